//===- Elementwise.cu - Element-wise launchers ----------------------------===//

#include "CudaKernels.h"
#include "Elementwise.cuh"

namespace sluice::rt::cuda {

void CudaKernels::softcap(DevicePtr x, int64_t rows, int64_t cols, int64_t ld,
                          float cap) {
  if (rows * cols <= 0)
    return;
  SLUICE_DISPATCH_ACT(x.getType(), T,
                      softcapKernel<<<gridFor(rows * cols), kThreads, 0,
                                      stream>>>(x.as<T>(), rows, cols, ld,
                                                cap));
  SLUICE_LAUNCHED(errors);
}

void CudaKernels::softcapGrad(DevicePtr capped, DevicePtr grad, int64_t rows,
                              int64_t cols, int64_t ld, float cap) {
  if (rows * cols <= 0)
    return;
  SLUICE_DISPATCH_ACT(grad.getType(), T,
                      softcapGradKernel<<<gridFor(rows * cols), kThreads, 0,
                                          stream>>>(capped.as<T>(),
                                                    grad.as<T>(), rows, cols,
                                                    ld, cap));
  SLUICE_LAUNCHED(errors);
}

void CudaKernels::scale(DevicePtr y, float factor, int64_t n) {
  if (n <= 0)
    return;
  SLUICE_DISPATCH_ACT(y.getType(), T,
                      scaleKernel<<<gridFor(n), kThreads, 0, stream>>>(
                          y.as<T>(), factor, n));
  SLUICE_LAUNCHED(errors);
}

void CudaKernels::zeroTokenRows(DevicePtr tokens, int64_t stride, int64_t rows,
                                int64_t length, int32_t token, int64_t hidden,
                                DevicePtr x) {
  int64_t n = rows * length * hidden;
  if (n <= 0)
    return;
  SLUICE_DISPATCH_ACT(x.getType(), T,
                      zeroTokenRowsKernel<<<gridFor(n), kThreads, 0, stream>>>(
                          tokens.as<int32_t>(), stride, length, token, hidden,
                          x.as<T>(), n));
  SLUICE_LAUNCHED(errors);
}

void CudaKernels::add(DevicePtr y, DevicePtr x, int64_t n) {
  // Mixed types occur: a sharded embedding adds its bf16 input gradient
  // into the f32 gradient of the learned positions.
  if (y.getType() == DType::BF16 && x.getType() == DType::BF16 &&
      canPack<bf16>(n, {y.get(), x.get()})) {
    addPackedKernel<<<gridFor(n / Pack<bf16>::kSize), kThreads, 0, stream>>>(
        y.as<bf16>(), x.as<bf16>(), n);
    SLUICE_LAUNCHED(errors);
    return;
  }
  SLUICE_DISPATCH_ACT(
      y.getType(), T,
      SLUICE_DISPATCH_ACT(x.getType(), X,
                          addKernel<<<gridFor(n), kThreads, 0, stream>>>(
                              y.as<T>(), x.as<X>(), n)));
  SLUICE_LAUNCHED(errors);
}

void CudaKernels::copy(DevicePtr y, DevicePtr x, int64_t n) {
  if (n <= 0)
    return;
  if (y.getType() == x.getType()) {
    SLUICE_CUDA_RECORD(errors,
                       cudaMemcpyAsync(y.get(), x.get(),
                                       size_t(n * getSize(x.getType())),
                                       cudaMemcpyDeviceToDevice, stream));
    return;
  }
  convertKernel<<<gridFor(n), kThreads, 0, stream>>>(y.get(), y.getType(),
                                                     x.get(), x.getType(), n);
  SLUICE_LAUNCHED(errors);
}

void CudaKernels::fill(DevicePtr y, double value, int64_t n) {
  if (n <= 0)
    return;
  if (value == 0.0) {
    // All-zero bits in every type: the copy engine's memset.
    SLUICE_CUDA_RECORD(
        errors,
        cudaMemsetAsync(y.get(), 0, size_t(n * getSize(y.getType())), stream));
    return;
  }
  fillKernel<<<gridFor(n), kThreads, 0, stream>>>(y.get(), y.getType(), value,
                                                  n);
  SLUICE_LAUNCHED(errors);
}

void CudaKernels::copyStrided(DevicePtr dst, DevicePtr src,
                              const StridedCopy &shape) {
  int64_t n = shape.batches * shape.rows * shape.cols;
  if (n <= 0)
    return;
  if (dst.getType() == src.getType() && shape.batches == 1) {
    // One 2-D copy: rows of `cols` elements, pitched.
    int64_t size = getSize(src.getType());
    SLUICE_CUDA_RECORD(
        errors, cudaMemcpy2DAsync(dst.get(), size_t(shape.dstRow * size),
                                  src.get(), size_t(shape.srcRow * size),
                                  size_t(shape.cols * size), size_t(shape.rows),
                                  cudaMemcpyDeviceToDevice, stream));
    return;
  }
  bool actTypes =
      (dst.getType() == DType::BF16 || dst.getType() == DType::F32) &&
      (src.getType() == DType::BF16 || src.getType() == DType::F32);
  if (actTypes && n / 4 < (int64_t(1) << 32) &&
      shape.rows < (int64_t(1) << 32) &&
      canQuad({{dst.get(), getSize(dst.getType())},
               {src.get(), getSize(src.getType())}},
              {shape.cols, shape.srcBatch, shape.srcRow, shape.dstBatch,
               shape.dstRow})) {
    auto quads = uint32_t(n / 4);
    SLUICE_DISPATCH_ACT(
        dst.getType(), D,
        SLUICE_DISPATCH_ACT(
            src.getType(), S,
            stridedQuadKernel<<<gridFor(quads), kThreads, 0, stream>>>(
                dst.as<D>(), src.as<S>(), shape, uint32_t(shape.cols / 4),
                uint32_t(shape.rows), quads)));
    SLUICE_LAUNCHED(errors);
    return;
  }
  stridedKernel<<<gridFor(n), kThreads, 0, stream>>>(
      dst.get(), dst.getType(), src.get(), src.getType(), shape);
  SLUICE_LAUNCHED(errors);
}

void CudaKernels::addRowVector(DevicePtr x, DevicePtr v, int64_t rows,
                               int64_t cols) {
  SLUICE_DISPATCH_ACT(
      x.getType(), T,
      SLUICE_DISPATCH_ACT(
          v.getType(), V,
          addRowVectorKernel<<<gridFor(rows * cols), kThreads, 0, stream>>>(
              x.as<T>(), v.as<V>(), rows, cols)));
  SLUICE_LAUNCHED(errors);
}

void CudaKernels::accumulateColumnSums(DevicePtr x, int64_t rows, int64_t cols,
                                       DevicePtr out) {
  if (rows <= 0 || cols <= 0)
    return;
  // Chunks of rows so that there are enough threads for a full GPU.
  const int64_t chunk = 64;
  dim3 grid(unsigned((cols + kThreads - 1) / kThreads),
            unsigned((rows + chunk - 1) / chunk));
  SLUICE_DISPATCH_ACT(x.getType(), T,
                      columnSumsKernel<<<grid, kThreads, 0, stream>>>(
                          x.as<T>(), rows, cols, chunk, out.f32()));
  SLUICE_LAUNCHED(errors);
}

void CudaKernels::geluForward(GateActivation act, DevicePtr u, DevicePtr g,
                              int64_t n) {
  SLUICE_DISPATCH_ACT(u.getType(), T,
                      geluForwardKernel<<<gridFor(n), kThreads, 0, stream>>>(
                          act, u.as<T>(), g.as<T>(), n));
  SLUICE_LAUNCHED(errors);
}

void CudaKernels::geluBackward(GateActivation act, DevicePtr u, DevicePtr dg,
                               DevicePtr du, int64_t n) {
  SLUICE_DISPATCH_ACT(u.getType(), T,
                      geluBackwardKernel<<<gridFor(n), kThreads, 0, stream>>>(
                          act, u.as<T>(), dg.as<T>(), du.as<T>(), n));
  SLUICE_LAUNCHED(errors);
}

void CudaKernels::gatedForward(GateActivation act, DevicePtr z, DevicePtr u,
                               DevicePtr g, int64_t n) {
  SLUICE_DISPATCH_ACT(z.getType(), T,
                      if (canPack<T>(n, {z.get(), u.get(), g.get()}))
                          gatedForwardKernel<T, true>
                      <<<gridFor(n / Pack<T>::kSize), kThreads, 0, stream>>>(
                          act, z.as<T>(), u.as<T>(), g.as<T>(), n);
                      else gatedForwardKernel<T, false>
                      <<<gridFor(n), kThreads, 0, stream>>>(
                          act, z.as<T>(), u.as<T>(), g.as<T>(), n));
  SLUICE_LAUNCHED(errors);
}

void CudaKernels::gatedBackward(GateActivation act, DevicePtr z, DevicePtr u,
                                DevicePtr dg, DevicePtr dz, DevicePtr du,
                                int64_t n) {
  SLUICE_DISPATCH_ACT(
      z.getType(), T,
      if (canPack<T>(n, {z.get(), u.get(), dg.get(), dz.get(), du.get()}))
          gatedBackwardKernel<T, true>
      <<<gridFor(n / Pack<T>::kSize), kThreads, 0, stream>>>(
          act, z.as<T>(), u.as<T>(), dg.as<T>(), dz.as<T>(), du.as<T>(), n);
      else gatedBackwardKernel<T, false><<<gridFor(n), kThreads, 0, stream>>>(
          act, z.as<T>(), u.as<T>(), dg.as<T>(), dz.as<T>(), du.as<T>(), n));
  SLUICE_LAUNCHED(errors);
}

void CudaKernels::rotate(DevicePtr x, int64_t rows, int64_t tokens,
                         int64_t offset, int64_t heads, int64_t headDim,
                         int64_t stride, const Rotary &rotary,
                         bool inverse) {
  int64_t n = rows * tokens * heads * (headDim / 2);
  if (n <= 0)
    return;
  const float2 *table = getRotaryTable(rotary, headDim, offset + tokens);
  if (!table)
    return;
  int64_t half = headDim / 2;
  if ((x.getType() == DType::BF16 || x.getType() == DType::F32) &&
      n / 4 < (int64_t(1) << 32) && offset + tokens < (int64_t(1) << 31) &&
      canQuad({{x.get(), getSize(x.getType())}}, {half, stride, headDim})) {
    auto quads = uint32_t(n / 4);
    SLUICE_DISPATCH_ACT(
        x.getType(), T,
        rotateQuadKernel<<<gridFor(quads), kThreads, 0, stream>>>(
            x.as<T>(), uint32_t(tokens), uint32_t(offset), uint32_t(heads),
            uint32_t(half), stride, uint32_t(headDim), table, inverse, quads));
    SLUICE_LAUNCHED(errors);
    return;
  }
  SLUICE_DISPATCH_ACT(x.getType(), T,
                      rotateKernel<<<gridFor(n), kThreads, 0, stream>>>(
                          x.as<T>(), rows, tokens, offset, heads, headDim,
                          stride, table, inverse));
  SLUICE_LAUNCHED(errors);
}

const float2 *CudaKernels::getRotaryTable(const Rotary &rotary,
                                          int64_t headDim, int64_t positions) {
  int64_t half = headDim / 2;
  RotaryTable *found = nullptr;
  for (RotaryTable &t : rotaryTables)
    if (t.rotary == rotary && t.headDim == headDim)
      found = &t;
  if (found && found->positions >= positions)
    return found->table;
  // Grow to a power of two (at least 4096 positions) so that a sequence
  // sees a few growths at most. The old table stays allocated: kernels
  // enqueued before may still read it.
  int64_t want = 4096;
  while (want < positions)
    want *= 2;
  float2 *table = nullptr;
  cudaError_t allocated =
      cudaMalloc(&table, size_t(want * half) * sizeof(float2) +
                             size_t(half) * sizeof(double));
  if (allocated != cudaSuccess) {
    SLUICE_CUDA_RECORD(errors, allocated);
    return nullptr;
  }
  retiredTables.push_back(table);
  // The frequencies from the one definition the CPU kernel uses too
  // (Rotary::getFrequency), behind the table; a blocking copy, so the
  // host vector may go.
  std::vector<double> frequency(half);
  for (int64_t i = 0; i < half; ++i)
    frequency[i] = rotary.getFrequency(i, headDim);
  auto *frequencies = reinterpret_cast<double *>(table + want * half);
  cudaError_t copied = cudaMemcpy(frequencies, frequency.data(),
                                  size_t(half) * sizeof(double),
                                  cudaMemcpyHostToDevice);
  if (copied != cudaSuccess) {
    SLUICE_CUDA_RECORD(errors, copied);
    return nullptr;
  }
  rotaryTableKernel<<<gridFor(want * half), kThreads, 0, stream>>>(
      table, 0, want, half, frequencies, rotary.magnitude);
  SLUICE_LAUNCHED(errors);
  if (!found) {
    rotaryTables.push_back({rotary, headDim, 0, nullptr});
    found = &rotaryTables.back();
  }
  found->positions = want;
  found->table = table;
  return table;
}

CudaKernels::~CudaKernels() {
  for (float2 *table : retiredTables)
    cudaFree(table);
  if (fp8Scratch)
    cudaFree(fp8Scratch);
  for (auto &[key, copy] : steadyCopies)
    if (copy.data)
      cudaFree(copy.data);
}

void CudaKernels::gemm(bool transA, bool transB, int64_t m, int64_t n,
                       int64_t k, float alpha, DevicePtr a, int64_t lda,
                       DevicePtr b, int64_t ldb, float beta, DevicePtr c,
                       int64_t ldc) {
  gemmEngine->run(stream, transA, transB, m, n, k, alpha, a, lda, b, ldb, beta,
                  c, ldc);
}

} // namespace sluice::rt::cuda
