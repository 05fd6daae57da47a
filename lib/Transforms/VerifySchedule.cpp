//===- VerifySchedule.cpp - Check programs against their model ------------===//

#include "sluice/Schedule/Verifier.h"
#include "sluice/Transforms/Passes.h"
#include "sluice/PipelineIR/PipelineIR.h"

namespace mlir::sluice {
#define GEN_PASS_DEF_VERIFYSCHEDULE
#include "sluice/Transforms/Passes.h.inc"
} // namespace mlir::sluice

using namespace mlir;
using namespace mlir::sluice;

LogicalResult mlir::sluice::verifySchedule(ProgramOp program) {
  FailureOr<ModelOp> model = getProgramModel(program);
  if (failed(model))
    return failure();
  FailureOr<sched::Pipeline> pipeline =
      getPipeline(*model, program.getMicrobatches(), program.getSlices());
  if (failed(pipeline))
    return failure();
  if (pipeline->devices != program.getDevices())
    return program.emitOpError("has ")
           << program.getDevices() << " devices, but model @"
           << model->getSymName() << " is placed on " << pipeline->devices;
  FailureOr<ProgramView> view = readProgram(program, *model);
  if (failed(view))
    return failure();
  std::optional<sched::Violation> violation =
      sched::verifyProgram(*pipeline, view->program);
  if (!violation)
    return success();
  InFlightDiagnostic diag =
      view->getOp(violation->at.device, violation->at.index)
          ->emitOpError(violation->message);
  if (violation->related)
    diag.attachNote(
        view->getOp(violation->related->device, violation->related->index)
            ->getLoc())
        << violation->relatedMessage;
  return failure();
}

namespace {
struct VerifySchedulePass
    : public mlir::sluice::impl::VerifyScheduleBase<VerifySchedulePass> {
  void runOnOperation() override {
    bool failedAny = false;
    for (ProgramOp program : getOperation().getOps<ProgramOp>())
      failedAny |= failed(verifySchedule(program));
    if (failedAny)
      signalPassFailure();
    markAllAnalysesPreserved();
  }
};
} // namespace
