//===- VShapeSearch.cpp - Choosing among a V search's blocks --------------===//
//
// The V-Half / V-Min searches (SqueezeVShape.cpp, RepeatVShape.cpp) build
// one order per building block of the controllable-memory paper's space
// (Qi et al. 2024, §3) and keep the fastest few under the real costs. A
// block's construction and timing are linear in the passes and the blocks
// grow with the devices, so building every block at every size would cost
// seconds past a few thousand passes (p = 16 with m = 64: 1.2 s).
//
// A block repeats one pattern per microbatch, so beyond its warm-up its
// step grows by a fixed period per microbatch. Above the budget each block
// is therefore built and timed at two smaller microbatch counts within it,
// its step at the real count extrapolated along that line, and only the
// best few by that estimate are built at the real count and timed there.
// The chosen orders are always timed whole: the estimate only decides
// which blocks are worth building.
//
//===----------------------------------------------------------------------===//

#include "VShapeSearch.h"

#include "llvm/ADT/DenseMap.h"

using namespace mlir::sluice;
using namespace mlir::sluice::sched;

/// Every block is built at the real size up to this many passes (p = 16
/// with m = 32, p = 8 with m = 64; about 0.4 s at p = 16).
static constexpr size_t kSearchPasses = 3072;
/// The blocks built again at the real size, per order kept: the estimate
/// ranks closely matched blocks only roughly.
static constexpr size_t kRebuiltPerKept = 4;

/// The two smaller counts a block is ranked on, or nullopt where every
/// block is built at the real count.
static std::optional<std::pair<int, int>>
getRankingCounts(const Pipeline &pipeline) {
  int p = pipeline.devices;
  size_t passesPerMicrobatch = 6 * size_t(p);
  if (passesPerMicrobatch * size_t(pipeline.microbatches) <= kSearchPasses)
    return std::nullopt;
  // Two counts in the steady phase: the larger the budget allows, the
  // smaller halfway down to p.
  int large = int(kSearchPasses / passesPerMicrobatch);
  return std::make_pair(large, (large + p) / 2);
}

bool sched::canSearchBlocks(const Pipeline &pipeline) {
  // Past p = 20 there is no room for both counts.
  auto counts = getRankingCounts(pipeline);
  return !counts || counts->first >= pipeline.devices + 4;
}

std::vector<int> sched::getSearchableVShape(const Pipeline &pipeline,
                                            size_t keep) {
  if (!isPlainVShape(pipeline) || pipeline.devices < 2 ||
      pipeline.microbatches < 1 || keep == 0 || !canSearchBlocks(pipeline))
    return {};
  return getVShapeStages(pipeline);
}

std::vector<BlockOrders>
sched::selectFastestBlocks(const Pipeline &pipeline, const Durations &durations,
                           llvm::ArrayRef<double> caps, size_t keep,
                           EnumerateBlocks enumerate, BuildBlock build) {
  int m = pipeline.microbatches;
  if (!canSearchBlocks(pipeline))
    return {};
  std::optional<std::pair<int, int>> counts = getRankingCounts(pipeline);
  if (!counts) {
    FastestOrders fastest(pipeline, durations, caps, keep);
    enumerate(pipeline, [&](size_t, BlockOrders orders) {
      fastest.offer(std::move(orders));
    });
    return fastest.take();
  }
  auto [large, small] = *counts;
  auto timeAll = [&](int microbatches) {
    Pipeline fewer = pipeline;
    fewer.microbatches = microbatches;
    OrderClock clock(fewer, durations);
    llvm::DenseMap<size_t, double> steps;
    enumerate(fewer, [&](size_t block, BlockOrders orders) {
      std::vector<double> peaks = getPeakUntilW(fewer, orders, durations);
      for (size_t d = 0; d < peaks.size(); ++d)
        if (peaks[d] > caps[d] + 1e-9)
          return;
      std::string why;
      if (std::optional<OrderTiming> timing = clock.time(orders, why))
        steps[block] = timing->makespan;
    });
    return steps;
  };
  llvm::DenseMap<size_t, double> atLarge = timeAll(large);
  llvm::DenseMap<size_t, double> atSmall = timeAll(small);

  std::vector<std::pair<double, size_t>> estimates;
  for (auto [block, step] : atLarge) {
    auto other = atSmall.find(block);
    double perMicrobatch = other == atSmall.end()
                               ? step / large
                               : (step - other->second) / (large - small);
    estimates.push_back({step + perMicrobatch * (m - large), block});
  }
  // The estimate first, then the search's own order of the blocks.
  std::sort(estimates.begin(), estimates.end());
  FastestOrders fastest(pipeline, durations, caps, keep);
  size_t rebuilt = std::min(estimates.size(), kRebuiltPerKept * keep);
  for (size_t i = 0; i < rebuilt; ++i)
    if (std::optional<BlockOrders> orders =
            build(pipeline, estimates[i].second))
      fastest.offer(std::move(*orders));
  return fastest.take();
}
