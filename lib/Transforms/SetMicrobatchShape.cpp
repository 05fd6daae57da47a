//===- SetMicrobatchShape.cpp - Retype a model for a training shape -------===//

#include "sluice/Transforms/Passes.h"

#include "ForEachPass.h"

namespace mlir::sluice {
#define GEN_PASS_DEF_SETMICROBATCHSHAPE
#include "sluice/Transforms/Passes.h.inc"
} // namespace mlir::sluice

using namespace mlir;
using namespace mlir::sluice;

LogicalResult mlir::sluice::setMicrobatchShape(ModelOp model, int64_t seqLen,
                                               int64_t microBatch,
                                               StringRef dtype) {
  if (seqLen < 0)
    return model.emitOpError("cannot set 'seq_len' to ") << seqLen;
  if (microBatch < 0)
    return model.emitOpError("cannot set 'micro_batch' to ") << microBatch;
  Builder builder(model.getContext());
  if (seqLen && seqLen != model.getSeqLen()) {
    model.setSeqLenAttr(builder.getI64IntegerAttr(seqLen));
    // Slices chosen for the old length do not cut the new one.
    model.removeTokenSlicesAttr();
    model.removeSlicingAttr();
  }
  if (microBatch)
    model.setMicroBatchAttr(builder.getI64IntegerAttr(microBatch));
  if (!dtype.empty()) {
    // The two element types the runtime trains in (docs/precision.md).
    Type type = dtype == "bf16"  ? Type(builder.getBF16Type())
                : dtype == "f32" ? Type(builder.getF32Type())
                                 : Type();
    if (!type)
      return model.emitOpError("cannot set 'dtype' to '")
             << dtype << "' (expected bf16 or f32)";
    model.setDtypeAttr(TypeAttr::get(type));
  }

  // Every layer result except the scalar loss is an activation.
  RankedTensorType activation = model.getActivationType();
  for (Operation &op : model.getBody().front())
    if (isa<EmbeddingOp, TransformerLayerOp>(op))
      op.getResult(0).setType(activation);
  return success();
}

namespace {
struct SetMicrobatchShapePass
    : ForEachPass<ModelOp, SetMicrobatchShapePass,
                  mlir::sluice::impl::SetMicrobatchShapeBase> {
  using ForEachPass::ForEachPass;
  LogicalResult apply(ModelOp model) {
    return setMicrobatchShape(model, seqLen, microBatch, dtype);
  }
};
} // namespace
