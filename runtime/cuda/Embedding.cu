//===- Embedding.cu - Embedding launchers ---------------------------------===//

#include "CudaKernels.h"
#include "Embedding.cuh"

namespace sluice::rt::cuda {

void CudaKernels::embeddingForward(DevicePtr tokens, int64_t stride,
                                   DevicePtr table, DevicePtr positions,
                                   int64_t rows, int64_t length, int64_t offset,
                                   int64_t hidden, DevicePtr out) {
  int64_t n = rows * length * hidden;
  SLUICE_DISPATCH_ACT(
      out.getType(), T,
      embeddingForwardKernel<<<gridFor(n), kThreads, 0, stream>>>(
          tokens.i32(), stride, table.as<T>(), positions.as<T>(), rows, length,
          offset, hidden, out.as<T>()));
  SLUICE_LAUNCHED(errors);
}

void CudaKernels::embeddingBackward(DevicePtr tokens, int64_t stride,
                                    DevicePtr dout, int64_t rows,
                                    int64_t length, int64_t offset,
                                    int64_t hidden, DevicePtr dtable,
                                    DevicePtr dpositions) {
  int64_t n = rows * length * hidden;
  SLUICE_DISPATCH_ACT(
      dout.getType(), T,
      embeddingBackwardKernel<<<gridFor(n), kThreads, 0, stream>>>(
          tokens.i32(), stride, dout.as<T>(), rows, length, offset, hidden,
          dtable.f32(), dpositions.f32()));
  SLUICE_LAUNCHED(errors);
}

void CudaKernels::shardLookup(DevicePtr tokens, int64_t stride, int64_t rows,
                              int64_t length, DevicePtr table, int64_t first,
                              int64_t count, int64_t hidden, DevicePtr out) {
  int64_t n = rows * length * hidden;
  SLUICE_DISPATCH_ACT(out.getType(), T,
                      shardLookupKernel<<<gridFor(n), kThreads, 0, stream>>>(
                          tokens.i32(), stride, rows, length, table.as<T>(),
                          first, count, hidden, out.as<T>()));
  SLUICE_LAUNCHED(errors);
}

void CudaKernels::shardScatterAdd(DevicePtr tokens, int64_t stride,
                                  int64_t rows, int64_t length, DevicePtr dout,
                                  int64_t first, int64_t count, int64_t hidden,
                                  DevicePtr dtable) {
  int64_t n = rows * length * hidden;
  SLUICE_DISPATCH_ACT(
      dout.getType(), T,
      shardScatterAddKernel<<<gridFor(n), kThreads, 0, stream>>>(
          tokens.i32(), stride, rows, length, dout.as<T>(), first, count,
          hidden, dtable.f32()));
  SLUICE_LAUNCHED(errors);
}

void CudaKernels::labelRows(DevicePtr labels, int64_t stride, int64_t rows,
                            int64_t length, DevicePtr table, int64_t first,
                            int64_t count, int64_t hidden, DevicePtr out) {
  // Equation 6's B = G W picks the label's row: a lookup by label.
  shardLookup(labels, stride, rows, length, table, first, count, hidden, out);
}

} // namespace sluice::rt::cuda
