//===- Embedding.cpp - Token embeddings on the host -----------------------===//
//
// The lookup of token rows and learned positions, its gradient, and the
// padding token's rows zeroed.
//
//===----------------------------------------------------------------------===//

#include "CpuKernels.h"

#include <algorithm>

namespace sluice::rt {

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

} // namespace sluice::rt
