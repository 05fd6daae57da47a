//===- SplitPasses.cpp - Record each stage's passes and costs -------------===//

#include "sluice/Analysis/CostModel.h"
#include "sluice/Transforms/Passes.h"

#include "mlir/IR/Builders.h"

#include <cmath>

namespace mlir::sluice {
#define GEN_PASS_DEF_SPLITPASSES
#include "sluice/Transforms/Passes.h.inc"
} // namespace mlir::sluice

using namespace mlir;
using namespace mlir::sluice;

LogicalResult mlir::sluice::splitPasses(ModelOp model, bool split) {
  SmallVector<StageOp> stages = getStages(model);
  if (stages.empty())
    return model.emitOpError("is not partitioned into stages: run "
                             "sluice-partition-stages first");
  Builder builder(model.getContext());
  SmallVector<PassKind> kinds =
      split ? SmallVector<PassKind>{PassKind::F, PassKind::B, PassKind::W}
            : SmallVector<PassKind>{PassKind::F, PassKind::BW};
  for (StageOp stage : stages) {
    StageProfile profile = StageProfile::get(stage, model);
    SmallVector<Attribute> passes;
    SmallVector<int64_t> flops;
    for (PassKind kind : kinds) {
      passes.push_back(PassKindAttr::get(model.getContext(), kind));
      flops.push_back(static_cast<int64_t>(
          std::llround(profile.getPassFlops(kind, profile.seqLen, 0))));
    }
    stage.setPassesAttr(builder.getArrayAttr(passes));
    stage.setFlops(flops);
    stage.setActivationBytesAttr(builder.getI64IntegerAttr(
        static_cast<int64_t>(profile.getActivationBytes(profile.seqLen))));
  }
  return success();
}

namespace {
struct SplitPassesPass : public sluice::impl::SplitPassesBase<SplitPassesPass> {
  using Base::Base;

  void runOnOperation() override {
    for (ModelOp model : getOperation().getOps<ModelOp>())
      if (failed(splitPasses(model, split)))
        return signalPassFailure();
  }
};
} // namespace
