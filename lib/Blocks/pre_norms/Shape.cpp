//===- Shape.cpp - pre_norms: a norm before each half ---------------------===//
//
// The pre-norm block (Xiong et al., 2020; GPT-2, Llama and most models
// since): attention reads norm1(x) and the feed-forward block norm2(x2),
// each a LayerNorm or RMSNorm (the layer's `norm`) over the hidden size.
// On by default (`pre_norms`); OLMo-2 turns it off and normalises each
// half's output instead (post_norms).
//
// Under sequence parallelism a norm runs on its shard's tokens only, so
// each shard's gains' gradients are its tokens' part: the tensor-parallel
// group sums them (Reduce::Tokens).
//
//===----------------------------------------------------------------------===//

#include "sluice/Blocks/Feature.h"

namespace sluice::blocks {
namespace {

class PreNorms final : public Feature {
public:
  const char *getName() const override { return "pre_norms"; }
  bool isEnabled(const LayerConfig &layer) const override {
    return layer.preNorms;
  }
  void setEnabled(LayerConfig &layer, bool on, int) const override {
    layer.preNorms = on;
  }
  unsigned getSlots() const override {
    return getSlotBit(Slot::AttentionInput) |
           getSlotBit(Slot::FeedForwardInput);
  }
  int getOrder() const override { return 0; }

  void addParameters(Slot slot, const LayerShape &shape,
                     std::vector<rt::ParameterSpec> &out) const override {
    bool first = slot == Slot::AttentionInput;
    addHiddenNorm(shape, shape.prefix + (first ? "norm1" : "norm2"), out);
  }

  /// Each norm's normalised input and 1/std, on this shard's tokens: the
  /// attention's are regions 0 and 1, the feed-forward block's 2 and 3.
  void walkState(State state, Slot slot, const LayerShape &shape,
                 const rt::SliceShape &s, const RegionFn &fn) const override {
    if (state == State::Forward)
      walkHiddenNormState(slot == Slot::AttentionInput ? 0 : 2, shape, s, fn);
  }
};

} // namespace

SLUICE_DEFINE_FEATURE(pre_norms, PreNorms)

} // namespace sluice::blocks
