//===- Compute.cpp - biases: on the linear maps ---------------------------===//
//
// F adds each bias to its map's output (a row-parallel map's after the
// group's sum, on this shard's tokens); W sums the output gradient's rows
// into the bias's gradient. B has nothing to do: a bias passes the
// gradient through.
//
//===----------------------------------------------------------------------===//

#include "Slots.h"

namespace sluice::rt::block {
namespace {

class BiasesCompute final : public FeatureCompute {
public:
  void forward(Slot slot, const SlotContext &c,
               const SlotTensors &t) const override {
    const Sizes &z = c.size;
    auto add = [&](const char *name, DevicePtr x, int64_t rows, int64_t cols) {
      if (DevicePtr b = c.weight(name))
        c.kernels.addRowVector(x, b, rows, cols);
    };
    switch (slot) {
    case Slot::Projections:
      return add("attn.qkv.bias", t.x, z.rt, z.width);
    case Slot::AttentionOutput:
      return add("attn.out.bias", t.x, z.n, z.h);
    case Slot::FeedForwardHidden:
      add("mlp.up.bias", t.x, z.rt, z.f);
      if (t.gate)
        add("mlp.gate.bias", t.gate, z.rt, z.f);
      return;
    case Slot::FeedForwardOutput:
      return add("mlp.down.bias", t.x, z.n, z.h);
    default:
      return;
    }
  }

  void weight(Slot slot, const SlotContext &c,
              const SlotTensors &t) const override {
    const Sizes &z = c.size;
    auto sum = [&](const char *name, DevicePtr grad, int64_t cols) {
      if (DevicePtr g = c.grad(name))
        c.kernels.accumulateColumnSums(grad, z.rt, cols, g);
    };
    switch (slot) {
    case Slot::Projections:
      return sum("attn.qkv.bias", t.x, z.width);
    case Slot::AttentionOutput:
      return sum("attn.out.bias", t.grad, z.h);
    case Slot::FeedForwardHidden:
      sum("mlp.up.bias", t.x, z.f);
      if (t.gate)
        sum("mlp.gate.bias", t.gate, z.f);
      return;
    case Slot::FeedForwardOutput:
      return sum("mlp.down.bias", t.grad, z.h);
    default:
      return;
    }
  }
};

} // namespace

SLUICE_DEFINE_COMPUTE(biases, BiasesCompute)

} // namespace sluice::rt::block
