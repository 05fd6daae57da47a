//===- SetMicrobatchShape.cpp - Retype a model for a training shape -------===//

#include "sluice/Transforms/Passes.h"

namespace mlir::sluice {
#define GEN_PASS_DEF_SETMICROBATCHSHAPE
#include "sluice/Transforms/Passes.h.inc"
} // namespace mlir::sluice

using namespace mlir;
using namespace mlir::sluice;

LogicalResult mlir::sluice::setMicrobatchShape(ModelOp model, int64_t seqLen,
                                               int64_t microBatch) {
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

  // Every layer result except the scalar loss is an activation.
  RankedTensorType activation = model.getActivationType();
  for (Operation &op : model.getBody().front())
    if (isa<EmbeddingOp, TransformerLayerOp>(op))
      op.getResult(0).setType(activation);
  return success();
}

namespace {
struct SetMicrobatchShapePass
    : public sluice::impl::SetMicrobatchShapeBase<SetMicrobatchShapePass> {
  using Base::Base;

  void runOnOperation() override {
    for (ModelOp model : getOperation().getOps<ModelOp>())
      if (failed(setMicrobatchShape(model, seqLen, microBatch)))
        return signalPassFailure();
  }
};
} // namespace
