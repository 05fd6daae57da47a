//===- ScheduleFiles.cpp - A simulated program's report, trace and SVG ----===//
//
// The files `sluice-compile --report/--trace/--svg` asks for, written from
// one simulation (sluice-simulate computes it and writes nothing).
//
//===----------------------------------------------------------------------===//

#include "sluice/Target/Export.h"

#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace mlir::sluice;

LogicalResult mlir::sluice::writeScheduleFiles(ScheduleFiles &files) {
  ProgramOp program = files.program;
  ModelOp model = files.model;
  const sched::Pipeline &pipeline = files.pipeline;
  const Simulation &sim = files.simulation;
  std::string error;
  if (!files.report.empty()) {
    ScheduleReportInputs inputs{model.getSymName(),
                                stringifyScheduleKind(program.getSchedule()),
                                pipeline,
                                files.costs,
                                sim,
                                /*verified=*/true};
    if (pipeline.slices > 1 || model.getSlicing())
      inputs.slicing = stringifySlicingMethod(
                           model.getSlicing().value_or(SlicingMethod::Uniform))
                           .str();
    inputs.slicingFitError = model.getSlicingFitError().value_or(-1);
    inputs.slicingLatency = model.getSlicingLatency().value_or(-1);
    llvm::json::Value report = getScheduleReport(inputs);
    for (const auto &[key, value] : files.reportExtras)
      report.getAsObject()->try_emplace(key, value);
    if (failed(writeFileAtomically(
            files.report, llvm::formatv("{0:2}\n", report).str(), error)))
      return program.emitOpError(error);
  }
  if (!files.trace.empty()) {
    std::vector<std::string> names;
    for (StageOp stage : getStages(model))
      names.push_back(stage.getSymName().str());
    // Analytic times are seconds; unit times read as milliseconds.
    double scale =
        files.costModel.getKind() == CostModel::Kind::Analytic ? 1e6 : 1e3;
    llvm::json::Value trace = getChromeTrace(pipeline, sim, names, scale);
    if (failed(writeFileAtomically(files.trace,
                                   llvm::formatv("{0}\n", trace).str(), error)))
      return program.emitOpError(error);
  }
  if (!files.svg.empty()) {
    std::string title = llvm::formatv(
        "{0}: {1} devices, {2} microbatches, bubble {3:P1}, step {4} {5}",
        stringifyScheduleKind(program.getSchedule()), pipeline.devices,
        pipeline.microbatches, sim.bubbleRatio, sim.stepTime,
        files.costModel.getTimeUnit());
    if (failed(writeFileAtomically(
            files.svg, renderTimelineSvg(pipeline, sim, title), error)))
      return program.emitOpError(error);
  }
  return success();
}
