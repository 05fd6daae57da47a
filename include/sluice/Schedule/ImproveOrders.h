//===- ImproveOrders.h - Faster orders under a memory cap -------*- C++ -*-===//
//
// The generated zero-bubble and V-shape schedules come from building
// blocks drawn for unit costs (BuildingBlock.h). With B != W, transfers,
// or one slow stage, the block's order leaves gaps a cost-aware order
// fills. The improver builds such orders by list scheduling -- each device,
// when free, runs the most urgent pass that is ready and fits its memory
// cap -- under several policies, and keeps the fastest of them and the
// block's own order that respects the cap. The cap counts the activations
// held from F to W (what a weight pass still reads), so whichever order
// wins, the schedule keeps the memory it is named for.
//
// The zero-bubble paper's heuristic (Qi et al. 2023, §3.1, cited in
// Yeung et al., 2024) is the model: forwards as memory
// allows in the warm-up, B as soon as it can run, W to fill a gap or to
// free memory; the policies differ in how far a W may overrun the next
// input's arrival and which ready pass goes first.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_SCHEDULE_IMPROVEORDERS_H
#define SLUICE_SCHEDULE_IMPROVEORDERS_H

#include "sluice/Schedule/BuildingBlock.h"

#include "mlir/Support/LogicalResult.h"

#include <optional>

namespace mlir::sluice::sched {

/// How the list scheduler picks among ready passes.
struct ListPolicy {
  /// A W may start in a gap if it ends at most this many W durations after
  /// the next forward or backward input arrives (0: only where it fits;
  /// a large value: in any gap).
  double weightOverrun = 0;
  /// Among ready forwards, the later stage first (the V-shape's second
  /// chunk, nearer the loss); else the oldest microbatch first.
  bool laterStageFirst = true;
  /// A forward may start only if it ends at most this many forward
  /// durations after the next backward's input arrives (a large value:
  /// always); keeps a long forward from holding up the critical B chain.
  double forwardOverrun = 1e9;
  /// A device with several stages (V-shape) starts a microbatch only with
  /// room for all of its stages' activations of it (else with room for
  /// one more of its later stages' forwards: enough for the oldest
  /// microbatch to go on, which is all that avoids a deadlock).
  bool reserveMicrobatch = false;
  /// A ready forward goes before a ready backward (the longest path to the
  /// end of the step starts at the forward); the cap alone holds forwards
  /// back. Else backwards first, as in 1F1B.
  bool forwardFirst = false;
};

/// Per device, the activations (Durations::activation, one per forward if
/// null) held from F to W (or BW) that the schedule may not exceed.
using MemoryCaps = std::vector<double>;

/// Orders built by list scheduling under `caps`: every stage's forwards
/// and backwards in microbatch order (backwards in reverse slice order),
/// W in the order of their B. Fails, naming the device, if a cap is below
/// one microbatch of the device's activations. Vocabulary passes are not
/// placed (the pipeline must have none).
FailureOr<std::vector<std::vector<Work>>>
scheduleByList(const Pipeline &pipeline, const Durations &durations,
               const MemoryCaps &caps, const ListPolicy &policy,
               std::string &error);

/// A device's activations for one whole microbatch (all its stages and
/// slices), the unit the schedules' memory is named in.
double getMicrobatchActivation(const Pipeline &pipeline,
                               const Durations &durations, int device);

/// The result of improveOrders.
struct Improved {
  std::vector<std::vector<Work>> orders;
  double makespan = 0;
  /// Which candidate won: "block", or the list policy that built it.
  std::string source;
};

/// The fastest of `candidates` (the orders of blocks; those that keep
/// `caps`) and list schedules under every policy the improver tries, each
/// also polished by running due W passes early where they fit
/// (refineOrders), timed with the simulator's rules (timeOrders). On a tie
/// the earlier candidate wins, the first before any list schedule.
/// Pipelines with vocabulary passes get the first candidate back.
/// `clock`, if given, is the caller's OrderClock for this pipeline and
/// these durations (TimeOrders.h), shared rather than learned again.
FailureOr<Improved>
improveOrders(const Pipeline &pipeline,
              llvm::ArrayRef<std::vector<std::vector<Work>>> candidates,
              const Durations &durations, const MemoryCaps &caps,
              std::string &error, OrderClock *clock = nullptr);

} // namespace mlir::sluice::sched

#endif // SLUICE_SCHEDULE_IMPROVEORDERS_H
