//===- ExtendOrders.h - A long pipeline's orders from a shorter one's -*- C++ -*-===//
//
// A schedule's orders are periodic in the microbatches: after its warm-up
// each device repeats one microbatch's passes (its steady state) until the
// cool-down. So the orders for m microbatches can be drawn for m0 < m and
// the steady state run m - m0 more times, instead of drawing and improving
// all m (the improvement's list schedules, refinements and timings are
// linear in the passes: most of a deep pipeline's compile; issue 52).
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_SCHEDULE_EXTENDORDERS_H
#define SLUICE_SCHEDULE_EXTENDORDERS_H

#include "sluice/Schedule/Pipeline.h"

#include <optional>
#include <vector>

namespace mlir::sluice::sched {

/// `orders` (a schedule of `target` with `from` microbatches instead of
/// target.microbatches) with each device's steady state run again for every
/// added microbatch: the longest run of the device's list in which every
/// pass recurs one period later for the next microbatch (the period: the
/// device's passes of one microbatch) gets the added periods after its
/// first, and every pass after it moves by the microbatches added. nullopt
/// where a device has no such run of `minPeriods` periods, or where the
/// result is not every pass of target exactly once.
std::optional<std::vector<std::vector<Work>>>
extendOrders(const Pipeline &target,
             const std::vector<std::vector<Work>> &orders, int from,
             int minPeriods = 3);

} // namespace mlir::sluice::sched

#endif // SLUICE_SCHEDULE_EXTENDORDERS_H
