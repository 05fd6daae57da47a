//===- Adam.cu - The fused Adam launcher ----------------------------------===//

#include "Adam.cuh"
#include "CudaKernels.h"

#include <algorithm>
#include <cmath>

namespace sluice::rt::cuda {

void CudaKernels::sumSquares(DevicePtr x, int64_t rows, int64_t cols,
                             int64_t stride, double weight, DevicePtr out) {
  if (rows <= 0 || cols <= 0)
    return;
  // A thousand blocks fill the GPU; more would only add atomics.
  unsigned blocks = std::min(gridFor(rows * cols), 1024u);
  sumSquaresKernel<<<blocks, kThreads, 0, stream>>>(
      x.f32(), rows, cols, stride, weight, out.as<double>());
  SLUICE_LAUNCHED(errors);
}

void CudaKernels::adamUpdate(DevicePtr weights, DevicePtr grads, DevicePtr m,
                             DevicePtr v, int64_t n, const AdamConfig &config,
                             int64_t step, DevicePtr working) {
  // The weights change: the steady operands' FP8 copies are stale.
  ++*fp8Generation;
  if (n <= 0)
    return;
  // The bias corrections, in double on the host as the CPU computes them.
  double correction1 = 1.0 - std::pow(double(config.beta1), double(step));
  double correction2 = 1.0 - std::pow(double(config.beta2), double(step));
  SLUICE_DISPATCH_ACT(working ? working.getType() : DType::F32, W,
                      adamKernel<<<gridFor(n), kThreads, 0, stream>>>(
                          weights.f32(), grads.f32(), m.f32(), v.f32(), n,
                          config, correction1, correction2, working.as<W>()));
  SLUICE_LAUNCHED(errors);
}

} // namespace sluice::rt::cuda
