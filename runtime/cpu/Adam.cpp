//===- Adam.cpp - AdamW and the gradient norm on the host -----------------===//
//
// The optimizer step (AdamW with the clip scale) and the sums of squares
// the global gradient norm is made of.
//
//===----------------------------------------------------------------------===//

#include "CpuKernels.h"

#include <cmath>

namespace sluice::rt {

void CpuKernels::sumSquares(DevicePtr xPtr, int64_t rows, int64_t cols,
                            int64_t stride, double weight, DevicePtr out) {
  const float *x = xPtr.as<float>();
  double sum = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      double e = x[r * stride + c];
      sum += e * e;
    }
  *out.as<double>() += weight * sum;
}

void CpuKernels::adamUpdate(DevicePtr wPtr, DevicePtr gPtr, DevicePtr mPtr,
                            DevicePtr vPtr, int64_t n, const AdamConfig &c,
                            int64_t step, DevicePtr working) {
  float *w = wPtr.as<float>();
  const float *g = gPtr.as<float>();
  float *m = mPtr.as<float>();
  float *v = vPtr.as<float>();
  double correction1 = 1.0 - std::pow(double(c.beta1), double(step));
  double correction2 = 1.0 - std::pow(double(c.beta2), double(step));
  for (int64_t i = 0; i < n; ++i) {
    float grad = g[i] * c.gradientScale;
    m[i] = c.beta1 * m[i] + (1.0f - c.beta1) * grad;
    v[i] = c.beta2 * v[i] + (1.0f - c.beta2) * grad * grad;
    double mHat = m[i] / correction1, vHat = v[i] / correction2;
    w[i] -= float(c.learningRate * (mHat / (std::sqrt(vHat) + c.epsilon) +
                                    c.weightDecay * w[i]));
  }
  if (working && working.get() != wPtr.get())
    copy(working, wPtr, n);
}

} // namespace sluice::rt
