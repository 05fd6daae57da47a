//===- ExtendOrders.cpp - A long pipeline's orders from a shorter one's ---===//

#include "sluice/Schedule/ExtendOrders.h"

using namespace mlir;
using namespace mlir::sluice;
using namespace mlir::sluice::sched;

namespace {
/// One device's list with its steady state run `added` more times.
std::optional<std::vector<Work>> extendDevice(const std::vector<Work> &order,
                                              int from, int added,
                                              int minPeriods) {
  // The period: the device's passes of one microbatch (every microbatch
  // has the same on a device), here of the middle one.
  size_t period = 0;
  for (const Work &w : order)
    period += w.microbatch == from / 2;
  size_t n = order.size();
  if (period == 0 || n < period)
    return std::nullopt;
  auto recurs = [&](size_t i) {
    Work next = order[i];
    ++next.microbatch;
    return order[i + period] == next;
  };
  // The longest run [begin, begin + length) of positions whose pass
  // recurs one period later, one microbatch on.
  size_t begin = 0, length = 0;
  for (size_t i = 0; i + period < n;) {
    if (!recurs(i)) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j + period < n && recurs(j))
      ++j;
    if (j - i > length) {
      begin = i;
      length = j - i;
    }
    i = j;
  }
  // A run of k periods of recurrence holds k + 1 periods of the pattern.
  if (length < size_t(minPeriods) * period)
    return std::nullopt;
  size_t at = begin + period;
  std::vector<Work> out(order.begin(), order.begin() + at);
  out.reserve(n + size_t(added) * period);
  for (int k = 1; k <= added; ++k)
    for (size_t j = begin; j < at; ++j) {
      Work w = order[j];
      w.microbatch += k;
      out.push_back(w);
    }
  for (size_t j = at; j < n; ++j) {
    Work w = order[j];
    w.microbatch += added;
    out.push_back(w);
  }
  return out;
}
} // namespace

std::optional<std::vector<std::vector<Work>>>
sched::extendOrders(const Pipeline &target,
                    const std::vector<std::vector<Work>> &orders, int from,
                    int minPeriods) {
  int added = target.microbatches - from;
  if (added < 0 || int(orders.size()) != target.devices)
    return std::nullopt;
  std::vector<std::vector<Work>> out;
  out.reserve(orders.size());
  for (const std::vector<Work> &order : orders) {
    std::optional<std::vector<Work>> device =
        added == 0 ? std::optional(order)
                   : extendDevice(order, from, added, minPeriods);
    if (!device)
      return std::nullopt;
    out.push_back(std::move(*device));
  }
  // Every pass of the target exactly once, on its own device: the
  // extension moved nothing onto a microbatch it does not have or twice.
  WorkIndex index(target);
  std::vector<char> seen(index.size(), 0);
  size_t total = 0;
  for (int d = 0; d < target.devices; ++d)
    for (const Work &w : out[d]) {
      if (w.microbatch < 0 || w.microbatch >= target.microbatches ||
          w.stage < 0 || w.stage >= target.getNumStages() ||
          w.slice < 0 || w.slice >= target.slices ||
          target.getWorkDevice(w) != d || seen[index(w)]++)
        return std::nullopt;
      ++total;
    }
  size_t expected = 0;
  for (const std::vector<Work> &order : orders)
    expected += order.size();
  // Each microbatch has as many passes as every other.
  if (from <= 0 || expected % size_t(from) != 0 ||
      total != expected / size_t(from) * size_t(target.microbatches))
    return std::nullopt;
  return out;
}
