//===- Schedules.h - The pipeline schedules Sluice generates ----*- C++ -*-===//
//
// Each schedule turns a Pipeline into per-device programs. The zero-bubble
// and V-shape families (and 1F1B) are built from building blocks
// (BuildingBlock.h); GPipe, TeraPipe, interleaved 1F1B and Seq1F1B follow
// their papers' orders directly.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_SCHEDULE_SCHEDULES_H
#define SLUICE_SCHEDULE_SCHEDULES_H

#include "sluice/Schedule/BuildingBlock.h"
#include "sluice/Schedule/Pipeline.h"

#include "llvm/ADT/StringRef.h"

#include <optional>

namespace mlir::sluice::sched {

// ScheduleKind (gpipe, 1f1b, ...) is the dialect enum of SluiceEnums.td, so
// a program's `schedule` attribute and this table name schedules alike.

/// What a schedule requires of the pipeline it runs.
struct ScheduleInfo {
  ScheduleKind kind;
  PlacementKind placement;
  /// Runs B and W as separate passes.
  bool splitBackward;
  /// Accepts token slices (slices > 1).
  bool sliced;
  /// Chunks per device it places; 0 means any number from 2 up.
  int chunks;
  llvm::StringLiteral summary;

  /// The schedule's name (`zb-h1`): the enum's spelling.
  llvm::StringRef getName() const { return stringifyScheduleKind(kind); }
};

llvm::ArrayRef<ScheduleInfo> getSchedules();

/// Whether the schedule is generated from a building block, and so can
/// take the vocabulary shards' passes (Yeung et al., 2024
/// §5.2).
bool isBuildingBlockSchedule(ScheduleKind kind);
const ScheduleInfo *lookupSchedule(llvm::StringRef name);
/// The table entry of `kind` (every kind has one).
const ScheduleInfo &getSchedule(ScheduleKind kind);

/// The chunks per device a schedule places when none is asked for: its
/// fixed count, or 2 for one that takes any number from 2 up.
int getDefaultChunks(const ScheduleInfo &info);

/// Why `pipeline` does not suit `schedule`, or "" if it does. The message
/// names the offending value and what would be accepted.
std::string checkPipeline(const ScheduleInfo &schedule,
                          const Pipeline &pipeline);

/// A pipeline of p x chunks uniform stages placed as `schedule` needs
/// (loop, interleaved or V), with its backward split or not: what tests
/// and benchmarks schedule without a model.
Pipeline makeSchedulePipeline(const ScheduleInfo &schedule, int devices,
                              int microbatches, int chunks, int slices);

/// The activations, in microbatches of a device's own stages, a schedule
/// may hold from F to W (the memory it is named for): p for ZB-H1 and
/// ZB-V, 2p - 1 for ZB-H2, ceil(p / 2) + 1 for V-Half, floor((p + 4) / 3)
/// for V-Min; none for the others, whose order is fixed by their papers.
std::optional<double> getMemoryCap(ScheduleKind kind, int devices);

struct BuildOptions {
  /// Replace a building block's order by a faster one within the
  /// schedule's memory cap (ImproveOrders.h) where one exists; off, the
  /// block's order as drawn (benchmarks compare the two).
  bool improve = true;
  /// Past 50,000 passes, improve the orders of 2p + 8 microbatches and run
  /// their steady state for the rest (ExtendOrders.h), where that keeps
  /// the cap and beats the block; off, improve every microbatch's passes
  /// (tests compare the two).
  bool extend = true;
  /// Where not null, set to whether the orders were extended.
  bool *extended = nullptr;
  /// dualpipev: pair its passes (Instr::paired); off, the same order
  /// with every pass on its own.
  bool overlap = true;
};

/// Builds the per-device programs. `durations` decide where W passes fill
/// bubbles (unit costs reproduce the papers' figures). The pipeline must
/// pass checkPipeline.
FailureOr<Program> buildSchedule(const ScheduleInfo &schedule,
                                 const Pipeline &pipeline,
                                 const Durations &durations, std::string &error,
                                 const BuildOptions &options = {});

/// Unit durations: F = B = W = 1 and BW = 2 per device per microbatch,
/// divided evenly over its chunks and slices; no transfer delay.
double getUnitDuration(const Pipeline &pipeline, const Work &work);

} // namespace mlir::sluice::sched

#endif // SLUICE_SCHEDULE_SCHEDULES_H
