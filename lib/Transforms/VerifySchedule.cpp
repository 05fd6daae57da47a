//===- VerifySchedule.cpp - Check programs against their model ------------===//

#include "sluice/PipelineIR/PipelineIR.h"
#include "sluice/Schedule/Verifier.h"
#include "sluice/Transforms/Passes.h"

namespace mlir::sluice {
#define GEN_PASS_DEF_VERIFYSCHEDULE
#include "sluice/Transforms/Passes.h.inc"
} // namespace mlir::sluice

using namespace mlir;
using namespace mlir::sluice;

LogicalResult mlir::sluice::verifySchedule(ProgramOp program,
                                           ProgramView *read) {
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
  if (!violation) {
    if (read)
      *read = std::move(*view);
    return success();
  }
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
    for (ProgramOp program : getOperation().getOps<ProgramOp>()) {
      ProgramView view;
      if (failed(verifySchedule(program, &view))) {
        failedAny = true;
        continue;
      }
      // The verdict, so that a check says what it found; the module itself
      // goes to the output as from any pass (-o /dev/null drops it). The
      // instructions as they run: repeat blocks run out, gradient syncs
      // (which the view leaves out) counted.
      size_t instructions = 0;
      for (const std::vector<sched::Instr> &device : view.program.devices)
        instructions += device.size();
      program.walk([&](GradSyncOp) { ++instructions; });
      // On the location, not the op: an op's diagnostic carries the whole
      // op printed after it (tens of thousands of lines for a program).
      mlir::emitRemark(program.getLoc(), "verified: ")
          << instructions << " instructions of schedule '"
          << stringifyScheduleKind(program.getSchedule()) << "' on "
          << program.getDevices()
          << " devices run every pass once, in order, without deadlock";
    }
    if (failedAny)
      signalPassFailure();
    markAllAnalysesPreserved();
  }
};
} // namespace
