//===- Adam.cuh - The fused Adam(W) update ----------------------*- C++ -*-===//
//
// One pass over the fp32 masters: both moments, the bias-corrected step,
// weight decay, and -- in a mixed-precision run -- the bf16 working copy
// the next step's kernels read, so no separate cast pass is needed.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_CUDA_ADAM_CUH
#define SLUICE_RUNTIME_CUDA_ADAM_CUH

#include "Common.cuh"

namespace sluice::rt::cuda {

template <class W>
__global__ void adamKernel(float *w, const float *g, float *m, float *v,
                           int64_t n, AdamConfig c, double correction1,
                           double correction2, W *working) {
  SLUICE_GRID_STRIDE(i, n) {
    float grad = g[i];
    float mi = c.beta1 * m[i] + (1.0f - c.beta1) * grad;
    float vi = c.beta2 * v[i] + (1.0f - c.beta2) * grad * grad;
    m[i] = mi;
    v[i] = vi;
    double mHat = mi / correction1, vHat = vi / correction2;
    float wi = w[i];
    wi -= float(c.learningRate *
                (mHat / (sqrt(vHat) + c.epsilon) + c.weightDecay * wi));
    w[i] = wi;
    if (working)
      working[i] = fromFloat<W>(wi);
  }
}

} // namespace sluice::rt::cuda

#endif // SLUICE_RUNTIME_CUDA_ADAM_CUH
