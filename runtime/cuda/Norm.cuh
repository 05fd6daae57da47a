//===- Norm.cuh - LayerNorm and RMSNorm, split into B and W -----*- C++ -*-===//
//
// One block per row for the row statistics (fp32, two passes over the row:
// the mean, then the variance around it, as CpuKernels); the parameter
// gradients (the W part) as column sums over chunks of rows.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_CUDA_NORM_CUH
#define SLUICE_RUNTIME_CUDA_NORM_CUH

#include "Common.cuh"

namespace sluice::rt::cuda {

template <class T>
__global__ void normForwardKernel(const T *x, const T *gamma, const T *beta,
                                  int64_t cols, bool rms, float eps, T *y,
                                  T *xhat, float *rstd) {
  __shared__ float shared[32];
  int64_t row = blockIdx.x;
  const T *xr = x + row * cols;
  float mean = 0;
  if (!rms) {
    float sum = 0;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
      sum += toFloat(xr[c]);
    mean = blockSum(sum, shared) / float(cols);
  }
  float squares = 0;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    float d = toFloat(xr[c]) - mean;
    squares += d * d;
  }
  float var = blockSum(squares, shared) / float(cols);
  float inv = rsqrtf(var + eps);
  if (threadIdx.x == 0)
    rstd[row] = inv;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    float h = (toFloat(xr[c]) - mean) * inv;
    xhat[row * cols + c] = fromFloat<T>(h);
    y[row * cols + c] =
        fromFloat<T>(toFloat(gamma[c]) * h + (beta ? toFloat(beta[c]) : 0.0f));
  }
}

template <class T>
__global__ void normAffineKernel(const T *xhat, const T *gamma, const T *beta,
                                 int64_t rows, int64_t cols, T *y) {
  SLUICE_GRID_STRIDE(i, rows * cols) {
    int64_t c = i % cols;
    y[i] = fromFloat<T>(toFloat(gamma[c]) * toFloat(xhat[i]) +
                        (beta ? toFloat(beta[c]) : 0.0f));
  }
}

/// dx += rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * gamma; RMS
/// norm has no mean term.
template <class T>
__global__ void normBackwardKernel(const T *dy, const T *xhat,
                                   const float *rstd, const T *gamma,
                                   int64_t cols, bool rms, T *dx) {
  __shared__ float shared[32];
  int64_t row = blockIdx.x;
  const T *dyr = dy + row * cols, *hr = xhat + row * cols;
  float sumG = 0, sumGH = 0;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    float g = toFloat(dyr[c]) * toFloat(gamma[c]);
    sumG += g;
    sumGH += g * toFloat(hr[c]);
  }
  float meanG = rms ? 0.0f : blockSum(sumG, shared) / float(cols);
  float meanGH = blockSum(sumGH, shared) / float(cols);
  float inv = rstd[row];
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    float g = toFloat(dyr[c]) * toFloat(gamma[c]);
    int64_t at = row * cols + c;
    dx[at] = fromFloat<T>(toFloat(dx[at]) +
                          inv * (g - meanG - toFloat(hr[c]) * meanGH));
  }
}

/// dgamma[c] += sum dy * xhat, dbeta[c] += sum dy over a chunk of rows.
template <class T>
__global__ void normParamGradsKernel(const T *dy, const T *xhat, int64_t rows,
                                     int64_t cols, int64_t chunk, float *dgamma,
                                     float *dbeta) {
  int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= cols)
    return;
  int64_t first = int64_t(blockIdx.y) * chunk;
  int64_t last = first + chunk < rows ? first + chunk : rows;
  float g = 0, b = 0;
  for (int64_t r = first; r < last; ++r) {
    float d = toFloat(dy[r * cols + c]);
    g += d * toFloat(xhat[r * cols + c]);
    b += d;
  }
  atomicAdd(dgamma + c, g);
  if (dbeta)
    atomicAdd(dbeta + c, b);
}

} // namespace sluice::rt::cuda

#endif // SLUICE_RUNTIME_CUDA_NORM_CUH
