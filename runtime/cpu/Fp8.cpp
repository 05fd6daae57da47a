//===- Fp8.cpp - FP8 GEMMs and delayed scaling on the host ----------------===//
//
// The fp8 precision's GEMMs, emulated: each operand is scaled, rounded to
// its FP8 format (DType.h roundToFp8, the CUDA conversion's rounding) and
// kept as fp32 values, and OpenBLAS multiplies those. Every product of two
// FP8 values is exact in fp32 and the sums accumulate in fp32, as an FP8
// tensor-core GEMM's do, so the CPU computes the GPU's function (up to
// the order of the sums). This is for correctness and for measuring FP8's
// loss against bf16 anywhere; it is not faster than the fp32 GEMM.
//
// Delayed scaling follows Transformer Engine's recipe (its DelayedScaling:
// amax history, scale from max(history), margin 0) with two changes: the
// scales are powers of two (getFp8Scale), so that dequantizing is exact
// and the product's 1 / (s_A s_B) loses nothing; and the
// history advanced once per training step rather than per call, so that
// every schedule of a step quantizes with the same scales and a pipelined
// run repeats the single-device one.
//
//===----------------------------------------------------------------------===//

#include "CpuKernels.h"
#include "Threads.h"

#include <cmath>
#include <vector>

namespace sluice::rt {

namespace {

/// Copies the stored rows x cols matrix (leading dimension ld) into `out`
/// (contiguous) quantized by `operand`'s scale and multiplied back by its
/// inverse (exact: a power of two), and folds its amax into the record.
void quantize(const float *x, int64_t rows, int64_t cols, int64_t ld,
              const Fp8Operand &operand, std::vector<float> &out) {
  float *record = operand.record.as<float>();
  float amax = 0.0f;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      float magnitude = std::fabs(x[r * ld + c]);
      // A NaN wins (and stays): the step's scales are not updated from it.
      if (!(magnitude <= amax))
        amax = magnitude;
    }
  if (!(amax <= record[1]))
    record[1] = amax;
  float scale = record[0];
  if (!(scale > 0.0f)) // no history yet: this operand's own amax
    scale = getFp8Scale(amax, operand.format);
  float inverse = 1.0f / scale;
  out.resize(size_t(rows * cols));
  float *q = out.data();
  cpu::parallelFor(rows, 64, [&](int64_t from, int64_t to) {
    for (int64_t r = from; r < to; ++r)
      for (int64_t c = 0; c < cols; ++c)
        q[r * cols + c] =
            roundToFp8(x[r * ld + c] * scale, operand.format) * inverse;
  });
}

} // namespace

void CpuKernels::gemmFp8(bool transA, bool transB, int64_t m, int64_t n,
                         int64_t k, float alpha, DevicePtr a, int64_t lda,
                         const Fp8Operand &qa, DevicePtr b, int64_t ldb,
                         const Fp8Operand &qb, float beta, DevicePtr c,
                         int64_t ldc) {
  // Scratch kept between calls: one thread drives a device's kernels.
  thread_local std::vector<float> first, second;
  int64_t aRows = transA ? k : m, aCols = transA ? m : k;
  int64_t bRows = transB ? n : k, bCols = transB ? k : n;
  quantize(a.f32(), aRows, aCols, lda, qa, first);
  quantize(b.f32(), bRows, bCols, ldb, qb, second);
  gemm(transA, transB, m, n, k, alpha, DevicePtr(first.data()), aCols,
       DevicePtr(second.data()), bCols, beta, c, ldc);
}

void CpuKernels::updateFp8Scales(DevicePtr records, int64_t count,
                                 bool trained) {
  for (int64_t i = 0; i < count; ++i) {
    float *record = records.f32() + i * kFp8RecordFloats;
    float largest = pushFp8Amax(record, trained);
    if (largest > 0.0f)
      record[0] = getFp8Scale(largest, record[2] == getFp8Max(Fp8Format::E4M3)
                                           ? Fp8Format::E4M3
                                           : Fp8Format::E5M2);
  }
}

} // namespace sluice::rt
