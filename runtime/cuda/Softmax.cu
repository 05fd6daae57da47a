//===- Softmax.cu - Cross-entropy and sharded-softmax launchers -----------===//

#include "CudaKernels.h"
#include "Softmax.cuh"

namespace sluice::rt::cuda {

void CudaKernels::crossEntropyForward(DevicePtr logits, DevicePtr labels,
                                      int64_t stride, int64_t rows,
                                      int64_t length, int64_t vocab,
                                      DevicePtr lse, DevicePtr loss) {
  int64_t tokens = rows * length;
  if (tokens == 0)
    return;
  SLUICE_DISPATCH_ACT(
      logits.getType(), T,
      crossEntropyForwardKernel<<<unsigned(tokens), kThreads, 0, stream>>>(
          logits.as<T>(), labels.i32(), stride, length, vocab, lse.f32(),
          loss.as<double>()));
  SLUICE_LAUNCHED(errors);
}

void CudaKernels::crossEntropyBackward(DevicePtr logits, DevicePtr lse,
                                       DevicePtr labels, int64_t stride,
                                       int64_t rows, int64_t length,
                                       int64_t vocab, float scale,
                                       DevicePtr dlogits) {
  int64_t tokens = rows * length;
  if (tokens == 0)
    return;
  // Both are the activation type (Layout.h); a mismatch is a caller's bug.
  if (logits.getType() != dlogits.getType()) {
    SLUICE_CUDA_RECORD(errors, cudaErrorInvalidValue);
    return;
  }
  SLUICE_DISPATCH_ACT(
      dlogits.getType(), T,
      crossEntropyBackwardKernel<<<unsigned(tokens), kThreads, 0, stream>>>(
          logits.as<T>(), lse.f32(), labels.i32(), stride, length, vocab,
          scale, dlogits.as<T>()));
  SLUICE_LAUNCHED(errors);
}

void CudaKernels::shardSoftmaxStatistics(DevicePtr logits, int64_t tokens,
                                         int64_t count, int64_t ld,
                                         DevicePtr reference, DevicePtr max,
                                         DevicePtr sum, DevicePtr probs) {
  if (tokens == 0)
    return;
  // Without probabilities the type is moot: use the fp32 instance.
  SLUICE_DISPATCH_ACT(
      probs ? probs.getType() : DType::F32, T,
      shardStatisticsKernel<<<unsigned(tokens), kThreads, 0, stream>>>(
          logits.f32(), count, ld, reference.f32(), max.f32(), sum.f32(),
          probs.as<T>()));
  SLUICE_LAUNCHED(errors);
}

void CudaKernels::rescaleSum(DevicePtr sum, DevicePtr localMax,
                             DevicePtr globalMax, int64_t tokens,
                             DevicePtr scaled) {
  rescaleSumKernel<<<gridFor(tokens), kThreads, 0, stream>>>(
      sum.f32(), localMax.f32(), globalMax.f32(), tokens, scaled.f32());
  SLUICE_LAUNCHED(errors);
}

void CudaKernels::scaleRows(DevicePtr x, DevicePtr factor, DevicePtr divisor,
                            int64_t tokens, int64_t count, int64_t ld) {
  int64_t n = tokens * count;
  if (n == 0)
    return;
  SLUICE_DISPATCH_ACT(
      x.getType(), T,
      scaleRowsKernel<<<gridFor(n), kThreads, 0, stream>>>(
          x.as<T>(), factor.f32(), divisor.f32(), tokens, count, ld));
  SLUICE_LAUNCHED(errors);
}

void CudaKernels::shardLoss(DevicePtr logits, DevicePtr labels, int64_t stride,
                            int64_t rows, int64_t length, int64_t first,
                            int64_t count, int64_t ld, DevicePtr max,
                            DevicePtr sum, DevicePtr loss) {
  shardLossKernel<<<gridFor(rows * length), kThreads, 0, stream>>>(
      logits.f32(), labels.i32(), stride, rows, length, first, count, ld,
      max.f32(), sum.f32(), loss.as<double>());
  SLUICE_LAUNCHED(errors);
}

void CudaKernels::shardSoftmaxGrad(DevicePtr probs, DevicePtr labels,
                                   int64_t stride, int64_t rows, int64_t length,
                                   int64_t first, int64_t count, int64_t ld,
                                   float scale) {
  int64_t n = rows * length * count;
  if (n == 0)
    return;
  SLUICE_DISPATCH_ACT(
      probs.getType(), T,
      shardSoftmaxGradKernel<<<gridFor(n), kThreads, 0, stream>>>(
          probs.as<T>(), labels.i32(), stride, rows, length, first, count, ld,
          scale));
  SLUICE_LAUNCHED(errors);
}

void CudaKernels::combineGrad(DevicePtr a, DevicePtr b, DevicePtr scaled,
                              DevicePtr sum, int64_t tokens, int64_t hidden,
                              float scale, DevicePtr out) {
  int64_t n = tokens * hidden;
  SLUICE_DISPATCH_ACT(out.getType(), T,
                      combineGradKernel<<<gridFor(n), kThreads, 0, stream>>>(
                          a.as<T>(), b.as<T>(), scaled.f32(), sum.f32(), tokens,
                          hidden, scale, out.as<T>()));
  SLUICE_LAUNCHED(errors);
}

} // namespace sluice::rt::cuda
