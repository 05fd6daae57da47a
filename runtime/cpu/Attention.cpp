//===- Attention.cpp - Rotary positions and attention on the host ---------===//
//
// Rotary positions and causal (optionally windowed, soft-capped,
// grouped-query) attention over a token slice with its context, keeping
// the log-sum-exp for the backward: per head, blocks of queries through
// OpenBLAS GEMMs (scores, context, and in B the four products of
// FlashAttention's backward), the softmax between them row by row.
//
//===----------------------------------------------------------------------===//

#include "CpuKernels.h"
#include "Threads.h"
#include "VectorMath.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace sluice::rt {

void CpuKernels::rotate(DevicePtr xPtr, int64_t rows, int64_t tokens,
                        int64_t offset, int64_t heads, int64_t headDim,
                        int64_t stride, const Rotary &rotary, bool inverse) {
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
      // YaRN scales the rotation (its transpose alike: the gradient).
      float c = float(std::cos(angle) * rotary.magnitude);
      float sn = float((inverse ? -std::sin(angle) : std::sin(angle)) *
                       rotary.magnitude);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t h = 0; h < heads; ++h) {
          float *v = x + (r * tokens + t) * stride + h * headDim;
          float a = v[i], b = v[i + half];
          v[i] = a * c - b * sn;
          v[i + half] = b * c + a * sn;
        }
    }
}

namespace {

/// Queries attend in blocks of this many (Dao et al., 2022,
/// "FlashAttention", section 3.1, tiles the queries alike): a block's
/// scores against every key it may see come from one GEMM and fit the
/// caches, its context from a second.
constexpr int64_t kQueryBlock = 64;

/// One (sequence row, query head)'s operands within a slice, and the block
/// of queries [first, first + count) with the keys [keyFirst, keyEnd) any
/// of them sees.
struct HeadBlock {
  int64_t row, head, first, count, keyFirst, width;
  // Element offsets of the block's first query, key, context row and
  // value (values and the context have the value heads' size).
  int64_t qAt, kvAt, cAt, vAt;
};

HeadBlock getBlock(const AttentionShape &s, int64_t r, int64_t h,
                   int64_t first) {
  const int64_t hd = s.heads * s.headDim, kvw = s.kvHeads * s.headDim;
  HeadBlock b;
  b.row = r;
  b.head = h;
  b.first = first;
  b.count = std::min(kQueryBlock, s.tokens - first);
  // The first query sees the earliest key (a window only moves forward);
  // the last the latest. Under a key block both are clipped to it, and
  // the block's queries may see none (width 0).
  b.keyFirst = s.getVisibleKeys(s.offset + first).first;
  b.width = std::max<int64_t>(
      0, std::min(s.offset + first + b.count, s.getKeyEnd()) - b.keyFirst);
  b.qAt = (r * s.tokens + first) * hd + h * s.headDim;
  // Keys are stored from keyBegin on (0 for a cache).
  int64_t key = r * s.seqLen + b.keyFirst - s.keyBegin;
  b.kvAt = key * kvw + (h / (s.heads / s.kvHeads)) * s.headDim;
  const int64_t dv = s.getValueDim();
  b.cAt = (r * s.tokens + first) * s.heads * dv + h * dv;
  b.vAt = key * s.kvHeads * dv + (h / (s.heads / s.kvHeads)) * dv;
  return b;
}

/// scores = scale * Q_block K^T, [count, width].
void getScores(const AttentionShape &s, const HeadBlock &b, const float *q,
               const float *keys, float *scores) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(b.count),
              int(b.width), int(s.headDim), getAttentionScale(s), q + b.qAt,
              int(s.heads * s.headDim), keys + b.kvAt,
              int(s.kvHeads * s.headDim), 0.0f, scores, int(b.width));
}

/// The keys query i of the block sees, as columns [begin, end) of its
/// scores.
std::pair<int64_t, int64_t> getVisible(const AttentionShape &s,
                                       const HeadBlock &b, int64_t i) {
  auto [first, end] = s.getVisibleKeys(s.offset + b.first + i);
  // None seen (a key block past a window's end, or in the query's future):
  // an empty range inside the block's columns.
  int64_t begin = std::clamp<int64_t>(first - b.keyFirst, 0, b.width);
  return {begin, std::clamp<int64_t>(end - b.keyFirst, begin, b.width)};
}

/// The longest row of scores a block of queries may have.
int64_t getScoreRoom(const AttentionShape &s) {
  return kQueryBlock * (s.isKeyBlock() ? s.keyCount : s.offset + s.tokens);
}

} // namespace

void CpuKernels::attentionForward(const AttentionShape &s, DevicePtr qPtr,
                                  DevicePtr keysPtr, DevicePtr valuesPtr,
                                  DevicePtr lsePtr, DevicePtr contextPtr) {
  const float *q = qPtr.f32(), *keys = keysPtr.f32(), *values = valuesPtr.f32();
  float *lse = lsePtr.f32(), *context = contextPtr.f32();
  const float cap = s.softcap;
  // (row, head) pairs over the kernel threads: each writes its own context
  // columns and statistics.
  cpu::SerialBlas serial;
  cpu::parallelFor(s.rows * s.heads, 1, [&](int64_t from, int64_t to) {
    std::vector<float> p(getScoreRoom(s));
    const int64_t dv = s.getValueDim();
    for (int64_t pair = from; pair < to; ++pair) {
      int64_t r = pair / s.heads, h = pair % s.heads;
      for (int64_t first = 0; first < s.tokens; first += kQueryBlock) {
        HeadBlock b = getBlock(s, r, h, first);
        if (b.width == 0) {
          // A key block none of these queries sees: nothing to fold in.
          for (int64_t i = 0; i < b.count; ++i) {
            lse[(r * s.heads + h) * s.tokens + first + i] = -INFINITY;
            std::fill_n(context + b.cAt + i * s.heads * dv, dv, 0.0f);
          }
          continue;
        }
        getScores(s, b, q, keys, p.data());
        // Each query's softmax over the keys it sees (causal, windowed),
        // the others zero; its log-sum-exp kept for B.
        for (int64_t i = 0; i < b.count; ++i) {
          float *pi = p.data() + i * b.width;
          auto [begin, end] = getVisible(s, b, i);
          float maxScore = -INFINITY;
          for (int64_t j = begin; j < end; ++j) {
            if (cap > 0)
              pi[j] = cap * std::tanh(pi[j] / cap);
            maxScore = std::max(maxScore, pi[j]);
          }
          cpu::expShifted(pi + begin, pi + begin, end - begin, maxScore);
          double sum = 0;
          for (int64_t j = begin; j < end; ++j)
            sum += pi[j];
          std::fill(pi, pi + begin, 0.0f);
          std::fill(pi + end, pi + b.width, 0.0f);
          for (int64_t j = begin; j < end; ++j)
            pi[j] = float(pi[j] / sum);
          // (A query that sees no key of a block: -inf, weighing 0.)
          lse[(r * s.heads + h) * s.tokens + first + i] =
              end > begin ? float(double(maxScore) + std::log(sum))
                          : -INFINITY;
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(b.count),
                    int(dv), int(b.width), 1.0f, p.data(), int(b.width),
                    values + b.vAt, int(s.kvHeads * dv), 0.0f,
                    context + b.cAt, int(s.heads * dv));
      }
    }
  });
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
  const int hd = int(s.heads * s.headDim), kvw = int(s.kvHeads * s.headDim);
  const int d = int(s.headDim), dv = int(s.getValueDim());
  const int cw = int(s.heads * dv), vw = int(s.kvHeads * dv);
  const float scale = getAttentionScale(s), cap = s.softcap;
  const int64_t room = getScoreRoom(s);
  // (row, key/value head) pairs over the kernel threads: a pair's query
  // heads add into its keys' and values' gradients, in the order one
  // thread takes them (the same sums with any thread count).
  const int64_t group = s.heads / s.kvHeads;
  cpu::SerialBlas serial;
  cpu::parallelFor(s.rows * s.kvHeads, 1, [&](int64_t from, int64_t to) {
    std::vector<float> p(room), ds(room);
    for (int64_t pair = from; pair < to; ++pair) {
      int64_t r = pair / s.kvHeads, kv = pair % s.kvHeads;
      for (int64_t h = kv * group; h < (kv + 1) * group; ++h)
        for (int64_t first = 0; first < s.tokens; first += kQueryBlock) {
          HeadBlock b = getBlock(s, r, h, first);
          const int n = int(b.count), w = int(b.width);
          if (w == 0) {
            // No key of the block: no gradient for these queries from it.
            if (!s.accumulateQueries)
              for (int64_t i = 0; i < n; ++i)
                std::fill_n(dq + b.qAt + i * hd, d, 0.0f);
            continue;
          }
          // FlashAttention's backward: P = exp(S - lse) from the kept
          // log-sum-exp; dP = dctx V^T; D = dctx . ctx = sum_j P_j dP_j.
          getScores(s, b, q, keys, p.data());
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, w, dv, 1.0f,
                      dcontext + b.cAt, cw, values + b.vAt, vw, 0.0f,
                      ds.data(), w);
          for (int64_t i = 0; i < b.count; ++i) {
            float *pi = p.data() + i * w, *dsi = ds.data() + i * w;
            auto [begin, end] = getVisible(s, b, i);
            double logSum = lse[(r * s.heads + h) * s.tokens + first + i];
            const float *dci = dcontext + b.cAt + i * cw,
                        *ci = context + b.cAt + i * cw;
            double weighted = 0;
            for (int64_t e = 0; e < dv; ++e)
              weighted += double(dci[e]) * ci[e];
            if (cap > 0) {
              for (int64_t j = begin; j < end; ++j) {
                // The cap's derivative, 1 - tanh^2, scales the score's
                // gradient.
                float t = std::tanh(pi[j] / cap);
                float slope = 1.0f - t * t;
                pi[j] = float(std::exp(double(cap * t) - logSum));
                // The softmax's backward, then the scores' scale.
                dsi[j] = pi[j] * float(dsi[j] - weighted) * slope * scale;
              }
            } else {
              // The same without a cap, the exponentials through the
              // vector expf (scalar double exp was 6% of a Llama step).
              cpu::expShifted(pi + begin, pi + begin, end - begin,
                              float(logSum));
              for (int64_t j = begin; j < end; ++j)
                dsi[j] = pi[j] * float(dsi[j] - weighted) * scale;
            }
            for (float *m : {pi, dsi}) {
              std::fill(m, m + begin, 0.0f);
              std::fill(m + end, m + w, 0.0f);
            }
          }
          // dQ = dS K; a group's query heads all add into their key/value
          // head's dK += dS^T Q and dV += P^T dctx.
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, d, w, 1.0f,
                      ds.data(), w, keys + b.kvAt, kvw,
                      s.accumulateQueries ? 1.0f : 0.0f, dq + b.qAt, hd);
          cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, w, d, n, 1.0f,
                      ds.data(), w, q + b.qAt, hd, 1.0f, dkeys + b.kvAt, kvw);
          cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, w, dv, n, 1.0f,
                      p.data(), w, dcontext + b.cAt, cw, 1.0f, dvalues + b.vAt,
                      vw);
        }
    }
  });
}

void CpuKernels::attentionMerge(const AttentionShape &s, DevicePtr lsePtr,
                                DevicePtr contextPtr, DevicePtr blockLsePtr,
                                DevicePtr blockContextPtr) {
  float *lse = lsePtr.f32(), *context = contextPtr.f32();
  const float *blockLse = blockLsePtr.f32(),
              *blockContext = blockContextPtr.f32();
  const int64_t dv = s.getValueDim();
  for (int64_t r = 0; r < s.rows; ++r)
    for (int64_t h = 0; h < s.heads; ++h)
      for (int64_t t = 0; t < s.tokens; ++t) {
        int64_t at = (r * s.heads + h) * s.tokens + t;
        double a = lse[at], b = blockLse[at];
        if (b == -INFINITY)
          continue; // the block adds nothing
        double most = std::max(a, b);
        double wa = a == -INFINITY ? 0.0 : std::exp(a - most),
               wb = std::exp(b - most), sum = wa + wb;
        float *c = context + ((r * s.tokens + t) * s.heads + h) * dv;
        const float *bc =
            blockContext + ((r * s.tokens + t) * s.heads + h) * dv;
        for (int64_t e = 0; e < dv; ++e)
          c[e] = float((wa * c[e] + wb * bc[e]) / sum);
        lse[at] = float(most + std::log(sum));
      }
}

} // namespace sluice::rt
