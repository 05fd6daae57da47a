//===- ReorderSoftmaxBarriers.cpp - 3 -> 2 -> 1 communication barriers ----===//
//
// A dataflow rewrite of a vocabulary output shard (Yeung et al.,
// 2024, §4.3-4.4):
//
// Algorithm 1 (equation 5). Naive:
//   m' = max(y); M = allreduce_max(m'); s = sumexp(y, M); S = allreduce_sum(s)
//   p = softmax(y, M, S)
// becomes
//   m' = max(y); s' = sumexp(y, m'); p' = softmax(y, m', s')      (local: S)
//   M = allreduce_max(m'); s'' = s' exp(m' - M); S = allreduce_sum(s'')
//   p = p' s'' / S                                               (barrier C1)
// so the heavy work before the max no longer sits between two collectives.
//
// Algorithm 2 (equation 6), on top of Algorithm 1:
//   A = p' W; B = G W                              (before the barrier: S)
//   dX' = A s'' / S - B; reduce(dX')                (inside C1)
// and the reduce of the old dX = (p - G) W disappears, along with its
// matmul; p, p - G and the weight gradient remain for T.
//
//===----------------------------------------------------------------------===//

#include "sluice/Transforms/Passes.h"

#include "mlir/IR/Builders.h"

namespace mlir::sluice {
#define GEN_PASS_DEF_REORDERSOFTMAXBARRIERS
#include "sluice/Transforms/Passes.h.inc"
} // namespace mlir::sluice

using namespace mlir;
using namespace mlir::sluice;

namespace {

/// The naive softmax chain of a shard, found by walking from the logits.
struct NaiveSoftmax {
  ShardLogitsOp logits;
  ShardMaxOp max;
  AllReduceOp globalMax;
  ShardSumExpOp sumExp;
  AllReduceOp globalSum;
  ShardSoftmaxOp softmax;
};

template <typename OpTy> OpTy findOp(Block &body) {
  auto ops = body.getOps<OpTy>();
  return ops.empty() ? OpTy() : *ops.begin();
}

/// Algorithm 1. Requires the naive form.
LogicalResult applyAlgorithm1(VocabOutputOp shard) {
  Block &body = shard.getBody().front();
  NaiveSoftmax n;
  n.logits = findOp<ShardLogitsOp>(body);
  n.max = findOp<ShardMaxOp>(body);
  n.sumExp = findOp<ShardSumExpOp>(body);
  n.softmax = findOp<ShardSoftmaxOp>(body);
  if (!n.logits || !n.max || !n.sumExp || !n.softmax)
    return shard.emitOpError("is not in the naive form Algorithm 1 starts "
                             "from (logits, max, sum of exponentials, "
                             "softmax)");
  n.globalMax = n.sumExp.getMax().getDefiningOp<AllReduceOp>();
  n.globalSum = n.softmax.getSum().getDefiningOp<AllReduceOp>();
  if (!n.globalMax || !n.globalSum ||
      n.globalMax.getInput() != n.max.getResult() ||
      n.globalSum.getInput() != n.sumExp.getResult())
    return shard.emitOpError("does not all-reduce the shard's maximum and sum "
                             "as the naive form does");

  OpBuilder b(shard.getContext());
  Location loc = n.softmax.getLoc();
  Value y = n.logits.getLogits(), localMax = n.max.getResult();
  // Local softmax' right after the local maximum: no barrier in between.
  b.setInsertionPointAfter(n.max);
  Value localSum = ShardSumExpOp::create(b, n.sumExp.getLoc(),
                                         n.sumExp.getType(), y, localMax);
  Value localProbs =
      ShardSoftmaxOp::create(b, loc, y.getType(), y, localMax, localSum);
  // Then the one barrier: max, rescale the local sum, sum.
  n.globalMax->moveAfter(localProbs.getDefiningOp());
  b.setInsertionPointAfter(n.globalMax);
  Value scaledSum = RescaleSumOp::create(b, loc, localSum.getType(), localSum,
                                         localMax, n.globalMax.getResult());
  n.globalSum->moveAfter(scaledSum.getDefiningOp());
  n.globalSum->setOperand(0, scaledSum);
  b.setInsertionPointAfter(n.globalSum);
  Value probs = RescaleProbsOp::create(b, loc, localProbs.getType(), localProbs,
                                       scaledSum, n.globalSum);
  n.softmax.getProbs().replaceAllUsesWith(probs);
  n.softmax.erase();
  n.sumExp.erase();
  // The loss wants the global maximum and sum, which it still uses; keep
  // it after them.
  if (auto loss = findOp<ShardLossOp>(body))
    loss->moveAfter(probs.getDefiningOp());
  shard.setAlgorithm(SoftmaxAlgorithm::Algorithm1);
  shard.setBarriers(countBarriers(shard.getBody()));
  return success();
}

/// Algorithm 2. Requires the Algorithm 1 form.
LogicalResult applyAlgorithm2(VocabOutputOp shard) {
  Block &body = shard.getBody().front();
  auto rescale = findOp<RescaleProbsOp>(body);
  auto grad = findOp<SoftmaxGradOp>(body);
  auto inputGrad = findOp<ShardInputGradOp>(body);
  if (!rescale || !grad || !inputGrad ||
      inputGrad.getGrad() != grad.getGrad() ||
      grad.getProbs() != rescale.getProbs())
    return shard.emitOpError("is not in the Algorithm 1 form Algorithm 2 "
                             "starts from");
  // Verified IR may use the input gradient anywhere, or nowhere: look at
  // its user only once there is exactly one.
  auto reduce = inputGrad->hasOneUse()
                    ? dyn_cast<ReduceOp>(*inputGrad->getUsers().begin())
                    : ReduceOp();
  if (!reduce)
    return shard.emitOpError("does not reduce the input gradient");
  Value localProbs = rescale.getLocalProbs();
  Value scaledSum = rescale.getLocalSum(), globalSum = rescale.getGlobalSum();
  OpBuilder b(shard.getContext());
  Location loc = inputGrad.getLoc();
  // Before the barrier: A = softmax' W and B = G W.
  b.setInsertionPointAfter(localProbs.getDefiningOp());
  Value a = ShardInputGradOp::create(b, loc, inputGrad.getType(), localProbs);
  Value bRows = LabelRowsOp::create(b, loc, inputGrad.getType());
  // Inside it: dX' = A s'' / S - B, and the reduce, right after the sum.
  b.setInsertionPointAfter(globalSum.getDefiningOp());
  Value combined = CombineGradOp::create(b, loc, a.getType(), a, bRows,
                                         scaledSum, globalSum);
  reduce->moveAfter(combined.getDefiningOp());
  reduce->setOperand(0, combined);
  inputGrad.erase();
  shard.setAlgorithm(SoftmaxAlgorithm::Algorithm2);
  shard.setBarriers(countBarriers(shard.getBody()));
  return success();
}

} // namespace

LogicalResult mlir::sluice::reorderSoftmaxBarriers(VocabOutputOp shard,
                                                   int64_t algorithm) {
  if (algorithm != 1 && algorithm != 2)
    return shard.emitOpError("cannot reorder to 'algorithm' = ")
           << algorithm << " (expected 1 or 2)";
  if (int64_t(shard.getAlgorithm()) >= algorithm)
    return success();
  if (shard.getAlgorithm() == SoftmaxAlgorithm::Naive &&
      failed(applyAlgorithm1(shard)))
    return failure();
  if (algorithm == 2)
    return applyAlgorithm2(shard);
  return success();
}

namespace {
struct ReorderSoftmaxBarriersPass
    : public mlir::sluice::impl::ReorderSoftmaxBarriersBase<
          ReorderSoftmaxBarriersPass> {
  using Base::Base;
  void runOnOperation() override {
    SmallVector<VocabOutputOp> shards;
    getOperation().walk([&](VocabOutputOp op) { shards.push_back(op); });
    for (VocabOutputOp shard : shards)
      if (failed(reorderSoftmaxBarriers(shard, algorithm)))
        return signalPassFailure();
  }
};
} // namespace
