//===- ShardTensors.cpp - Tensor-parallel shards of a program -------------===//
//
// Megatron-LM's tensor parallelism (papers/tensor-parallelism-blog.txt):
// each pipeline device becomes a group of shards that split every
// transformer layer -- the QKV, up and gate projections by columns (each
// shard its query heads, the key/value heads they read, its share of the
// feed-forward width), the attention output and down projections by rows
// -- and sum the row-parallel projections' partial results in F and the
// column-parallel ones' input gradients in B (the blog's "Communication
// Overhead" table). The vocabulary layers split their tables by rows:
// the embedding's masked lookups and the output layer's cross-entropy are
// summed over the group (the blog's "Input Embedding" and "Cross-Entropy";
// runtime/Stage.cpp). The shards run the device's program in lockstep;
// the runtime derives each shard's slices from the mesh
// (docs/parallelism.md).
//
// The pass checks that every layer splits and records the mesh's tp: a
// layer whose heads or feed-forward width do not divide, or whose
// key/value heads neither divide among the shards nor divide their count
// (GQA heads are replicated when there are fewer than shards, the blog's
// "Grouped/Multi-Query Attention"), is an error at that layer; so is a
// vocabulary too small to leave the last shard any rows.
//
//===----------------------------------------------------------------------===//

#include "sluice/Target/Plan.h"
#include "sluice/Transforms/Passes.h"
#include "sluice/Transforms/PipelineIR.h"

namespace mlir::sluice {
#define GEN_PASS_DEF_SHARDTENSORS
#include "sluice/Transforms/Passes.h.inc"
} // namespace mlir::sluice

using namespace mlir;
using namespace mlir::sluice;

LogicalResult mlir::sluice::shardTensors(ProgramOp program,
                                         int64_t tensorParallel) {
  if (tensorParallel < 1)
    return program.emitOpError("cannot have ")
           << tensorParallel
           << " tensor-parallel shards: the count must be positive";
  if (program.getTp() != 1)
    return program.emitOpError("already has ")
           << program.getTp() << " tensor-parallel shards";
  FailureOr<ModelOp> model = getProgramModel(program);
  if (failed(model))
    return failure();
  int64_t n = tensorParallel;
  WalkResult walk = model->walk([&](TransformerLayerOp layer) {
    int64_t heads = layer.getHeads(), kvHeads = layer.getKvHeads();
    if (heads % n != 0) {
      layer.emitOpError() << heads << " attention heads do not divide among "
                          << n << " tensor-parallel shards";
      return WalkResult::interrupt();
    }
    if (layer.getFfn() % n != 0) {
      layer.emitOpError() << "feed-forward width " << layer.getFfn()
                          << " does not divide among " << n
                          << " tensor-parallel shards";
      return WalkResult::interrupt();
    }
    if (kvHeads % n != 0 && n % kvHeads != 0) {
      layer.emitOpError()
          << kvHeads << " key/value heads neither divide among " << n
          << " tensor-parallel shards nor divide " << n
          << " (to be replicated)";
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return failure();
  // The vocabulary-parallel embedding and output layer give each shard its
  // rows of their tables, by the runtime's rule: the last shard must get
  // some.
  rt::ModelConfig config = getModelConfig(*model);
  for (const rt::LayerConfig &layer : config.layers) {
    if (!rt::splitsVocabulary(layer, int(n)) ||
        rt::getShardVocabRows(layer.vocab, int(n) - 1, int(n)).second > 0)
      continue;
    Operation *op = layer.kind == rt::LayerKind::Embedding
                        ? model->getEmbedding().getOperation()
                        : model->getOutputLayer().getOperation();
    return op->emitOpError("the ")
           << layer.vocab << "-row table leaves the last of " << n
           << " tensor-parallel shards no rows";
  }
  program.setTp(n);
  return success();
}

namespace {
struct ShardTensorsPass
    : public mlir::sluice::impl::ShardTensorsBase<ShardTensorsPass> {
  using ShardTensorsBase::ShardTensorsBase;
  void runOnOperation() override {
    for (ProgramOp program : getOperation().getOps<ProgramOp>())
      if (failed(shardTensors(program, tensorParallel)))
        return signalPassFailure();
  }
};
} // namespace
