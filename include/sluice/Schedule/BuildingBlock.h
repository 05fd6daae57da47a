//===- BuildingBlock.h - Schedules from repeated building blocks -*- C++
//-*-===//
//
// papers/vocabulary-parallelism.txt §5.2, after Qi et al. (2024): a
// schedule is described by its building block -- the start time of each
// pass of ONE microbatch on every device -- repeated every `interval` time
// units (the per-device work of one microbatch). Peak activation memory is
// the block's lifespan (F start to B end) divided by the interval.
//
// Turning a block into per-device programs:
//  1. expand: microbatch b's passes start at offset + b * interval; each
//     device runs its passes in that nominal order;
//  2. fill: W passes are not part of the block; each device runs a pending
//     W whenever its next pass is not ready yet, and the rest at the end
//     (the "W fills the bubbles" idea of zero-bubble pipelining);
//  3. squeeze: executing the orders as early as dependencies allow removes
//     the idle time the repetition leaves in warm-up (the simulator does
//     this; the order is what a program records).
//
// Later passes insert new pass kinds (the vocabulary S and T passes) by
// adding entries to a block and widening it, not by writing a schedule.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_SCHEDULE_BUILDINGBLOCK_H
#define SLUICE_SCHEDULE_BUILDINGBLOCK_H

#include "sluice/Schedule/Pipeline.h"

#include "mlir/Support/LogicalResult.h"
#include "llvm/ADT/STLFunctionalExtras.h"

namespace mlir::sluice::sched {

/// One pass of microbatch 0 and its nominal start.
struct BlockEntry {
  Work work;
  int64_t offset = 0;
};

struct BuildingBlock {
  int64_t interval = 1;
  std::vector<BlockEntry> entries;
};

/// The 1F1B block on a loop placement, in units where F = 1 and the
/// backward = 2 (B + W, or BW): device d runs F at d and its backward at
/// 3p - 2 - 2d, plus `extraIntervals[d]` intervals (ZB-H2 delays the
/// backward to admit more microbatches in warm-up). Interval 3.
BuildingBlock getOneFOneBBlock(const Pipeline &pipeline,
                               llvm::ArrayRef<int64_t> extraIntervals);

/// A V-shape block (2 chunks per device, stage s on device s for s < p and
/// 2p - 1 - s after), F = B = 1 per chunk, interval 6 (W fills the rest).
/// Each pass starts at the earliest time after its dependency whose slot
/// (time modulo the interval) is free on its device. `spacing` delays each
/// forward of the first chunk and each backward of the second by that many
/// units: 0 is V-Min (about p/3 microbatches of activations), 1 V-Half
/// (about p/2), 4 ZB-V (at most p).
BuildingBlock getVShapeBlock(const Pipeline &pipeline, int spacing);

/// Per device, the block's passes for every microbatch in nominal order.
std::vector<std::vector<Work>> expandBlock(const Pipeline &pipeline,
                                           const BuildingBlock &block);

/// How long each work unit takes, and the delay of a transfer between
/// devices; used to decide where W passes fill bubbles.
struct Durations {
  llvm::function_ref<double(const Work &)> compute;
  double transfer = 0;
};

/// Step 2 above: inserts one W after each B, where the device would
/// otherwise idle. Fails (naming a stuck pass) if `orders` cannot execute.
FailureOr<std::vector<std::vector<Work>>>
fillWeightPasses(const Pipeline &pipeline,
                 std::vector<std::vector<Work>> orders,
                 const Durations &durations, std::string &error);

} // namespace mlir::sluice::sched

#endif // SLUICE_SCHEDULE_BUILDINGBLOCK_H
