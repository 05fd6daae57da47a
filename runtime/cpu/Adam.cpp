//===- Adam.cpp - AdamW and the gradient norm on the host -----------------===//
//
// The optimizer step (AdamW with the clip scale) and the sums of squares
// the global gradient norm is made of.
//
//===----------------------------------------------------------------------===//

#include "CpuKernels.h"
#include "Threads.h"

#include <cmath>

namespace sluice::rt {

namespace {
/// The squares of x[0, n) summed in double, in vector lanes (a serial
/// chain of double adds was 2% of a step: the gradient norm reads every
/// gradient).
__attribute__((target_clones("avx2", "default"))) double
sumSquaresLoop(const float *x, int64_t n) {
  double sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < n; ++i)
    sum += double(x[i]) * double(x[i]);
  return sum;
}
} // namespace

void CpuKernels::sumSquares(DevicePtr xPtr, int64_t rows, int64_t cols,
                            int64_t stride, double weight, DevicePtr out) {
  const float *x = xPtr.as<float>();
  double sum = 0;
  if (stride == cols)
    sum = sumSquaresLoop(x, rows * cols);
  else
    for (int64_t r = 0; r < rows; ++r)
      sum += sumSquaresLoop(x + r * stride, cols);
  *out.as<double>() += weight * sum;
}

namespace {
/// AdamW over n elements, the update in double as the CUDA kernel takes it
/// (runtime/cuda/Adam.cuh). Built for baseline x86-64 and for AVX2, chosen
/// at load; division and square root are correctly rounded in either, and
/// AVX2 brings no fused multiply-add, so both give the scalar loop's bits.
__attribute__((target_clones("avx2", "default"))) void
adamLoop(float *w, const float *g, float *m, float *v, int64_t n,
         const AdamConfig &c, double correction1, double correction2) {
  float scale = c.gradientScale, beta1 = c.beta1, beta2 = c.beta2;
  double lr = c.learningRate, epsilon = c.epsilon, decay = c.weightDecay;
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    float grad = g[i] * scale;
    float mi = beta1 * m[i] + (1.0f - beta1) * grad;
    float vi = beta2 * v[i] + (1.0f - beta2) * grad * grad;
    m[i] = mi;
    v[i] = vi;
    double mHat = mi / correction1, vHat = vi / correction2;
    w[i] -= float(lr * (mHat / (std::sqrt(vHat) + epsilon) + decay * w[i]));
  }
}
} // namespace

void CpuKernels::adamUpdate(DevicePtr wPtr, DevicePtr gPtr, DevicePtr mPtr,
                            DevicePtr vPtr, int64_t n, const AdamConfig &c,
                            int64_t step, DevicePtr working) {
  double correction1 = 1.0 - std::pow(double(c.beta1), double(step));
  double correction2 = 1.0 - std::pow(double(c.beta2), double(step));
  float *w = wPtr.as<float>(), *m = mPtr.as<float>(), *v = vPtr.as<float>();
  const float *g = gPtr.as<float>();
  cpu::parallelFor(n, 16384, [&](int64_t from, int64_t to) {
    adamLoop(w + from, g + from, m + from, v + from, to - from, c, correction1,
             correction2);
  });
  if (working && working.get() != wPtr.get())
    copy(working, wPtr, n);
}

} // namespace sluice::rt
