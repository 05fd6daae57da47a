//===- Slots.h - Block features: the compute part ---------------*- C++ -*-===//
//
// What a block feature computes at the slots of the transformer block
// (sluice/Blocks/Feature.h lists them), in F, B and W. The block
// (TransformerBlock.cpp) calls the enabled features at each slot and names
// none; a feature's compute part lives in its folder (lib/Blocks/<name>/
// Compute.cpp), found by the build, or is registered (registerCompute) by
// a test or a plug-in together with its shape part.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_BLOCKS_SLOTS_H
#define SLUICE_RUNTIME_BLOCKS_SLOTS_H

#include "Block.h"
#include "sluice/Blocks/Feature.h"

#include <string>
#include <vector>

namespace sluice::rt::block {

using blocks::Slot;

/// What a feature's compute part sees of one layer in one pass.
struct SlotContext {
  const ModelConfig &model;
  const LayerConfig &layer;
  const SliceShape &s;
  Sizes size;
  Kernels &kernels;
  const ShardSeams &seams;
  /// Every region of the layer: the core's by Field, the feature's by
  /// region().
  const Views &views;
  const BoundFeature &feature;
  /// The feature's scratch (its getScratchElements), or null.
  DevicePtr scratch;
  /// The load-balancing loss's part in this pass (a mixture of experts').
  Balance balance;

  /// Its parameter `name` within the layer, or null when it has none.
  DevicePtr weight(const std::string &name) const;
  DevicePtr grad(const std::string &name) const;
  /// Its fp32 master weights (a value no rounding to the activation type
  /// may lose: the router's bias).
  DevicePtr master(const std::string &name) const;
  /// Its region `local` (its walkState's id).
  DevicePtr region(int local) const {
    return views[getFeatureField(*feature.shape, local)];
  }
  bool rms() const { return layer.isRms(); }
  float eps() const { return float(model.normEps); }
};

/// The tensors at a slot; which ones a call carries depends on the slot
/// and the pass. n = this shard's tokens outside the tensor-parallel
/// regions, rt = the slice's, h = hidden, f = the shard's feed-forward
/// width.
///
/// AttentionInput, FeedForwardInput (one feature at most):
///   F  `x` the residual stream [n, h] (the feed-forward input: the
///      attention's output, to which `residual`, the block's input, is
///      added first, in place); `out` receives the sublayer's input [n, h].
///   B  `grad` the gradient at the sublayer's input [n, h], `residual`
///      the gradient along the residual path; `out` receives the
///      gradient at `x`: residual + the feature's input gradient.
///   W  materialize(): `out` receives the sublayer's input again [n, h];
///      weight(): `grad` as in B, for the feature's parameters.
/// QueryKeyValue (one feature at most):
///   F  `x` the attention's input, the whole slice's [rt, h]; `out`
///      receives q, k and v side by side [rt, width], rotated.
///   B  `grad` their gradient [rt, width]; `out` receives the input's
///      [rt, h] (a partial sum per tensor-parallel shard).
///   W  `x` the input again, `grad` as in B.
/// Projections:
///   F  `x` the QKV projection's output [rt, width] (q, k, v side by
///      side), in place, before the rotation; the layer's Q and Context
///      regions are free (written after this slot).
///   B  `x` its gradient, in place (after the rotation's); `temp` and
///      `temp2` free [rt, hd] each.
///   W  `x` the same gradient (the weight state's).
/// AttentionOutput, FeedForwardOutput:
///   F  `x` the projection's output reduced to this shard's tokens [n, h],
///      in place, before the residual add; `temp` a free [n, h].
///   B  `grad` the gradient at the slot's output [n, h]; a feature that
///      changes it writes the gradient at the slot's input into `out` and
///      returns true (one such feature per slot).
///   W  `grad` the whole slice's gradient at the projection's output
///      [rt, h] (what the feature's parameters' gradients read).
/// FeedForwardHidden:
///   F  `x` the up projection's output, `gate` the gate's (gated blocks)
///      [rt, f], in place, before the activation.
///   W  `x`, `gate`: their gradients.
struct SlotTensors {
  DevicePtr x, residual, out, grad, gate, temp, temp2;
};

/// A hidden-size norm's tensors at a slot (blocks::addHiddenNorm's
/// parameters, walkHiddenNormState's regions): its gain and bias (null
/// for RMSNorm), their gradients, the normalised input and 1/std.
struct HiddenNorm {
  DevicePtr w, b, gw, gb, xhat, rstd;
};
/// The norm at `slot` of a feature whose shape part is a
/// blocks::HiddenNormPair (pre_norms, post_norms).
HiddenNorm getHiddenNorm(const SlotContext &c, Slot slot);

class FeatureCompute {
public:
  virtual ~FeatureCompute() = default;

  virtual void forward(Slot slot, const SlotContext &c,
                       const SlotTensors &t) const {}
  /// B; at an output slot, whether it wrote `out`.
  virtual bool backward(Slot slot, const SlotContext &c,
                        const SlotTensors &t) const {
    return false;
  }
  /// W at an input slot: the sublayer's input again.
  virtual void materialize(Slot slot, const SlotContext &c,
                           const SlotTensors &t) const {}
  /// W: its parameters' gradients at `slot`, accumulated.
  virtual void weight(Slot slot, const SlotContext &c,
                      const SlotTensors &t) const {}
};

/// The compute part of the feature named `name`: the build's (lib/Blocks/
/// */Compute.cpp), or one registered; null if none.
const FeatureCompute *lookupCompute(const std::string &name);
/// Adds `compute` (kept by reference) as the compute part of the feature
/// named `name`.
void registerCompute(const std::string &name, const FeatureCompute &compute);

} // namespace sluice::rt::block

/// Defines getCompute_NAME(), which the build's compute list calls (one
/// per folder under lib/Blocks), returning the one CLASS: the compute part
/// of the feature named NAME (its folder's name).
#define SLUICE_DEFINE_COMPUTE(NAME, CLASS)                                     \
  const ::sluice::rt::block::FeatureCompute &getCompute_##NAME() {             \
    static const CLASS compute;                                                \
    return compute;                                                            \
  }

#endif // SLUICE_RUNTIME_BLOCKS_SLOTS_H
