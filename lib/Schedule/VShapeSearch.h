//===- VShapeSearch.h - What the V-shape constructions share ----*- C++ -*-===//
//
// Private to lib/Schedule: the V-shape orders' constructions (ZeroBubbleV,
// SqueezeVShape, RepeatVShape) take the same pipelines, name a device's
// two stages alike, and the V searches keep their fastest few orders
// alike.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_LIB_SCHEDULE_VSHAPESEARCH_H
#define SLUICE_LIB_SCHEDULE_VSHAPESEARCH_H

#include "sluice/Schedule/TimeOrders.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

namespace mlir::sluice::sched {

/// A V the constructions draw: two chunks per device of one stage each,
/// no slices, the backward split, no vocabulary passes.
inline bool isPlainVShape(const Pipeline &pipeline) {
  return pipeline.chunks == 2 &&
         pipeline.getNumStages() == 2 * pipeline.devices &&
         pipeline.slices == 1 && pipeline.splitBackward &&
         !pipeline.vocab.any();
}

/// The stage of device d's chunk c at [2d + c].
inline std::vector<int> getVShapeStages(const Pipeline &pipeline) {
  std::vector<int> stageOf(2 * size_t(pipeline.devices), -1);
  for (int s = 0; s < pipeline.getNumStages(); ++s)
    stageOf[size_t(pipeline.stages[s].device) * 2 + pipeline.stages[s].chunk] =
        s;
  return stageOf;
}

/// How many chunk activations (the larger of the device's two chunks' as
/// the unit) device d's cap holds: the unit-slot constructions count
/// chunks.
inline int getChunkCap(const Durations &durations, llvm::ArrayRef<int> stageOf,
                       double cap, int d) {
  double chunk = std::max(
      getActivation(durations, Work{PassKind::F, stageOf[2 * d], 0, 0}),
      getActivation(durations, Work{PassKind::F, stageOf[2 * d + 1], 0, 0}));
  return int(std::floor(cap / chunk + 1e-9));
}

/// The V searches' selection: of the orders offered, the `keep` fastest
/// that hold each device's cap from F to W, timed with one OrderClock,
/// fastest first, earlier offers first among equals.
class FastestOrders {
public:
  FastestOrders(const Pipeline &pipeline, const Durations &durations,
                llvm::ArrayRef<double> caps, size_t keep)
      : pipeline(pipeline), durations(durations), caps(caps), keep(keep),
        clock(pipeline, durations) {}

  void offer(std::vector<std::vector<Work>> orders) {
    std::vector<double> peaks = getPeakUntilW(pipeline, orders, durations);
    for (size_t d = 0; d < peaks.size(); ++d)
      if (peaks[d] > caps[d] + 1e-9)
        return;
    std::string why;
    std::optional<OrderTiming> timing = clock.time(orders, why);
    if (!timing ||
        (best.size() == keep && timing->makespan >= best.back().first))
      return;
    auto at = std::upper_bound(
        best.begin(), best.end(), timing->makespan,
        [](double t, const auto &entry) { return t < entry.first; });
    best.insert(at, {timing->makespan, std::move(orders)});
    if (best.size() > keep)
      best.pop_back();
  }

  std::vector<std::vector<std::vector<Work>>> take() {
    std::vector<std::vector<std::vector<Work>>> result;
    for (auto &entry : best)
      result.push_back(std::move(entry.second));
    best.clear();
    return result;
  }

private:
  const Pipeline &pipeline;
  const Durations &durations;
  llvm::ArrayRef<double> caps;
  size_t keep;
  OrderClock clock;
  std::vector<std::pair<double, std::vector<std::vector<Work>>>> best;
};

/// One V search's blocks. `EnumerateBlocks` builds every block of the
/// search for a pipeline and offers each order with the block's number
/// (the same numbers for every microbatch count); `BuildBlock` builds one
/// block again, nullopt where it gives no order.
using BlockOrders = std::vector<std::vector<Work>>;
using OfferBlock = llvm::function_ref<void(size_t, BlockOrders)>;
using EnumerateBlocks = llvm::function_ref<void(const Pipeline &, OfferBlock)>;
using BuildBlock =
    llvm::function_ref<std::optional<BlockOrders>(const Pipeline &, size_t)>;

/// Whether the V searches run on this pipeline (VShapeSearch.cpp: up to
/// p = 20); the searches return nothing where not, before any work.
bool canSearchBlocks(const Pipeline &pipeline);
/// The stage of each (device, chunk) where a V search keeping `keep`
/// orders runs on `pipeline` (a plain V of at least 2 devices with
/// microbatches, within canSearchBlocks); empty where it does not.
std::vector<int> getSearchableVShape(const Pipeline &pipeline, size_t keep);

/// The `keep` fastest orders of a V search's blocks that hold the caps
/// (VShapeSearch.cpp says how it stays within a compile's time).
std::vector<BlockOrders>
selectFastestBlocks(const Pipeline &pipeline, const Durations &durations,
                    llvm::ArrayRef<double> caps, size_t keep,
                    EnumerateBlocks enumerate, BuildBlock build);

} // namespace mlir::sluice::sched

#endif // SLUICE_LIB_SCHEDULE_VSHAPESEARCH_H
