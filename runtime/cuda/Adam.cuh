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
    float grad = g[i] * c.gradientScale;
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

/// out += weight * the sum of squares of a strided block of f32 elements:
/// each thread's share in f64, a block's sum in shared memory, one atomic
/// add per block.
__global__ void sumSquaresKernel(const float *x, int64_t rows, int64_t cols,
                                 int64_t stride, double weight, double *out) {
  __shared__ double shared[kThreads];
  double sum = 0;
  SLUICE_GRID_STRIDE(i, rows * cols) {
    double e = x[(i / cols) * stride + i % cols];
    sum += e * e;
  }
  shared[threadIdx.x] = sum;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half)
      shared[threadIdx.x] += shared[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0)
    atomicAdd(out, weight * shared[0]);
}

} // namespace sluice::rt::cuda

#endif // SLUICE_RUNTIME_CUDA_ADAM_CUH
