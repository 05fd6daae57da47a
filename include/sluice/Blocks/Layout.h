//===- Layout.h - What a pass keeps, in typed regions -----------*- C++ -*-===//
//
// The contract between the compiler's buffer planning and the runtime: the
// tensors each pass of a stage keeps for a later pass of the same
// microbatch slice, with their element types, in the order the runtime
// carves them out of a buffer. The compiler sizes plan buffers with these
// functions; the runtime carves its tensors out of those buffers with the
// same walk and refuses a plan whose buffers are too small. Header-only
// over the block features' registry (each feature walks its own regions),
// so both sides include the same code.
//
// For a slice of t tokens after o tokens of context, R rows (micro-batch),
// hidden h, H query heads of size d, KV key/value heads, feed-forward f:
//
//  * forward state (F -> B, W): per transformer layer what the feature at
//    its attention input keeps (the pre-norm: its normalised input and
//    1/std; without one, the block's input itself), Q, the attention's
//    log-sum-exp per query and head (R x H x t: FlashAttention's
//    statistic, from which B recomputes the probabilities instead of
//    keeping R x H x t x (o + t) of them), the attention context, what the
//    feature at the feed-forward input keeps, the MLP's pre-activation and
//    activation (gated blocks: also the gate's pre-activation), then each
//    other feature's regions (sandwich norms: their normalised inputs and
//    1/std; query/key norms: theirs); the output layer's normalised input,
//    1/std, logits (t x vocab) and their log-sum-exp per token (none of
//    the two when the layer is sharded; split over tensor-parallel
//    shards, the shard's t x ceil(vocab / tp) logits in fp32 and the
//    group's maximum and sum per token): B makes the logits' gradient
//    from them, so no probabilities are kept;
//    the embedding keeps nothing;
//  * weight state (B -> W): the gradients at every linear map's output and
//    at each norm's output, which W turns into weight gradients;
//  * key/value state (first slice's F -> first slice's B): the keys and
//    values of the whole sequence and their gradients, which later slices
//    read and whose gradients the backward of later slices accumulates
//    (in fp32: they are sums over slices); after the model's last sparse
//    layer, with a load-balancing loss, the microbatch's routing
//    statistics (getBalanceFloats);
//  * messages between stages: the activation (or its gradient), and with a
//    load-balancing loss the routing statistics after it.
//
// Sequence parallelism (ModelConfig::sequenceShards = T > 1; Korthikanti
// et al., Weitkamp, 2024): a shard keeps its 1/T of the
// tokens of what lies outside the tensor-parallel regions -- the norms'
// normalised inputs and 1/std, the gradients at the norms' outputs, the
// output layer's final norm, a Full-recomputing stage's checkpoint, and the
// messages between stages -- and the whole slice of what the column- and
// row-parallel projections read and write on its heads and feed-forward
// share (Q, the context, the MLP's activations, the projections' output
// gradients), which the all-gathers before them and the reduce-scatters
// after them make.
//
// Element types (DType.h): activations and their gradients in the
// precision's activation type, the unsharded output layer's logits too (as
// a bf16 GEMM writes them under PyTorch's autocast); statistics (1/std,
// log-sum-exp) and the key/value gradient accumulators in fp32. Every
// region starts at a multiple of kRegionAlignment bytes, as vectorised
// kernels, cuBLASLt and cuDNN want.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_BLOCKS_LAYOUT_H
#define SLUICE_BLOCKS_LAYOUT_H

#include "sluice/Blocks/Feature.h"
#include "sluice/Blocks/Regions.h"
#include "sluice/PlanFormat/Format.h"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace sluice::rt {

/// The named tensors of the three kinds of state and of scratch: the
/// core's, then kFeatureRegions per registered feature (getFeatureField).
enum class Field : uint16_t {
  // Transformer forward state.
  AttnIn, // the block's input, when no feature makes the attention's
  Q,
  Lse,
  Context,
  MlpIn, // the residual stream after attention, when no feature makes the
         // feed-forward block's input
  Up,
  Act,
  Gate,
  // Transformer weight state.
  DQkv,
  DA, // the gradient at the attention's input
  DY1,
  DC, // the gradient at the feed-forward block's input
  DUp,
  DY2,
  DGate,
  // Key/value state.
  Keys,
  Values,
  DKeys,
  DValues,
  BalanceStats, // after the last sparse layer: the microbatch's routing
  // Output layer (forward, then weight state); embedding (weight state).
  OutXhat,
  OutRstd,
  OutLogits,
  OutLse, // split over tensor-parallel shards: the group's maximum
  OutSum, // split: the group's sum of exponentials under that maximum
  OutDLogits,
  OutDNorm,
  EmbedGrad,
  CoreEnd,
};

/// Region `local` of `feature` (its walkState's id).
inline Field getFeatureField(const blocks::Feature &feature, int local) {
  return Field(int(Field::CoreEnd) +
               blocks::getFeatureIndex(feature) * blocks::kFeatureRegions +
               local);
}
/// Every field a layer's views may hold: the core's and every registered
/// feature's.
inline int getFieldCount() {
  return int(Field::CoreEnd) +
         int(blocks::getFeatures().size()) * blocks::kFeatureRegions;
}

/// Whether `field` of the forward state is recomputed under `r`. Under
/// Selective, the attention's output and statistics and the MLP's
/// activation (the core's); every feature's regions are kept (they are
/// what norms made, Korthikanti et al.'s selective recomputation keeps).
inline bool isRecomputed(Field field, Recompute r) {
  switch (r) {
  case Recompute::None:
    return false;
  case Recompute::Full:
    return true;
  case Recompute::Selective:
    return field == Field::Lse || field == Field::Context ||
           field == Field::Act;
  }
  return false;
}

namespace detail {
/// Walks the regions of `state` of `layer`'s features at `slot`, as
/// fields.
template <class Fn>
void walkFeatures(blocks::State state, blocks::Slot slot,
                  const ModelConfig &model, const LayerConfig &layer,
                  const SliceShape &s, Fn &fn) {
  blocks::LayerShape shape = blocks::getLayerShape(model, layer, "", {});
  for (const blocks::Feature *f : blocks::getEnabledFeatures(layer, slot))
    f->walkState(state, slot, shape, s,
                 [&](int local, int64_t count, Storage storage) {
                   fn(getFeatureField(*f, local), count, storage);
                 });
}
/// The same at every slot but the input slots (walked in their place).
template <class Fn>
void walkOtherFeatures(blocks::State state, const ModelConfig &model,
                       const LayerConfig &layer, const SliceShape &s,
                       Fn &fn) {
  for (blocks::Slot slot :
       {blocks::Slot::QueryKeyValue, blocks::Slot::Projections,
        blocks::Slot::AttentionOutput,
        blocks::Slot::FeedForwardHidden, blocks::Slot::FeedForwardOutput})
    walkFeatures(state, slot, model, layer, s, fn);
}
} // namespace detail

/// Whether a feature makes the sublayer input at `slot` of `layer`.
inline bool hasInputFeature(const LayerConfig &layer, blocks::Slot slot) {
  return !blocks::getEnabledFeatures(layer, slot).empty();
}

/// Calls fn(field, count, storage) for each region of `layer`'s forward
/// state, in layout order.
template <class Fn>
void walkForwardState(const ModelConfig &model, const LayerConfig &layer,
                      const SliceShape &s, Fn &&fn) {
  int64_t h = model.hidden, rt = s.rows * s.tokens;
  int64_t local = getLocalTokens(model, s);
  switch (layer.kind) {
  case LayerKind::Embedding:
    return;
  case LayerKind::Output:
    // Sharded: the final norm alone, whose output the shards read.
    fn(Field::OutXhat, local * h, Storage::Activation);
    fn(Field::OutRstd, local, Storage::Fp32);
    // Unsharded: the logits as the GEMM wrote them (the activation type,
    // as under PyTorch's autocast) and their log-sum-exp per token; B
    // makes the gradient from the two, so no fp32 probabilities are kept.
    if (layer.sharded)
      return;
    if (layer.vocabShards == 1) {
      fn(Field::OutLogits, rt * layer.vocab, Storage::Activation);
      fn(Field::OutLse, rt, Storage::Fp32);
      return;
    }
    // Split over tensor-parallel shards: the shard's logits in fp32 (the
    // vocabulary shards' kernels' type), ld the largest share's columns,
    // and the group's maximum and sum of exponentials per token, from
    // which B makes the shard's columns of the softmax.
    fn(Field::OutLogits, rt * getShardVocabColumns(layer), Storage::Fp32);
    fn(Field::OutLse, rt, Storage::Fp32);
    fn(Field::OutSum, rt, Storage::Fp32);
    return;
  case LayerKind::Transformer: {
    using blocks::Slot;
    using blocks::State;
    int64_t hd = layer.heads * layer.headDim,
            context = layer.heads * layer.getValueDim();
    if (hasInputFeature(layer, Slot::AttentionInput))
      detail::walkFeatures(State::Forward, Slot::AttentionInput, model, layer,
                           s, fn);
    else
      fn(Field::AttnIn, local * h, Storage::Activation);
    fn(Field::Q, rt * hd, Storage::Activation);
    fn(Field::Lse, s.rows * layer.heads * s.tokens, Storage::Fp32);
    fn(Field::Context, rt * context, Storage::Activation);
    if (hasInputFeature(layer, Slot::FeedForwardInput))
      detail::walkFeatures(State::Forward, Slot::FeedForwardInput, model,
                           layer, s, fn);
    else
      fn(Field::MlpIn, local * h, Storage::Activation);
    if (blocks::hasCoreFeedForward(layer)) {
      fn(Field::Up, rt * layer.ffn, Storage::Activation);
      fn(Field::Act, rt * layer.ffn, Storage::Activation);
      if (layer.isGated())
        fn(Field::Gate, rt * layer.ffn, Storage::Activation);
    } else {
      detail::walkFeatures(State::Forward, Slot::FeedForward, model, layer, s,
                           fn);
    }
    detail::walkOtherFeatures(State::Forward, model, layer, s, fn);
    return;
  }
  }
}

/// The same for the weight state (B -> W).
template <class Fn>
void walkWeightState(const ModelConfig &model, const LayerConfig &layer,
                     const SliceShape &s, Fn &&fn) {
  int64_t h = model.hidden, rt = s.rows * s.tokens;
  int64_t local = getLocalTokens(model, s);
  switch (layer.kind) {
  case LayerKind::Embedding:
    // Whole under sequence parallelism too: the table's shard needs the
    // gradient of every token whose row it holds.
    fn(Field::EmbedGrad, rt * h, Storage::Activation);
    return;
  case LayerKind::Output:
    // Logits' and norm output's gradients (sharded: the latter only).
    if (!layer.sharded)
      fn(Field::OutDLogits, rt * getShardVocabColumns(layer),
         Storage::Activation);
    fn(Field::OutDNorm, local * h, Storage::Activation);
    return;
  case LayerKind::Transformer: {
    int64_t hd = layer.heads * layer.headDim;
    int64_t kv = layer.kvHeads * (layer.headDim + layer.getValueDim());
    fn(Field::DQkv, rt * (hd + kv), Storage::Activation);
    fn(Field::DA, local * h, Storage::Activation); // attention input
    fn(Field::DY1, rt * h, Storage::Activation);   // attention projection out
    fn(Field::DC, local * h, Storage::Activation); // feed-forward input
    // The feed-forward block's output gradient, and what the core's or a
    // replacing feature's W needs behind it.
    bool core = blocks::hasCoreFeedForward(layer);
    if (core)
      fn(Field::DUp, rt * layer.ffn, Storage::Activation);
    fn(Field::DY2, rt * h, Storage::Activation); // MLP down-projection out
    if (core && layer.isGated())
      fn(Field::DGate, rt * layer.ffn, Storage::Activation);
    if (!core)
      detail::walkFeatures(blocks::State::Weight, blocks::Slot::FeedForward,
                           model, layer, s, fn);
    for (blocks::Slot slot :
         {blocks::Slot::AttentionInput, blocks::Slot::FeedForwardInput})
      detail::walkFeatures(blocks::State::Weight, slot, model, layer, s, fn);
    detail::walkOtherFeatures(blocks::State::Weight, model, layer, s, fn);
    return;
  }
  }
}

/// The load-balancing loss's statistics (BalanceLoss), in f32: each
/// expert's routed copies, then its router probabilities' sum, over the
/// sparse layers so far; 0 without the loss. They travel with the
/// activation between stages (getMessageBytes), and the microbatch's
/// copies per expert travel back with its gradient (the loss's gradient
/// at every router's probabilities needs the counts of every layer).
inline int64_t getBalanceFloats(const ModelConfig &model) {
  BalanceLoss loss = getBalanceLoss(model);
  return loss.isOn() ? 2 * loss.experts : 0;
}

/// The same for the key/value state of a microbatch of `rows` rows.
template <class Fn>
void walkKeyValues(const ModelConfig &model, const LayerConfig &layer,
                   int64_t rows, Fn &&fn) {
  if (layer.kind != LayerKind::Transformer)
    return;
  // A context-parallel rank's own tokens only (ring attention).
  int64_t tokens = model.seqLen / std::max(1, model.contextShards);
  int64_t keys = rows * tokens * layer.kvHeads * layer.headDim,
          values = rows * tokens * layer.kvHeads * layer.getValueDim();
  fn(Field::Keys, keys, Storage::Activation);
  fn(Field::Values, values, Storage::Activation);
  fn(Field::DKeys, keys, Storage::Fp32);
  fn(Field::DValues, values, Storage::Fp32);
}

namespace detail {
template <class Walk>
int64_t countBytes(const Precision &precision, Walk &&walk) {
  Arena arena(precision);
  walk([&](Field, int64_t count, Storage storage) {
    arena.take(count, storage);
  });
  return arena.getBytes();
}
} // namespace detail

/// Elements of the stage input a Full-recomputing stage keeps from F to B:
/// none when it begins with a whole embedding (B looks the tokens up
/// again); the message it received (getMessageElements); or, when it
/// begins with a sharded embedding, the input shard's summed rows, which
/// are whole under sequence parallelism too.
inline int64_t getCheckpointElements(const ModelConfig &model,
                                     const std::vector<int> &layers,
                                     const SliceShape &s) {
  const LayerConfig &first = model.layers[layers.front()];
  if (first.kind == LayerKind::Embedding)
    return first.sharded ? s.rows * s.tokens * model.hidden : 0;
  return getLocalTokens(model, s) * model.hidden;
}

/// Its bytes.
inline int64_t getCheckpointBytes(const ModelConfig &model,
                                  const std::vector<int> &layers,
                                  const SliceShape &s,
                                  const Precision &precision) {
  int64_t count = getCheckpointElements(model, layers, s);
  if (count == 0)
    return 0;
  Arena arena(precision);
  arena.take(count, Storage::Activation);
  return arena.getBytes();
}

/// Bytes of the state a stage's `layers` keep from F to B and W, one
/// layer's regions after the other's (each layer's start aligned); with
/// recomputation, the regions it keeps (Full: the checkpoint). With
/// `layers` one layer, that layer's.
inline int64_t getForwardStateBytes(const ModelConfig &model,
                                    const std::vector<int> &layers,
                                    const SliceShape &s,
                                    const Precision &precision,
                                    Recompute r = Recompute::None) {
  if (r == Recompute::Full)
    return getCheckpointBytes(model, layers, s, precision);
  return detail::countBytes(precision, [&](auto &&fn) {
    for (int index : layers)
      walkForwardState(model, model.layers[index], s,
                       [&](Field f, int64_t count, Storage storage) {
                         if (!isRecomputed(f, r))
                           fn(f, count, storage);
                       });
  });
}

/// Bytes of the forward state B recomputes (kept until W), in layout
/// order: the regions getForwardStateBytes leaves out.
inline int64_t getRecomputedStateBytes(const ModelConfig &model,
                                       const std::vector<int> &layers,
                                       const SliceShape &s,
                                       const Precision &precision,
                                       Recompute r) {
  if (r == Recompute::None)
    return 0;
  return detail::countBytes(precision, [&](auto &&fn) {
    for (int index : layers)
      walkForwardState(model, model.layers[index], s,
                       [&](Field f, int64_t count, Storage storage) {
                         if (isRecomputed(f, r))
                           fn(f, count, storage);
                       });
  });
}

inline int64_t getWeightStateBytes(const ModelConfig &model,
                                   const std::vector<int> &layers,
                                   const SliceShape &s,
                                   const Precision &precision) {
  return detail::countBytes(precision, [&](auto &&fn) {
    for (int index : layers)
      walkWeightState(model, model.layers[index], s, fn);
  });
}

/// The key/value state of model layer `index`, then, after the model's
/// last sparse layer, the microbatch's load-balancing statistics
/// (`balance`, the model's getBalanceLoss: taken once by the caller, as a
/// walk over a stage's layers would otherwise walk the model per layer):
/// its slices' F add theirs, the last slice's adds the loss, and every
/// slice's B reads the copies per expert. Per microbatch, as the keys and
/// values are.
template <class Fn>
void walkLayerKeyValues(const ModelConfig &model, const BalanceLoss &balance,
                        int index, int64_t rows, Fn &&fn) {
  walkKeyValues(model, model.layers[index], rows, fn);
  if (balance.isOn() && balance.last == index)
    fn(Field::BalanceStats, 2 * balance.experts, Storage::Fp32);
}

inline int64_t getKeyValueBytes(const ModelConfig &model,
                                const std::vector<int> &layers, int64_t rows,
                                const Precision &precision) {
  BalanceLoss balance = getBalanceLoss(model);
  return detail::countBytes(precision, [&](auto &&fn) {
    for (int index : layers)
      walkLayerKeyValues(model, balance, index, rows, fn);
  });
}

/// Scratch of one transformer layer's passes, in activation elements:
/// forward (norm output, QKV projection, residual, second norm output),
/// backward (MLP activation gradient, residual gradient, context and query
/// gradients, and under sequence parallelism the whole slice's partial sums
/// a reduce-scatter takes), weight (a recomputed norm output). The norm
/// outputs are whole: under sequence parallelism, the all-gathers' results.
struct TransformerScratch {
  int64_t norm, qkv, residual, norm2;
  int64_t dAct, dResidual, dContext, dQ, partial;
  /// Ring attention's buffers under context parallelism (TransformerBlock
  /// ringForward, ringBackward): two blocks of a rank's keys and values
  /// of the prefix (at most its seq_len / cp tokens of every row), two
  /// fp32 accumulators of their gradients, and one chunk's log-sum-exps
  /// (fp32) and context.
  int64_t context;
};

inline TransformerScratch getTransformerScratch(const ModelConfig &model,
                                                const LayerConfig &l,
                                                const SliceShape &s) {
  int64_t rt = s.rows * s.tokens, h = model.hidden;
  int64_t local = getLocalTokens(model, s);
  int64_t hd = l.heads * l.headDim,
          kv = l.kvHeads * (l.headDim + l.getValueDim()),
          context = l.heads * l.getValueDim();
  int64_t partial = model.sequenceShards > 1 ? rt * h : 0;
  int64_t act = blocks::hasCoreFeedForward(l) ? rt * l.ffn : 0;
  // In activation elements: an fp32 one is two bf16 ones; one alignment's
  // bytes (elements of one byte at least) before each of the six regions.
  int64_t block = s.rows * (model.seqLen / s.contextShards) * kv;
  int64_t exchange = s.contextShards > 1
                         ? 2 * block + 2 * 2 * block + 2 * rt * l.heads +
                               rt * context + 6 * kRegionAlignment
                         : 0;
  return {rt * h,    rt * (hd + kv), local * h, rt * h, act,
          local * h, rt * context,   rt * hd,   partial, exchange};
}

/// The core's scratch for one pass of a stage running `layers`: two
/// activations to pass between layers, then the largest layer's scratch
/// (each layer's regions carved in the order of TransformerScratch).
inline int64_t getCoreScratchBytes(const ModelConfig &model,
                                   const std::vector<int> &layers,
                                   const SliceShape &s,
                                   const Precision &precision) {
  int64_t rt = s.rows * s.tokens, h = model.hidden;
  int64_t local = getLocalTokens(model, s);
  auto arenaOf = [&](std::initializer_list<int64_t> counts) {
    Arena arena(precision);
    arena.take(local * h, Storage::Activation); // ping
    arena.take(local * h, Storage::Activation); // pong
    for (int64_t count : counts)
      arena.take(count, Storage::Activation);
    return arena.getBytes();
  };
  // The output layer's: its (whole) norm output and a per-token fp32
  // statistic (the shard's sum of exponentials when it splits over
  // shards). A split embedding's partial sums use the same region.
  Arena output(precision);
  output.take(local * h, Storage::Activation); // ping
  output.take(local * h, Storage::Activation); // pong
  output.take(rt * h, Storage::Activation);
  output.take(rt, Storage::Fp32);
  int64_t most = output.getBytes();
  for (int index : layers) {
    const LayerConfig &l = model.layers[index];
    if (l.kind != LayerKind::Transformer)
      continue;
    TransformerScratch t = getTransformerScratch(model, l, s);
    // W: the two norms' outputs, both at once under sequence parallelism
    // (their gathers overlap).
    int64_t gathered = model.sequenceShards > 1 ? rt * h : 0;
    most =
        std::max({most,
                  arenaOf({t.norm, t.qkv, t.residual, t.norm2, t.context}),
                  arenaOf({t.dAct, t.dResidual, t.dContext, t.dQ, t.partial,
                           t.context}),
                  arenaOf({rt * h, gathered})});
  }
  return most;
}

/// Where the features' scratch starts in a pass's workspace: past the
/// core's, aligned.
inline int64_t getFeatureScratchOffset(const ModelConfig &model,
                                       const std::vector<int> &layers,
                                       const SliceShape &s,
                                       const Precision &precision) {
  int64_t core = getCoreScratchBytes(model, layers, s, precision);
  return (core + kRegionAlignment - 1) / kRegionAlignment * kRegionAlignment;
}

/// Calls fn(feature, byteOffset, count) for each enabled feature of
/// transformer layer `layer` that asks for scratch: its region (`count`
/// activation elements) from the features' scratch start, in getOrder.
template <class Fn>
void walkFeatureScratch(const ModelConfig &model, const LayerConfig &layer,
                        const SliceShape &s, const Precision &precision,
                        Fn &&fn) {
  blocks::LayerShape shape = blocks::getLayerShape(model, layer, "", {});
  Arena arena(precision);
  for (const blocks::Feature *f : blocks::getEnabledFeatures(layer))
    if (int64_t count = f->getScratchElements(shape, s); count > 0)
      fn(*f, arena.take(count, Storage::Activation), count);
}

/// Scratch for one pass of a stage running `layers`: the core's, then the
/// largest layer's features' (walkFeatureScratch).
inline int64_t getScratchBytes(const ModelConfig &model,
                               const std::vector<int> &layers,
                               const SliceShape &s,
                               const Precision &precision) {
  int64_t features = 0;
  for (int index : layers) {
    const LayerConfig &l = model.layers[index];
    if (l.kind != LayerKind::Transformer)
      continue;
    walkFeatureScratch(model, l, s, precision,
                       [&](const blocks::Feature &, int64_t at, int64_t count) {
                         features = std::max(
                             features,
                             at + count * getSize(precision.activations));
                       });
  }
  if (features == 0)
    return getCoreScratchBytes(model, layers, s, precision);
  return getFeatureScratchOffset(model, layers, s, precision) + features;
}

/// Where a recomputing stage's workspace continues past the scratch, in
/// bytes: an f64 for the loss B's second F computes and discards, then
/// the recomputed regions while F makes them (B and W find them in the
/// recomputed state instead).
struct RecomputeArea {
  int64_t loss, area;
};
inline RecomputeArea getRecomputeArea(const ModelConfig &model,
                                      const std::vector<int> &layers,
                                      const SliceShape &s,
                                      const Precision &precision) {
  auto align = [](int64_t bytes) {
    return (bytes + kRegionAlignment - 1) / kRegionAlignment *
           kRegionAlignment;
  };
  int64_t loss = align(getScratchBytes(model, layers, s, precision));
  return {loss, align(loss + 8)};
}

/// A pass's workspace: the scratch, and a recomputing stage's
/// RecomputeArea after it.
inline int64_t getWorkspaceBytes(const ModelConfig &model,
                                 const std::vector<int> &layers,
                                 const SliceShape &s,
                                 const Precision &precision,
                                 Recompute r = Recompute::None) {
  if (r == Recompute::None)
    return getScratchBytes(model, layers, s, precision);
  return getRecomputeArea(model, layers, s, precision).area +
         getRecomputedStateBytes(model, layers, s, precision, r);
}

/// The activation (or its gradient) that travels between stages, in
/// elements of the activation type: the shard's tokens' under sequence
/// parallelism.
inline int64_t getMessageElements(const ModelConfig &model,
                                  const SliceShape &s) {
  return getLocalTokens(model, s) * model.hidden;
}

/// Its bytes: the activation, then the load-balancing statistics
/// (getBalanceFloats, f32) at getBalanceOffset.
inline int64_t getMessageBytes(const ModelConfig &model, const SliceShape &s,
                               const Precision &precision) {
  Arena arena(precision);
  arena.take(getMessageElements(model, s), Storage::Activation);
  if (int64_t floats = getBalanceFloats(model))
    arena.take(floats, Storage::Fp32);
  return arena.getBytes();
}

/// Where a message's load-balancing statistics start, in bytes: past the
/// activation, aligned.
inline int64_t getBalanceOffset(const ModelConfig &model, const SliceShape &s,
                                const Precision &precision) {
  Arena arena(precision);
  arena.take(getMessageElements(model, s), Storage::Activation);
  return arena.take(0, Storage::Fp32);
}

} // namespace sluice::rt

#endif // SLUICE_BLOCKS_LAYOUT_H
