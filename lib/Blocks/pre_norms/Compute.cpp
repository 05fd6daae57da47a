//===- Compute.cpp - pre_norms: a norm before each half -------------------===//
//
// F normalises the residual stream into the sublayer's input (at the
// feed-forward input fused with the attention's residual add); B joins
// the norm's input gradient to the residual path's (normBackwardAdd); W
// recomputes the norm's output from its kept normalised input for the
// projections' weight gradients, and takes the gains' own.
//
//===----------------------------------------------------------------------===//

#include "Slots.h"

namespace sluice::rt::block {
namespace {

class PreNormsCompute final : public FeatureCompute {
public:
  void forward(Slot slot, const SlotContext &c,
               const SlotTensors &t) const override {
    HiddenNorm norm = getHiddenNorm(c, slot);
    int64_t n = c.size.n, h = c.size.h;
    if (t.residual)
      c.kernels.addNormForward(t.x, t.residual, norm.w, norm.b, n, h, c.rms(),
                               c.eps(), t.out, norm.xhat, norm.rstd);
    else
      c.kernels.normForward(t.x, norm.w, norm.b, n, h, c.rms(), c.eps(), t.out,
                            norm.xhat, norm.rstd);
  }

  bool backward(Slot slot, const SlotContext &c,
                const SlotTensors &t) const override {
    HiddenNorm norm = getHiddenNorm(c, slot);
    c.kernels.normBackwardAdd(t.grad, norm.xhat, norm.rstd, norm.w, c.size.n,
                              c.size.h, c.rms(), t.residual, t.out);
    return true;
  }

  void materialize(Slot slot, const SlotContext &c,
                   const SlotTensors &t) const override {
    HiddenNorm norm = getHiddenNorm(c, slot);
    c.kernels.normAffine(norm.xhat, norm.w, norm.b, c.size.n, c.size.h, t.out);
  }

  void weight(Slot slot, const SlotContext &c,
              const SlotTensors &t) const override {
    HiddenNorm norm = getHiddenNorm(c, slot);
    c.kernels.normParamGrads(t.grad, norm.xhat, c.size.n, c.size.h, norm.gw,
                             norm.gb);
  }
};

} // namespace

SLUICE_DEFINE_COMPUTE(pre_norms, PreNormsCompute)

} // namespace sluice::rt::block
