//===- PartitionStages.cpp - Group layers into pipeline stages ------------===//

#include "sluice/Analysis/LayerCost.h"
#include "sluice/Schedule/StagePartition.h"
#include "sluice/Transforms/Passes.h"

#include "ForEachPass.h"

#include "mlir/IR/Builders.h"

namespace mlir::sluice {
#define GEN_PASS_DEF_PARTITIONSTAGES
#include "sluice/Transforms/Passes.h.inc"
} // namespace mlir::sluice

using namespace mlir;
using namespace mlir::sluice;

/// Device and chunk of stage `index` (PlacementKind's description).
static std::pair<int64_t, int64_t> place(PlacementKind placement, int64_t pp,
                                         int64_t index) {
  if (placement == PlacementKind::vshape && index >= pp)
    return {2 * pp - 1 - index, 1};
  return {index % pp, index / pp};
}

LogicalResult mlir::sluice::partitionStages(ModelOp model,
                                            const StagePartitionOptions &opts) {
  if (!getStages(model).empty())
    return model.emitOpError("is already partitioned into stages");
  if (opts.pp < 1)
    return model.emitOpError("cannot be partitioned with 'pp' = ")
           << opts.pp << ": it must be positive";
  if (opts.virtualChunks < 1)
    return model.emitOpError("cannot be partitioned with 'virtual' = ")
           << opts.virtualChunks << ": it must be positive";
  if (opts.placement == PlacementKind::loop && opts.virtualChunks != 1)
    return model.emitOpError("placement 'loop' holds one chunk per device: "
                             "'virtual' must be 1, got ")
           << opts.virtualChunks << " (use interleaved or vshape)";
  if (opts.placement == PlacementKind::vshape && opts.virtualChunks != 2)
    return model.emitOpError("placement 'vshape' holds two chunks per "
                             "device: 'virtual' must be 2, got ")
           << opts.virtualChunks;

  // 1. Collect the layer chain and what each layer costs.
  SmallVector<Operation *> layers;
  for (Operation &op : model.getBody().front())
    if (!isa<ReturnOp>(op))
      layers.push_back(&op);
  sched::PartitionProblem problem;
  problem.stages = static_cast<int>(opts.pp * opts.virtualChunks);
  int64_t seqLen = model.getSeqLen();
  SmallVector<Operation *> transformers;
  for (Operation *layer : layers) {
    double flops = getForwardFlopsPerToken(layer, seqLen);
    if (isa<EmbeddingOp>(layer))
      problem.firstExtra += flops;
    else if (isa<OutputLayerOp>(layer))
      problem.lastExtra += flops;
    else {
      problem.layerCosts.push_back(flops);
      transformers.push_back(layer);
    }
  }

  // 2. Decide how many transformer layers each stage gets.
  std::string error;
  FailureOr<std::vector<int>> counts =
      sched::partitionLayers(problem, opts.balance, error);
  if (failed(counts))
    return model.emitOpError("cannot be partitioned with 'pp' = ")
           << opts.pp << " and 'virtual' = " << opts.virtualChunks << ": "
           << error;

  // 3. Move the layers into stages; each stage reads the previous stage's
  // result through its block argument and yields its last layer's result.
  OpBuilder builder(model.getContext());
  auto ret = cast<ReturnOp>(model.getBody().front().getTerminator());
  builder.setInsertionPoint(ret);
  Value carried;
  size_t nextTransformer = 0;
  for (int s = 0; s < problem.stages; ++s) {
    SmallVector<Operation *> group;
    if (s == 0)
      group.push_back(model.getEmbedding());
    for (int i = 0; i < (*counts)[s]; ++i)
      group.push_back(transformers[nextTransformer++]);
    if (s == problem.stages - 1)
      group.push_back(model.getOutputLayer());
    if (group.empty())
      return model.emitOpError("stage ") << s << " would hold no layer";

    Value out = group.back()->getResult(0);
    auto [device, chunk] = place(opts.placement, opts.pp, s);
    auto stage = StageOp::create(
        builder, group.front()->getLoc(), out.getType(),
        builder.getStringAttr("s" + std::to_string(s)),
        builder.getI64IntegerAttr(device), builder.getI64IntegerAttr(chunk),
        carried, ArrayAttr(), DenseI64ArrayAttr(), IntegerAttr(),
        RecomputeKindAttr());
    Block *body = new Block();
    stage.getBody().push_back(body);
    if (carried) {
      BlockArgument arg = body->addArgument(carried.getType(), stage.getLoc());
      group.front()->setOperand(0, arg);
    }
    for (Operation *op : group)
      op->moveBefore(body, body->end());
    OpBuilder::InsertionGuard guard(builder);
    builder.setInsertionPointToEnd(body);
    YieldOp::create(builder, stage.getLoc(), out);
    out.replaceUsesWithIf(stage.getResult(), [&](OpOperand &use) {
      return !stage->isProperAncestor(use.getOwner());
    });
    carried = stage.getResult();
  }
  return success();
}

namespace {
struct PartitionStagesPass
    : ForEachPass<ModelOp, PartitionStagesPass,
                  mlir::sluice::impl::PartitionStagesBase> {
  using ForEachPass::ForEachPass;
  LogicalResult apply(ModelOp model) {
    // Typed options: the pass manager refuses an unknown placement or
    // balance.
    return partitionStages(model, {pp, virtualChunks, placement, balance});
  }
};
} // namespace
