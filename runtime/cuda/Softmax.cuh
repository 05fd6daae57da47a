//===- Softmax.cuh - Cross-entropy and the sharded softmax ------*- C++ -*-===//
//
// The unsharded output layer's softmax cross-entropy (one block per token;
// the loss added to an f64 accumulator on the device; logits in the
// activation type, their log-sum-exp kept for B), and the pieces of
// the vocabulary shards' softmax (Yeung et al., 2024 §4):
// per-token statistics of the shard's logits, equation 5's rescaling, the
// shard's loss and gradient columns, equation 6's combination. Logits and
// statistics are fp32; probabilities and gradients the activation type.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_CUDA_SOFTMAX_CUH
#define SLUICE_RUNTIME_CUDA_SOFTMAX_CUH

#include "Common.cuh"

namespace sluice::rt::cuda {

/// Calls f(index, value as float) for z[0, n) in this thread's share of a
/// block's loop, reading 16 bytes at a time (eight bf16 or four floats)
/// where the row allows it: a 128k vocabulary's row is 0.25 MB in bf16,
/// and the loop is bound by memory.
template <class T, class F>
__device__ __forceinline__ void forRow(const T *z, int64_t n, F f) {
  using P = Pack<T>;
  if (n % P::kSize == 0 && reinterpret_cast<uintptr_t>(z) % 16 == 0) {
    const P *zp = reinterpret_cast<const P *>(z);
    for (int64_t v = threadIdx.x; v < n / P::kSize; v += blockDim.x) {
      P q = zp[v];
#pragma unroll
      for (int k = 0; k < P::kSize; ++k)
        f(P::kSize * v + k, toFloat(q.v[k]));
    }
    return;
  }
  for (int64_t v = threadIdx.x; v < n; v += blockDim.x)
    f(v, toFloat(z[v]));
}

/// Token `blockIdx.x`'s log-sum-exp of its logits row (kept for B); the
/// loss gets lse - logit[label]. One read of the row: each thread's running
/// sum is rescaled when its maximum grows, then the block's partial sums to
/// the block's maximum. The logits stay as they are (in the activation
/// type, as the GEMM wrote them): no probabilities are written, so F reads
/// the row once and B once (Liger-style; the row never goes to fp32 in
/// memory).
template <class T>
__global__ void crossEntropyForwardKernel(const T *logits,
                                          const int32_t *labels, int64_t stride,
                                          int64_t length, int64_t vocab,
                                          float *lse, double *loss) {
  __shared__ float shared[32];
  int64_t token = blockIdx.x, r = token / length, t = token % length;
  const T *z = logits + token * vocab;
  float most = -INFINITY, sum = 0;
  forRow(z, vocab, [&](int64_t, float x) { onlineSoftmaxStep(x, most, sum); });
  float blockMost;
  float l = blockLogSumExp(most, sum, shared, blockMost);
  if (threadIdx.x == 0) {
    lse[token] = l;
    atomicAdd(loss, double(l) - double(toFloat(z[labels[r * stride + t]])));
  }
}

/// dlogits = (softmax(logits) - onehot(label)) * scale from the logits and
/// F's log-sum-exp, one block per token, 16 bytes read and written at once
/// where the row allows it.
template <class T>
__global__ void crossEntropyBackwardKernel(const T *logits, const float *lse,
                                           const int32_t *labels,
                                           int64_t stride, int64_t length,
                                           int64_t vocab, float scale,
                                           T *dlogits) {
  using P = Pack<T>;
  int64_t token = blockIdx.x, r = token / length, t = token % length;
  int64_t label = labels[r * stride + t];
  float l = lse[token];
  const T *z = logits + token * vocab;
  T *d = dlogits + token * vocab;
  auto grad = [&](int64_t v, float x) {
    float g = expf(x - l) * scale;
    return v == label ? g - scale : g;
  };
  if (vocab % P::kSize == 0 && reinterpret_cast<uintptr_t>(z) % 16 == 0 &&
      reinterpret_cast<uintptr_t>(d) % 16 == 0) {
    for (int64_t v = threadIdx.x; v < vocab / P::kSize; v += blockDim.x) {
      P q = reinterpret_cast<const P *>(z)[v], out;
#pragma unroll
      for (int k = 0; k < P::kSize; ++k)
        out.v[k] = fromFloat<T>(grad(P::kSize * v + k, toFloat(q.v[k])));
      reinterpret_cast<P *>(d)[v] = out;
    }
    return;
  }
  for (int64_t v = threadIdx.x; v < vocab; v += blockDim.x)
    d[v] = fromFloat<T>(grad(v, toFloat(z[v])));
}

/// Per token (one block each): max of the shard's `count` logits, the sum
/// of exp(logit - reference) and, if asked, those exponentials / sum.
template <class T>
__global__ void shardStatisticsKernel(const float *logits, int64_t count,
                                      int64_t ld, const float *reference,
                                      float *max, float *sum, T *probs) {
  __shared__ float shared[32];
  int64_t t = blockIdx.x;
  const float *z = logits + t * ld;
  float most = -INFINITY;
  for (int64_t v = threadIdx.x; v < count; v += blockDim.x)
    most = fmaxf(most, z[v]);
  most = blockMax(most, shared);
  if (max && threadIdx.x == 0)
    max[t] = most;
  float ref = reference ? reference[t] : most;
  float s = 0;
  for (int64_t v = threadIdx.x; v < count; v += blockDim.x)
    s += expf(z[v] - ref);
  s = blockSum(s, shared);
  if (threadIdx.x == 0)
    sum[t] = s;
  if (probs)
    for (int64_t v = threadIdx.x; v < count; v += blockDim.x)
      probs[t * ld + v] = fromFloat<T>(expf(z[v] - ref) / s);
}

__global__ void rescaleSumKernel(const float *sum, const float *localMax,
                                 const float *globalMax, int64_t tokens,
                                 float *scaled) {
  // A shard without rows has sum 0 and max -inf: it contributes 0.
  SLUICE_GRID_STRIDE(t, tokens)
  scaled[t] = sum[t] == 0.0f ? 0.0f : sum[t] * expf(localMax[t] - globalMax[t]);
}

template <class T>
__global__ void scaleRowsKernel(T *x, const float *factor, const float *divisor,
                                int64_t tokens, int64_t count, int64_t ld) {
  SLUICE_GRID_STRIDE(i, tokens * count) {
    int64_t v = i % count, t = i / count;
    T &cell = x[t * ld + v];
    cell = fromFloat<T>(toFloat(cell) * (factor[t] / divisor[t]));
  }
}

__global__ void shardLossKernel(const float *logits, const int32_t *labels,
                                int64_t stride, int64_t rows, int64_t length,
                                int64_t first, int64_t count, int64_t ld,
                                const float *max, const float *sum,
                                double *loss) {
  SLUICE_GRID_STRIDE(token, rows * length) {
    int64_t r = token / length, t = token % length;
    int64_t row = int64_t(labels[r * stride + t]) - first;
    if (row >= 0 && row < count)
      atomicAdd(loss, double(max[token]) + log(double(sum[token])) -
                          double(logits[token * ld + row]));
  }
}

template <class T>
__global__ void shardSoftmaxGradKernel(T *probs, const int32_t *labels,
                                       int64_t stride, int64_t rows,
                                       int64_t length, int64_t first,
                                       int64_t count, int64_t ld, float scale) {
  SLUICE_GRID_STRIDE(i, rows * length * count) {
    int64_t v = i % count, token = i / count;
    int64_t r = token / length, t = token % length;
    float p = toFloat(probs[token * ld + v]);
    if (int64_t(labels[r * stride + t]) - first == v)
      p -= 1.0f;
    probs[token * ld + v] = fromFloat<T>(p * scale);
  }
}

template <class T>
__global__ void combineGradKernel(const T *a, const T *b, const float *scaled,
                                  const float *sum, int64_t tokens,
                                  int64_t hidden, float scale, T *out) {
  SLUICE_GRID_STRIDE(i, tokens * hidden) {
    int64_t t = i / hidden;
    float f = scaled[t] / sum[t];
    out[i] = fromFloat<T>(scale * (toFloat(a[i]) * f - toFloat(b[i])));
  }
}

} // namespace sluice::rt::cuda

#endif // SLUICE_RUNTIME_CUDA_SOFTMAX_CUH
