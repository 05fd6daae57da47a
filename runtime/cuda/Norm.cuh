//===- Norm.cuh - LayerNorm and RMSNorm, split into B and W -----*- C++ -*-===//
//
// One block per row for the row statistics (fp32, two passes over the row:
// the mean, then the variance around it, as CpuKernels); the parameter
// gradients (the W part) as column sums over chunks of rows. Rows of whole
// 16-byte packs take the row-cached kernels at the end of this file.
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

// The row-cached forms, for rows of whole 16-byte packs up to
// kMaxRowPacks * kThreads packs (8192 bf16 or 4096 fp32 values): one block
// per row, each thread keeping its up to kPacks packs of the row in
// registers. The row then moves once, in 16-byte loads, where the kernels
// above read it two or three times in 2- or 4-byte loads and rely on the
// cache for the repeats (issue 10's traces: 66 us a 2048-wide bf16 norm
// over 8192 rows, against ~30 us that its bytes take). They also take the
// residual seam of a pre-norm block (Kernels::addNormForward and
// normBackwardAdd) in the same pass.

constexpr int kMaxRowPacks = 4;

/// [x += residual (rounded to T, as Kernels::add does)], then the norm of
/// x as normForwardKernel.
template <class T, int kPacks>
__global__ void normForwardRowKernel(T *x, const T *residual, const T *gamma,
                                     const T *beta, int64_t cols, bool rms,
                                     float eps, T *y, T *xhat, float *rstd) {
  using P = Pack<T>;
  __shared__ float shared[32];
  const int64_t row = blockIdx.x;
  const int packs = int(cols / P::kSize);
  P *xr = reinterpret_cast<P *>(x + row * cols);
  const P *rr =
      residual ? reinterpret_cast<const P *>(residual + row * cols) : nullptr;
  float v[kPacks][P::kSize];
  float sum = 0;
#pragma unroll
  for (int k = 0; k < kPacks; ++k) {
    int p = threadIdx.x + k * blockDim.x;
    if (p >= packs)
      continue;
    P xp = xr[p];
    if (rr) {
      P rp = rr[p];
#pragma unroll
      for (int j = 0; j < P::kSize; ++j)
        xp.v[j] = fromFloat<T>(toFloat(xp.v[j]) + toFloat(rp.v[j]));
      xr[p] = xp;
    }
#pragma unroll
    for (int j = 0; j < P::kSize; ++j) {
      v[k][j] = toFloat(xp.v[j]);
      sum += v[k][j];
    }
  }
  // Two passes over the registers, as over memory in normForwardKernel:
  // the mean, then the variance around it.
  const float mean = rms ? 0.0f : blockSum(sum, shared) / float(cols);
  float squares = 0;
#pragma unroll
  for (int k = 0; k < kPacks; ++k) {
    if (int(threadIdx.x) + k * int(blockDim.x) >= packs)
      continue;
#pragma unroll
    for (int j = 0; j < P::kSize; ++j) {
      float d = v[k][j] - mean;
      squares += d * d;
    }
  }
  const float inv = rsqrtf(blockSum(squares, shared) / float(cols) + eps);
  if (threadIdx.x == 0)
    rstd[row] = inv;
  const P *gp = reinterpret_cast<const P *>(gamma);
  const P *bp = reinterpret_cast<const P *>(beta);
  P *yr = reinterpret_cast<P *>(y + row * cols);
  P *hr = reinterpret_cast<P *>(xhat + row * cols);
#pragma unroll
  for (int k = 0; k < kPacks; ++k) {
    int p = threadIdx.x + k * blockDim.x;
    if (p >= packs)
      continue;
    P g = gp[p], hp, yp;
    P b;
    if (bp)
      b = bp[p];
#pragma unroll
    for (int j = 0; j < P::kSize; ++j) {
      float h = (v[k][j] - mean) * inv;
      hp.v[j] = fromFloat<T>(h);
      yp.v[j] = fromFloat<T>(toFloat(g.v[j]) * h +
                             (bp ? toFloat(b.v[j]) : 0.0f));
    }
    hr[p] = hp;
    yr[p] = yp;
  }
}

/// dx = (residual, or dx itself when null) + the input gradient, as
/// normBackwardKernel computes it.
template <class T, int kPacks>
__global__ void normBackwardRowKernel(const T *dy, const T *xhat,
                                      const float *rstd, const T *gamma,
                                      int64_t cols, bool rms, const T *residual,
                                      T *dx) {
  using P = Pack<T>;
  __shared__ float shared[32];
  const int64_t row = blockIdx.x;
  const int packs = int(cols / P::kSize);
  const P *dyr = reinterpret_cast<const P *>(dy + row * cols);
  const P *hr = reinterpret_cast<const P *>(xhat + row * cols);
  const P *gp = reinterpret_cast<const P *>(gamma);
  float g[kPacks][P::kSize], h[kPacks][P::kSize];
  float sumG = 0, sumGH = 0;
#pragma unroll
  for (int k = 0; k < kPacks; ++k) {
    int p = threadIdx.x + k * blockDim.x;
    if (p >= packs)
      continue;
    P d = dyr[p], x = hr[p], w = gp[p];
#pragma unroll
    for (int j = 0; j < P::kSize; ++j) {
      g[k][j] = toFloat(d.v[j]) * toFloat(w.v[j]);
      h[k][j] = toFloat(x.v[j]);
      sumG += g[k][j];
      sumGH += g[k][j] * h[k][j];
    }
  }
  const float meanG = rms ? 0.0f : blockSum(sumG, shared) / float(cols);
  const float meanGH = blockSum(sumGH, shared) / float(cols);
  const float inv = rstd[row];
  P *out = reinterpret_cast<P *>(dx + row * cols);
  const P *base =
      residual ? reinterpret_cast<const P *>(residual + row * cols) : out;
#pragma unroll
  for (int k = 0; k < kPacks; ++k) {
    int p = threadIdx.x + k * blockDim.x;
    if (p >= packs)
      continue;
    P r = base[p];
#pragma unroll
    for (int j = 0; j < P::kSize; ++j)
      r.v[j] = fromFloat<T>(toFloat(r.v[j]) +
                            inv * (g[k][j] - meanG - h[k][j] * meanGH));
    out[p] = r;
  }
}

/// normAffineKernel in packs (cols a whole number of packs, so none
/// straddles two rows).
template <class T>
__global__ void normAffinePackedKernel(const T *xhat, const T *gamma,
                                       const T *beta, int64_t rows,
                                       int64_t cols, T *y) {
  using P = Pack<T>;
  const int64_t rowPacks = cols / P::kSize;
  const P *hp = reinterpret_cast<const P *>(xhat);
  const P *gp = reinterpret_cast<const P *>(gamma);
  const P *bp = reinterpret_cast<const P *>(beta);
  P *yp = reinterpret_cast<P *>(y);
  SLUICE_GRID_STRIDE(i, rows * rowPacks) {
    int64_t c = i % rowPacks;
    P x = hp[i], g = gp[c], out;
    P b;
    if (bp)
      b = bp[c];
#pragma unroll
    for (int j = 0; j < P::kSize; ++j)
      out.v[j] = fromFloat<T>(toFloat(g.v[j]) * toFloat(x.v[j]) +
                              (bp ? toFloat(b.v[j]) : 0.0f));
    yp[i] = out;
  }
}

} // namespace sluice::rt::cuda

#endif // SLUICE_RUNTIME_CUDA_NORM_CUH
