//===- CpuKernels.cpp - fp32 kernels on the host with OpenBLAS ------------===//

#include "CpuKernels.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace sluice::rt {

namespace {
// sqrt(2 / pi), the GELU tanh approximation's constant.
constexpr float kGeluScale = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;
// 1 / sqrt(2) and 1 / sqrt(2 pi), of the exact GELU.
constexpr float kInvSqrt2 = 0.7071067811865476f;
constexpr float kInvSqrt2Pi = 0.3989422804014327f;
} // namespace

void CpuKernels::gemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
                      float alpha, DevicePtr aPtr, int64_t lda, DevicePtr bPtr,
                      int64_t ldb, float beta, DevicePtr cPtr, int64_t ldc) {
  const float *a = aPtr.as<float>();
  const float *b = bPtr.as<float>();
  float *c = cPtr.as<float>();
  cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
              transB ? CblasTrans : CblasNoTrans, int(m), int(n), int(k), alpha,
              a, int(lda), b, int(ldb), beta, c, int(ldc));
}

void CpuKernels::addRowVector(DevicePtr xPtr, DevicePtr vPtr, int64_t rows,
                              int64_t cols) {
  float *x = xPtr.as<float>();
  const float *v = vPtr.as<float>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      x[r * cols + c] += v[c];
}

void CpuKernels::accumulateColumnSums(DevicePtr xPtr, int64_t rows,
                                      int64_t cols, DevicePtr outPtr) {
  const float *x = xPtr.as<float>();
  float *out = outPtr.as<float>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      out[c] += x[r * cols + c];
}

void CpuKernels::add(DevicePtr yPtr, DevicePtr xPtr, int64_t n) {
  float *y = yPtr.as<float>();
  const float *x = xPtr.as<float>();
  for (int64_t i = 0; i < n; ++i)
    y[i] += x[i];
}

namespace {
/// Element i of a typed array, as double (the CPU backend converts through
/// double; bf16 is the upper half of an fp32).
double load(DevicePtr p, int64_t i) {
  switch (p.getType()) {
  case DType::F32:
    return p.as<float>()[i];
  case DType::F64:
    return p.as<double>()[i];
  case DType::I32:
    return p.as<int32_t>()[i];
  case DType::BF16: {
    uint32_t bits = uint32_t(p.as<uint16_t>()[i]) << 16;
    float value;
    std::memcpy(&value, &bits, sizeof(value));
    return value;
  }
  }
  return 0;
}

void store(DevicePtr p, int64_t i, double value) {
  switch (p.getType()) {
  case DType::F32:
    p.as<float>()[i] = float(value);
    return;
  case DType::F64:
    p.as<double>()[i] = value;
    return;
  case DType::I32:
    p.as<int32_t>()[i] = int32_t(value);
    return;
  case DType::BF16: {
    // Round to nearest even, as __float2bfloat16_rn does.
    float f = float(value);
    uint32_t bits;
    std::memcpy(&bits, &f, sizeof(bits));
    bits += 0x7fff + ((bits >> 16) & 1);
    p.as<uint16_t>()[i] = uint16_t(bits >> 16);
    return;
  }
  }
}
} // namespace

void CpuKernels::copy(DevicePtr y, DevicePtr x, int64_t n) {
  if (y.getType() == x.getType()) {
    std::memcpy(y.get(), x.get(), size_t(n * getSize(x.getType())));
    return;
  }
  for (int64_t i = 0; i < n; ++i)
    store(y, i, load(x, i));
}

void CpuKernels::fill(DevicePtr y, double value, int64_t n) {
  if (y.getType() == DType::F32) {
    std::fill(y.f32(), y.f32() + n, float(value));
    return;
  }
  for (int64_t i = 0; i < n; ++i)
    store(y, i, value);
}

void CpuKernels::copyStrided(DevicePtr dst, DevicePtr src,
                             const StridedCopy &c) {
  for (int64_t b = 0; b < c.batches; ++b)
    for (int64_t r = 0; r < c.rows; ++r)
      copy(dst + (b * c.dstBatch + r * c.dstRow),
           src + (b * c.srcBatch + r * c.srcRow), c.cols);
}

void CpuKernels::normForward(DevicePtr xPtr, DevicePtr gammaPtr,
                             DevicePtr betaPtr, int64_t rows, int64_t cols,
                             bool rms, float eps, DevicePtr yPtr,
                             DevicePtr xhatPtr, DevicePtr rstdPtr) {
  const float *x = xPtr.as<float>();
  const float *gamma = gammaPtr.as<float>();
  const float *beta = betaPtr.as<float>();
  float *y = yPtr.as<float>();
  float *xhat = xhatPtr.as<float>();
  float *rstd = rstdPtr.as<float>();
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
    float inv = float(1.0 / std::sqrt(var + double(eps)));
    rstd[r] = inv;
    for (int64_t c = 0; c < cols; ++c) {
      float h = float(xr[c] - mean) * inv;
      xhat[r * cols + c] = h;
      y[r * cols + c] = gamma[c] * h + (beta ? beta[c] : 0.0f);
    }
  }
}

void CpuKernels::normAffine(DevicePtr xhatPtr, DevicePtr gammaPtr,
                            DevicePtr betaPtr, int64_t rows, int64_t cols,
                            DevicePtr yPtr) {
  const float *xhat = xhatPtr.as<float>();
  const float *gamma = gammaPtr.as<float>();
  const float *beta = betaPtr.as<float>();
  float *y = yPtr.as<float>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      y[r * cols + c] = gamma[c] * xhat[r * cols + c] + (beta ? beta[c] : 0.0f);
}

void CpuKernels::normBackward(DevicePtr dyPtr, DevicePtr xhatPtr,
                              DevicePtr rstdPtr, DevicePtr gammaPtr,
                              int64_t rows, int64_t cols, bool rms,
                              DevicePtr dxPtr) {
  const float *dy = dyPtr.as<float>();
  const float *xhat = xhatPtr.as<float>();
  const float *rstd = rstdPtr.as<float>();
  const float *gamma = gammaPtr.as<float>();
  float *dx = dxPtr.as<float>();
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

void CpuKernels::normParamGrads(DevicePtr dyPtr, DevicePtr xhatPtr,
                                int64_t rows, int64_t cols, DevicePtr dgammaPtr,
                                DevicePtr dbetaPtr) {
  const float *dy = dyPtr.as<float>();
  const float *xhat = xhatPtr.as<float>();
  float *dgamma = dgammaPtr.as<float>();
  float *dbeta = dbetaPtr.as<float>();
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
  if (act == GateActivation::GeluErf) {
    // x * Phi(x); Phi'(x) is the normal density.
    float phi = 0.5f * (1.0f + std::erf(x * kInvSqrt2));
    value = x * phi;
    slope = phi + x * kInvSqrt2Pi * std::exp(-0.5f * x * x);
    return;
  }
  float inner = kGeluScale * (x + kGeluCubic * x * x * x);
  float t = std::tanh(inner);
  float dInner = kGeluScale * (1.0f + 3.0f * kGeluCubic * x * x);
  value = 0.5f * x * (1.0f + t);
  slope = 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * dInner;
}
} // namespace

void CpuKernels::geluForward(GateActivation act, DevicePtr uPtr, DevicePtr gPtr,
                             int64_t n) {
  const float *u = uPtr.as<float>();
  float *g = gPtr.as<float>();
  for (int64_t i = 0; i < n; ++i) {
    float slope;
    gate(act, u[i], g[i], slope);
  }
}

void CpuKernels::geluBackward(GateActivation act, DevicePtr uPtr,
                              DevicePtr dgPtr, DevicePtr duPtr, int64_t n) {
  const float *u = uPtr.as<float>();
  const float *dg = dgPtr.as<float>();
  float *du = duPtr.as<float>();
  for (int64_t i = 0; i < n; ++i) {
    float value, slope;
    gate(act, u[i], value, slope);
    du[i] = dg[i] * slope;
  }
}

void CpuKernels::gatedForward(GateActivation act, DevicePtr zPtr,
                              DevicePtr uPtr, DevicePtr gPtr, int64_t n) {
  const float *z = zPtr.as<float>();
  const float *u = uPtr.as<float>();
  float *g = gPtr.as<float>();
  for (int64_t i = 0; i < n; ++i) {
    float value, slope;
    gate(act, z[i], value, slope);
    g[i] = value * u[i];
  }
}

void CpuKernels::gatedBackward(GateActivation act, DevicePtr zPtr,
                               DevicePtr uPtr, DevicePtr dgPtr, DevicePtr dzPtr,
                               DevicePtr duPtr, int64_t n) {
  const float *z = zPtr.as<float>();
  const float *u = uPtr.as<float>();
  const float *dg = dgPtr.as<float>();
  float *dz = dzPtr.as<float>();
  float *du = duPtr.as<float>();
  for (int64_t i = 0; i < n; ++i) {
    float value, slope;
    gate(act, z[i], value, slope);
    dz[i] = dg[i] * u[i] * slope;
    du[i] = dg[i] * value;
  }
}

void CpuKernels::rotate(DevicePtr xPtr, int64_t rows, int64_t tokens,
                        int64_t offset, int64_t heads, int64_t headDim,
                        int64_t stride, const Rotary &rotary,
                        bool inverse) {
  float *x = xPtr.as<float>();
  const int64_t half = headDim / 2;
  std::vector<double> frequency(half);
  for (int64_t i = 0; i < half; ++i)
    frequency[i] = rotary.getFrequency(i, headDim);
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t i = 0; i < half; ++i) {
      // In double: positions reach 10^5 and the angle must stay exact
      // enough that every slice of a sequence sees the same rotation.
      double angle = double(offset + t) * frequency[i];
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

void CpuKernels::attentionForward(const AttentionShape &s, DevicePtr qPtr,
                                  DevicePtr keysPtr, DevicePtr valuesPtr,
                                  DevicePtr lsePtr, DevicePtr contextPtr) {
  const float *q = qPtr.f32(), *keys = keysPtr.f32(), *values = valuesPtr.f32();
  float *lse = lsePtr.f32(), *context = contextPtr.f32();
  const int64_t span = s.offset + s.tokens, hd = s.heads * s.headDim;
  const int64_t kvw = s.kvHeads * s.headDim, group = s.heads / s.kvHeads;
  const float scale = getAttentionScale(s), cap = s.softcap;
  std::vector<float> p(span);
  for (int64_t r = 0; r < s.rows; ++r)
    for (int64_t h = 0; h < s.heads; ++h)
      for (int64_t i = 0; i < s.tokens; ++i) {
        const int64_t kvAt = (h / group) * s.headDim;
        const float *qi = q + (r * s.tokens + i) * hd + h * s.headDim;
        // Causal: keys [first, offset + i], first 0 unless windowed.
        int64_t visible = s.offset + i + 1, first = s.getFirstKey(s.offset + i);
        float maxScore = -INFINITY;
        for (int64_t j = first; j < visible; ++j) {
          const float *kj = keys + (r * s.seqLen + j) * kvw + kvAt;
          float dot = 0;
          for (int64_t e = 0; e < s.headDim; ++e)
            dot += qi[e] * kj[e];
          p[j] = dot * scale;
          if (cap > 0)
            p[j] = cap * std::tanh(p[j] / cap);
          maxScore = std::max(maxScore, p[j]);
        }
        double sum = 0;
        for (int64_t j = first; j < visible; ++j) {
          p[j] = std::exp(p[j] - maxScore);
          sum += p[j];
        }
        for (int64_t j = first; j < visible; ++j)
          p[j] = float(p[j] / sum);
        lse[(r * s.heads + h) * s.tokens + i] =
            float(double(maxScore) + std::log(sum));
        float *ci = context + (r * s.tokens + i) * hd + h * s.headDim;
        std::fill(ci, ci + s.headDim, 0.0f);
        for (int64_t j = first; j < visible; ++j) {
          const float *vj = values + (r * s.seqLen + j) * kvw + kvAt;
          for (int64_t e = 0; e < s.headDim; ++e)
            ci[e] += p[j] * vj[e];
        }
      }
}

void CpuKernels::attentionBackward(const AttentionShape &s, DevicePtr qPtr,
                                   DevicePtr keysPtr, DevicePtr valuesPtr,
                                   DevicePtr contextPtr, DevicePtr lsePtr,
                                   DevicePtr dcontextPtr, DevicePtr dqPtr,
                                   DevicePtr dkeysPtr, DevicePtr dvaluesPtr) {
  const float *q = qPtr.f32(), *keys = keysPtr.f32(), *values = valuesPtr.f32(),
              *context = contextPtr.f32(), *lse = lsePtr.f32(),
              *dcontext = dcontextPtr.f32();
  float *dq = dqPtr.f32(), *dkeys = dkeysPtr.f32(), *dvalues = dvaluesPtr.f32();
  const int64_t span = s.offset + s.tokens, hd = s.heads * s.headDim;
  const int64_t kvw = s.kvHeads * s.headDim, group = s.heads / s.kvHeads;
  const float scale = getAttentionScale(s), cap = s.softcap;
  std::vector<float> p(span), slope(span, 1.0f);
  for (int64_t r = 0; r < s.rows; ++r)
    for (int64_t h = 0; h < s.heads; ++h)
      for (int64_t i = 0; i < s.tokens; ++i) {
        // A group's query heads all add into their key/value head's
        // gradients.
        const int64_t kvAt = (h / group) * s.headDim;
        int64_t row = r * s.tokens + i;
        const float *qi = q + row * hd + h * s.headDim;
        const float *dci = dcontext + row * hd + h * s.headDim;
        const float *ci = context + row * hd + h * s.headDim;
        float *dqi = dq + row * hd + h * s.headDim;
        int64_t visible = s.offset + i + 1, first = s.getFirstKey(s.offset + i);
        // FlashAttention's backward: P = exp(S - lse) from the kept
        // log-sum-exp, and D = dctx . ctx = sum_j P_j dP_j.
        double logSum = lse[(r * s.heads + h) * s.tokens + i];
        for (int64_t j = first; j < visible; ++j) {
          const float *kj = keys + (r * s.seqLen + j) * kvw + kvAt;
          float dot = 0;
          for (int64_t e = 0; e < s.headDim; ++e)
            dot += qi[e] * kj[e];
          float score = dot * scale;
          if (cap > 0) {
            // The cap's derivative, 1 - tanh^2, scales the score's
            // gradient.
            float t = std::tanh(score / cap);
            score = cap * t;
            slope[j] = 1.0f - t * t;
          }
          p[j] = float(std::exp(double(score) - logSum));
        }
        double weighted = 0;
        for (int64_t e = 0; e < s.headDim; ++e)
          weighted += double(dci[e]) * ci[e];
        // dP = dctx . V and dV += P dctx; softmax backward, then the
        // 1/sqrt(d) scale.
        std::fill(dqi, dqi + s.headDim, 0.0f);
        for (int64_t j = first; j < visible; ++j) {
          const float *vj = values + (r * s.seqLen + j) * kvw + kvAt;
          float *dvj = dvalues + (r * s.seqLen + j) * kvw + kvAt;
          float dot = 0;
          for (int64_t e = 0; e < s.headDim; ++e) {
            dot += dci[e] * vj[e];
            dvj[e] += p[j] * dci[e];
          }
          float ds = p[j] * float(dot - weighted) * slope[j] * scale;
          const float *kj = keys + (r * s.seqLen + j) * kvw + kvAt;
          float *dkj = dkeys + (r * s.seqLen + j) * kvw + kvAt;
          for (int64_t e = 0; e < s.headDim; ++e) {
            dqi[e] += ds * kj[e];
            dkj[e] += ds * qi[e];
          }
        }
      }
}

void CpuKernels::embeddingForward(DevicePtr tokensPtr, int64_t stride,
                                  DevicePtr tablePtr, DevicePtr positionsPtr,
                                  int64_t rows, int64_t length, int64_t offset,
                                  int64_t hidden, DevicePtr outPtr) {
  const int32_t *tokens = tokensPtr.as<int32_t>();
  const float *table = tablePtr.as<float>();
  const float *positions = positionsPtr.as<float>();
  float *out = outPtr.as<float>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t t = 0; t < length; ++t) {
      const float *row = table + int64_t(tokens[r * stride + t]) * hidden;
      float *o = out + (r * length + t) * hidden;
      for (int64_t c = 0; c < hidden; ++c)
        o[c] = row[c] + (positions ? positions[(offset + t) * hidden + c] : 0);
    }
}

void CpuKernels::softcap(DevicePtr xPtr, int64_t rows, int64_t cols,
                         int64_t ld, float cap) {
  float *x = xPtr.as<float>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      x[r * ld + c] = cap * std::tanh(x[r * ld + c] / cap);
}

void CpuKernels::softcapGrad(DevicePtr cappedPtr, DevicePtr gradPtr,
                             int64_t rows, int64_t cols, int64_t ld,
                             float cap) {
  const float *capped = cappedPtr.as<float>();
  float *grad = gradPtr.as<float>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      float t = capped[r * ld + c] / cap;
      grad[r * ld + c] *= 1.0f - t * t;
    }
}

void CpuKernels::scale(DevicePtr yPtr, float factor, int64_t n) {
  float *y = yPtr.as<float>();
  for (int64_t i = 0; i < n; ++i)
    y[i] *= factor;
}

void CpuKernels::zeroTokenRows(DevicePtr tokensPtr, int64_t stride,
                               int64_t rows, int64_t length, int32_t token,
                               int64_t hidden, DevicePtr xPtr) {
  const int32_t *tokens = tokensPtr.as<int32_t>();
  float *x = xPtr.as<float>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t t = 0; t < length; ++t)
      if (tokens[r * stride + t] == token)
        std::fill_n(x + (r * length + t) * hidden, hidden, 0.0f);
}

void CpuKernels::embeddingBackward(DevicePtr tokensPtr, int64_t stride,
                                   DevicePtr doutPtr, int64_t rows,
                                   int64_t length, int64_t offset,
                                   int64_t hidden, DevicePtr dtablePtr,
                                   DevicePtr dpositionsPtr) {
  const int32_t *tokens = tokensPtr.as<int32_t>();
  const float *dout = doutPtr.as<float>();
  float *dtable = dtablePtr.as<float>();
  float *dpositions = dpositionsPtr.as<float>();
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

void CpuKernels::crossEntropyForward(DevicePtr logitsPtr, DevicePtr labelsPtr,
                                     int64_t stride, int64_t rows,
                                     int64_t length, int64_t vocab,
                                     DevicePtr lsePtr, DevicePtr loss) {
  const float *logits = logitsPtr.as<float>();
  const int32_t *labels = labelsPtr.as<int32_t>();
  float *lse = lsePtr.as<float>();
  double total = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t t = 0; t < length; ++t) {
      int64_t row = r * length + t;
      const float *z = logits + row * vocab;
      float maxLogit = *std::max_element(z, z + vocab);
      double sum = 0;
      for (int64_t v = 0; v < vocab; ++v)
        sum += std::exp(double(z[v] - maxLogit));
      lse[row] = float(maxLogit + std::log(sum));
      total += double(lse[row]) - double(z[labels[r * stride + t]]);
    }
  *loss.as<double>() += total;
}

void CpuKernels::crossEntropyBackward(DevicePtr logitsPtr, DevicePtr lsePtr,
                                      DevicePtr labelsPtr, int64_t stride,
                                      int64_t rows, int64_t length,
                                      int64_t vocab, float scale,
                                      DevicePtr dlogitsPtr) {
  const float *logits = logitsPtr.as<float>();
  const float *lse = lsePtr.as<float>();
  const int32_t *labels = labelsPtr.as<int32_t>();
  float *dlogits = dlogitsPtr.as<float>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t t = 0; t < length; ++t) {
      int64_t row = r * length + t;
      for (int64_t v = 0; v < vocab; ++v)
        dlogits[row * vocab + v] =
            std::exp(logits[row * vocab + v] - lse[row]) * scale;
      dlogits[row * vocab + labels[r * stride + t]] -= scale;
    }
}

void CpuKernels::sumSquares(DevicePtr xPtr, int64_t rows, int64_t cols,
                            int64_t stride, double weight, DevicePtr out) {
  const float *x = xPtr.as<float>();
  double sum = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      double e = x[r * stride + c];
      sum += e * e;
    }
  *out.as<double>() += weight * sum;
}

void CpuKernels::adamUpdate(DevicePtr wPtr, DevicePtr gPtr, DevicePtr mPtr,
                            DevicePtr vPtr, int64_t n, const AdamConfig &c,
                            int64_t step, DevicePtr working) {
  float *w = wPtr.as<float>();
  const float *g = gPtr.as<float>();
  float *m = mPtr.as<float>();
  float *v = vPtr.as<float>();
  double correction1 = 1.0 - std::pow(double(c.beta1), double(step));
  double correction2 = 1.0 - std::pow(double(c.beta2), double(step));
  for (int64_t i = 0; i < n; ++i) {
    float grad = g[i] * c.gradientScale;
    m[i] = c.beta1 * m[i] + (1.0f - c.beta1) * grad;
    v[i] = c.beta2 * v[i] + (1.0f - c.beta2) * grad * grad;
    double mHat = m[i] / correction1, vHat = v[i] / correction2;
    w[i] -= float(c.learningRate * (mHat / (std::sqrt(vHat) + c.epsilon) +
                                    c.weightDecay * w[i]));
  }
  if (working && working.get() != wPtr.get())
    copy(working, wPtr, n);
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

void CpuKernels::shardLookup(DevicePtr tokensPtr, int64_t stride, int64_t rows,
                             int64_t length, DevicePtr tablePtr, int64_t first,
                             int64_t count, int64_t hidden, DevicePtr outPtr) {
  const int32_t *tokens = tokensPtr.as<int32_t>();
  const float *table = tablePtr.as<float>();
  float *out = outPtr.as<float>();
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

void CpuKernels::shardScatterAdd(DevicePtr tokensPtr, int64_t stride,
                                 int64_t rows, int64_t length,
                                 DevicePtr doutPtr, int64_t first,
                                 int64_t count, int64_t hidden,
                                 DevicePtr dtablePtr) {
  const int32_t *tokens = tokensPtr.as<int32_t>();
  const float *dout = doutPtr.as<float>();
  float *dtable = dtablePtr.as<float>();
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

void CpuKernels::shardSoftmaxStatistics(DevicePtr logitsPtr, int64_t tokens,
                                        int64_t count, int64_t ld,
                                        DevicePtr referencePtr,
                                        DevicePtr maxPtr, DevicePtr sumPtr,
                                        DevicePtr probsPtr) {
  const float *logits = logitsPtr.as<float>();
  const float *reference = referencePtr.as<float>();
  float *max = maxPtr.as<float>();
  float *sum = sumPtr.as<float>();
  float *probs = probsPtr.as<float>();
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

void CpuKernels::rescaleSum(DevicePtr sumPtr, DevicePtr localMaxPtr,
                            DevicePtr globalMaxPtr, int64_t tokens,
                            DevicePtr scaledPtr) {
  const float *sum = sumPtr.as<float>();
  const float *localMax = localMaxPtr.as<float>();
  const float *globalMax = globalMaxPtr.as<float>();
  float *scaled = scaledPtr.as<float>();
  for (int64_t t = 0; t < tokens; ++t)
    // A shard without rows has sum 0 and max -inf: it contributes 0.
    scaled[t] = sum[t] == 0.0f
                    ? 0.0f
                    : float(double(sum[t]) * std::exp(double(localMax[t]) -
                                                      double(globalMax[t])));
}

void CpuKernels::scaleRows(DevicePtr xPtr, DevicePtr factorPtr,
                           DevicePtr divisorPtr, int64_t tokens, int64_t count,
                           int64_t ld) {
  float *x = xPtr.as<float>();
  const float *factor = factorPtr.as<float>();
  const float *divisor = divisorPtr.as<float>();
  for (int64_t t = 0; t < tokens; ++t) {
    float f = float(double(factor[t]) / double(divisor[t]));
    for (int64_t v = 0; v < count; ++v)
      x[t * ld + v] *= f;
  }
}

void CpuKernels::shardLoss(DevicePtr logitsPtr, DevicePtr labelsPtr,
                           int64_t stride, int64_t rows, int64_t length,
                           int64_t first, int64_t count, int64_t ld,
                           DevicePtr maxPtr, DevicePtr sumPtr, DevicePtr loss) {
  const float *logits = logitsPtr.as<float>();
  const int32_t *labels = labelsPtr.as<int32_t>();
  const float *max = maxPtr.as<float>();
  const float *sum = sumPtr.as<float>();
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
  *loss.as<double>() += total;
}

void CpuKernels::shardSoftmaxGrad(DevicePtr probsPtr, DevicePtr labelsPtr,
                                  int64_t stride, int64_t rows, int64_t length,
                                  int64_t first, int64_t count, int64_t ld,
                                  float scale) {
  float *probs = probsPtr.as<float>();
  const int32_t *labels = labelsPtr.as<int32_t>();
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

void CpuKernels::labelRows(DevicePtr labelsPtr, int64_t stride, int64_t rows,
                           int64_t length, DevicePtr tablePtr, int64_t first,
                           int64_t count, int64_t hidden, DevicePtr outPtr) {
  const int32_t *labels = labelsPtr.as<int32_t>();
  const float *table = tablePtr.as<float>();
  float *out = outPtr.as<float>();
  shardLookup(labels, stride, rows, length, table, first, count, hidden, out);
}

void CpuKernels::combineGrad(DevicePtr aPtr, DevicePtr bPtr,
                             DevicePtr scaledPtr, DevicePtr sumPtr,
                             int64_t tokens, int64_t hidden, float scale,
                             DevicePtr outPtr) {
  const float *a = aPtr.as<float>();
  const float *b = bPtr.as<float>();
  const float *scaled = scaledPtr.as<float>();
  const float *sum = sumPtr.as<float>();
  float *out = outPtr.as<float>();
  for (int64_t t = 0; t < tokens; ++t) {
    float f = float(double(scaled[t]) / double(sum[t]));
    for (int64_t c = 0; c < hidden; ++c)
      out[t * hidden + c] = scale * (a[t * hidden + c] * f - b[t * hidden + c]);
  }
}

} // namespace sluice::rt
