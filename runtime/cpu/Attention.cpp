//===- Attention.cpp - Rotary positions and attention on the host ---------===//
//
// Rotary positions and causal (optionally windowed, soft-capped,
// grouped-query) attention over a token slice with its context, keeping
// the log-sum-exp for the backward.
//
//===----------------------------------------------------------------------===//

#include "CpuKernels.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace sluice::rt {

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

} // namespace sluice::rt
