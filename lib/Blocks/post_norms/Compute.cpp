//===- Compute.cpp - post_norms: a norm on each half's output -------------===//
//
// F normalises the projection's reduced output in place (through the
// slot's free buffer); B passes the gradient at the norm's output back to
// its input and takes the gains' gradients there, since they need only
// what F kept.
//
//===----------------------------------------------------------------------===//

#include "Slots.h"

namespace sluice::rt::block {
namespace {

class PostNormsCompute final : public FeatureCompute {
public:
  void forward(Slot slot, const SlotContext &c,
               const SlotTensors &t) const override {
    HiddenNorm norm = getHiddenNorm(c, slot);
    int64_t n = c.size.n, h = c.size.h;
    c.kernels.normForward(t.x, norm.w, norm.b, n, h, c.rms(), c.eps(), t.temp,
                          norm.xhat, norm.rstd);
    c.kernels.copy(t.x, t.temp, n * h);
  }

  bool backward(Slot slot, const SlotContext &c,
                const SlotTensors &t) const override {
    HiddenNorm norm = getHiddenNorm(c, slot);
    int64_t n = c.size.n, h = c.size.h;
    c.kernels.fill(t.out, 0.0, n * h);
    c.kernels.normBackward(t.grad, norm.xhat, norm.rstd, norm.w, n, h, c.rms(),
                           t.out);
    c.kernels.normParamGrads(t.grad, norm.xhat, n, h, norm.gw, norm.gb);
    return true;
  }
};

} // namespace

SLUICE_DEFINE_COMPUTE(post_norms, PostNormsCompute)

} // namespace sluice::rt::block
