//===- Softmax.cpp - Cross-entropy and soft-capping on the host -----------===//
//
// The whole vocabulary's cross-entropy forward and backward, and the
// logits' soft-cap (Gemma-2).
//
//===----------------------------------------------------------------------===//

#include "CpuKernels.h"
#include "Threads.h"
#include "VectorMath.h"

#include <algorithm>
#include <cmath>

namespace sluice::rt {

void CpuKernels::softcap(DevicePtr xPtr, int64_t rows, int64_t cols, int64_t ld,
                         float cap) {
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

void CpuKernels::crossEntropyForward(DevicePtr logitsPtr, DevicePtr labelsPtr,
                                     int64_t stride, int64_t rows,
                                     int64_t length, int64_t vocab,
                                     DevicePtr lsePtr, DevicePtr loss) {
  const float *logits = logitsPtr.as<float>();
  const int32_t *labels = labelsPtr.as<int32_t>();
  float *lse = lsePtr.as<float>();
  // Each token's log-sum-exp on the kernel threads; the loss summed after,
  // in token order, on this one.
  cpu::parallelFor(rows * length, 1, [&](int64_t from, int64_t to) {
    for (int64_t row = from; row < to; ++row) {
      const float *z = logits + row * vocab;
      float maxLogit = *std::max_element(z, z + vocab);
      double sum = cpu::sumExpShifted(z, vocab, maxLogit);
      lse[row] = float(maxLogit + std::log(sum));
    }
  });
  double total = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t t = 0; t < length; ++t) {
      int64_t row = r * length + t;
      total += double(lse[row]) -
               double(logits[row * vocab + labels[r * stride + t]]);
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
  cpu::parallelFor(rows * length, 1, [&](int64_t from, int64_t to) {
    for (int64_t row = from; row < to; ++row) {
      float *d = dlogits + row * vocab;
      cpu::expShifted(logits + row * vocab, d, vocab, lse[row]);
      for (int64_t v = 0; v < vocab; ++v)
        d[v] *= scale;
      int64_t r = row / length, t = row % length;
      dlogits[row * vocab + labels[r * stride + t]] -= scale;
    }
  });
}

} // namespace sluice::rt
