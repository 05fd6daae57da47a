//===- Schedule.cpp - Build the program level -----------------------------===//

#include "sluice/Analysis/CostModel.h"
#include "sluice/PipelineIR/PipelineIR.h"
#include "sluice/Schedule/Schedules.h"
#include "sluice/Transforms/Passes.h"

#include "llvm/ADT/StringExtras.h"

namespace mlir::sluice {
#define GEN_PASS_DEF_SCHEDULE
#include "sluice/Transforms/Passes.h.inc"
} // namespace mlir::sluice

using namespace mlir;
using namespace mlir::sluice;

FailureOr<ProgramOp>
mlir::sluice::schedulePipeline(ModelOp model, const SchedulingOptions &opts) {
  const sched::ScheduleInfo *info = &sched::getSchedule(opts.schedule);
  if (opts.microbatches < 1)
    return model.emitOpError("cannot be scheduled with 'microbatches' = ")
           << opts.microbatches << ": it must be positive";
  int64_t slices = opts.slices;
  std::optional<ArrayRef<int64_t>> chosen = model.getTokenSlices();
  if (slices == 0)
    slices = chosen ? int64_t(chosen->size()) : 1;
  if (slices < 1 || slices > model.getSeqLen())
    return model.emitOpError("cannot be scheduled with 'slices' = ")
           << slices << ": it must be between 1 and the sequence length "
           << model.getSeqLen();
  if (chosen && int64_t(chosen->size()) != slices)
    return model.emitOpError("cannot be scheduled with 'slices' = ")
           << slices << ": its 'token_slices' cut each sequence into "
           << chosen->size() << " (sluice-slice-tokens)";
  std::string error;
  std::optional<CostModel> costs = CostModel::parse(opts.costs, error);
  if (!costs)
    return model.emitOpError("cannot be scheduled: ") << error;

  FailureOr<sched::Pipeline> pipeline =
      getPipeline(model, opts.microbatches, slices);
  if (failed(pipeline))
    return failure();
  std::string mismatch = sched::checkPipeline(*info, *pipeline);
  if (!mismatch.empty())
    return model.emitOpError("cannot be scheduled: ") << mismatch;

  PipelineCosts table(
      model, *pipeline, *costs,
      MeshShape{opts.tensorParallel, 1, 0, opts.sequenceParallel});
  std::string gap =
      costs->checkCoverage(table.getStages(), sched::getStagePasses(*pipeline));
  if (gap.empty())
    gap = table.getCalibrationError();
  if (!gap.empty())
    return model.emitOpError("cannot be scheduled: ") << gap;
  auto compute = [&](const sched::Work &w) { return table.getComputeTime(w); };
  double transfer = table.getTransferTime(sched::Work{});
  auto units = [&](const sched::Work &w) {
    return table.getActivationUnits(w);
  };
  sched::BuildOptions build;
  build.overlap = opts.overlap;
  FailureOr<sched::Program> program = sched::buildSchedule(
      *info, *pipeline, sched::Durations{compute, transfer, units}, error,
      build);
  if (failed(program))
    return model.emitOpError("schedule '")
           << info->getName() << "' failed: " << error;

  // Scheduling again replaces the program of the same name.
  auto module = model->getParentOfType<ModuleOp>();
  if (Operation *old = module.lookupSymbol(opts.programName))
    old->erase();
  return writeProgram(model, opts.programName, info->kind, *pipeline, *program,
                      opts.repeats);
}

namespace {
struct SchedulePass : public mlir::sluice::impl::ScheduleBase<SchedulePass> {
  using Base::Base;

  void runOnOperation() override {
    FailureOr<ModelOp> model = getSingleModel(getOperation());
    if (failed(model))
      return signalPassFailure();
    SchedulingOptions opts{schedule,    microbatches,   slices,
                           costs,       programName,    tensorParallel,
                           sequenceParallel, repeats, overlap};
    if (failed(schedulePipeline(*model, opts)))
      return signalPassFailure();
  }
};
} // namespace
