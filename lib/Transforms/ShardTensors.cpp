//===- ShardTensors.cpp - Tensor-parallel shards of a program -------------===//
//
// Megatron-LM's tensor parallelism (Weitkamp, 2024):
// each pipeline device becomes a group of shards that split every
// transformer layer -- the QKV, up and gate projections by columns (each
// shard its query heads, the key/value heads they read, its share of the
// feed-forward width), the attention output and down projections by rows
// -- and sum the row-parallel projections' partial results in F and the
// column-parallel ones' input gradients in B (the blog's "Communication
// Overhead" table). The vocabulary layers split their tables by rows:
// the embedding's masked lookups and the output layer's cross-entropy are
// summed over the group (the blog's "Input Embedding" and "Cross-Entropy";
// runtime/model/Stage.cpp). The shards run the device's program in lockstep;
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

#include "ForEachPass.h"

#include "sluice/Blocks/ExpertCapacity.h"
#include "sluice/Blocks/Feature.h"
#include "sluice/Blocks/Spec.h"
#include "sluice/PipelineIR/PipelineIR.h"

#include "mlir/IR/Builders.h"

namespace mlir::sluice {
#define GEN_PASS_DEF_SHARDTENSORS
#include "sluice/Transforms/Passes.h.inc"
} // namespace mlir::sluice

using namespace mlir;
using namespace mlir::sluice;

namespace {
/// Writes the shard bodies: one of `shards` shards' forward pass of a
/// layer, with the collectives among the shards explicit (Megatron-LM's f
/// and g; Weitkamp, 2024, "Communication Overhead").
class BodyBuilder {
public:
  BodyBuilder(MLIRContext *context, int64_t shards, bool sequence,
              int64_t members, double capacity)
      : builder(context), shards(shards), sequence(sequence),
        members(members), capacity(capacity) {}

  /// x + out(attn(qkv(norm(x)))), then + down(act(up(norm(.)))): the
  /// column-parallel projections enter through tp_copy (all-reduce of the
  /// input gradient in B) and the row-parallel ones leave through
  /// tp_reduce (all-reduce of the partial sums in F).
  void build(TransformerLayerOp layer) {
    auto type = cast<RankedTensorType>(layer.getType());
    Location loc = layer.getLoc();
    Block *block = begin(layer, layer.getBody());
    Value x = block->addArgument(between(type), loc);
    int64_t headDim = layer.getHeadDimOrDefault(),
            valueDim = ::sluice::blocks::getValueHeadDim(layer.getSpec(),
                                                         layer.getHidden());
    const ::sluice::rt::LayerConfig &spec = layer.getSpec();
    int64_t kv = spec.kvHeads >= shards ? spec.kvHeads / shards : 1;
    int64_t heads = spec.heads / shards, ffn = spec.ffn / shards;

    Value qkv = column(loc, enter(loc, norm(loc, x)), Projection::qkv,
                       (heads + kv) * headDim + kv * valueDim);
    Value context = ShardAttentionOp::create(
        builder, loc, widen(type, heads * valueDim), qkv);
    Value attention = leave(loc, row(loc, context, Projection::out, type));
    x = ResidualAddOp::create(builder, loc, x.getType(), x, attention);

    Value in = enter(loc, norm(loc, x));
    // Expert parallelism: the experts compute on the copies their member
    // receives (the most any routing sends it), returned before the
    // shards' sum.
    auto whole = cast<RankedTensorType>(in.getType());
    bool dispatches = spec.experts > 0 && members > 1;
    Value rows = in;
    if (dispatches)
      rows = ExpertDispatchOp::create(
          builder, loc,
          reshape(whole,
                  ::sluice::blocks::moe::getExpertRows(
                      whole.getDimSize(1), spec, int(members), capacity),
                  whole.getDimSize(2)),
          in, members);
    Value up = column(loc, rows, Projection::up, ffn);
    Value gate =
        !spec.isGated() ? Value() : column(loc, rows, Projection::gate, ffn);
    Value act = ShardActivationOp::create(builder, loc, up.getType(), up, gate);
    Value partial =
        row(loc, act, Projection::down, cast<RankedTensorType>(rows.getType()));
    if (dispatches)
      partial =
          ExpertCombineOp::create(builder, loc, whole, partial, members);
    Value mlp = leave(loc, partial);
    x = ResidualAddOp::create(builder, loc, x.getType(), x, mlp);
    LayerYieldOp::create(builder, loc, x);
  }

  /// The vocabulary-parallel embedding: each shard looks up the tokens in
  /// its rows (zeros elsewhere) and the partial embeddings are summed.
  void build(EmbeddingOp layer) {
    auto type = cast<RankedTensorType>(layer.getType());
    Location loc = layer.getLoc();
    begin(layer, layer.getBody());
    Value x = leave(loc, ShardLookupOp::create(builder, loc, type));
    if (layer.getPositions())
      x = AddPositionsOp::create(builder, loc, x.getType(), x);
    LayerYieldOp::create(builder, loc, x);
  }

  /// The vocabulary-parallel cross-entropy: each shard's logits, its
  /// maximum and sum of exponentials in one pass, the group's maximum,
  /// the sum rescaled to it (Yeung et al., 2024,
  /// equation 5) and summed; each shard's loss covers the labels it holds.
  /// Two per-token all-reduces, against the blog's three.
  void build(OutputLayerOp layer) {
    auto type = cast<RankedTensorType>(layer.getInput().getType());
    Location loc = layer.getLoc();
    Block *block = begin(layer, layer.getBody());
    Value x = block->addArgument(between(type), loc);
    Type f32 = builder.getF32Type();
    int64_t rows = (layer.getVocab() + shards - 1) / shards;
    auto logitsType = RankedTensorType::get(
        {type.getDimSize(0), type.getDimSize(1), rows}, f32);
    auto statsType =
        RankedTensorType::get({type.getDimSize(0), type.getDimSize(1)}, f32);
    Value logits = ShardLogitsOp::create(builder, loc, logitsType,
                                         enter(loc, norm(loc, x)));
    Value localMax = ShardMaxOp::create(builder, loc, statsType, logits);
    Value localSum =
        ShardSumExpOp::create(builder, loc, statsType, logits, localMax);
    Value max = AllReduceOp::create(
        builder, loc, statsType, localMax,
        ReductionAttr::get(builder.getContext(), Reduction::max));
    Value rescaled =
        RescaleSumOp::create(builder, loc, statsType, localSum, localMax, max);
    Value sum = AllReduceOp::create(
        builder, loc, statsType, rescaled,
        ReductionAttr::get(builder.getContext(), Reduction::sum));
    Value loss = ShardLossOp::create(builder, loc, layer.getLoss().getType(),
                                     logits, max, sum);
    LayerYieldOp::create(builder, loc, loss);
  }

private:
  Block *begin(Operation *layer, Region &body) {
    layer->setAttr("shards", builder.getI64IntegerAttr(shards));
    Block *block = builder.createBlock(&body);
    builder.setInsertionPointToStart(block);
    return block;
  }
  /// `type` ([batch, tokens, width]) with other tokens and width.
  static RankedTensorType reshape(RankedTensorType type, int64_t tokens,
                                  int64_t width) {
    return RankedTensorType::get({type.getDimSize(0), tokens, width},
                                 type.getElementType());
  }
  static RankedTensorType widen(RankedTensorType type, int64_t width) {
    return reshape(type, type.getDimSize(1), width);
  }
  Value norm(Location loc, Value x) {
    return ShardNormOp::create(builder, loc, x.getType(), x);
  }
  /// The activation a shard holds between the layers: whole, or with
  /// sequence parallelism its 1/shards of the tokens.
  RankedTensorType between(RankedTensorType whole) const {
    if (!sequence)
      return whole;
    return reshape(whole, whole.getDimSize(1) / shards, whole.getDimSize(2));
  }
  /// Into a column-parallel projection: the whole input (f: identity in F,
  /// all-reduce in B), or the slices gathered (all-gather in F,
  /// reduce-scatter in B).
  Value enter(Location loc, Value x) {
    if (!sequence)
      return TpCopyOp::create(builder, loc, x.getType(), x);
    auto slice = cast<RankedTensorType>(x.getType());
    return TpGatherOp::create(
        builder, loc,
        reshape(slice, slice.getDimSize(1) * shards, slice.getDimSize(2)), x);
  }
  /// Out of a row-parallel projection: the partial sums summed (g:
  /// all-reduce in F, identity in B), or summed into each shard's slice
  /// (reduce-scatter in F, all-gather in B).
  Value leave(Location loc, Value partial) {
    auto type = cast<RankedTensorType>(partial.getType());
    if (!sequence)
      return TpReduceOp::create(builder, loc, type, partial);
    return TpScatterOp::create(builder, loc, between(type), partial);
  }
  Value column(Location loc, Value in, Projection projection, int64_t width) {
    return ColumnParallelOp::create(
        builder, loc, widen(cast<RankedTensorType>(in.getType()), width),
        ProjectionAttr::get(builder.getContext(), projection), in);
  }
  Value row(Location loc, Value in, Projection projection,
            RankedTensorType type) {
    return RowParallelOp::create(
        builder, loc, type,
        ProjectionAttr::get(builder.getContext(), projection), in);
  }

  OpBuilder builder;
  int64_t shards;
  bool sequence;
  int64_t members;
  double capacity;
};
} // namespace

LogicalResult mlir::sluice::shardTensors(ProgramOp program,
                                         int64_t tensorParallel,
                                         bool sequenceParallel) {
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
  if (sequenceParallel) {
    // Megatron-LM's sequence parallelism splits each microbatch's tokens
    // over the shards between the tensor-parallel regions.
    if (n < 2)
      return program.emitOpError("sequence parallelism splits the tokens "
                                 "over the tensor-parallel shards, but there "
                                 "are ")
             << n;
    if (model->getSeqLen() % n != 0)
      return model->emitOpError("'seq_len' = ")
             << model->getSeqLen() << " does not divide among " << n
             << " sequence-parallel shards";
    if (program.getSlices() != 1)
      return program.emitOpError("sequence parallelism does not combine with ")
             << program.getSlices() << " token slices per microbatch";
  }
  // The core's split and each block feature's rules (lib/Blocks), as the
  // runtime holds plans to them.
  WalkResult walk = model->walk([&](TransformerLayerOp layer) {
    if (std::string why =
            ::sluice::blocks::checkLayerTensorParallel(layer.getSpec(), int(n));
        !why.empty()) {
      layer.emitOpError() << why;
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
  // Expert parallelism alone (one shard): the sparse layers' bodies spell
  // the experts' dispatch; a second run would spell it twice.
  int64_t members = program.getEp();
  if (n == 1 && members > 1) {
    WalkResult built = model->walk([&](TransformerLayerOp layer) {
      return layer.getBody().empty() ? WalkResult::advance()
                                     : WalkResult::interrupt();
    });
    if (built.wasInterrupted())
      return program.emitOpError("already has the experts' dispatch "
                                 "spelled in its layers' bodies");
  }
  program.setTp(n);
  program.setSequenceParallel(sequenceParallel);
  if (n == 1 && members == 1)
    return success();
  // Every layer that splits gets its shard body; a vocabulary layer that
  // Vocabulary Parallelism already split over the pipeline
  // (sluice.vocab_input / vocab_output) keeps its own region. With one
  // shard, only the sparse layers under expert parallelism have one.
  BodyBuilder bodies(program.getContext(), n, sequenceParallel, members,
                     program.getExpertCapacity().value_or(0));
  model->walk([&](Operation *op) {
    if (auto layer = dyn_cast<TransformerLayerOp>(op)) {
      if (n > 1 || layer.getSpec().experts > 0)
        bodies.build(layer);
    } else if (auto layer = dyn_cast<EmbeddingOp>(op); layer && n > 1)
      bodies.build(layer);
    else if (auto layer = dyn_cast<OutputLayerOp>(op); layer && n > 1)
      bodies.build(layer);
  });
  return success();
}

namespace {
struct ShardTensorsPass : ForEachPass<ProgramOp, ShardTensorsPass,
                                      mlir::sluice::impl::ShardTensorsBase> {
  using ForEachPass::ForEachPass;
  LogicalResult apply(ProgramOp program) {
    return shardTensors(program, tensorParallel, sequenceParallel);
  }
};
} // namespace
