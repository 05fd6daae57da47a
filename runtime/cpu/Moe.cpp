//===- Moe.cpp - Mixture-of-experts routing on the CPU --------------------===//
//
// The router and the token permutation of a mixture-of-experts
// feed-forward (runtime/Kernels.def): softmax over the experts then top-k,
// as transformers' Mixtral, Qwen2-MoE, Qwen3-MoE and OLMoE blocks compute
// it (Jiang et al., 2024, "Mixtral of Experts", section 2.1), with every
// token kept (dropless: no capacity factor); the experts' own matmuls are
// the gemm kernel's, one call per expert over its contiguous tokens.
//
//===----------------------------------------------------------------------===//

#include "CpuKernels.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace sluice::rt {

namespace {
/// The k largest of `values[0, count)` whose `eligible` is set (null:
/// all), descending, the lower index first on a tie (torch.topk's order on
/// distinct values; a fixed rule on ties).
void topK(const float *values, const bool *eligible, int64_t count, int64_t k,
          int32_t *out) {
  for (int64_t j = 0; j < k; ++j) {
    int64_t best = -1;
    for (int64_t e = 0; e < count; ++e) {
      if ((eligible && !eligible[e]) ||
          std::find(out, out + j, int32_t(e)) != out + j)
        continue;
      if (best < 0 || values[e] > values[best])
        best = e;
    }
    out[j] = int32_t(best);
  }
}

/// One token's choice under `rule` from its scores `p`: the k experts
/// (into `c`) of largest score + bias among the best groups' experts.
/// `choice`, `eligible` and `groupScores` are the caller's scratch.
void choose(const float *p, int64_t experts, int64_t k, const RouterRule &rule,
            const float *bias, std::vector<float> &choice,
            std::vector<char> &eligible, std::vector<float> &groupScores,
            std::vector<int32_t> &best, int32_t *c) {
  for (int64_t e = 0; e < experts; ++e)
    choice[size_t(e)] = bias ? p[e] + bias[e] : p[e];
  const bool *allowed = nullptr;
  if (rule.groups > 1) {
    // Group-limited routing (DeepSeek-V2's device-limited, V3's node-
    // limited; Liu et al. 2024, section 2.1.2): a group scores by its best
    // expert (softmax) or its two best experts' sum (sigmoid).
    int64_t size = experts / rule.groups, top = rule.sigmoid ? 2 : 1;
    for (int64_t g = 0; g < rule.groups; ++g) {
      int32_t two[2];
      int64_t n = std::min(top, size);
      topK(choice.data() + g * size, nullptr, size, n, two);
      float sum = 0;
      for (int64_t i = 0; i < n; ++i)
        sum += choice[size_t(g * size + two[i])];
      groupScores[size_t(g)] = sum;
    }
    topK(groupScores.data(), nullptr, rule.groups, rule.topGroups,
         best.data());
    std::fill(eligible.begin(), eligible.end(), 0);
    for (int64_t i = 0; i < rule.topGroups; ++i)
      std::fill_n(eligible.begin() + best[size_t(i)] * size, size, 1);
    allowed = reinterpret_cast<const bool *>(eligible.data());
  }
  topK(choice.data(), allowed, experts, k, c);
}

/// One token's router backward: dz (its logits' gradient) from dw.
void routeBackward(const float *p, const int32_t *c, const float *w,
                   const float *dw, int64_t experts, int64_t k,
                   const RouterRule &rule, const float *balance,
                   float balanceScale, std::vector<double> &dp, float *dz) {
  // The load-balancing loss's gradient reaches every probability.
  for (int64_t e = 0; e < experts; ++e)
    dp[e] = balance ? double(balanceScale) * balance[e] : 0.0;
  // Through the scale c and the renormalisation w_j = c p_j / S: dp_i =
  // (c dw_i - sum_j dw_j w_j) / S for a chosen i.
  double kept = 0, dot = 0, scale = rule.scale;
  for (int64_t j = 0; j < k; ++j) {
    kept += p[c[j]];
    dot += double(dw[j]) * w[j];
  }
  for (int64_t j = 0; j < k; ++j)
    dp[c[j]] += rule.normalize ? (scale * dw[j] - dot) / kept
                               : scale * double(dw[j]);
  if (rule.sigmoid) {
    // Each score its own logit's sigmoid: dz_e = dp_e p_e (1 - p_e).
    for (int64_t e = 0; e < experts; ++e)
      dz[e] = float(dp[e] * p[e] * (1.0 - p[e]));
    return;
  }
  // Through the softmax: dz_e = p_e (dp_e - sum_l p_l dp_l).
  double mean = 0;
  for (int64_t e = 0; e < experts; ++e)
    mean += double(p[e]) * dp[e];
  for (int64_t e = 0; e < experts; ++e)
    dz[e] = float(p[e] * (dp[e] - mean));
}
} // namespace

void CpuKernels::moeRoute(DevicePtr logitsPtr, int64_t tokens, int64_t experts,
                          int64_t k, const RouterRule &rule, DevicePtr probsPtr,
                          DevicePtr chosenPtr, DevicePtr weightsPtr) {
  const float *logits = logitsPtr.f32();
  float *probs = probsPtr.f32();
  int32_t *chosen = chosenPtr.i32();
  float *weights = weightsPtr.f32();
  const float *bias = rule.bias ? rule.bias.f32() : nullptr;
  auto count = [](int64_t n) { return static_cast<size_t>(std::max<int64_t>(n, 1)); };
  std::vector<float> choice(count(experts)), groupScores(count(rule.groups));
  std::vector<char> eligible(count(experts));
  std::vector<int32_t> best(count(rule.topGroups));
  for (int64_t t = 0; t < tokens; ++t) {
    const float *z = logits + t * experts;
    float *p = probs + t * experts;
    if (rule.sigmoid) {
      for (int64_t e = 0; e < experts; ++e)
        p[e] = float(1.0 / (1.0 + std::exp(-double(z[e]))));
    } else {
      float max = *std::max_element(z, z + experts);
      double sum = 0;
      for (int64_t e = 0; e < experts; ++e)
        sum += std::exp(double(z[e]) - max);
      for (int64_t e = 0; e < experts; ++e)
        p[e] = float(std::exp(double(z[e]) - max) / sum);
    }
    int32_t *c = chosen + t * k;
    choose(p, experts, k, rule, bias, choice, eligible, groupScores, best, c);
    double kept = 0;
    for (int64_t j = 0; j < k; ++j)
      kept += p[c[j]];
    for (int64_t j = 0; j < k; ++j)
      weights[t * k + j] = float(
          (rule.normalize ? p[c[j]] / kept : double(p[c[j]])) * rule.scale);
  }
}

void CpuKernels::moeRouteBackward(DevicePtr probs, DevicePtr chosen,
                                  DevicePtr weights, DevicePtr dweights,
                                  int64_t tokens, int64_t experts, int64_t k,
                                  const RouterRule &rule, DevicePtr balance,
                                  float balanceScale, DevicePtr dlogits) {
  std::vector<double> dp(static_cast<size_t>(experts));
  const float *counts = balance ? balance.f32() : nullptr;
  for (int64_t t = 0; t < tokens; ++t)
    routeBackward(probs.f32() + t * experts, chosen.i32() + t * k,
                  weights.f32() + t * k, dweights.f32() + t * k, experts, k,
                  rule, counts, balanceScale, dp,
                  dlogits.f32() + t * experts);
}

void CpuKernels::moeBalance(DevicePtr probsPtr, DevicePtr offsetsPtr,
                            int64_t tokens, int64_t experts,
                            DevicePtr statsPtr) {
  const float *probs = probsPtr.f32();
  const int32_t *offsets = offsetsPtr.i32();
  float *stats = statsPtr.f32();
  for (int64_t e = 0; e < experts; ++e) {
    double sum = 0;
    for (int64_t t = 0; t < tokens; ++t)
      sum += probs[t * experts + e];
    stats[e] += float(offsets[e + 1] - offsets[e]);
    stats[experts + e] += float(sum);
  }
}

void CpuKernels::moeBalanceLoss(DevicePtr statsPtr, int64_t experts,
                                double scale, DevicePtr loss) {
  const float *stats = statsPtr.f32();
  double sum = 0;
  for (int64_t e = 0; e < experts; ++e)
    sum += double(stats[e]) * stats[experts + e];
  *loss.as<double>() += scale * sum;
}

void CpuKernels::moeSort(DevicePtr chosenPtr, int64_t tokens, int64_t k,
                         int64_t experts, DevicePtr orderPtr,
                         DevicePtr positionPtr, DevicePtr offsetsPtr) {
  const int32_t *chosen = chosenPtr.i32();
  int32_t *order = orderPtr.i32(), *position = positionPtr.i32(),
          *offsets = offsetsPtr.i32();
  std::fill(offsets, offsets + experts + 1, 0);
  for (int64_t i = 0; i < tokens * k; ++i)
    ++offsets[chosen[i] + 1];
  for (int64_t e = 0; e < experts; ++e)
    offsets[e + 1] += offsets[e];
  std::vector<int32_t> next(offsets, offsets + experts);
  for (int64_t i = 0; i < tokens * k; ++i) {
    int32_t p = next[size_t(chosen[i])]++;
    order[p] = int32_t(i);
    position[i] = p;
  }
}

void CpuKernels::moeGather(DevicePtr xPtr, DevicePtr orderPtr, int64_t tokens,
                           int64_t k, int64_t hidden, DevicePtr outPtr) {
  const float *x = xPtr.f32();
  const int32_t *order = orderPtr.i32();
  float *out = outPtr.f32();
  for (int64_t p = 0; p < tokens * k; ++p)
    std::copy_n(x + int64_t(order[p] / k) * hidden, hidden, out + p * hidden);
}

void CpuKernels::moeCombine(DevicePtr rowsPtr, DevicePtr positionPtr,
                            DevicePtr weightsPtr, int64_t tokens, int64_t k,
                            int64_t hidden, DevicePtr yPtr) {
  const float *rows = rowsPtr.f32();
  const int32_t *position = positionPtr.i32();
  const float *weights = weightsPtr ? weightsPtr.f32() : nullptr;
  float *y = yPtr.f32();
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t j = 0; j < k; ++j) {
      const float *row = rows + int64_t(position[t * k + j]) * hidden;
      float w = weights ? weights[t * k + j] : 1.0f;
      for (int64_t c = 0; c < hidden; ++c)
        y[t * hidden + c] += w * row[c];
    }
}

void CpuKernels::moeCombineBackward(DevicePtr rowsPtr, DevicePtr positionPtr,
                                    DevicePtr weightsPtr, DevicePtr dyPtr,
                                    int64_t tokens, int64_t k, int64_t hidden,
                                    DevicePtr drowsPtr, DevicePtr dweightsPtr) {
  const float *rows = rowsPtr.f32(), *weights = weightsPtr.f32(),
              *dy = dyPtr.f32();
  const int32_t *position = positionPtr.i32();
  float *drows = drowsPtr.f32(), *dweights = dweightsPtr.f32();
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t j = 0; j < k; ++j) {
      int64_t p = position[t * k + j];
      const float *row = rows + p * hidden, *g = dy + t * hidden;
      float w = weights[t * k + j];
      double dot = 0;
      for (int64_t c = 0; c < hidden; ++c) {
        drows[p * hidden + c] = w * g[c];
        dot += double(row[c]) * g[c];
      }
      dweights[t * k + j] = float(dot);
    }
}

// The grouped GEMM: one threaded gemm per expert over its contiguous rows
// (the "one BLAS call per expert on sorted tokens"); the offsets
// are host memory here.
void CpuKernels::groupedGemm(bool transB, int64_t groups, DevicePtr offsets,
                             int64_t rows, int64_t n, int64_t k, DevicePtr a,
                             int64_t lda, DevicePtr b, int64_t ldb,
                             int64_t bStride, float beta, DevicePtr c,
                             int64_t ldc) {
  runGroupedGemm(*this, offsets.i32(), transB, groups, n, k, a, lda, b, ldb,
                 bStride, beta, c, ldc);
}

void CpuKernels::groupedGemmWeights(int64_t groups, DevicePtr offsets,
                                    int64_t rows, int64_t m, int64_t n,
                                    DevicePtr a, int64_t lda, DevicePtr b,
                                    int64_t ldb, float beta, DevicePtr c,
                                    int64_t cStride) {
  runGroupedGemmWeights(*this, offsets.i32(), groups, m, n, a, lda, b, ldb,
                        beta, c, cStride);
}

void CpuKernels::gateRowsForward(DevicePtr zPtr, DevicePtr sPtr, int64_t tokens,
                                 int64_t hidden, DevicePtr gPtr,
                                 DevicePtr yPtr) {
  const float *z = zPtr.f32(), *s = sPtr.f32();
  float *g = gPtr.f32(), *y = yPtr.f32();
  for (int64_t t = 0; t < tokens; ++t) {
    float gate = float(1.0 / (1.0 + std::exp(-double(z[t]))));
    g[t] = gate;
    for (int64_t c = 0; c < hidden; ++c)
      y[t * hidden + c] += gate * s[t * hidden + c];
  }
}

void CpuKernels::gateRowsBackward(DevicePtr gPtr, DevicePtr sPtr,
                                  DevicePtr dyPtr, int64_t tokens,
                                  int64_t hidden, DevicePtr dsPtr,
                                  DevicePtr dzPtr) {
  const float *g = gPtr.f32(), *s = sPtr.f32(), *dy = dyPtr.f32();
  float *ds = dsPtr.f32(), *dz = dzPtr.f32();
  for (int64_t t = 0; t < tokens; ++t) {
    double dot = 0;
    for (int64_t c = 0; c < hidden; ++c) {
      ds[t * hidden + c] = g[t] * dy[t * hidden + c];
      dot += double(s[t * hidden + c]) * dy[t * hidden + c];
    }
    dz[t] = float(dot * g[t] * (1.0 - g[t]));
  }
}

} // namespace sluice::rt
