//===- Common.cuh - Device helpers every kernel file shares -----*- C++ -*-===//
//
// Element conversions (activations are fp32 or bf16; statistics fp32), warp
// and block reductions, grid sizing for grid-stride loops, 16-byte packs,
// the dispatch of a kernel template on the activation type, and the launch
// check. Included by the .cu files only.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_CUDA_COMMON_CUH
#define SLUICE_RUNTIME_CUDA_COMMON_CUH

#include "Backend.h"
#include "CudaDevice.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>

namespace sluice::rt::cuda {

using bf16 = __nv_bfloat16;

template <class T> __device__ __forceinline__ float toFloat(T x);
template <> __device__ __forceinline__ float toFloat<float>(float x) {
  return x;
}
template <> __device__ __forceinline__ float toFloat<bf16>(bf16 x) {
  return __bfloat162float(x);
}

template <class T> __device__ __forceinline__ T fromFloat(float x);
template <> __device__ __forceinline__ float fromFloat<float>(float x) {
  return x;
}
template <> __device__ __forceinline__ bf16 fromFloat<bf16>(float x) {
  return __float2bfloat16_rn(x);
}

/// Element i of a typed array as double (conversions between any types).
__device__ __forceinline__ double loadAny(const void *p, DType type,
                                          int64_t i) {
  switch (type) {
  case DType::F32:
    return static_cast<const float *>(p)[i];
  case DType::BF16:
    return __bfloat162float(static_cast<const bf16 *>(p)[i]);
  case DType::F64:
    return static_cast<const double *>(p)[i];
  case DType::I32:
    return static_cast<const int32_t *>(p)[i];
  }
  return 0;
}

__device__ __forceinline__ void storeAny(void *p, DType type, int64_t i,
                                         double value) {
  switch (type) {
  case DType::F32:
    static_cast<float *>(p)[i] = float(value);
    return;
  case DType::BF16:
    static_cast<bf16 *>(p)[i] = __float2bfloat16_rn(float(value));
    return;
  case DType::F64:
    static_cast<double *>(p)[i] = value;
    return;
  case DType::I32:
    static_cast<int32_t *>(p)[i] = int32_t(value);
    return;
  }
}

__device__ __forceinline__ float warpSum(float v) {
  for (int offset = 16; offset > 0; offset /= 2)
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ __forceinline__ float warpMax(float v) {
  for (int offset = 16; offset > 0; offset /= 2)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

/// The sum over the block of every thread's `v` (blockDim.x a multiple of
/// 32, at most 1024); every thread gets it. `shared` holds 32 floats.
__device__ __forceinline__ float blockSum(float v, float *shared) {
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  v = warpSum(v);
  __syncthreads(); // `shared` may still be read by a previous reduction
  if (lane == 0)
    shared[warp] = v;
  __syncthreads();
  int warps = (blockDim.x + 31) / 32;
  v = lane < warps ? shared[lane] : 0.0f;
  return warpSum(v);
}

__device__ __forceinline__ float blockMax(float v, float *shared) {
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  v = warpMax(v);
  __syncthreads();
  if (lane == 0)
    shared[warp] = v;
  __syncthreads();
  int warps = (blockDim.x + 31) / 32;
  v = lane < warps ? shared[lane] : -INFINITY;
  return warpMax(v);
}

/// One element of an online softmax (Milakov and Gimelshein, 2018): the
/// running maximum `most` and the running sum of exp(x - most) take `x`.
__device__ __forceinline__ void onlineSoftmaxStep(float x, float &most,
                                                  float &sum) {
  if (x > most) {
    sum = sum * expf(most - x) + 1.0f;
    most = x;
  } else {
    sum += expf(x - most);
  }
}

/// The block's log-sum-exp of every thread's running (`most`, `sum`); a
/// thread that saw no element (most = -inf, sum 0) adds nothing. Every
/// thread gets it; `blockMost` receives the block's maximum.
__device__ __forceinline__ float
blockLogSumExp(float most, float sum, float *shared, float &blockMost) {
  blockMost = blockMax(most, shared);
  float total =
      blockSum(most == -INFINITY ? 0.0f : sum * expf(most - blockMost), shared);
  return blockMost + logf(total);
}

constexpr int kThreads = 256;

/// Blocks for a grid-stride loop over n elements.
inline unsigned gridFor(int64_t n, int threads = kThreads) {
  int64_t blocks = (n + threads - 1) / threads;
  if (blocks < 1)
    blocks = 1;
  return unsigned(blocks > 65535 * 16 ? 65535 * 16 : blocks);
}

#define SLUICE_GRID_STRIDE(i, n)                                               \
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (n);    \
       i += int64_t(blockDim.x) * gridDim.x)

/// 16 bytes of T: eight bf16 or four floats, loaded and stored at once.
template <class T> struct alignas(16) Pack {
  static constexpr int kSize = int(16 / sizeof(T));
  T v[kSize];
};

/// Whether n elements at every pointer can go as Packs of T.
template <class T>
inline bool canPack(int64_t n, std::initializer_list<const void *> pointers) {
  if (n % Pack<T>::kSize != 0)
    return false;
  for (const void *p : pointers)
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0)
      return false;
  return true;
}

/// Runs the statement with `T` the C++ type of an activation type.
#define SLUICE_DISPATCH_ACT(type, T, ...)                                      \
  do {                                                                         \
    if ((type) == ::sluice::rt::DType::BF16) {                                 \
      using T = ::sluice::rt::cuda::bf16;                                      \
      __VA_ARGS__;                                                             \
    } else {                                                                   \
      using T = float;                                                         \
      __VA_ARGS__;                                                             \
    }                                                                          \
  } while (0)

/// After a launch: records a launch failure (bad configuration, no device).
#define SLUICE_LAUNCHED(sink) SLUICE_CUDA_RECORD(sink, cudaGetLastError())

} // namespace sluice::rt::cuda

#endif // SLUICE_RUNTIME_CUDA_COMMON_CUH
