//===- BuildingBlock.h - Schedules from repeated building blocks -*- C++
//-*-===//
//
// Yeung et al., 2024 §5.2, after Qi et al. (2024): a
// schedule is described by its building block -- the start time of each
// pass of ONE microbatch on every device -- repeated every `interval` time
// units (the per-device work of one microbatch). Peak activation memory is
// the block's lifespan (F start to B end) divided by the interval.
//
// Turning a block into per-device programs:
//  1. expand: microbatch b's passes start at offset + b * interval; each
//     device runs its passes in that nominal order;
//  2. advance W: each device runs a W that is due (its B has run) whenever
//     its next pass is not ready yet, instead of idling -- the zero-bubble
//     idea that W fills the bubbles. W passes only ever move earlier than
//     the block places them, so none piles up until the end of the step;
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

/// One pass of microbatch 0 and its nominal start. Among passes of a
/// device that start at the same time, lower `rank` runs first (the
/// zero-length vocabulary passes use it to sit before or after a pass).
struct BlockEntry {
  Work work;
  int64_t offset = 0;
  int rank = 0;
};

struct BuildingBlock {
  int64_t interval = 1;
  std::vector<BlockEntry> entries;
};

/// The 1F1B block on a loop placement, in units where F = 1 and the
/// backward = 2 (B then W, or BW): device d runs F at d and its backward at
/// 3p - 2 - 2d, plus `extraIntervals[d]` intervals (ZB-H2 delays the
/// backward to admit more microbatches in warm-up). Interval 3. Split, W
/// takes the second unit of the backward's slot `weightLag[d]` intervals
/// later: zero-bubble schedules let device d lag its W passes by d
/// microbatches, which is what lets the critical B chain run back to back
/// (ZB-H1's (p - 1) / (3m + p - 1) bubble) while a device never holds more
/// than p pending W passes.
BuildingBlock getOneFOneBBlock(const Pipeline &pipeline,
                               llvm::ArrayRef<int64_t> extraIntervals,
                               llvm::ArrayRef<int64_t> weightLag);

/// A V-shape block (2 chunks per device, stage s on device s for s < p and
/// 2p - 1 - s after), F = B = W = 1 per chunk, interval 6. Each F and B
/// starts at the earliest time after its dependency whose slot (time
/// modulo the interval) is free on its device; each W then takes the first
/// free slot after its B. `spacing` delays each forward of the first chunk
/// and each backward of the second by that many units: 0 is V-Min (about
/// p/3 microbatches of activations), 1 V-Half (about p/2), 4 ZB-V (at most
/// p). `lagWeights` moves device d's W slots d intervals later, as in
/// ZB-H1; ZB-V uses it, V-Half and V-Min keep W's inputs as short-lived as
/// their activations.
BuildingBlock getVShapeBlock(const Pipeline &pipeline, int spacing,
                             bool lagWeights);

/// Length of a pass in block time units: F, B and W 1, BW 2; the
/// vocabulary shard's passes take no slot of their own.
int64_t getBlockLength(PassKind kind);

/// Yeung et al., 2024 §5.2, for the asynchronous
/// vocabulary shards (Vocab-1, Vocab-2, naive): widens the gap between the
/// last stage's F and its B by one interval per barrier -- every backward
/// pass moves that many intervals later, which keeps the block's slots --
/// and places the output shard's passes one per interval inside the gap,
/// S right after the last F and each next pass an interval later; the
/// input shard's IF an interval before the first stage's F and IB right
/// after the first stage's backward (DESIGN.md, Appendix C).
void addVocabularyPasses(const Pipeline &pipeline, BuildingBlock &block);

/// The interlaced baseline (Appendix B): the vocabulary layers run
/// synchronously, so every device must stop at the same time for each
/// microbatch's output layer (and input layer). Rebuilds `base` so that
/// these synchronisation points fall at multiples of the interval and no
/// pass straddles one: each pass of the base block, in order, takes the
/// earliest free slot after its dependencies that does not straddle a
/// synchronisation point and leaves room for the device's other passes.
/// For 1F1B this alternates the devices' F/B layouts, and the lifespan on
/// the first device grows to about 1.5 times 1F1B's (the paper's 1.5x
/// activation memory). Fails only if no layout exists within a few
/// intervals.
FailureOr<BuildingBlock> alignSynchronousVocabulary(const Pipeline &pipeline,
                                                    const BuildingBlock &base);

/// Per device, the block's passes for every microbatch in nominal order.
std::vector<std::vector<Work>> expandBlock(const Pipeline &pipeline,
                                           const BuildingBlock &block);

/// How long each work unit takes, and the delay of a transfer between
/// devices; used to decide where W passes fill bubbles.
class OrderClock;

struct Durations {
  llvm::function_ref<double(const Work &)> compute;
  double transfer = 0;
  /// Activations a forward pass allocates until its W frees them (the
  /// improver's memory cap, ImproveOrders.h); null: one per pass.
  llvm::function_ref<double(const Work &)> activation = nullptr;
};

/// Step 2 above: executes `orders` (which hold every W) and returns the
/// order that results when a due W runs early wherever the device would
/// otherwise idle and it ends before the next pass's inputs arrive.
/// Asynchronous vocabulary passes likewise do not hold a device up: one whose
/// inputs have not arrived is passed over and runs as soon as they have (the
/// block places S at the last stage's F plus a unit, which devices reach early
/// in the warm-up). Fails, naming a stuck pass, if `orders` cannot execute.
/// `clock`, if given, is one already timing orders of this pipeline under
/// `durations` (OrderClock, TimeOrders.h): what it has learned of each
/// pass is not looked up again.
FailureOr<std::vector<std::vector<Work>>>
refineOrders(const Pipeline &pipeline,
             const std::vector<std::vector<Work>> &orders,
             const Durations &durations, std::string &error,
             OrderClock *clock = nullptr);

} // namespace mlir::sluice::sched

#endif // SLUICE_SCHEDULE_BUILDINGBLOCK_H
