//===- CpuKernels.cpp - fp32 kernels on the host with OpenBLAS ------------===//

#include "CpuKernels.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace sluice::rt {

namespace {
constexpr float kNormEpsilon = 1e-5f;
// sqrt(2 / pi), the GELU tanh approximation's constant.
constexpr float kGeluScale = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;
} // namespace

void CpuKernels::gemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
                      float alpha, const float *a, int64_t lda, const float *b,
                      int64_t ldb, float beta, float *c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
              transB ? CblasTrans : CblasNoTrans, int(m), int(n), int(k), alpha,
              a, int(lda), b, int(ldb), beta, c, int(ldc));
}

void CpuKernels::addRowVector(float *x, const float *v, int64_t rows,
                              int64_t cols) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      x[r * cols + c] += v[c];
}

void CpuKernels::accumulateColumnSums(const float *x, int64_t rows,
                                      int64_t cols, float *out) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      out[c] += x[r * cols + c];
}

void CpuKernels::add(float *y, const float *x, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    y[i] += x[i];
}

void CpuKernels::copy(float *y, const float *x, int64_t n) {
  std::copy(x, x + n, y);
}

void CpuKernels::fill(float *y, float value, int64_t n) {
  std::fill(y, y + n, value);
}

void CpuKernels::normForward(const float *x, const float *gamma,
                             const float *beta, int64_t rows, int64_t cols,
                             bool rms, float *y, float *xhat, float *rstd) {
  for (int64_t r = 0; r < rows; ++r) {
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
    float inv = float(1.0 / std::sqrt(var + kNormEpsilon));
    rstd[r] = inv;
    for (int64_t c = 0; c < cols; ++c) {
      float h = float(xr[c] - mean) * inv;
      xhat[r * cols + c] = h;
      y[r * cols + c] = gamma[c] * h + (beta ? beta[c] : 0.0f);
    }
  }
}

void CpuKernels::normAffine(const float *xhat, const float *gamma,
                            const float *beta, int64_t rows, int64_t cols,
                            float *y) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      y[r * cols + c] = gamma[c] * xhat[r * cols + c] + (beta ? beta[c] : 0.0f);
}

void CpuKernels::normBackward(const float *dy, const float *xhat,
                              const float *rstd, const float *gamma,
                              int64_t rows, int64_t cols, bool rms, float *dx) {
  // With g = dy * gamma: dx = rstd * (g - mean(g) - xhat * mean(g * xhat));
  // RMS norm has no mean term.
  for (int64_t r = 0; r < rows; ++r) {
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
}

void CpuKernels::normParamGrads(const float *dy, const float *xhat,
                                int64_t rows, int64_t cols, float *dgamma,
                                float *dbeta) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      dgamma[c] += dy[r * cols + c] * xhat[r * cols + c];
      if (dbeta)
        dbeta[c] += dy[r * cols + c];
    }
}

namespace {
/// act(x) and act'(x) of a gate.
inline void gate(GateActivation act, float x, float &value, float &slope) {
  if (act == GateActivation::Silu) {
    float sigmoid = 1.0f / (1.0f + std::exp(-x));
    value = x * sigmoid;
    slope = sigmoid * (1.0f + x * (1.0f - sigmoid));
    return;
  }
  float inner = kGeluScale * (x + kGeluCubic * x * x * x);
  float t = std::tanh(inner);
  float dInner = kGeluScale * (1.0f + 3.0f * kGeluCubic * x * x);
  value = 0.5f * x * (1.0f + t);
  slope = 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * dInner;
}
} // namespace

void CpuKernels::geluForward(const float *u, float *g, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    float slope;
    gate(GateActivation::Gelu, u[i], g[i], slope);
  }
}

void CpuKernels::geluBackward(const float *u, const float *dg, float *du,
                              int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    float value, slope;
    gate(GateActivation::Gelu, u[i], value, slope);
    du[i] = dg[i] * slope;
  }
}

void CpuKernels::gatedForward(GateActivation act, const float *z,
                              const float *u, float *g, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    float value, slope;
    gate(act, z[i], value, slope);
    g[i] = value * u[i];
  }
}

void CpuKernels::gatedBackward(GateActivation act, const float *z,
                               const float *u, const float *dg, float *dz,
                               float *du, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    float value, slope;
    gate(act, z[i], value, slope);
    dz[i] = dg[i] * u[i] * slope;
    du[i] = dg[i] * value;
  }
}

void CpuKernels::rotate(float *x, int64_t rows, int64_t tokens, int64_t offset,
                        int64_t heads, int64_t headDim, int64_t stride,
                        double theta, bool inverse) {
  const int64_t half = headDim / 2;
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t i = 0; i < half; ++i) {
      // In double: positions reach 10^5 and the angle must stay exact
      // enough that every slice of a sequence sees the same rotation.
      double angle =
          double(offset + t) * std::pow(theta, -2.0 * double(i) / headDim);
      float c = float(std::cos(angle));
      float sn = float(inverse ? -std::sin(angle) : std::sin(angle));
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t h = 0; h < heads; ++h) {
          float *v = x + (r * tokens + t) * stride + h * headDim;
          float a = v[i], b = v[i + half];
          v[i] = a * c - b * sn;
          v[i + half] = b * c + a * sn;
        }
    }
}

void CpuKernels::attentionForward(const AttentionShape &s, const float *q,
                                  const float *keys, const float *values,
                                  float *probs, float *context) {
  const int64_t span = s.offset + s.tokens, hd = s.heads * s.headDim;
  const int64_t kvw = s.kvHeads * s.headDim, group = s.heads / s.kvHeads;
  const float scale = 1.0f / std::sqrt(float(s.headDim));
  for (int64_t r = 0; r < s.rows; ++r)
    for (int64_t h = 0; h < s.heads; ++h)
      for (int64_t i = 0; i < s.tokens; ++i) {
        const int64_t kvAt = (h / group) * s.headDim;
        const float *qi = q + (r * s.tokens + i) * hd + h * s.headDim;
        float *p = probs + ((r * s.heads + h) * s.tokens + i) * span;
        int64_t visible = s.offset + i + 1; // causal: keys [0, offset + i]
        float maxScore = -INFINITY;
        for (int64_t j = 0; j < visible; ++j) {
          const float *kj = keys + (r * s.seqLen + j) * kvw + kvAt;
          float dot = 0;
          for (int64_t e = 0; e < s.headDim; ++e)
            dot += qi[e] * kj[e];
          p[j] = dot * scale;
          maxScore = std::max(maxScore, p[j]);
        }
        double sum = 0;
        for (int64_t j = 0; j < visible; ++j) {
          p[j] = std::exp(p[j] - maxScore);
          sum += p[j];
        }
        for (int64_t j = 0; j < visible; ++j)
          p[j] = float(p[j] / sum);
        for (int64_t j = visible; j < span; ++j)
          p[j] = 0.0f;
        float *ci = context + (r * s.tokens + i) * hd + h * s.headDim;
        std::fill(ci, ci + s.headDim, 0.0f);
        for (int64_t j = 0; j < visible; ++j) {
          const float *vj = values + (r * s.seqLen + j) * kvw + kvAt;
          for (int64_t e = 0; e < s.headDim; ++e)
            ci[e] += p[j] * vj[e];
        }
      }
}

void CpuKernels::attentionBackward(const AttentionShape &s, const float *q,
                                   const float *keys, const float *values,
                                   const float *probs, const float *dcontext,
                                   float *dq, float *dkeys, float *dvalues) {
  const int64_t span = s.offset + s.tokens, hd = s.heads * s.headDim;
  const int64_t kvw = s.kvHeads * s.headDim, group = s.heads / s.kvHeads;
  const float scale = 1.0f / std::sqrt(float(s.headDim));
  std::vector<float> dp(span);
  for (int64_t r = 0; r < s.rows; ++r)
    for (int64_t h = 0; h < s.heads; ++h)
      for (int64_t i = 0; i < s.tokens; ++i) {
        // A group's query heads all add into their key/value head's
        // gradients.
        const int64_t kvAt = (h / group) * s.headDim;
        int64_t row = r * s.tokens + i;
        const float *qi = q + row * hd + h * s.headDim;
        const float *dci = dcontext + row * hd + h * s.headDim;
        const float *p = probs + ((r * s.heads + h) * s.tokens + i) * span;
        float *dqi = dq + row * hd + h * s.headDim;
        int64_t visible = s.offset + i + 1;
        // dP = dctx . V and dV += P dctx.
        double weighted = 0;
        for (int64_t j = 0; j < visible; ++j) {
          const float *vj = values + (r * s.seqLen + j) * kvw + kvAt;
          float *dvj = dvalues + (r * s.seqLen + j) * kvw + kvAt;
          float dot = 0;
          for (int64_t e = 0; e < s.headDim; ++e) {
            dot += dci[e] * vj[e];
            dvj[e] += p[j] * dci[e];
          }
          dp[j] = dot;
          weighted += double(p[j]) * dot;
        }
        // Softmax backward, then the 1/sqrt(d) scale.
        std::fill(dqi, dqi + s.headDim, 0.0f);
        for (int64_t j = 0; j < visible; ++j) {
          float ds = p[j] * float(dp[j] - weighted) * scale;
          const float *kj = keys + (r * s.seqLen + j) * kvw + kvAt;
          float *dkj = dkeys + (r * s.seqLen + j) * kvw + kvAt;
          for (int64_t e = 0; e < s.headDim; ++e) {
            dqi[e] += ds * kj[e];
            dkj[e] += ds * qi[e];
          }
        }
      }
}

void CpuKernels::embeddingForward(const int32_t *tokens, int64_t stride,
                                  const float *table, const float *positions,
                                  int64_t rows, int64_t length, int64_t offset,
                                  int64_t hidden, float *out) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t t = 0; t < length; ++t) {
      const float *row = table + int64_t(tokens[r * stride + t]) * hidden;
      float *o = out + (r * length + t) * hidden;
      for (int64_t c = 0; c < hidden; ++c)
        o[c] = row[c] + (positions ? positions[(offset + t) * hidden + c] : 0);
    }
}

void CpuKernels::embeddingBackward(const int32_t *tokens, int64_t stride,
                                   const float *dout, int64_t rows,
                                   int64_t length, int64_t offset,
                                   int64_t hidden, float *dtable,
                                   float *dpositions) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t t = 0; t < length; ++t) {
      float *row = dtable + int64_t(tokens[r * stride + t]) * hidden;
      const float *g = dout + (r * length + t) * hidden;
      for (int64_t c = 0; c < hidden; ++c) {
        row[c] += g[c];
        if (dpositions)
          dpositions[(offset + t) * hidden + c] += g[c];
      }
    }
}

double CpuKernels::crossEntropyForward(float *logits, const int32_t *labels,
                                       int64_t stride, int64_t rows,
                                       int64_t length, int64_t vocab) {
  double total = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t t = 0; t < length; ++t) {
      float *z = logits + (r * length + t) * vocab;
      float maxLogit = *std::max_element(z, z + vocab);
      double sum = 0;
      for (int64_t v = 0; v < vocab; ++v) {
        z[v] = std::exp(z[v] - maxLogit);
        sum += z[v];
      }
      for (int64_t v = 0; v < vocab; ++v)
        z[v] = float(z[v] / sum);
      total -= std::log(std::max(double(z[labels[r * stride + t]]), 1e-30));
    }
  return total;
}

void CpuKernels::crossEntropyBackward(const float *probs, const int32_t *labels,
                                      int64_t stride, int64_t rows,
                                      int64_t length, int64_t vocab,
                                      float scale, float *dlogits) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t t = 0; t < length; ++t) {
      int64_t row = r * length + t;
      for (int64_t v = 0; v < vocab; ++v)
        dlogits[row * vocab + v] = probs[row * vocab + v] * scale;
      dlogits[row * vocab + labels[r * stride + t]] -= scale;
    }
}

void CpuKernels::adamUpdate(float *w, const float *g, float *m, float *v,
                            int64_t n, const AdamConfig &c, int64_t step) {
  double correction1 = 1.0 - std::pow(double(c.beta1), double(step));
  double correction2 = 1.0 - std::pow(double(c.beta2), double(step));
  for (int64_t i = 0; i < n; ++i) {
    m[i] = c.beta1 * m[i] + (1.0f - c.beta1) * g[i];
    v[i] = c.beta2 * v[i] + (1.0f - c.beta2) * g[i] * g[i];
    double mHat = m[i] / correction1, vHat = v[i] / correction2;
    w[i] -= float(c.learningRate * (mHat / (std::sqrt(vHat) + c.epsilon) +
                                    c.weightDecay * w[i]));
  }
}

//===----------------------------------------------------------------------===//
// Vocabulary shards
//===----------------------------------------------------------------------===//

namespace {
/// The shard row of `token`, or -1 when another device holds it.
inline int64_t shardRow(int32_t token, int64_t first, int64_t count) {
  int64_t row = int64_t(token) - first;
  return row >= 0 && row < count ? row : -1;
}
} // namespace

void CpuKernels::shardLookup(const int32_t *tokens, int64_t stride,
                             int64_t rows, int64_t length, const float *table,
                             int64_t first, int64_t count, int64_t hidden,
                             float *out) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t t = 0; t < length; ++t) {
      float *dst = out + (r * length + t) * hidden;
      int64_t row = shardRow(tokens[r * stride + t], first, count);
      if (row < 0)
        std::fill(dst, dst + hidden, 0.0f);
      else
        std::copy(table + row * hidden, table + (row + 1) * hidden, dst);
    }
}

void CpuKernels::shardScatterAdd(const int32_t *tokens, int64_t stride,
                                 int64_t rows, int64_t length,
                                 const float *dout, int64_t first,
                                 int64_t count, int64_t hidden, float *dtable) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t t = 0; t < length; ++t) {
      int64_t row = shardRow(tokens[r * stride + t], first, count);
      if (row < 0)
        continue;
      const float *g = dout + (r * length + t) * hidden;
      float *dst = dtable + row * hidden;
      for (int64_t c = 0; c < hidden; ++c)
        dst[c] += g[c];
    }
}

void CpuKernels::shardSoftmaxStatistics(const float *logits, int64_t tokens,
                                        int64_t count, int64_t ld,
                                        const float *reference, float *max,
                                        float *sum, float *probs) {
  for (int64_t t = 0; t < tokens; ++t) {
    const float *z = logits + t * ld;
    float m = -INFINITY;
    for (int64_t v = 0; v < count; ++v)
      m = std::max(m, z[v]);
    if (max)
      max[t] = m;
    float ref = reference ? reference[t] : m;
    double s = 0;
    for (int64_t v = 0; v < count; ++v)
      s += std::exp(double(z[v]) - double(ref));
    sum[t] = float(s);
    if (probs)
      for (int64_t v = 0; v < count; ++v)
        probs[t * ld + v] = float(std::exp(double(z[v]) - double(ref)) / s);
  }
}

void CpuKernels::rescaleSum(const float *sum, const float *localMax,
                            const float *globalMax, int64_t tokens,
                            float *scaled) {
  for (int64_t t = 0; t < tokens; ++t)
    // A shard without rows has sum 0 and max -inf: it contributes 0.
    scaled[t] = sum[t] == 0.0f
                    ? 0.0f
                    : float(double(sum[t]) * std::exp(double(localMax[t]) -
                                                      double(globalMax[t])));
}

void CpuKernels::scaleRows(float *x, const float *factor, const float *divisor,
                           int64_t tokens, int64_t count, int64_t ld) {
  for (int64_t t = 0; t < tokens; ++t) {
    float f = float(double(factor[t]) / double(divisor[t]));
    for (int64_t v = 0; v < count; ++v)
      x[t * ld + v] *= f;
  }
}

double CpuKernels::shardLoss(const float *logits, const int32_t *labels,
                             int64_t stride, int64_t rows, int64_t length,
                             int64_t first, int64_t count, int64_t ld,
                             const float *max, const float *sum) {
  double total = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t t = 0; t < length; ++t) {
      int64_t row = shardRow(labels[r * stride + t], first, count);
      if (row < 0)
        continue;
      int64_t token = r * length + t;
      total += double(max[token]) + std::log(double(sum[token])) -
               double(logits[token * ld + row]);
    }
  return total;
}

void CpuKernels::shardSoftmaxGrad(float *probs, const int32_t *labels,
                                  int64_t stride, int64_t rows, int64_t length,
                                  int64_t first, int64_t count, int64_t ld,
                                  float scale) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t t = 0; t < length; ++t) {
      float *p = probs + (r * length + t) * ld;
      int64_t row = shardRow(labels[r * stride + t], first, count);
      if (row >= 0)
        p[row] -= 1.0f;
      for (int64_t v = 0; v < count; ++v)
        p[v] *= scale;
    }
}

void CpuKernels::labelRows(const int32_t *labels, int64_t stride, int64_t rows,
                           int64_t length, const float *table, int64_t first,
                           int64_t count, int64_t hidden, float *out) {
  shardLookup(labels, stride, rows, length, table, first, count, hidden, out);
}

void CpuKernels::combineGrad(const float *a, const float *b,
                             const float *scaled, const float *sum,
                             int64_t tokens, int64_t hidden, float scale,
                             float *out) {
  for (int64_t t = 0; t < tokens; ++t) {
    float f = float(double(scaled[t]) / double(sum[t]));
    for (int64_t c = 0; c < hidden; ++c)
      out[t * hidden + c] = scale * (a[t * hidden + c] * f - b[t * hidden + c]);
  }
}

} // namespace sluice::rt
