//===- FastestOrders.h - The fastest few orders under caps ------*- C++ -*-===//
//
// The V searches' selection (SqueezeVShape.cpp, RepeatVShape.cpp): of the
// orders offered, keep the `keep` fastest that hold each device's cap from
// F to W, timed with one OrderClock, fastest first, earlier offers first
// among equals.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_LIB_SCHEDULE_FASTESTORDERS_H
#define SLUICE_LIB_SCHEDULE_FASTESTORDERS_H

#include "sluice/Schedule/TimeOrders.h"

#include <algorithm>

namespace mlir::sluice::sched {

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

} // namespace mlir::sluice::sched

#endif // SLUICE_LIB_SCHEDULE_FASTESTORDERS_H
