//===- Export.h - Reports, traces and timelines of a schedule ---*- C++ -*-===//
//
// What `sluice-compile --report/--trace/--svg` writes (passes write no
// files). Formats are documented in docs/sluice-compile.md.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_TARGET_EXPORT_H
#define SLUICE_TARGET_EXPORT_H

#include "sluice/Analysis/CostModel.h"
#include "sluice/Analysis/Simulator.h"
#include "sluice/SluiceOps.h"

#include "llvm/Support/JSON.h"

namespace mlir::sluice {

struct ScheduleReportInputs {
  llvm::StringRef model;
  llvm::StringRef schedule;
  const sched::Pipeline &pipeline;
  const PipelineCosts &costs;
  const Simulation &simulation;
  bool verified;
  /// How the token slices were chosen ("" if never), and for TeraPipe's
  /// DP equation 9's fit error and the DP's latency (-1 if none).
  std::string slicing = "";
  double slicingFitError = -1;
  double slicingLatency = -1;
};

/// The report.json object: the schedule, its predicted step time, bubble
/// ratio and MFU, and per device busy/idle time and memory.
llvm::json::Value getScheduleReport(const ScheduleReportInputs &inputs);

/// Chrome trace-event JSON (opens in Perfetto): one process per device,
/// one thread per stream. `microsecondsPerUnit` converts simulated time.
llvm::json::Value getChromeTrace(const sched::Pipeline &pipeline,
                                 const Simulation &simulation,
                                 llvm::ArrayRef<std::string> stageNames,
                                 double microsecondsPerUnit);

/// A timeline like the papers' figures: one row per device, passes
/// coloured by kind and labelled with their microbatch (and slice).
std::string renderTimelineSvg(const sched::Pipeline &pipeline,
                              const Simulation &simulation,
                              llvm::StringRef title);

/// Writes `contents` to a temporary file next to `path` and renames it
/// over `path`: readers see the old file or the new one, never half.
LogicalResult writeFileAtomically(llvm::StringRef path,
                                  llvm::StringRef contents, std::string &error);

/// A simulated program (simulateProgram) and the files asked of it.
struct ScheduleFiles {
  ProgramOp program;
  ModelOp model;
  const sched::Pipeline &pipeline;
  const PipelineCosts &costs;
  const CostModel &costModel;
  const Simulation &simulation;
  /// Paths ("" writes nothing) and fields added to the report (the
  /// driver adds the model summary).
  std::string report, trace, svg;
  llvm::json::Object reportExtras;
};

/// Writes the report, trace and timeline each atomically; an error names
/// the file, on the program.
LogicalResult writeScheduleFiles(ScheduleFiles &files);

} // namespace mlir::sluice

#endif // SLUICE_TARGET_EXPORT_H
