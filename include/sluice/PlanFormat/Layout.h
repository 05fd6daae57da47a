//===- Layout.h - What a pass keeps, in typed regions -----------*- C++ -*-===//
//
// The contract between the compiler's buffer planning and the runtime: the
// tensors each pass of a stage keeps for a later pass of the same
// microbatch slice, with their element types, in the order the runtime
// carves them out of a buffer. The compiler sizes plan buffers with these
// functions; the runtime carves its tensors out of those buffers with the
// same walk and refuses a plan whose buffers are too small. Header-only,
// no dependencies, so both sides include the same code.
//
// For a slice of t tokens after o tokens of context, R rows (micro-batch),
// hidden h, H query heads of size d, KV key/value heads, feed-forward f:
//
//  * forward state (F -> B, W): per transformer layer the first norm's
//    normalised input and 1/std, Q, the attention's log-sum-exp per query
//    and head (R x H x t: FlashAttention's statistic, from which B
//    recomputes the probabilities instead of keeping R x H x t x (o + t)
//    of them), the attention context, the second norm's normalised input
//    and 1/std, the MLP's pre-activation and activation (gated blocks:
//    also the gate's pre-activation; sandwich norms: their normalised
//    inputs and 1/std); the output layer's normalised input,
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
//    (in fp32: they are sums over slices).
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

#ifndef SLUICE_PLANFORMAT_LAYOUT_H
#define SLUICE_PLANFORMAT_LAYOUT_H

#include "sluice/PlanFormat/DType.h"
#include "sluice/PlanFormat/ModelConfig.h"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace sluice::rt {

struct SliceShape {
  int64_t rows = 1;
  int64_t tokens = 0;
  int64_t offset = 0;
};

/// The rows x tokens of slice `s` a shard of `model` holds outside the
/// tensor-parallel regions: all of them, or its 1/sequenceShards under
/// sequence parallelism.
inline int64_t getLocalTokens(const ModelConfig &model, const SliceShape &s) {
  return s.rows * s.tokens / std::max(1, model.sequenceShards);
}

/// Every region of a buffer starts at a multiple of this many bytes.
constexpr int64_t kRegionAlignment = 256;

/// What a region holds, and so its element type.
enum class Storage : uint8_t {
  Activation, // the precision's activation type
  Fp32,       // statistics, logits, accumulators
};

inline DType getType(Storage storage, const Precision &precision) {
  return storage == Storage::Fp32 ? kStatisticType : precision.activations;
}

/// Lays regions out one after the other, each aligned: the byte offset of
/// every region and the total.
class Arena {
public:
  explicit Arena(const Precision &precision) : precision(precision) {}
  /// Appends `count` elements of `storage`; returns their byte offset.
  int64_t take(int64_t count, Storage storage) {
    int64_t at =
        (used + kRegionAlignment - 1) / kRegionAlignment * kRegionAlignment;
    used = at + count * getSize(getType(storage, precision));
    return at;
  }
  int64_t getBytes() const { return used; }
  const Precision &getPrecision() const { return precision; }

private:
  Precision precision;
  int64_t used = 0;
};

/// The named tensors of the three kinds of state and of scratch.
enum class Field : uint8_t {
  // Transformer forward state.
  Xhat1,
  Rstd1,
  Q,
  Lse,
  Context,
  Xhat2,
  Rstd2,
  Up,
  Act,
  Gate,
  Xhat3, // sandwich norms (LayerConfig::postNorms): after attention
  Rstd3,
  Xhat4, // and after the feed-forward block
  Rstd4,
  QXhat, // query/key norms (LayerConfig::qkNorm): per query head
  QRstd,
  KXhat, // and per key head
  KRstd,
  // Transformer weight state.
  DQkv,
  DA,
  DY1,
  DC,
  DUp,
  DY2,
  DGate,
  // Key/value state.
  Keys,
  Values,
  DKeys,
  DValues,
  // Output layer (forward, then weight state); embedding (weight state).
  OutXhat,
  OutRstd,
  OutLogits,
  OutLse, // split over tensor-parallel shards: the group's maximum
  OutSum, // split: the group's sum of exponentials under that maximum
  OutDLogits,
  OutDNorm,
  EmbedGrad,
};

/// What a stage recomputes in its backward pass instead of keeping it from
/// F (activation recomputation: Li, LLM Systems;
/// Megatron-LM's `--recompute-granularity`):
///  * None: F keeps its whole forward state until B and W;
///  * Selective: F keeps the norms' and the projections' tensors (what the
///    matmuls made: Xhat, Q, the MLP's pre-activations) and drops the
///    attention's output and statistics and the MLP's activation; B
///    recomputes them (the attention core and an elementwise function,
///    Korthikanti et al.'s selective recomputation) into the recomputed
///    state, which lives until W;
///  * Full: F keeps only the stage's input (the checkpoint); B runs the
///    stage's F again from it into the recomputed state.
enum class Recompute : uint8_t { None, Selective, Full };

/// Whether `field` of the forward state is recomputed under `r`.
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
    int64_t hd = layer.heads * layer.headDim;
    fn(Field::Xhat1, local * h, Storage::Activation);
    fn(Field::Rstd1, local, Storage::Fp32);
    fn(Field::Q, rt * hd, Storage::Activation);
    fn(Field::Lse, s.rows * layer.heads * s.tokens, Storage::Fp32);
    fn(Field::Context, rt * hd, Storage::Activation);
    fn(Field::Xhat2, local * h, Storage::Activation);
    fn(Field::Rstd2, local, Storage::Fp32);
    fn(Field::Up, rt * layer.ffn, Storage::Activation);
    fn(Field::Act, rt * layer.ffn, Storage::Activation);
    if (layer.isGated())
      fn(Field::Gate, rt * layer.ffn, Storage::Activation);
    if (layer.postNorms) {
      fn(Field::Xhat3, local * h, Storage::Activation);
      fn(Field::Rstd3, local, Storage::Fp32);
      fn(Field::Xhat4, local * h, Storage::Activation);
      fn(Field::Rstd4, local, Storage::Fp32);
    }
    if (layer.qkNorm) {
      int64_t kv = layer.kvHeads * layer.headDim;
      fn(Field::QXhat, rt * hd, Storage::Activation);
      fn(Field::QRstd, rt * layer.heads, Storage::Fp32);
      fn(Field::KXhat, rt * kv, Storage::Activation);
      fn(Field::KRstd, rt * layer.kvHeads, Storage::Fp32);
    }
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
    int64_t kv = layer.kvHeads * layer.headDim;
    fn(Field::DQkv, rt * (hd + 2 * kv), Storage::Activation);
    fn(Field::DA, local * h, Storage::Activation); // norm 1 output
    fn(Field::DY1, rt * h, Storage::Activation);   // attention projection out
    fn(Field::DC, local * h, Storage::Activation); // norm 2 output
    fn(Field::DUp, rt * layer.ffn, Storage::Activation);
    fn(Field::DY2, rt * h, Storage::Activation); // MLP down-projection out
    if (layer.isGated())
      fn(Field::DGate, rt * layer.ffn, Storage::Activation);
    return;
  }
  }
}

/// The same for the key/value state of a microbatch of `rows` rows.
template <class Fn>
void walkKeyValues(const ModelConfig &model, const LayerConfig &layer,
                   int64_t rows, Fn &&fn) {
  if (layer.kind != LayerKind::Transformer)
    return;
  int64_t cache = rows * model.seqLen * layer.kvHeads * layer.headDim;
  fn(Field::Keys, cache, Storage::Activation);
  fn(Field::Values, cache, Storage::Activation);
  fn(Field::DKeys, cache, Storage::Fp32);
  fn(Field::DValues, cache, Storage::Fp32);
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

inline int64_t getKeyValueBytes(const ModelConfig &model,
                                const std::vector<int> &layers, int64_t rows,
                                const Precision &precision) {
  return detail::countBytes(precision, [&](auto &&fn) {
    for (int index : layers)
      walkKeyValues(model, model.layers[index], rows, fn);
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
};

inline TransformerScratch getTransformerScratch(const ModelConfig &model,
                                                const LayerConfig &l,
                                                const SliceShape &s) {
  int64_t rt = s.rows * s.tokens, h = model.hidden;
  int64_t local = getLocalTokens(model, s);
  int64_t hd = l.heads * l.headDim, kv = l.kvHeads * l.headDim;
  int64_t partial = model.sequenceShards > 1 ? rt * h : 0;
  return {rt * h,       rt * (hd + 2 * kv), local * h, rt * h, rt * l.ffn,
          local * h,    rt * hd,            rt * hd,   partial};
}

/// Scratch for one pass of a stage running `layers`: two activations to
/// pass between layers, then the largest layer's scratch (each layer's
/// regions carved in the order of TransformerScratch).
inline int64_t getScratchBytes(const ModelConfig &model,
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
        std::max({most, arenaOf({t.norm, t.qkv, t.residual, t.norm2}),
                  arenaOf({t.dAct, t.dResidual, t.dContext, t.dQ, t.partial}),
                  arenaOf({rt * h, gathered})});
  }
  return most;
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

inline int64_t getMessageBytes(const ModelConfig &model, const SliceShape &s,
                               const Precision &precision) {
  return getMessageElements(model, s) * getSize(precision.activations);
}

} // namespace sluice::rt

#endif // SLUICE_PLANFORMAT_LAYOUT_H
