//===- Norm.cpp - LayerNorm and RMSNorm on the host -----------------------===//
//
// The norms' forward, backward and parameter gradients, one row at a time;
// rows split over the kernel threads (the parameter gradients' sums over
// rows: columns split, each column summed in row order on one thread).
//
//===----------------------------------------------------------------------===//

#include "CpuKernels.h"
#include "Threads.h"

#include <algorithm>
#include <cmath>

namespace sluice::rt {

namespace {
/// Rows (or columns) a thread's part should hold at least: about 16k
/// elements, below which a thread's start costs more than it saves.
int64_t grainFor(int64_t width) {
  return std::max<int64_t>(1, 16384 / std::max<int64_t>(width, 1));
}
} // namespace

void CpuKernels::normForward(DevicePtr xPtr, DevicePtr gammaPtr,
                             DevicePtr betaPtr, int64_t rows, int64_t cols,
                             bool rms, float eps, DevicePtr yPtr,
                             DevicePtr xhatPtr, DevicePtr rstdPtr) {
  const float *x = xPtr.as<float>();
  const float *gamma = gammaPtr.as<float>();
  const float *beta = betaPtr.as<float>();
  float *y = yPtr.as<float>();
  float *xhat = xhatPtr.as<float>();
  float *rstd = rstdPtr.as<float>();
  cpu::parallelFor(rows, grainFor(cols), [&](int64_t from, int64_t to) {
    for (int64_t r = from; r < to; ++r) {
      const float *xr = x + r * cols;
      double mean = 0;
      if (!rms) {
        for (int64_t c = 0; c < cols; ++c)
          mean += xr[c];
        mean /= double(cols);
      }
      double var = 0;
      for (int64_t c = 0; c < cols; ++c) {
        double d = xr[c] - mean;
        var += d * d;
      }
      var /= double(cols);
      float inv = float(1.0 / std::sqrt(var + double(eps)));
      rstd[r] = inv;
      for (int64_t c = 0; c < cols; ++c) {
        float h = float(xr[c] - mean) * inv;
        xhat[r * cols + c] = h;
        y[r * cols + c] = gamma[c] * h + (beta ? beta[c] : 0.0f);
      }
    }
  });
}

void CpuKernels::normAffine(DevicePtr xhatPtr, DevicePtr gammaPtr,
                            DevicePtr betaPtr, int64_t rows, int64_t cols,
                            DevicePtr yPtr) {
  const float *xhat = xhatPtr.as<float>();
  const float *gamma = gammaPtr.as<float>();
  const float *beta = betaPtr.as<float>();
  float *y = yPtr.as<float>();
  cpu::parallelFor(rows, grainFor(cols), [&](int64_t from, int64_t to) {
    for (int64_t r = from; r < to; ++r)
      for (int64_t c = 0; c < cols; ++c)
        y[r * cols + c] =
            gamma[c] * xhat[r * cols + c] + (beta ? beta[c] : 0.0f);
  });
}

void CpuKernels::normBackward(DevicePtr dyPtr, DevicePtr xhatPtr,
                              DevicePtr rstdPtr, DevicePtr gammaPtr,
                              int64_t rows, int64_t cols, bool rms,
                              DevicePtr dxPtr) {
  const float *dy = dyPtr.as<float>();
  const float *xhat = xhatPtr.as<float>();
  const float *rstd = rstdPtr.as<float>();
  const float *gamma = gammaPtr.as<float>();
  float *dx = dxPtr.as<float>();
  // With g = dy * gamma: dx = rstd * (g - mean(g) - xhat * mean(g * xhat));
  // RMS norm has no mean term.
  cpu::parallelFor(rows, grainFor(cols), [&](int64_t from, int64_t to) {
    for (int64_t r = from; r < to; ++r) {
      const float *dyr = dy + r * cols, *hr = xhat + r * cols;
      double sumG = 0, sumGH = 0;
      for (int64_t c = 0; c < cols; ++c) {
        double g = double(dyr[c]) * gamma[c];
        sumG += g;
        sumGH += g * hr[c];
      }
      double meanG = rms ? 0.0 : sumG / double(cols);
      double meanGH = sumGH / double(cols);
      for (int64_t c = 0; c < cols; ++c) {
        double g = double(dyr[c]) * gamma[c];
        dx[r * cols + c] += float(rstd[r] * (g - meanG - hr[c] * meanGH));
      }
    }
  });
}

void CpuKernels::normParamGrads(DevicePtr dyPtr, DevicePtr xhatPtr,
                                int64_t rows, int64_t cols, DevicePtr dgammaPtr,
                                DevicePtr dbetaPtr) {
  const float *dy = dyPtr.as<float>();
  const float *xhat = xhatPtr.as<float>();
  float *dgamma = dgammaPtr.as<float>();
  float *dbeta = dbetaPtr.as<float>();
  cpu::parallelFor(cols, grainFor(rows), [&](int64_t from, int64_t to) {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = from; c < to; ++c) {
        dgamma[c] += dy[r * cols + c] * xhat[r * cols + c];
        if (dbeta)
          dbeta[c] += dy[r * cols + c];
      }
  });
}

} // namespace sluice::rt
