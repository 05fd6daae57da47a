//===- Attention.cuh - Causal attention over a token slice ------*- C++ -*-===//
//
// The hand-written attention: fp32 math on any storage type, a bottom-right
// causal mask (the slice's queries sit at [offset, offset + tokens) and see
// keys [0, offset + i], or a sliding window's last ones of them),
// grouped-query heads. One block per (row, head, query); the scores are never
// stored: the forward pass finds the log-sum-exp with an online softmax, then
// accumulates the context tile by tile, recomputing each score; the backward
// pass recomputes the probabilities from the log-sum-exp (FlashAttention's
// backward) and adds into the fp32 key and value gradients atomically.
//
// It is the fallback: cuDNN's fused attention (AttentionCudnn.cpp) is the
// fast path where it is built and accepts the shape.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_CUDA_ATTENTION_CUH
#define SLUICE_RUNTIME_CUDA_ATTENTION_CUH

#include "Common.cuh"

namespace sluice::rt::cuda {

/// Threads per query block, and so keys per tile; the largest head size is
/// twice this (each thread owns two dimensions at most).
constexpr int kAttentionThreads = 128;
constexpr int kMaxHeadDim = 2 * kAttentionThreads;

struct AttentionIndex {
  // kvAt, vAt: the head's first key and value element within a token's.
  int64_t r, h, i, kvAt, vAt, row, visible;
  int64_t first; // the first key attended: 0 unless the window starts later
};

/// AttentionShape::getValueDim, on the device.
__device__ __forceinline__ int64_t valueDimOf(const AttentionShape &s) {
  return s.valueDim > 0 ? s.valueDim : s.headDim;
}

__device__ __forceinline__ AttentionIndex locate(const AttentionShape &s) {
  int64_t query = blockIdx.x;
  AttentionIndex x;
  x.i = query % s.tokens;
  x.h = (query / s.tokens) % s.heads;
  x.r = query / (s.tokens * s.heads);
  x.kvAt = (x.h / (s.heads / s.kvHeads)) * s.headDim;
  x.vAt = (x.h / (s.heads / s.kvHeads)) * valueDimOf(s);
  x.row = x.r * s.tokens + x.i;
  x.visible = s.offset + x.i + 1;
  // AttentionShape::getFirstKey, on the device.
  int64_t position = s.offset + x.i;
  x.first = s.window > 0 && position >= s.window ? position - s.window + 1 : 0;
  // A key block's (AttentionShape::getVisibleKeys): clipped to it.
  if (s.keyCount > 0) {
    x.first = x.first > s.keyBegin ? x.first : s.keyBegin;
    int64_t end = s.keyBegin + s.keyCount;
    x.visible = x.visible < end ? x.visible : end;
    x.visible = x.visible > x.first ? x.visible : x.first;
  }
  return x;
}

/// q . key times the shape's scale (the launchers set it), capped by
/// its softcap (Gemma-2) where it has one.
template <class T>
__device__ __forceinline__ float score(const float *q, const T *key,
                                       const AttentionShape &s) {
  float dot = 0;
  for (int64_t e = 0; e < s.headDim; ++e)
    dot += q[e] * toFloat(key[e]);
  float v = dot * s.scale;
  return s.softcap > 0 ? s.softcap * tanhf(v / s.softcap) : v;
}

template <class T>
__global__ void attentionForwardKernel(AttentionShape s, const T *q,
                                       const T *keys, const T *values,
                                       float *lse, T *context) {
  __shared__ float shared[32];
  __shared__ float qs[kMaxHeadDim];
  __shared__ float p[kAttentionThreads];
  AttentionIndex x = locate(s);
  const int64_t hd = s.heads * s.headDim, kvw = s.kvHeads * s.headDim;
  for (int64_t e = threadIdx.x; e < s.headDim; e += blockDim.x)
    qs[e] = toFloat(q[x.row * hd + x.h * s.headDim + e]);
  __syncthreads();
  const int64_t dv = valueDimOf(s), vw = s.kvHeads * dv;
  // Keys are stored from keyBegin on (0 for a cache): key j at j - keyBegin.
  const T *keyBase = keys + (x.r * s.seqLen - s.keyBegin) * kvw + x.kvAt;
  const T *valueBase = values + (x.r * s.seqLen - s.keyBegin) * vw + x.vAt;
  // Online softmax over this thread's keys, then across the block.
  float m = -INFINITY, l = 0;
  for (int64_t j = x.first + threadIdx.x; j < x.visible; j += blockDim.x)
    onlineSoftmaxStep(score(qs, keyBase + j * kvw, s), m, l);
  float most;
  float logSum = blockLogSumExp(m, l, shared, most);
  if (threadIdx.x == 0)
    lse[(x.r * s.heads + x.h) * s.tokens + x.i] = logSum;
  // context = sum_j p_j v_j, a tile of keys at a time.
  float acc0 = 0, acc1 = 0;
  int64_t e0 = threadIdx.x, e1 = threadIdx.x + blockDim.x;
  for (int64_t tile = x.first; tile < x.visible; tile += blockDim.x) {
    int64_t j = tile + threadIdx.x;
    __syncthreads();
    p[threadIdx.x] =
        j < x.visible ? expf(score(qs, keyBase + j * kvw, s) - logSum) : 0.0f;
    __syncthreads();
    int64_t count =
        x.visible - tile < blockDim.x ? x.visible - tile : int64_t(blockDim.x);
    for (int64_t jj = 0; jj < count; ++jj) {
      const T *v = valueBase + (tile + jj) * vw;
      if (e0 < dv)
        acc0 += p[jj] * toFloat(v[e0]);
      if (e1 < dv)
        acc1 += p[jj] * toFloat(v[e1]);
    }
  }
  T *out = context + x.row * s.heads * dv + x.h * dv;
  if (e0 < dv)
    out[e0] = fromFloat<T>(acc0);
  if (e1 < dv)
    out[e1] = fromFloat<T>(acc1);
}

template <class T>
__global__ void attentionBackwardKernel(AttentionShape s, const T *q,
                                        const T *keys, const T *values,
                                        const T *context, const float *lse,
                                        const T *dcontext, T *dq, float *dkeys,
                                        float *dvalues) {
  __shared__ float shared[32];
  __shared__ float qs[kMaxHeadDim], dcs[kMaxHeadDim];
  __shared__ float p[kAttentionThreads], ds[kAttentionThreads];
  AttentionIndex x = locate(s);
  const int64_t hd = s.heads * s.headDim, kvw = s.kvHeads * s.headDim;
  const int64_t dv = valueDimOf(s), vw = s.kvHeads * dv;
  int64_t at = x.row * hd + x.h * s.headDim;
  int64_t cAt = x.row * s.heads * dv + x.h * dv;
  float weighted = 0; // D = dctx . ctx = sum_j P_j dP_j
  for (int64_t e = threadIdx.x; e < s.headDim; e += blockDim.x)
    qs[e] = toFloat(q[at + e]);
  for (int64_t e = threadIdx.x; e < dv; e += blockDim.x) {
    dcs[e] = toFloat(dcontext[cAt + e]);
    weighted += dcs[e] * toFloat(context[cAt + e]);
  }
  weighted = blockSum(weighted, shared);
  float logSum = lse[(x.r * s.heads + x.h) * s.tokens + x.i];
  int64_t base = (x.r * s.seqLen - s.keyBegin) * kvw + x.kvAt;
  int64_t valueBase = (x.r * s.seqLen - s.keyBegin) * vw + x.vAt;
  float acc0 = 0, acc1 = 0;
  int64_t e0 = threadIdx.x, e1 = threadIdx.x + blockDim.x;
  for (int64_t tile = x.first; tile < x.visible; tile += blockDim.x) {
    int64_t j = tile + threadIdx.x;
    __syncthreads();
    if (j < x.visible) {
      const T *key = keys + base + j * kvw,
              *value = values + valueBase + j * vw;
      float capped = score(qs, key, s);
      float prob = expf(capped - logSum);
      float dp = 0;
      for (int64_t e = 0; e < dv; ++e)
        dp += dcs[e] * toFloat(value[e]);
      // The cap's derivative: 1 - tanh^2 of the uncapped score over it.
      float t = s.softcap > 0 ? capped / s.softcap : 0.0f;
      p[threadIdx.x] = prob;
      ds[threadIdx.x] = prob * (dp - weighted) * (1.0f - t * t) * s.scale;
    } else {
      p[threadIdx.x] = 0;
      ds[threadIdx.x] = 0;
    }
    __syncthreads();
    int64_t count =
        x.visible - tile < blockDim.x ? x.visible - tile : int64_t(blockDim.x);
    for (int64_t jj = 0; jj < count; ++jj) {
      int64_t kj = base + (tile + jj) * kvw,
              vj = valueBase + (tile + jj) * vw;
      if (e0 < s.headDim) {
        acc0 += ds[jj] * toFloat(keys[kj + e0]);
        atomicAdd(dkeys + kj + e0, ds[jj] * qs[e0]);
      }
      if (e1 < s.headDim) {
        acc1 += ds[jj] * toFloat(keys[kj + e1]);
        atomicAdd(dkeys + kj + e1, ds[jj] * qs[e1]);
      }
      if (e0 < dv)
        atomicAdd(dvalues + vj + e0, p[jj] * dcs[e0]);
      if (e1 < dv)
        atomicAdd(dvalues + vj + e1, p[jj] * dcs[e1]);
    }
  }
  // Summed over key blocks (ring attention) or written.
  if (s.accumulateQueries) {
    if (e0 < s.headDim)
      acc0 += toFloat(dq[at + e0]);
    if (e1 < s.headDim)
      acc1 += toFloat(dq[at + e1]);
  }
  if (e0 < s.headDim)
    dq[at + e0] = fromFloat<T>(acc0);
  if (e1 < s.headDim)
    dq[at + e1] = fromFloat<T>(acc1);
}

/// AttentionMerge (Kernels.def): one thread per (row, head, query) and
/// value element, in fp32.
template <class T>
__global__ void attentionMergeKernel(AttentionShape s, float *lse, T *context,
                                     const float *blockLse,
                                     const T *blockContext) {
  const int64_t dv = valueDimOf(s);
  SLUICE_GRID_STRIDE(i, s.rows * s.heads * s.tokens * dv) {
    int64_t e = i % dv, query = i / dv;
    int64_t t = query % s.tokens, h = (query / s.tokens) % s.heads,
            r = query / (s.tokens * s.heads);
    float a = lse[query], b = blockLse[query];
    if (b == -INFINITY)
      continue;
    float most = a > b ? a : b;
    float wa = a == -INFINITY ? 0.0f : expf(a - most), wb = expf(b - most);
    float sum = wa + wb;
    int64_t at = ((r * s.tokens + t) * s.heads + h) * dv + e;
    context[at] = fromFloat<T>(
        (wa * toFloat(context[at]) + wb * toFloat(blockContext[at])) / sum);
  }
}

/// Its lse, after every element has read the old one.
__global__ void attentionMergeLseKernel(int64_t n, float *lse,
                                        const float *blockLse) {
  SLUICE_GRID_STRIDE(i, n) {
    float a = lse[i], b = blockLse[i];
    if (b == -INFINITY)
      continue;
    float most = a > b ? a : b;
    float wa = a == -INFINITY ? 0.0f : expf(a - most), wb = expf(b - most);
    lse[i] = most + logf(wa + wb);
  }
}

/// cache[r][j] += scratch[r][j] over keys j < span: cuDNN's dK or dV of a
/// slice added into the microbatch's fp32 accumulator.
template <class T>
__global__ void addIntoCacheKernel(float *cache, const T *scratch, int64_t rows,
                                   int64_t span, int64_t seqLen,
                                   int64_t width) {
  SLUICE_GRID_STRIDE(i, rows * span * width) {
    int64_t c = i % width, j = (i / width) % span, r = i / (width * span);
    cache[(r * seqLen + j) * width + c] += toFloat(scratch[i]);
  }
}

} // namespace sluice::rt::cuda

#endif // SLUICE_RUNTIME_CUDA_ATTENTION_CUH
