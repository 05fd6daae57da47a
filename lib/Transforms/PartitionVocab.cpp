//===- PartitionVocab.cpp - Shard the vocabulary layers over devices ------===//
//
// Yeung et al., 2024 §3: partition the vocabulary layers
// along the vocabulary over all p devices, padded to a multiple of 2p
// (§6.1). The output shard is written in its naive form (Figure 4: three
// barriers); sluice-reorder-softmax-barriers improves it.
//
//===----------------------------------------------------------------------===//

#include "sluice/Transforms/Passes.h"

#include "ForEachPass.h"

#include "mlir/IR/Builders.h"

namespace mlir::sluice {
#define GEN_PASS_DEF_PARTITIONVOCAB
#include "sluice/Transforms/Passes.h.inc"
} // namespace mlir::sluice

using namespace mlir;
using namespace mlir::sluice;

/// Builds the naive output shard's body: broadcast X (C0), logits, the
/// global maximum (barrier 1), the global sum (barrier 2), softmax, loss,
/// the gradients, and the reduce of the input gradient (barrier 3).
static void buildNaiveOutputShard(OpBuilder &b, Location loc, Value input,
                                  int64_t root, int64_t shardRows) {
  auto act = cast<RankedTensorType>(input.getType());
  auto shape = act.getShape();
  Type f32 = b.getF32Type();
  auto logitsType = RankedTensorType::get({shape[0], shape[1], shardRows}, f32);
  auto tokenType = RankedTensorType::get({shape[0], shape[1]}, f32);
  auto gradType = RankedTensorType::get(shape, act.getElementType());

  Value x = BroadcastOp::create(b, loc, input.getType(), input, root);
  Value y = ShardLogitsOp::create(b, loc, logitsType, x);
  Value m = ShardMaxOp::create(b, loc, tokenType, y);
  Value gm =
      AllReduceOp::create(b, loc, m.getType(), m,
                          ReductionAttr::get(b.getContext(), Reduction::max));
  Value s = ShardSumExpOp::create(b, loc, tokenType, y, gm);
  Value gs =
      AllReduceOp::create(b, loc, s.getType(), s,
                          ReductionAttr::get(b.getContext(), Reduction::sum));
  Value p = ShardSoftmaxOp::create(b, loc, y.getType(), y, gm, gs);
  Value loss =
      ShardLossOp::create(b, loc, RankedTensorType::get({}, f32), y, gm, gs);
  Value g = SoftmaxGradOp::create(b, loc, p.getType(), p);
  Value dx = ShardInputGradOp::create(b, loc, gradType, g);
  Value dxr = ReduceOp::create(b, loc, dx.getType(), dx, root);
  ShardWeightGradOp::create(b, loc, g, x);
  VocabYieldOp::create(b, loc, ValueRange{loss, dxr});
}

/// The input shard's body: look up the rows in this shard, sum onto root,
/// add positions there; backward, broadcast the gradient and scatter it.
static void buildInputShard(OpBuilder &b, Location loc, Value gradArg,
                            Type actType, int64_t root, bool positions) {
  Value part = ShardLookupOp::create(b, loc, actType);
  Value x = ReduceOp::create(b, loc, part.getType(), part, root);
  if (positions)
    x = AddPositionsOp::create(b, loc, x.getType(), x);
  Value g = BroadcastOp::create(b, loc, gradArg.getType(), gradArg, root);
  ShardScatterGradOp::create(b, loc, g);
  VocabYieldOp::create(b, loc, ValueRange{x});
}

LogicalResult mlir::sluice::partitionVocab(ModelOp model, VocabPartition mode) {
  SmallVector<StageOp> stages = getStages(model);
  if (stages.empty())
    return model.emitOpError("is not partitioned into stages: run "
                             "sluice-partition-stages first");
  if (mode == VocabPartition::Baseline)
    return success();
  EmbeddingOp embedding = model.getEmbedding();
  OutputLayerOp output = model.getOutputLayer();
  if (!embedding || !output)
    return model.emitOpError("has its vocabulary layers partitioned already");
  StageOp first = stages.front(), last = stages.back();
  if (first.getLayers().size() < 2 || last.getLayers().size() < 2)
    return model.emitOpError("cannot shard the vocabulary layers: stage @")
           << (first.getLayers().size() < 2 ? first.getSymName()
                                            : last.getSymName())
           << " would hold no transformer layer without them (partition "
              "with balance=uniform)";

  int64_t devices = 0;
  for (StageOp stage : stages)
    devices = std::max(devices, stage.getDevice() + 1);
  int64_t vocab = output.getVocab();
  int64_t multiple = 2 * devices;
  int64_t padded = (vocab + multiple - 1) / multiple * multiple;
  bool synchronous = mode == VocabPartition::Interlaced;
  OpBuilder b(model.getContext());
  RankedTensorType act = model.getActivationType();

  // 1. The input shard feeds the first stage, whose embedding goes away.
  b.setInsertionPoint(first);
  auto input = VocabInputOp::create(
      b, embedding.getLoc(), act, "vin", devices, first.getDevice(),
      embedding.getVocab(),
      (embedding.getVocab() + multiple - 1) / multiple * multiple,
      output.getTied(), synchronous, /*passes=*/nullptr,
      embedding.getPositionsAttr());
  {
    Block *body = b.createBlock(&input.getBody());
    Value grad = body->addArgument(act, embedding.getLoc());
    buildInputShard(b, embedding.getLoc(), grad, act, first.getDevice(),
                    embedding.getPositions().has_value());
  }
  Value embedded = input.getResult();
  first->insertOperands(0, ValueRange(embedded));
  BlockArgument carried =
      first.getBody().front().insertArgument(0u, act, embedding.getLoc());
  embedding.getResult().replaceAllUsesWith(carried);
  embedding.erase();

  // 2. The last stage keeps the norm and yields the normalised activation;
  // the output shard takes it over, and the model returns the shard's loss.
  auto yield = cast<YieldOp>(last.getBody().front().getTerminator());
  b.setInsertionPoint(output);
  Value normed =
      FinalNormOp::create(b, output.getLoc(), output.getInput().getType(),
                          output.getInput(), output.getNorm());
  yield->setOperands(ValueRange(normed));
  bool tied = output.getTied();
  Location outLoc = output.getLoc();
  output.erase();
  Value oldLoss = last.getResult();
  auto ret = cast<ReturnOp>(model.getBody().front().getTerminator());
  b.setInsertionPoint(ret);
  auto vocabOut = VocabOutputOp::create(
      b, outLoc, RankedTensorType::get({}, b.getF32Type()), "vout", oldLoss,
      devices, last.getDevice(), vocab, padded, tied, synchronous,
      /*passes=*/nullptr, /*barriers=*/3, SoftmaxAlgorithm::Naive);
  Value loss = vocabOut.getLoss();
  ret->setOperands(ValueRange(loss));
  oldLoss.setType(act);
  {
    OpBuilder::InsertionGuard guard(b);
    Block *body = b.createBlock(&vocabOut.getBody());
    Value x = body->addArgument(act, outLoc);
    buildNaiveOutputShard(b, outLoc, x, last.getDevice(), padded / devices);
  }
  return success();
}

namespace {
struct PartitionVocabPass
    : ForEachPass<ModelOp, PartitionVocabPass,
                  mlir::sluice::impl::PartitionVocabBase> {
  using ForEachPass::ForEachPass;
  LogicalResult apply(ModelOp model) { return partitionVocab(model, mode); }
};
} // namespace
