//===- Attention.cu - Attention launchers ---------------------------------===//

#include "Attention.cuh"

#include <algorithm>
#include "CudaKernels.h"

namespace sluice::rt::cuda {

namespace {
bool checkShape(const AttentionShape &s, ErrorSink &errors) {
  int64_t largest = std::max(s.headDim, s.getValueDim());
  if (largest <= kMaxHeadDim)
    return true;
  errors.check(cudaErrorInvalidValue,
               ("attention: head size " + std::to_string(largest) +
                " exceeds the fallback kernel's " + std::to_string(kMaxHeadDim))
                   .c_str(),
               __FILE__, __LINE__);
  return false;
}
} // namespace

void CudaKernels::attentionForward(const AttentionShape &shape, DevicePtr q,
                                   DevicePtr keys, DevicePtr values,
                                   DevicePtr lse, DevicePtr context) {
  int64_t queries = shape.rows * shape.heads * shape.tokens;
  if (queries == 0)
    return;
  // cuDNN's graph has neither another scale, a cap, a window nor value
  // heads of another size: Gemma-2's scores, windowed slices and
  // DeepSeek's heads take the kernel below.
  bool plain = shape.scale == 0 && shape.softcap == 0 &&
               !shape.isWindowed() && shape.getValueDim() == shape.headDim &&
               !shape.isKeyBlock();
  if (plain && cudnn &&
      cudnn->forward(stream, shape, q, keys, values, lse, context))
    return;
  AttentionShape s = shape;
  s.scale = getAttentionScale(shape);
  if (!checkShape(s, errors))
    return;
  SLUICE_DISPATCH_ACT(q.getType(), T,
                      attentionForwardKernel<<<unsigned(queries),
                                               kAttentionThreads, 0, stream>>>(
                          s, q.as<T>(), keys.as<T>(), values.as<T>(), lse.f32(),
                          context.as<T>()));
  SLUICE_LAUNCHED(errors);
}

void CudaKernels::attentionBackward(const AttentionShape &shape, DevicePtr q,
                                    DevicePtr keys, DevicePtr values,
                                    DevicePtr context, DevicePtr lse,
                                    DevicePtr dcontext, DevicePtr dq,
                                    DevicePtr dkeys, DevicePtr dvalues) {
  int64_t queries = shape.rows * shape.heads * shape.tokens;
  if (queries == 0)
    return;
  AttentionShape s = shape;
  s.scale = getAttentionScale(shape);
  DevicePtr dk, dv;
  // (Nor key blocks, nor a dq summed over them: ring attention's.)
  bool plain = shape.scale == 0 && shape.softcap == 0 &&
               !shape.isWindowed() && shape.getValueDim() == shape.headDim &&
               !shape.isKeyBlock() && !shape.accumulateQueries;
  if (plain && cudnn &&
      cudnn->backward(stream, shape, q, keys, values, context, lse, dcontext,
                      dq, dk, dv)) {
    // cuDNN overwrites dK and dV; the runtime's accumulate over slices.
    int64_t span = s.offset + s.tokens, width = s.kvHeads * s.headDim;
    int64_t n = s.rows * span * width;
    for (auto [cache, scratch] : {std::pair{dkeys, dk}, std::pair{dvalues, dv}})
      addIntoCacheKernel<<<gridFor(n), kThreads, 0, stream>>>(
          cache.f32(), scratch.as<bf16>(), s.rows, span, s.seqLen, width);
    SLUICE_LAUNCHED(errors);
    return;
  }
  if (!checkShape(s, errors))
    return;
  SLUICE_DISPATCH_ACT(q.getType(), T,
                      attentionBackwardKernel<<<unsigned(queries),
                                                kAttentionThreads, 0, stream>>>(
                          s, q.as<T>(), keys.as<T>(), values.as<T>(),
                          context.as<T>(), lse.f32(), dcontext.as<T>(),
                          dq.as<T>(), dkeys.f32(), dvalues.f32()));
  SLUICE_LAUNCHED(errors);
}

void CudaKernels::attentionMerge(const AttentionShape &s, DevicePtr lse,
                                 DevicePtr context, DevicePtr blockLse,
                                 DevicePtr blockContext) {
  int64_t queries = s.rows * s.heads * s.tokens;
  if (queries == 0)
    return;
  int64_t n = queries * s.getValueDim();
  SLUICE_DISPATCH_ACT(context.getType(), T,
                      attentionMergeKernel<<<gridFor(n), kThreads, 0, stream>>>(
                          s, lse.f32(), context.as<T>(), blockLse.f32(),
                          blockContext.as<T>()));
  attentionMergeLseKernel<<<gridFor(queries), kThreads, 0, stream>>>(
      queries, lse.f32(), blockLse.f32());
  SLUICE_LAUNCHED(errors);
}

} // namespace sluice::rt::cuda
