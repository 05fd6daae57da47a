//===- Norm.cu - Norm launchers -------------------------------------------===//

#include "CudaKernels.h"
#include "Norm.cuh"

namespace sluice::rt::cuda {

void CudaKernels::normForward(DevicePtr x, DevicePtr gamma, DevicePtr beta,
                              int64_t rows, int64_t cols, bool rms, float eps,
                              DevicePtr y, DevicePtr xhat, DevicePtr rstd) {
  if (rows <= 0)
    return;
  SLUICE_DISPATCH_ACT(
      x.getType(), T,
      normForwardKernel<<<unsigned(rows), kThreads, 0, stream>>>(
          x.as<T>(), gamma.as<T>(), beta.as<T>(), cols, rms, eps, y.as<T>(),
          xhat.as<T>(), rstd.f32()));
  SLUICE_LAUNCHED(errors);
}

void CudaKernels::normAffine(DevicePtr xhat, DevicePtr gamma, DevicePtr beta,
                             int64_t rows, int64_t cols, DevicePtr y) {
  SLUICE_DISPATCH_ACT(
      xhat.getType(), T,
      normAffineKernel<<<gridFor(rows * cols), kThreads, 0, stream>>>(
          xhat.as<T>(), gamma.as<T>(), beta.as<T>(), rows, cols, y.as<T>()));
  SLUICE_LAUNCHED(errors);
}

void CudaKernels::normBackward(DevicePtr dy, DevicePtr xhat, DevicePtr rstd,
                               DevicePtr gamma, int64_t rows, int64_t cols,
                               bool rms, DevicePtr dx) {
  if (rows <= 0)
    return;
  SLUICE_DISPATCH_ACT(
      dy.getType(), T,
      normBackwardKernel<<<unsigned(rows), kThreads, 0, stream>>>(
          dy.as<T>(), xhat.as<T>(), rstd.f32(), gamma.as<T>(), cols, rms,
          dx.as<T>()));
  SLUICE_LAUNCHED(errors);
}

void CudaKernels::normParamGrads(DevicePtr dy, DevicePtr xhat, int64_t rows,
                                 int64_t cols, DevicePtr dgamma,
                                 DevicePtr dbeta) {
  if (rows <= 0 || cols <= 0)
    return;
  const int64_t chunk = 64;
  dim3 grid(unsigned((cols + kThreads - 1) / kThreads),
            unsigned((rows + chunk - 1) / chunk));
  SLUICE_DISPATCH_ACT(dy.getType(), T,
                      normParamGradsKernel<<<grid, kThreads, 0, stream>>>(
                          dy.as<T>(), xhat.as<T>(), rows, cols, chunk,
                          dgamma.f32(), dbeta.f32()));
  SLUICE_LAUNCHED(errors);
}

} // namespace sluice::rt::cuda
