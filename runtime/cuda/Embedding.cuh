//===- Embedding.cuh - Embedding gathers and scatters -----------*- C++ -*-===//
//
// Row gathers from an embedding table (with learned positions) and the
// scatter-adds of their gradients into fp32 tables (atomically: two tokens
// of a batch may share a row); the vocabulary shards' variants look up only
// the rows [first, first + count) the device holds (Appendix C of
// Yeung et al., 2024).
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_CUDA_EMBEDDING_CUH
#define SLUICE_RUNTIME_CUDA_EMBEDDING_CUH

#include "Common.cuh"

namespace sluice::rt::cuda {

template <class T>
__global__ void embeddingForwardKernel(const int32_t *tokens, int64_t stride,
                                       const T *table, const T *positions,
                                       int64_t rows, int64_t length,
                                       int64_t offset, int64_t hidden, T *out) {
  SLUICE_GRID_STRIDE(i, rows * length * hidden) {
    int64_t c = i % hidden, t = (i / hidden) % length,
            r = i / (hidden * length);
    float v = toFloat(table[int64_t(tokens[r * stride + t]) * hidden + c]);
    if (positions)
      v += toFloat(positions[(offset + t) * hidden + c]);
    out[i] = fromFloat<T>(v);
  }
}

template <class T>
__global__ void
embeddingBackwardKernel(const int32_t *tokens, int64_t stride, const T *dout,
                        int64_t rows, int64_t length, int64_t offset,
                        int64_t hidden, float *dtable, float *dpositions) {
  SLUICE_GRID_STRIDE(i, rows * length * hidden) {
    int64_t c = i % hidden, t = (i / hidden) % length,
            r = i / (hidden * length);
    float g = toFloat(dout[i]);
    atomicAdd(dtable + int64_t(tokens[r * stride + t]) * hidden + c, g);
    if (dpositions)
      atomicAdd(dpositions + (offset + t) * hidden + c, g);
  }
}

/// The shard row of `token`, or -1 when another device holds it.
__device__ __forceinline__ int64_t shardRow(int32_t token, int64_t first,
                                            int64_t count) {
  int64_t row = int64_t(token) - first;
  return row >= 0 && row < count ? row : -1;
}

template <class T>
__global__ void shardLookupKernel(const int32_t *tokens, int64_t stride,
                                  int64_t rows, int64_t length, const T *table,
                                  int64_t first, int64_t count, int64_t hidden,
                                  T *out) {
  SLUICE_GRID_STRIDE(i, rows * length * hidden) {
    int64_t c = i % hidden, t = (i / hidden) % length,
            r = i / (hidden * length);
    int64_t row = shardRow(tokens[r * stride + t], first, count);
    out[i] = row < 0 ? fromFloat<T>(0.0f) : table[row * hidden + c];
  }
}

template <class T>
__global__ void
shardScatterAddKernel(const int32_t *tokens, int64_t stride, int64_t rows,
                      int64_t length, const T *dout, int64_t first,
                      int64_t count, int64_t hidden, float *dtable) {
  SLUICE_GRID_STRIDE(i, rows * length * hidden) {
    int64_t c = i % hidden, t = (i / hidden) % length,
            r = i / (hidden * length);
    int64_t row = shardRow(tokens[r * stride + t], first, count);
    if (row >= 0)
      atomicAdd(dtable + row * hidden + c, toFloat(dout[i]));
  }
}

} // namespace sluice::rt::cuda

#endif // SLUICE_RUNTIME_CUDA_EMBEDDING_CUH
