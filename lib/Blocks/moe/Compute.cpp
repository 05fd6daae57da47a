//===- Compute.cpp - moe: a mixture of experts in the feed-forward's place ===//
//
// F, B and W of the mixture-of-experts block (Shape.cpp) on the routing
// kernels of runtime/Kernels.def: the router's logits in fp32 (as
// transformers' softmax runs with dtype=float), its softmax and top-k
// (moeRoute), the tokens' k copies sorted by expert (moeSort) and gathered
// (moeGather), each expert's gate, up and down maps as one grouped GEMM
// over its contiguous copies, and the weighted sum back per token
// (moeCombine). B runs the same chain backwards; the router's logits
// gradient is stored in the activation type, as the product that reads it
// takes, and W reads it for the router's weight gradient. With a
// load-balancing loss (aux_loss), F adds its routing's statistics to the
// stage's (moeBalance) and B the loss's gradient at the probabilities
// (moeRouteBackward's `balance`): Stage.cpp carries them between layers
// and stages.
//
// The copies' count is tokens x top_k whatever the routing (dropless), so
// every region has a size the plan knows; only the split among experts
// (the offsets) is data.
//
//===----------------------------------------------------------------------===//

#include "Slots.h"

namespace sluice::rt::block {
namespace {

class MoeCompute final : public FeatureCompute {
public:
  void forward(Slot, const SlotContext &c,
               const SlotTensors &t) const override {
    Kernels &k = c.kernels;
    Sizes z = getSizes(c);
    Routing r = getRouting(c, z);
    DevicePtr logits = f32At(c, 0),
              permuted = actAt(c, 2 * z.rt * z.experts + 2 * z.rt);
    k.gemm(false, false, z.rt, z.experts, z.h, 1.0f, t.x, z.h,
           c.weight("mlp.router.weight"), z.experts, 0.0f, logits, z.experts);
    k.moeRoute(logits, z.rt, z.experts, z.k, c.layer.normTopK, r.probs,
               r.chosen, r.weights);
    k.moeSort(r.chosen, z.rt, z.k, z.experts, r.order, r.position, r.offsets);
    for (DevicePtr stats : {c.balance.stats, c.balance.load})
      if (stats)
        k.moeBalance(r.probs, r.offsets, z.rt, z.experts, stats);
    k.moeGather(t.x, r.order, z.rt, z.k, z.h, permuted);
    Hidden x = getHidden(c, z);
    DevicePtr up = x.up, gate = x.gate, act = x.act, rows = c.region(2);
    k.groupedGemm(false, z.experts, r.offsets, z.copies, z.f, z.h, permuted,
                  z.h, c.weight("mlp.experts.up.weight"), z.f, z.h * z.f, 0.0f,
                  up, z.f);
    k.groupedGemm(false, z.experts, r.offsets, z.copies, z.f, z.h, permuted,
                  z.h, c.weight("mlp.experts.gate.weight"), z.f, z.h * z.f,
                  0.0f, gate, z.f);
    k.gatedForward(activation(c.model, c.layer), gate, up, act, z.copies * z.f);
    k.groupedGemm(false, z.experts, r.offsets, z.copies, z.h, z.f, act, z.f,
                  c.weight("mlp.experts.down.weight"), z.h, z.f * z.h, 0.0f,
                  rows, z.h);
    k.fill(t.out, 0.0, z.rt * z.h);
    k.moeCombine(rows, r.position, r.weights, z.rt, z.k, z.h, t.out);
    if (!z.fs)
      return;
    // The shared expert, every token, scaled by its sigmoid gate.
    Shared e = getShared(c, z, r);
    k.gemm(false, false, z.rt, z.fs, z.h, 1.0f, t.x, z.h,
           c.weight("mlp.shared.up.weight"), z.fs, 0.0f, e.up, z.fs);
    k.gemm(false, false, z.rt, z.fs, z.h, 1.0f, t.x, z.h,
           c.weight("mlp.shared.gate.weight"), z.fs, 0.0f, e.gate, z.fs);
    k.gatedForward(activation(c.model, c.layer), e.gate, e.up, e.act,
                   z.rt * z.fs);
    k.gemm(false, false, z.rt, z.h, z.fs, 1.0f, e.act, z.fs,
           c.weight("mlp.shared.down.weight"), z.h, 0.0f, e.out, z.h);
    DevicePtr logit = f32At(c, 2 * z.rt * z.experts);
    k.gemm(false, false, z.rt, 1, z.h, 1.0f, t.x, z.h,
           c.weight("mlp.shared_gate.weight"), 1, 0.0f, logit, 1);
    k.gateRowsForward(logit, e.out, z.rt, z.h, e.g, t.out);
  }

  /// `grad` the block's output gradient, `out` receives its input's.
  bool backward(Slot, const SlotContext &c,
                const SlotTensors &t) const override {
    Kernels &k = c.kernels;
    Sizes z = getSizes(c);
    Routing r = getRouting(c, z);
    DevicePtr dweights = f32At(c, 0), dlogits32 = f32At(c, 2 * z.copies);
    DevicePtr dpermuted =
        actAt(c, 2 * z.copies + 2 * z.rt * z.experts + 2 * z.rt);
    DevicePtr dact = dpermuted + z.copies * z.h;
    Hidden x = getHidden(c, z);
    DevicePtr dup = c.region(3), dgate = dup + z.copies * z.f,
              drows = c.region(4), dlogits = c.region(5);
    k.moeCombineBackward(c.region(2), r.position, r.weights, t.grad, z.rt, z.k,
                         z.h, drows, dweights);
    k.groupedGemm(true, z.experts, r.offsets, z.copies, z.f, z.h, drows, z.h,
                  c.weight("mlp.experts.down.weight"), z.h, z.f * z.h, 0.0f,
                  dact, z.f);
    k.gatedBackward(activation(c.model, c.layer), x.gate, x.up, dact, dgate,
                    dup, z.copies * z.f);
    k.groupedGemm(true, z.experts, r.offsets, z.copies, z.h, z.f, dup, z.f,
                  c.weight("mlp.experts.up.weight"), z.f, z.h * z.f, 0.0f,
                  dpermuted, z.h);
    k.groupedGemm(true, z.experts, r.offsets, z.copies, z.h, z.f, dgate, z.f,
                  c.weight("mlp.experts.gate.weight"), z.f, z.h * z.f, 1.0f,
                  dpermuted, z.h);
    k.moeRouteBackward(r.probs, r.chosen, r.weights, dweights, z.rt, z.experts,
                       z.k, c.layer.normTopK, c.balance.counts,
                       c.balance.scale, dlogits32);
    k.copy(dlogits, dlogits32, z.rt * z.experts);
    // The input's gradient: the router's part, then each copy's added back
    // to its token (moeCombine unweighted is moeGather's transpose).
    k.gemm(false, true, z.rt, z.h, z.experts, 1.0f, dlogits, z.experts,
           c.weight("mlp.router.weight"), z.experts, 0.0f, t.out, z.h);
    k.moeCombine(dpermuted, r.position, DevicePtr(), z.rt, z.k, z.h, t.out);
    if (!z.fs)
      return true;
    Shared e = getShared(c, z, r);
    DevicePtr dz = f32At(c, 2 * z.copies + 2 * z.rt * z.experts);
    DevicePtr dactShared = dact + z.copies * z.f;
    k.gateRowsBackward(e.g, e.out, t.grad, z.rt, z.h, e.dout, dz);
    k.gemm(false, true, z.rt, z.fs, z.h, 1.0f, e.dout, z.h,
           c.weight("mlp.shared.down.weight"), z.h, 0.0f, dactShared, z.fs);
    k.gatedBackward(activation(c.model, c.layer), e.gate, e.up, dactShared,
                    e.dgate, e.dup, z.rt * z.fs);
    k.gemm(false, true, z.rt, z.h, z.fs, 1.0f, e.dup, z.fs,
           c.weight("mlp.shared.up.weight"), z.fs, 1.0f, t.out, z.h);
    k.gemm(false, true, z.rt, z.h, z.fs, 1.0f, e.dgate, z.fs,
           c.weight("mlp.shared.gate.weight"), z.fs, 1.0f, t.out, z.h);
    k.copy(e.dlogit, dz, z.rt);
    k.gemm(false, true, z.rt, z.h, 1, 1.0f, e.dlogit, 1,
           c.weight("mlp.shared_gate.weight"), 1, 1.0f, t.out, z.h);
    return true;
  }

  /// `x` the block's input again, `grad` its output gradient.
  void weight(Slot, const SlotContext &c,
              const SlotTensors &t) const override {
    Kernels &k = c.kernels;
    Sizes z = getSizes(c);
    Routing r = getRouting(c, z);
    DevicePtr permuted = actAt(c, 2 * z.rt * z.experts + 2 * z.rt);
    DevicePtr dup = c.region(3), dgate = dup + z.copies * z.f;
    k.moeGather(t.x, r.order, z.rt, z.k, z.h, permuted);
    k.groupedGemmWeights(z.experts, r.offsets, z.copies, z.h, z.f, permuted,
                         z.h, dgate, z.f, 1.0f,
                         c.grad("mlp.experts.gate.weight"), z.h * z.f);
    k.groupedGemmWeights(z.experts, r.offsets, z.copies, z.h, z.f, permuted,
                         z.h, dup, z.f, 1.0f, c.grad("mlp.experts.up.weight"),
                         z.h * z.f);
    k.groupedGemmWeights(z.experts, r.offsets, z.copies, z.f, z.h,
                         getHidden(c, z).act, z.f, c.region(4), z.h, 1.0f,
                         c.grad("mlp.experts.down.weight"), z.f * z.h);
    k.gemm(true, false, z.h, z.experts, z.rt, 1.0f, t.x, z.h, c.region(5),
           z.experts, 1.0f, c.grad("mlp.router.weight"), z.experts);
    if (!z.fs)
      return;
    Shared e = getShared(c, z, r);
    k.gemm(true, false, z.h, z.fs, z.rt, 1.0f, t.x, z.h, e.dup, z.fs, 1.0f,
           c.grad("mlp.shared.up.weight"), z.fs);
    k.gemm(true, false, z.h, z.fs, z.rt, 1.0f, t.x, z.h, e.dgate, z.fs, 1.0f,
           c.grad("mlp.shared.gate.weight"), z.fs);
    k.gemm(true, false, z.fs, z.h, z.rt, 1.0f, e.act, z.fs, e.dout, z.h, 1.0f,
           c.grad("mlp.shared.down.weight"), z.h);
    k.gemm(true, false, z.h, 1, z.rt, 1.0f, t.x, z.h, e.dlogit, 1, 1.0f,
           c.grad("mlp.shared_gate.weight"), 1);
  }

private:
  struct Sizes {
    int64_t rt, h, f, experts, k, copies, fs;
  };
  static Sizes getSizes(const SlotContext &c) {
    int64_t rt = c.size.rt, k = c.layer.topK;
    return {rt,       c.size.h,     c.size.f,           c.layer.experts,
            k,        rt * k,       c.layer.sharedFfn};
  }
  /// The routing F keeps (Shape.cpp: region 0, fp32 then i32 parts).
  struct Routing {
    DevicePtr probs, chosen, order, position, offsets, weights;
  };
  static Routing getRouting(const SlotContext &c, const Sizes &z) {
    DevicePtr probs = c.region(0), weights = probs + z.rt * z.experts;
    DevicePtr ints = (weights + z.copies).atByte(0, DType::I32);
    return {probs,
            ints,
            ints + z.copies,
            ints + 2 * z.copies,
            ints + 3 * z.copies,
            weights};
  }
  /// The shared expert's tensors: its gate's values (after the routing in
  /// region 0), its pre-activations, activation and output (region 6),
  /// and their gradients and the gate logit's (region 7).
  struct Shared {
    DevicePtr g, up, gate, act, out, dup, dgate, dout, dlogit;
  };
  static Shared getShared(const SlotContext &c, const Sizes &z,
                          const Routing &r) {
    int64_t n = z.rt * z.fs;
    DevicePtr up = c.region(6), dup = c.region(7);
    return {(r.offsets + (z.experts + 1)).atByte(0, DType::F32),
            up,
            up + n,
            up + 2 * n,
            up + 3 * n,
            dup,
            dup + n,
            dup + 2 * n,
            dup + 2 * n + z.rt * z.h};
  }
  /// The experts' up and gate pre-activations and activation (region 1).
  struct Hidden {
    DevicePtr up, gate, act;
  };
  static Hidden getHidden(const SlotContext &c, const Sizes &z) {
    DevicePtr up = c.region(1);
    int64_t n = z.copies * z.f;
    return {up, up + n, up + 2 * n};
  }
  /// The scratch `elements` activation elements in, as fp32 or the
  /// activation type (fp32 parts come first, so each is 4-byte aligned).
  static DevicePtr f32At(const SlotContext &c, int64_t elements) {
    return c.scratch.atByte(elements * getSize(c.scratch.getType()),
                            DType::F32);
  }
  static DevicePtr actAt(const SlotContext &c, int64_t elements) {
    return c.scratch + elements;
  }
};

} // namespace

SLUICE_DEFINE_COMPUTE(moe, MoeCompute)

} // namespace sluice::rt::block
