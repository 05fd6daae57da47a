//===- Softmax.cuh - Cross-entropy and the sharded softmax ------*- C++ -*-===//
//
// The unsharded output layer's softmax cross-entropy (one block per token;
// the loss added to an f64 accumulator on the device), and the pieces of
// the vocabulary shards' softmax (papers/vocabulary-parallelism.txt §4):
// per-token statistics of the shard's logits, equation 5's rescaling, the
// shard's loss and gradient columns, equation 6's combination. Logits and
// statistics are fp32; probabilities and gradients the activation type.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_CUDA_SOFTMAX_CUH
#define SLUICE_RUNTIME_CUDA_SOFTMAX_CUH

#include "Common.cuh"

namespace sluice::rt::cuda {

/// Token `blockIdx.x`'s row of logits becomes its probabilities; the loss
/// gets -log p[label].
__global__ void crossEntropyForwardKernel(float *logits, const int32_t *labels,
                                          int64_t stride, int64_t length,
                                          int64_t vocab, double *loss) {
  __shared__ float shared[32];
  int64_t token = blockIdx.x, r = token / length, t = token % length;
  float *z = logits + token * vocab;
  float most = -INFINITY;
  for (int64_t v = threadIdx.x; v < vocab; v += blockDim.x)
    most = fmaxf(most, z[v]);
  most = blockMax(most, shared);
  float sum = 0;
  for (int64_t v = threadIdx.x; v < vocab; v += blockDim.x) {
    float e = expf(z[v] - most);
    z[v] = e;
    sum += e;
  }
  sum = blockSum(sum, shared);
  for (int64_t v = threadIdx.x; v < vocab; v += blockDim.x)
    z[v] /= sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    float p = z[labels[r * stride + t]];
    atomicAdd(loss, -log(fmax(double(p), 1e-30)));
  }
}

template <class T>
__global__ void
crossEntropyBackwardKernel(const float *probs, const int32_t *labels,
                           int64_t stride, int64_t rows, int64_t length,
                           int64_t vocab, float scale, T *dlogits) {
  SLUICE_GRID_STRIDE(i, rows * length * vocab) {
    int64_t v = i % vocab, token = i / vocab;
    int64_t r = token / length, t = token % length;
    float g = probs[i] * scale;
    if (labels[r * stride + t] == v)
      g -= scale;
    dlogits[i] = fromFloat<T>(g);
  }
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
