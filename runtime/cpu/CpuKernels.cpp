//===- CpuKernels.cpp - The CPU backend's kernels: GEMM, copies, adds -----===//
//
// GEMMs through OpenBLAS; the element-wise adds, copies (converting element
// types through double) and fills. The other op families are the files
// beside this one, as the CUDA backend splits its kernels: Norm, Activation,
// Attention, Embedding, Softmax, Vocabulary, Adam.
//
//===----------------------------------------------------------------------===//

#include "CpuKernels.h"
#include "Threads.h"

#include <cblas.h>

#include <algorithm>
#include <cstring>

namespace sluice::rt {

namespace {
/// Output rows or columns of a part of a split GEMM come in multiples of
/// this (OpenBLAS's kernels' widest tile), and a part of fewer
/// multiply-adds than kGemmGrain is not worth a thread.
constexpr int64_t kGemmTile = 16;
constexpr int64_t kGemmGrain = int64_t(1) << 22;
} // namespace

// A GEMM splits its output over the kernel threads, each part one
// single-threaded OpenBLAS call, rather than through OpenBLAS's own
// threads: those spin (sched_yield) for a while after each call, and on a
// rank's share of the cores they took the cores from the kernel threads'
// norms, attention and AdamW in between (12% of a 2-thread Llama step in
// sched_yield). One pool of sleeping threads serves both; OpenBLAS stays
// at one thread (cpu::setThreads).
void CpuKernels::gemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
                      float alpha, DevicePtr aPtr, int64_t lda, DevicePtr bPtr,
                      int64_t ldb, float beta, DevicePtr cPtr, int64_t ldc) {
  const float *a = aPtr.as<float>();
  const float *b = bPtr.as<float>();
  float *c = cPtr.as<float>();
  auto part = [&](int64_t row, int64_t rows, int64_t col, int64_t cols) {
    // Row r of op(A) is A's row r, or its column r when transposed;
    // column j of op(B) likewise.
    const float *ap = transA ? a + row : a + row * lda;
    const float *bp = transB ? b + col * ldb : b + col;
    cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
                transB ? CblasTrans : CblasNoTrans, int(rows), int(cols),
                int(k), alpha, ap, int(lda), bp, int(ldb), beta,
                c + row * ldc + col, int(ldc));
  };
  // Split the longer side of C into tiles; parts of whole tiles.
  bool byRows = m >= n;
  int64_t side = byRows ? m : n;
  int64_t tiles = (side + kGemmTile - 1) / kGemmTile;
  int64_t work = std::max<int64_t>(m * n * k, 1);
  int64_t grain = std::max<int64_t>(1, tiles * kGemmGrain / work);
  cpu::parallelFor(tiles, grain, [&](int64_t from, int64_t to) {
    int64_t begin = from * kGemmTile, end = std::min(side, to * kGemmTile);
    if (begin >= end)
      return;
    if (byRows)
      part(begin, end - begin, 0, n);
    else
      part(0, m, begin, end - begin);
  });
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
  case DType::BF16:
    return bf16ToFloat(p.as<uint16_t>()[i]);
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
  case DType::BF16:
    p.as<uint16_t>()[i] = floatToBf16(float(value));
    return;
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

void CpuKernels::scale(DevicePtr yPtr, float factor, int64_t n) {
  float *y = yPtr.as<float>();
  for (int64_t i = 0; i < n; ++i)
    y[i] *= factor;
}

} // namespace sluice::rt
