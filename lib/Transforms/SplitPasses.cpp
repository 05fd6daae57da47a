//===- SplitPasses.cpp - Record each stage's passes and costs -------------===//

#include "sluice/Analysis/CostModel.h"
#include "sluice/Transforms/Passes.h"

#include "ForEachPass.h"

#include "mlir/IR/Builders.h"

#include <cmath>

namespace mlir::sluice {
#define GEN_PASS_DEF_SPLITPASSES
#include "sluice/Transforms/Passes.h.inc"
} // namespace mlir::sluice

using namespace mlir;
using namespace mlir::sluice;

/// The output shard's passes (§5.1): the body is cut before a heavy op
/// that reads, directly or through light ops, a collective issued since
/// the current pass began. Heavy work that does not wait for a collective
/// (Algorithm 1's weight gradient after the reduce) stays in its pass.
static SmallVector<PassKind> getOutputShardPasses(VocabOutputOp shard) {
  // For each value, the number of the latest collective it depends on.
  llvm::DenseMap<Value, int> latest;
  int collectives = 0, passStart = 0, passes = 0;
  for (Operation &op : shard.getBody().front()) {
    int dependsOn = 0;
    for (Value operand : op.getOperands())
      dependsOn = std::max(dependsOn, latest.lookup(operand));
    if (isa<BroadcastOp, AllReduceOp, ReduceOp>(op))
      dependsOn = ++collectives;
    else if (op.hasTrait<HeavyCompute>() && dependsOn > passStart) {
      ++passes;
      passStart = collectives;
    }
    for (Value result : op.getResults())
      latest[result] = dependsOn;
  }
  SmallVector<PassKind> kinds{PassKind::S};
  for (int i = 2; i < passes; ++i)
    kinds.push_back(PassKind::S2);
  if (passes > 1)
    kinds.push_back(PassKind::T);
  return kinds;
}

/// Records the shards' passes.
static void splitShardPasses(ModelOp model) {
  Builder builder(model.getContext());
  auto record = [&](Operation *op, ArrayRef<PassKind> kinds) {
    SmallVector<Attribute> passes;
    for (PassKind kind : kinds)
      passes.push_back(PassKindAttr::get(model.getContext(), kind));
    op->setAttr("passes", builder.getArrayAttr(passes));
  };
  for (Operation &op : model.getBody().front()) {
    if (auto out = dyn_cast<VocabOutputOp>(op))
      record(out, getOutputShardPasses(out));
    else if (isa<VocabInputOp>(op))
      record(&op, {PassKind::IF, PassKind::IB});
  }
}

LogicalResult mlir::sluice::splitPasses(ModelOp model, bool split,
                                        RecomputeKind recompute) {
  SmallVector<StageOp> stages = getStages(model);
  if (stages.empty())
    return model.emitOpError("is not partitioned into stages: run "
                             "sluice-partition-stages first");
  Builder builder(model.getContext());
  SmallVector<PassKind> kinds =
      split ? SmallVector<PassKind>{PassKind::F, PassKind::B, PassKind::W}
            : SmallVector<PassKind>{PassKind::F, PassKind::BW};
  for (StageOp stage : stages) {
    if (recompute != RecomputeKind::none)
      stage.setRecomputeAttr(
          RecomputeKindAttr::get(model.getContext(), recompute));
    StageProfile profile = StageProfile::get(stage, model);
    SmallVector<Attribute> passes;
    SmallVector<int64_t> flops;
    for (PassKind kind : kinds) {
      passes.push_back(PassKindAttr::get(model.getContext(), kind));
      flops.push_back(static_cast<int64_t>(
          std::llround(profile.getPassFlops(kind, profile.seqLen, 0))));
    }
    stage.setPassesAttr(builder.getArrayAttr(passes));
    stage.setFlops(flops);
    stage.setActivationBytesAttr(builder.getI64IntegerAttr(
        static_cast<int64_t>(profile.getActivationBytes(profile.seqLen))));
  }
  splitShardPasses(model);
  return success();
}

namespace {
// `recompute` is a typed option: the pass manager refuses an unknown value.
struct SplitPassesPass : ForEachPass<ModelOp, SplitPassesPass,
                                     mlir::sluice::impl::SplitPassesBase> {
  using ForEachPass::ForEachPass;
  LogicalResult apply(ModelOp model) {
    return splitPasses(model, split, recompute);
  }
};
} // namespace
