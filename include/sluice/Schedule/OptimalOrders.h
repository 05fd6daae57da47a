//===- OptimalOrders.h - The exact schedule of small pipelines --*- C++ -*-===//
//
// The zero-bubble paper's formulation (Qi et al., 2023, cited in
// Yeung et al., 2024) as a mixed-integer program solved by
// GLPK: a start time per pass, an order variable per pair of passes on one
// device, the dependencies with a transfer between devices, and a memory
// cap per device on the activations held from F to W. Minimises the step.
//
// Exact but exponential: meant for small pipelines (a few devices and
// microbatches), as the ground truth the heuristic schedules are tested
// against (issue 11), with a time limit after which the best schedule
// found so far comes back, marked unproven.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_SCHEDULE_OPTIMALORDERS_H
#define SLUICE_SCHEDULE_OPTIMALORDERS_H

#include "sluice/Schedule/BuildingBlock.h"

#include "mlir/Support/LogicalResult.h"

namespace mlir::sluice::sched {

struct OptimalOptions {
  /// Per device, the most activations (Durations::activation, one per
  /// forward if null) it may hold from F to W; empty: no cap.
  std::vector<double> memoryCap;
  /// Wall-clock limit of the search, in seconds.
  double timeLimit = 30;
};

struct OptimalResult {
  double makespan = 0;
  /// Whether the solver proved `makespan` optimal within the time limit.
  bool proven = false;
  /// Per device, its passes by start time.
  std::vector<std::vector<Work>> orders;
};

/// The shortest step of `pipeline` (F, B, W or BW passes; no vocabulary
/// passes or token slices) under `durations` and the memory caps. Fails
/// with `error` when the pipeline is out of scope, the caps admit no
/// schedule or the limit passed before any schedule was found.
FailureOr<OptimalResult> findOptimalOrders(const Pipeline &pipeline,
                                           const Durations &durations,
                                           const OptimalOptions &options,
                                           std::string &error);

} // namespace mlir::sluice::sched

#endif // SLUICE_SCHEDULE_OPTIMALORDERS_H
