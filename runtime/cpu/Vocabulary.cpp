//===- Vocabulary.cpp - The vocabulary shards' kernels on the host --------===//
//
// The pieces of a vocabulary split over devices or shards (Yeung et al.,
// 2024; Megatron-LM's vocabulary-parallel layers): masked lookups and
// scatter-adds of a shard's rows, its softmax statistics, loss and
// gradient.
//
//===----------------------------------------------------------------------===//

#include "CpuKernels.h"

#include <algorithm>
#include <cmath>

namespace sluice::rt {

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
  // The labels' rows, as the lookup takes the tokens'.
  shardLookup(labelsPtr, stride, rows, length, tablePtr, first, count, hidden,
              outPtr);
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
