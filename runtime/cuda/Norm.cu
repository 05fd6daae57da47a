//===- Norm.cu - Norm launchers -------------------------------------------===//

#include "CudaKernels.h"
#include "Norm.cuh"

#include <cstdlib>
#include <cstring>

namespace sluice::rt::cuda {

bool CudaKernels::isFusionEnabled() {
  // A benchmark's A/B switch (docs/benchmarks.md), read once per process:
  // SLUICE_CUDA_FUSION=0 runs the scalar norms and the composed residual
  // seams of Kernels' defaults, the kernels before issue 35.
  static const bool enabled = [] {
    const char *value = std::getenv("SLUICE_CUDA_FUSION");
    return !(value && std::strcmp(value, "0") == 0);
  }();
  return enabled;
}

namespace {

/// The packs of 16 bytes each thread of a row-cached kernel keeps for rows
/// of `cols` T (1, 2 or 4), or 0 where those kernels do not apply: rows not
/// whole packs, a pointer off 16 bytes, or rows too wide for registers.
template <class T>
int getRowPacks(int64_t cols, std::initializer_list<const void *> pointers) {
  if (!canPack<T>(cols, pointers))
    return 0;
  int64_t packs = cols / Pack<T>::kSize;
  for (int k = 1; k <= kMaxRowPacks; k *= 2)
    if (packs <= int64_t(k) * kThreads)
      return k;
  return 0;
}

} // namespace

/// Launches KERNEL<T, packs> for packs 1, 2 or 4.
#define SLUICE_LAUNCH_ROWS(packs, KERNEL, T, grid, stream, ...)                \
  do {                                                                         \
    if ((packs) == 1)                                                          \
      KERNEL<T, 1><<<(grid), kThreads, 0, (stream)>>>(__VA_ARGS__);            \
    else if ((packs) == 2)                                                     \
      KERNEL<T, 2><<<(grid), kThreads, 0, (stream)>>>(__VA_ARGS__);            \
    else                                                                       \
      KERNEL<T, 4><<<(grid), kThreads, 0, (stream)>>>(__VA_ARGS__);            \
  } while (0)

void CudaKernels::normForward(DevicePtr x, DevicePtr gamma, DevicePtr beta,
                              int64_t rows, int64_t cols, bool rms, float eps,
                              DevicePtr y, DevicePtr xhat, DevicePtr rstd) {
  if (rows <= 0)
    return;
  SLUICE_DISPATCH_ACT(x.getType(), T, {
    int packs = fusion ? getRowPacks<T>(cols, {x.get(), gamma.get(), beta.get(),
                                               y.get(), xhat.get()})
                       : 0;
    if (packs)
      SLUICE_LAUNCH_ROWS(packs, normForwardRowKernel, T, unsigned(rows), stream,
                         x.as<T>(), nullptr, gamma.as<T>(), beta.as<T>(), cols,
                         rms, eps, y.as<T>(), xhat.as<T>(), rstd.f32());
    else
      normForwardKernel<<<unsigned(rows), kThreads, 0, stream>>>(
          x.as<T>(), gamma.as<T>(), beta.as<T>(), cols, rms, eps, y.as<T>(),
          xhat.as<T>(), rstd.f32());
  });
  SLUICE_LAUNCHED(errors);
}

void CudaKernels::addNormForward(DevicePtr x, DevicePtr residual,
                                 DevicePtr gamma, DevicePtr beta, int64_t rows,
                                 int64_t cols, bool rms, float eps, DevicePtr y,
                                 DevicePtr xhat, DevicePtr rstd) {
  if (rows <= 0)
    return;
  int packs = 0;
  if (fusion && x.getType() == residual.getType())
    SLUICE_DISPATCH_ACT(x.getType(), T,
                        packs = getRowPacks<T>(cols, {x.get(), residual.get(),
                                                      gamma.get(), beta.get(),
                                                      y.get(), xhat.get()}));
  if (!packs) {
    Kernels::addNormForward(x, residual, gamma, beta, rows, cols, rms, eps, y,
                            xhat, rstd);
    return;
  }
  SLUICE_DISPATCH_ACT(
      x.getType(), T,
      SLUICE_LAUNCH_ROWS(packs, normForwardRowKernel, T, unsigned(rows), stream,
                         x.as<T>(), residual.as<T>(), gamma.as<T>(),
                         beta.as<T>(), cols, rms, eps, y.as<T>(), xhat.as<T>(),
                         rstd.f32()));
  SLUICE_LAUNCHED(errors);
}

void CudaKernels::normAffine(DevicePtr xhat, DevicePtr gamma, DevicePtr beta,
                             int64_t rows, int64_t cols, DevicePtr y) {
  if (rows * cols <= 0)
    return;
  SLUICE_DISPATCH_ACT(xhat.getType(), T, {
    if (fusion &&
        canPack<T>(cols, {xhat.get(), gamma.get(), beta.get(), y.get()}))
      normAffinePackedKernel<<<gridFor(rows * cols / Pack<T>::kSize), kThreads,
                               0, stream>>>(xhat.as<T>(), gamma.as<T>(),
                                            beta.as<T>(), rows, cols,
                                            y.as<T>());
    else
      normAffineKernel<<<gridFor(rows * cols), kThreads, 0, stream>>>(
          xhat.as<T>(), gamma.as<T>(), beta.as<T>(), rows, cols, y.as<T>());
  });
  SLUICE_LAUNCHED(errors);
}

void CudaKernels::normBackward(DevicePtr dy, DevicePtr xhat, DevicePtr rstd,
                               DevicePtr gamma, int64_t rows, int64_t cols,
                               bool rms, DevicePtr dx) {
  if (rows <= 0)
    return;
  SLUICE_DISPATCH_ACT(dy.getType(), T, {
    int packs = fusion ? getRowPacks<T>(cols, {dy.get(), xhat.get(),
                                               gamma.get(), dx.get()})
                       : 0;
    if (packs)
      SLUICE_LAUNCH_ROWS(packs, normBackwardRowKernel, T, unsigned(rows),
                         stream, dy.as<T>(), xhat.as<T>(), rstd.f32(),
                         gamma.as<T>(), cols, rms, nullptr, dx.as<T>());
    else
      normBackwardKernel<<<unsigned(rows), kThreads, 0, stream>>>(
          dy.as<T>(), xhat.as<T>(), rstd.f32(), gamma.as<T>(), cols, rms,
          dx.as<T>());
  });
  SLUICE_LAUNCHED(errors);
}

void CudaKernels::normBackwardAdd(DevicePtr dy, DevicePtr xhat, DevicePtr rstd,
                                  DevicePtr gamma, int64_t rows, int64_t cols,
                                  bool rms, DevicePtr residual, DevicePtr dx) {
  if (rows <= 0)
    return;
  int packs = 0;
  if (fusion && dx.getType() == residual.getType())
    SLUICE_DISPATCH_ACT(dy.getType(), T,
                        packs = getRowPacks<T>(cols, {dy.get(), xhat.get(),
                                                      gamma.get(),
                                                      residual.get(),
                                                      dx.get()}));
  if (!packs) {
    Kernels::normBackwardAdd(dy, xhat, rstd, gamma, rows, cols, rms, residual,
                             dx);
    return;
  }
  SLUICE_DISPATCH_ACT(
      dy.getType(), T,
      SLUICE_LAUNCH_ROWS(packs, normBackwardRowKernel, T, unsigned(rows),
                         stream, dy.as<T>(), xhat.as<T>(), rstd.f32(),
                         gamma.as<T>(), cols, rms, residual.as<T>(),
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
