//===- Shape.cpp - post_norms: a norm on each half's output ---------------===//
//
// A norm of the layer's kind on the attention's and the feed-forward
// block's outputs before each residual add: x + norm(attn(...)). With the
// pre-norms, Gemma-2's and Gemma-3's sandwich norms (Gemma Team, 2024);
// without them (`pre_norms = false`), OLMo-2's only norms (OLMo Team,
// 2024, "2 OLMo 2 Olmo": reordered norm).
//
// The norms run on each shard's tokens under sequence parallelism, so the
// group sums their gains' gradients (Reduce::Tokens).
//
//===----------------------------------------------------------------------===//

#include "sluice/Blocks/Feature.h"

namespace sluice::blocks {
namespace {

class PostNorms final : public Feature {
public:
  const char *getName() const override { return "post_norms"; }
  bool isEnabled(const LayerConfig &layer) const override {
    return layer.postNorms;
  }
  void setEnabled(LayerConfig &layer, bool on, int) const override {
    layer.postNorms = on;
  }
  unsigned getSlots() const override {
    return getSlotBit(Slot::AttentionOutput) |
           getSlotBit(Slot::FeedForwardOutput);
  }
  // After a bias (the output projection's bias is inside the norm).
  int getOrder() const override { return 20; }

  void addParameters(Slot slot, const LayerShape &shape,
                     std::vector<rt::ParameterSpec> &out) const override {
    bool first = slot == Slot::AttentionOutput;
    addHiddenNorm(shape,
                  shape.prefix + (first ? "post_attn_norm" : "post_mlp_norm"),
                  out);
  }

  /// Each norm's normalised input and 1/std, on this shard's tokens: the
  /// attention's are regions 0 and 1, the feed-forward block's 2 and 3.
  void walkState(State state, Slot slot, const LayerShape &shape,
                 const rt::SliceShape &s, const RegionFn &fn) const override {
    if (state == State::Forward)
      walkHiddenNormState(slot == Slot::AttentionOutput ? 0 : 2, shape, s, fn);
  }
};

} // namespace

SLUICE_DEFINE_FEATURE(post_norms, PostNorms)

} // namespace sluice::blocks
