//===- Moe.cu - Mixture-of-experts routing on the GPU ---------------------===//
//
// The CUDA side of runtime/Kernels.def's router and token permutation
// (runtime/cpu/Moe.cpp is the CPU's, the contract's wording the same). One
// thread per token for the router (tens to hundreds of experts, k of a few:
// a token's softmax and top-k are a short loop), one per expert for the
// stable counting sort (each walks the copies in order, so a copy's
// position does not depend on scheduling), one per element for the
// permutation and the combine (each output row sums its k inputs in j's
// order: deterministic, no atomics).
//
//===----------------------------------------------------------------------===//

#include "Common.cuh"
#include "CudaKernels.h"
#include "sluice/Blocks/ExpertCapacity.h"

#include <algorithm>
#include <vector>

namespace sluice::rt::cuda {
namespace {

/// The router's rule as the kernels take it (RouterRule less the pointer).
struct Rule {
  bool sigmoid, normalize;
  float scale;
  int64_t groups, topGroups;
  const float *bias;
};
Rule toRule(const RouterRule &r) {
  return {r.sigmoid, r.normalize, r.scale, r.groups, r.topGroups,
          r.bias ? r.bias.f32() : nullptr};
}

/// Index j of the descending order of the values `at(i)`, i < count, that
/// `eligible(i)` admits and are not among out[0, j): the largest left, the
/// lower index first on a tie.
template <class At, class Eligible>
__device__ int64_t nextLargest(At at, Eligible eligible, int64_t count,
                               const int32_t *out, int64_t j) {
  int64_t best = -1;
  for (int64_t e = 0; e < count; ++e) {
    if (!eligible(e))
      continue;
    bool taken = false;
    for (int64_t i = 0; i < j; ++i)
      taken |= out[i] == e;
    if (!taken && (best < 0 || at(e) > at(best)))
      best = e;
  }
  return best;
}

/// Up to this many groups (the spec's rule; DeepSeek-V3 has 8).
constexpr int64_t kMaxGroups = blocks::moe::kMaxExpertGroups;

__global__ void routeKernel(const float *logits, int64_t tokens,
                            int64_t experts, int64_t k, Rule rule,
                            float *probs, int32_t *chosen, float *weights) {
  SLUICE_GRID_STRIDE(t, tokens) {
    const float *z = logits + t * experts;
    float *p = probs + t * experts;
    if (rule.sigmoid) {
      for (int64_t e = 0; e < experts; ++e)
        p[e] = float(1.0 / (1.0 + exp(-double(z[e]))));
    } else {
      float most = -INFINITY;
      for (int64_t e = 0; e < experts; ++e)
        most = fmaxf(most, z[e]);
      double sum = 0;
      for (int64_t e = 0; e < experts; ++e)
        sum += exp(double(z[e]) - most);
      for (int64_t e = 0; e < experts; ++e)
        p[e] = float(exp(double(z[e]) - most) / sum);
    }
    auto choice = [&](int64_t e) {
      return rule.bias ? p[e] + rule.bias[e] : p[e];
    };
    // Group-limited routing: a group scores by its best expert (softmax)
    // or its two best experts' sum (sigmoid); the k come from the
    // topGroups best groups.
    bool limited = rule.groups > 1;
    int64_t size = limited ? experts / rule.groups : experts;
    float groupScore[kMaxGroups];
    int32_t bestGroups[kMaxGroups];
    if (limited) {
      for (int64_t g = 0; g < rule.groups; ++g) {
        int32_t two[2];
        int64_t n = min(rule.sigmoid ? int64_t(2) : int64_t(1), size);
        float sum = 0;
        for (int64_t i = 0; i < n; ++i) {
          two[i] = int32_t(nextLargest(
              [&](int64_t e) { return choice(g * size + e); },
              [](int64_t) { return true; }, size, two, i));
          sum += choice(g * size + two[i]);
        }
        groupScore[g] = sum;
      }
      for (int64_t i = 0; i < rule.topGroups; ++i)
        bestGroups[i] = int32_t(nextLargest(
            [&](int64_t g) { return groupScore[g]; },
            [](int64_t) { return true; }, rule.groups, bestGroups, i));
    }
    auto eligible = [&](int64_t e) {
      if (!limited)
        return true;
      bool in = false;
      for (int64_t i = 0; i < rule.topGroups; ++i)
        in |= bestGroups[i] == e / size;
      return in;
    };
    int32_t *c = chosen + t * k;
    double kept = 0;
    for (int64_t j = 0; j < k; ++j) {
      c[j] = int32_t(nextLargest(choice, eligible, experts, c, j));
      kept += p[c[j]];
    }
    for (int64_t j = 0; j < k; ++j)
      weights[t * k + j] =
          float((rule.normalize ? p[c[j]] / kept : double(p[c[j]])) *
                rule.scale);
  }
}

__global__ void routeBackwardKernel(const float *probs, const int32_t *chosen,
                                    const float *weights, const float *dweights,
                                    int64_t tokens, int64_t experts, int64_t k,
                                    Rule rule, const float *balance,
                                    float balanceScale, float *dlogits) {
  SLUICE_GRID_STRIDE(t, tokens) {
    const float *p = probs + t * experts;
    const int32_t *c = chosen + t * k;
    const float *w = weights + t * k, *dw = dweights + t * k;
    double kept = 0, dot = 0, scale = rule.scale;
    for (int64_t j = 0; j < k; ++j) {
      kept += p[c[j]];
      dot += double(dw[j]) * w[j];
    }
    // Through the scale and the renormalisation; non-zero on the chosen
    // experts only.
    auto chosenShare = [&](int64_t j) {
      return rule.normalize ? (scale * dw[j] - dot) / kept
                            : scale * double(dw[j]);
    };
    auto dp = [&](int64_t e) {
      double v = 0;
      for (int64_t j = 0; j < k; ++j)
        if (c[j] == e)
          v += chosenShare(j);
      return v;
    };
    if (rule.sigmoid) {
      for (int64_t e = 0; e < experts; ++e)
        dlogits[t * experts + e] = float(dp(e) * p[e] * (1.0 - p[e]));
      continue;
    }
    double mean = 0;
    for (int64_t j = 0; j < k; ++j)
      mean += double(p[c[j]]) * chosenShare(j);
    // The load-balancing loss's gradient reaches every probability.
    auto extra = [&](int64_t e) {
      return balance ? double(balanceScale) * balance[e] : 0.0;
    };
    for (int64_t e = 0; balance && e < experts; ++e)
      mean += double(p[e]) * extra(e);
    for (int64_t e = 0; e < experts; ++e)
      dlogits[t * experts + e] = float(p[e] * (dp(e) + extra(e) - mean));
  }
}

/// One thread per expert: its copies and its probabilities' sum.
__global__ void balanceKernel(const float *probs, const int32_t *offsets,
                              int64_t tokens, int64_t experts, float *stats) {
  SLUICE_GRID_STRIDE(e, experts) {
    double sum = 0;
    for (int64_t t = 0; t < tokens; ++t)
      sum += probs[t * experts + e];
    stats[e] += float(offsets[e + 1] - offsets[e]);
    stats[experts + e] += float(sum);
  }
}

__global__ void balanceLossKernel(const float *stats, int64_t experts,
                                  double scale, double *loss) {
  double sum = 0;
  for (int64_t e = 0; e < experts; ++e)
    sum += double(stats[e]) * stats[experts + e];
  loss[0] += scale * sum;
}

__global__ void countKernel(const int32_t *chosen, int64_t copies,
                            int64_t experts, int32_t *offsets) {
  // One thread per expert: its count, then (thread 0) the prefix sums.
  SLUICE_GRID_STRIDE(e, experts) {
    int32_t count = 0;
    for (int64_t i = 0; i < copies; ++i)
      count += chosen[i] == e;
    offsets[e + 1] = count;
  }
}

__global__ void prefixKernel(int64_t experts, int32_t *offsets) {
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    offsets[0] = 0;
    for (int64_t e = 0; e < experts; ++e)
      offsets[e + 1] += offsets[e];
  }
}

__global__ void placeKernel(const int32_t *chosen, int64_t copies,
                            int64_t experts, const int32_t *offsets,
                            int32_t *order, int32_t *position) {
  SLUICE_GRID_STRIDE(e, experts) {
    int32_t next = offsets[e];
    for (int64_t i = 0; i < copies; ++i)
      if (chosen[i] == e) {
        order[next] = int32_t(i);
        position[i] = next++;
      }
  }
}

template <class T>
__global__ void gatherKernel(const T *x, const int32_t *order, int64_t copies,
                             int64_t k, int64_t hidden, T *out) {
  SLUICE_GRID_STRIDE(i, copies * hidden) {
    int64_t p = i / hidden, c = i % hidden;
    out[i] = x[int64_t(order[p] / k) * hidden + c];
  }
}

template <class T>
__global__ void combineKernel(const T *rows, const int32_t *position,
                              const float *weights, int64_t tokens, int64_t k,
                              int64_t hidden, T *y) {
  SLUICE_GRID_STRIDE(i, tokens * hidden) {
    int64_t t = i / hidden, c = i % hidden;
    float sum = toFloat(y[i]);
    for (int64_t j = 0; j < k; ++j) {
      float w = weights ? weights[t * k + j] : 1.0f;
      sum += w * toFloat(rows[int64_t(position[t * k + j]) * hidden + c]);
    }
    y[i] = fromFloat<T>(sum);
  }
}

template <class T>
__global__ void combineRowsBackwardKernel(const int32_t *position,
                                          const float *weights, const T *dy,
                                          int64_t tokens, int64_t k,
                                          int64_t hidden, T *drows) {
  SLUICE_GRID_STRIDE(i, tokens * k * hidden) {
    int64_t copy = i / hidden, c = i % hidden, t = copy / k;
    drows[int64_t(position[copy]) * hidden + c] =
        fromFloat<T>(weights[copy] * toFloat(dy[t * hidden + c]));
  }
}

/// One block per copy: dweights[copy] = rows[position[copy]] . dy[t].
template <class T>
__global__ void combineWeightsBackwardKernel(const T *rows,
                                             const int32_t *position,
                                             const T *dy, int64_t k,
                                             int64_t hidden, float *dweights) {
  __shared__ float shared[32];
  int64_t copy = blockIdx.x, t = copy / k;
  const T *row = rows + int64_t(position[copy]) * hidden;
  float sum = 0;
  for (int64_t c = threadIdx.x; c < hidden; c += blockDim.x)
    sum += toFloat(row[c]) * toFloat(dy[t * hidden + c]);
  sum = blockSum(sum, shared);
  if (threadIdx.x == 0)
    dweights[copy] = sum;
}

} // namespace

void CudaKernels::moeRoute(DevicePtr logits, int64_t tokens, int64_t experts,
                           int64_t k, const RouterRule &rule, DevicePtr probs,
                           DevicePtr chosen, DevicePtr weights) {
  if (tokens == 0)
    return;
  routeKernel<<<gridFor(tokens), kThreads, 0, stream>>>(
      logits.f32(), tokens, experts, k, toRule(rule), probs.f32(),
      chosen.i32(), weights.f32());
  SLUICE_LAUNCHED(errors);
}

void CudaKernels::moeRouteBackward(DevicePtr probs, DevicePtr chosen,
                                   DevicePtr weights, DevicePtr dweights,
                                   int64_t tokens, int64_t experts, int64_t k,
                                   const RouterRule &rule, DevicePtr balance,
                                   float balanceScale, DevicePtr dlogits) {
  if (tokens == 0)
    return;
  routeBackwardKernel<<<gridFor(tokens), kThreads, 0, stream>>>(
      probs.f32(), chosen.i32(), weights.f32(), dweights.f32(), tokens,
      experts, k, toRule(rule), balance ? balance.f32() : nullptr,
      balanceScale, dlogits.f32());
  SLUICE_LAUNCHED(errors);
}

void CudaKernels::moeBalance(DevicePtr probs, DevicePtr offsets,
                             int64_t tokens, int64_t experts, DevicePtr stats) {
  balanceKernel<<<gridFor(experts), kThreads, 0, stream>>>(
      probs.f32(), offsets.i32(), tokens, experts, stats.f32());
  SLUICE_LAUNCHED(errors);
}

void CudaKernels::moeBalanceLoss(DevicePtr stats, int64_t experts,
                                 double scale, DevicePtr loss) {
  balanceLossKernel<<<1, 1, 0, stream>>>(stats.f32(), experts, scale,
                                         loss.as<double>());
  SLUICE_LAUNCHED(errors);
}

void CudaKernels::moeSort(DevicePtr chosen, int64_t tokens, int64_t k,
                          int64_t experts, DevicePtr order, DevicePtr position,
                          DevicePtr offsets) {
  int64_t copies = tokens * k;
  countKernel<<<gridFor(experts), kThreads, 0, stream>>>(
      chosen.i32(), copies, experts, offsets.i32());
  prefixKernel<<<1, 1, 0, stream>>>(experts, offsets.i32());
  placeKernel<<<gridFor(experts), kThreads, 0, stream>>>(
      chosen.i32(), copies, experts, offsets.i32(), order.i32(),
      position.i32());
  SLUICE_LAUNCHED(errors);
}

void CudaKernels::moeGather(DevicePtr x, DevicePtr order, int64_t tokens,
                            int64_t k, int64_t hidden, DevicePtr out) {
  int64_t n = tokens * k * hidden;
  if (n == 0)
    return;
  SLUICE_DISPATCH_ACT(out.getType(), T,
                      gatherKernel<<<gridFor(n), kThreads, 0, stream>>>(
                          x.as<T>(), order.i32(), tokens * k, k, hidden,
                          out.as<T>()));
  SLUICE_LAUNCHED(errors);
}

void CudaKernels::moeCombine(DevicePtr rows, DevicePtr position,
                             DevicePtr weights, int64_t tokens, int64_t k,
                             int64_t hidden, DevicePtr y) {
  int64_t n = tokens * hidden;
  if (n == 0)
    return;
  const float *w = weights ? weights.f32() : nullptr;
  SLUICE_DISPATCH_ACT(y.getType(), T,
                      combineKernel<<<gridFor(n), kThreads, 0, stream>>>(
                          rows.as<T>(), position.i32(), w, tokens, k, hidden,
                          y.as<T>()));
  SLUICE_LAUNCHED(errors);
}

void CudaKernels::moeCombineBackward(DevicePtr rows, DevicePtr position,
                                     DevicePtr weights, DevicePtr dy,
                                     int64_t tokens, int64_t k, int64_t hidden,
                                     DevicePtr drows, DevicePtr dweights) {
  int64_t n = tokens * k * hidden;
  if (n == 0)
    return;
  SLUICE_DISPATCH_ACT(
      drows.getType(), T,
      combineRowsBackwardKernel<<<gridFor(n), kThreads, 0, stream>>>(
          position.i32(), weights.f32(), dy.as<T>(), tokens, k, hidden,
          drows.as<T>());
      combineWeightsBackwardKernel<<<unsigned(tokens * k), kThreads, 0,
                                     stream>>>(rows.as<T>(), position.i32(),
                                               dy.as<T>(), k, hidden,
                                               dweights.f32()));
  SLUICE_LAUNCHED(errors);
}

namespace {
/// One block per token: the gate, then its row (Qwen2-MoE's shared
/// expert); the backward's dot product reduced in the block in a fixed
/// order.
template <typename T>
__global__ void gateRowsKernel(const float *z, const T *s, int64_t tokens,
                               int64_t hidden, float *g, T *y) {
  for (int64_t t = blockIdx.x; t < tokens; t += gridDim.x) {
    float gate = float(1.0 / (1.0 + exp(-double(z[t]))));
    if (threadIdx.x == 0)
      g[t] = gate;
    for (int64_t c = threadIdx.x; c < hidden; c += blockDim.x)
      y[t * hidden + c] =
          T(float(y[t * hidden + c]) + gate * float(s[t * hidden + c]));
  }
}

template <typename T>
__global__ void gateRowsBackwardKernel(const float *g, const T *s,
                                       const T *dy, int64_t tokens,
                                       int64_t hidden, T *ds, float *dz) {
  __shared__ double partial[256];
  for (int64_t t = blockIdx.x; t < tokens; t += gridDim.x) {
    double dot = 0;
    for (int64_t c = threadIdx.x; c < hidden; c += blockDim.x) {
      float d = float(dy[t * hidden + c]);
      ds[t * hidden + c] = T(g[t] * d);
      dot += double(float(s[t * hidden + c])) * d;
    }
    partial[threadIdx.x] = dot;
    __syncthreads();
    for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
      if (threadIdx.x < half)
        partial[threadIdx.x] += partial[threadIdx.x + half];
      __syncthreads();
    }
    if (threadIdx.x == 0)
      dz[t] = float(partial[0] * g[t] * (1.0 - g[t]));
    __syncthreads();
  }
}

} // namespace

void CudaKernels::gateRowsForward(DevicePtr z, DevicePtr s, int64_t tokens,
                                  int64_t hidden, DevicePtr g, DevicePtr y) {
  if (tokens == 0)
    return;
  unsigned blocks = unsigned(std::min<int64_t>(tokens, 65535));
  SLUICE_DISPATCH_ACT(y.getType(), T,
                      gateRowsKernel<<<blocks, 256, 0, stream>>>(
                          z.f32(), s.as<T>(), tokens, hidden, g.f32(),
                          y.as<T>()));
  SLUICE_LAUNCHED(errors);
}

void CudaKernels::gateRowsBackward(DevicePtr g, DevicePtr s, DevicePtr dy,
                                   int64_t tokens, int64_t hidden,
                                   DevicePtr ds, DevicePtr dz) {
  if (tokens == 0)
    return;
  unsigned blocks = unsigned(std::min<int64_t>(tokens, 65535));
  SLUICE_DISPATCH_ACT(ds.getType(), T,
                      gateRowsBackwardKernel<<<blocks, 256, 0, stream>>>(
                          g.f32(), s.as<T>(), dy.as<T>(), tokens, hidden,
                          ds.as<T>(), dz.f32()));
  SLUICE_LAUNCHED(errors);
}

namespace {
/// The groups' offsets on the host: each group's gemm takes its row count
/// as a shape, so the stream is drained to read them (a device-side
/// grouped call without the wait is the later speed step, docs/moe.md).
std::vector<int32_t> readOffsets(DevicePtr offsets, int64_t groups,
                                 cudaStream_t stream, ErrorSink &errors) {
  std::vector<int32_t> host(size_t(groups) + 1, 0);
  SLUICE_CUDA_RECORD(errors,
                     cudaMemcpyAsync(host.data(), offsets.get(),
                                     host.size() * sizeof(int32_t),
                                     cudaMemcpyDeviceToHost, stream));
  SLUICE_CUDA_RECORD(errors, cudaStreamSynchronize(stream));
  return host;
}
} // namespace

void CudaKernels::groupedGemm(bool transB, int64_t groups, DevicePtr offsets,
                              int64_t rows, int64_t n, int64_t k, DevicePtr a,
                              int64_t lda, DevicePtr b, int64_t ldb,
                              int64_t bStride, float beta, DevicePtr c,
                              int64_t ldc) {
  std::vector<int32_t> at = readOffsets(offsets, groups, stream, errors);
  runGroupedGemm(*this, at.data(), transB, groups, n, k, a, lda, b, ldb,
                 bStride, beta, c, ldc);
}

void CudaKernels::groupedGemmWeights(int64_t groups, DevicePtr offsets,
                                     int64_t rows, int64_t m, int64_t n,
                                     DevicePtr a, int64_t lda, DevicePtr b,
                                     int64_t ldb, float beta, DevicePtr c,
                                     int64_t cStride) {
  std::vector<int32_t> at = readOffsets(offsets, groups, stream, errors);
  runGroupedGemmWeights(*this, at.data(), groups, m, n, a, lda, b, ldb, beta,
                        c, cStride);
}

} // namespace sluice::rt::cuda
