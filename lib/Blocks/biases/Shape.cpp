//===- Shape.cpp - biases: on the linear maps -----------------------------===//
//
// `bias` adds a bias to every linear map (GPT-2: Radford et al., 2019);
// `qkv_bias` to the query, key and value projections only (Qwen2: Yang et
// al., 2024). A column-parallel map's bias splits with its columns; a
// row-parallel map's is added once, after the group's sum, and is whole on
// every shard (Megatron-LM's RowParallelLinear): its gradient comes from
// the whole slice's output gradient, so nothing is summed.
//
//===----------------------------------------------------------------------===//

#include "sluice/Blocks/Feature.h"

namespace sluice::blocks {
namespace {

class Biases final : public Feature {
public:
  // Inside the norms of the same slots; zero biases add nothing.
  Biases()
      : Feature(
            {"biases",
             getSlotBits({Slot::Projections, Slot::AttentionOutput,
                          Slot::FeedForwardHidden, Slot::FeedForwardOutput}),
             /*order=*/10, /*field=*/nullptr, /*variants=*/2,
             /*identityAtInit=*/true}) {}
  bool isEnabled(const LayerConfig &layer) const override {
    return layer.hasQkvBias();
  }
  /// Variant 0: every map's (`bias`); 1: the QKV projection's only
  /// (`qkv_bias`).
  void setEnabled(LayerConfig &layer, bool on, int variant) const override {
    layer.bias = on && variant == 0;
    layer.qkvBias = on && variant == 1;
  }

  void addParameters(Slot slot, const LayerShape &shape,
                     std::vector<rt::ParameterSpec> &out) const override {
    const LayerConfig &l = shape.layer;
    int64_t h = shape.hidden(), hd = l.heads * l.headDim,
            kv = l.kvHeads * (l.headDim + l.getValueDim());
    auto bias = [&](const char *name, int64_t size, rt::Split split,
                    const std::vector<rt::IndexRange> &parts = {}) {
      out.push_back(rt::makeParameter(shape.prefix + name, {size},
                                      rt::InitKind::Zeros, shape.shard, split,
                                      parts));
    };
    switch (slot) {
    case Slot::Projections:
      bias("attn.qkv.bias", hd + kv, rt::Split::Columns, shape.split.qkv);
      return;
    case Slot::AttentionOutput:
      if (l.bias)
        bias("attn.out.bias", h, rt::Split::Whole);
      return;
    case Slot::FeedForwardHidden:
      if (l.bias && l.isGated())
        bias("mlp.gate.bias", l.ffn, rt::Split::Columns, shape.split.ffn);
      if (l.bias)
        bias("mlp.up.bias", l.ffn, rt::Split::Columns, shape.split.ffn);
      return;
    case Slot::FeedForwardOutput:
      if (l.bias)
        bias("mlp.down.bias", h, rt::Split::Whole);
      return;
    default:
      return;
    }
  }
};

} // namespace

SLUICE_DEFINE_FEATURE(biases, Biases)

} // namespace sluice::blocks
