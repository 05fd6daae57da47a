//===- Layout.h - What a pass keeps, in floats ------------------*- C++ -*-===//
//
// The contract between the compiler's buffer planning and the CPU runtime:
// how many fp32 values each pass of a stage keeps for a later pass of the
// same microbatch slice. The compiler sizes plan buffers with these
// functions; the runtime carves its tensors out of those buffers in the
// same order and refuses a plan whose buffers are too small. Header-only,
// no dependencies, so both sides include the same code.
//
// For a slice of t tokens after o tokens of context, R rows (micro-batch),
// hidden h, H heads of size d, feed-forward f:
//
//  * forward state (F -> B, W): per transformer layer the first norm's
//    output and 1/std, Q, the attention probabilities (H x t x (o + t) per
//    row), the attention context, the second norm's output and 1/std, the
//    MLP's pre-activation and activation (gated blocks: also the gate's
//    pre-activation); the output layer's norm output,
//    1/std and probabilities (t x vocab; none when the layer is sharded);
//    the embedding keeps nothing;
//  * weight state (B -> W): the gradients at every linear map's output and
//    at each norm's output, which W turns into weight gradients;
//  * key/value state (first slice's F -> first slice's B): the keys and
//    values of the whole sequence and their gradients, which later slices
//    read and whose gradients the backward of later slices accumulates.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_LAYOUT_H
#define SLUICE_RUNTIME_LAYOUT_H

#include "ModelConfig.h"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace sluice::rt {

struct SliceShape {
  int64_t rows = 1;
  int64_t tokens = 0;
  int64_t offset = 0;
};

inline int64_t getNormStatFloats(const SliceShape &s) {
  return s.rows * s.tokens;
}

inline int64_t getForwardStateFloats(const ModelConfig &model,
                                     const LayerConfig &layer,
                                     const SliceShape &s) {
  int64_t h = model.hidden, rt = s.rows * s.tokens;
  switch (layer.kind) {
  case LayerKind::Embedding:
    return 0;
  case LayerKind::Output:
    // Sharded: the final norm alone, whose output the shards read.
    return rt * h + rt + (layer.sharded ? 0 : rt * layer.vocab);
  case LayerKind::Transformer: {
    int64_t hd = layer.heads * layer.headDim;
    int64_t probs = s.rows * layer.heads * s.tokens * (s.offset + s.tokens);
    return rt * h + rt          // norm 1 output, 1/std
           + rt * hd            // Q
           + probs              // attention probabilities
           + rt * hd            // attention context
           + rt * h + rt        // norm 2 output, 1/std
           + 2 * rt * layer.ffn // MLP pre-activation, activation
           + (layer.isGated() ? rt * layer.ffn : 0); // gate pre-activation
  }
  }
  return 0;
}

inline int64_t getWeightStateFloats(const ModelConfig &model,
                                    const LayerConfig &layer,
                                    const SliceShape &s) {
  int64_t h = model.hidden, rt = s.rows * s.tokens;
  switch (layer.kind) {
  case LayerKind::Embedding:
    return rt * h; // gradient of the embedding output
  case LayerKind::Output:
    // Logits and norm-output gradients (sharded: the latter only).
    return (layer.sharded ? 0 : rt * layer.vocab) + rt * h;
  case LayerKind::Transformer: {
    int64_t hd = layer.heads * layer.headDim;
    int64_t kv = layer.kvHeads * layer.headDim;
    return rt * (hd + 2 * kv) // QKV-projection output gradient
           + rt * h           // norm 1 output gradient
           + rt * h           // attention projection output gradient
           + rt * h           // norm 2 output gradient
           + rt * layer.ffn   // MLP up-projection output gradient
           + rt * h           // MLP down-projection output gradient
           + (layer.isGated() ? rt * layer.ffn : 0); // gate output gradient
  }
  }
  return 0;
}

inline int64_t getKeyValueFloats(const ModelConfig &model,
                                 const LayerConfig &layer, int64_t rows) {
  if (layer.kind != LayerKind::Transformer)
    return 0;
  // Keys, values and their gradients over the whole sequence.
  return 4 * rows * model.seqLen * layer.kvHeads * layer.headDim;
}

/// Scratch for one pass of a stage running `layers`: two activations to
/// pass between layers, plus the largest layer's scratch.
inline int64_t getWorkspaceFloats(const ModelConfig &model,
                                  const std::vector<int> &layers,
                                  const SliceShape &s) {
  int64_t rt = s.rows * s.tokens, h = model.hidden, most = rt * h;
  for (int index : layers) {
    const LayerConfig &l = model.layers[index];
    int64_t hd = l.heads * l.headDim, kv = l.kvHeads * l.headDim;
    if (l.kind == LayerKind::Transformer)
      most = std::max(
          {most, rt * (3 * h + hd + 2 * kv), rt * (l.ffn + h + 2 * hd)});
  }
  return 2 * rt * h + most;
}

/// The activation (or its gradient) that travels between stages.
inline int64_t getMessageFloats(const ModelConfig &model, const SliceShape &s) {
  return s.rows * s.tokens * model.hidden;
}

} // namespace sluice::rt

#endif // SLUICE_RUNTIME_LAYOUT_H
