//===- TimeOrders.cpp - Orders executed strictly, in time -----------------===//

#include "sluice/Schedule/TimeOrders.h"

#include <algorithm>

using namespace mlir::sluice;
using namespace mlir::sluice::sched;

namespace {
/// Runs each device's order as far as its inputs allow, round after round.
class OrderTimer {
public:
  OrderTimer(const Pipeline &pipeline, const Durations &durations)
      : pipeline(pipeline), durations(durations), index(pipeline),
        start(index.size(), -1.0), end(index.size(), -1.0),
        arrival(index.size(), -1.0) {}

  /// Fills `timing`; false with `stuck` set if a pass never becomes ready.
  bool time(llvm::ArrayRef<std::vector<Work>> orders, OrderTiming &timing,
            Work &stuck) {
    int p = int(orders.size());
    std::fill(start.begin(), start.end(), -1.0);
    std::fill(end.begin(), end.end(), -1.0);
    std::fill(arrival.begin(), arrival.end(), -1.0);
    linkFree.assign(size_t(p) * p, 0.0);
    next.assign(p, 0);
    free.assign(p, 0.0);

    size_t total = 0, done = 0;
    for (const auto &order : orders)
      total += order.size();
    timing = OrderTiming{};
    while (done < total) {
      size_t before = done;
      for (int d = 0; d < p; ++d) {
        const auto &order = orders[d];
        while (next[d] < order.size()) {
          const Work &work = order[next[d]];
          deps.clear();
          getAllDependencies(pipeline, work, deps);
          double begin = 0;
          bool ready = true;
          for (const Work &dep : deps) {
            double depEnd = end[index(dep)];
            if (depEnd < 0) {
              ready = false;
              break;
            }
            // From another device: through the link (a vocabulary
            // collective's contribution: one transfer later).
            if (pipeline.getWorkDevice(dep) != d)
              depEnd = arrival[index(dep)] >= 0 ? arrival[index(dep)]
                                                : depEnd + durations.transfer;
            begin = std::max(begin, depEnd);
          }
          if (!ready)
            break;
          begin = std::max(begin, free[d]);
          double finish = begin + durations.compute(work);
          start[index(work)] = begin;
          end[index(work)] = finish;
          free[d] = finish;
          // The result travels to the consumer's device behind the
          // link's earlier sends (NCCL: one connection per peer, in
          // order; different peers overlap).
          int consumer = getConsumerStage(pipeline, work);
          if (consumer >= 0 && pipeline.getDevice(consumer) != d) {
            double &link = linkFree[size_t(d) * p + pipeline.getDevice(consumer)];
            link = std::max(link, finish) + durations.transfer;
            arrival[index(work)] = link;
          }
          timing.makespan = std::max(timing.makespan, finish);
          timing.totalEnd += finish;
          ++next[d];
          ++done;
        }
      }
      if (done == before) {
        for (int d = 0; d < p; ++d)
          if (next[d] < orders[d].size()) {
            stuck = orders[d][next[d]];
            break;
          }
        return false;
      }
    }
    return true;
  }

  void getTimes(PassTimes &times) const {
    times = {start, end, arrival};
    for (size_t i = 0; i < end.size(); ++i)
      if (times.arrival[i] < 0)
        times.arrival[i] = end[i];
  }

private:
  const Pipeline &pipeline;
  const Durations &durations;
  WorkIndex index;
  std::vector<double> start, end, arrival, linkFree;
  std::vector<size_t> next;
  std::vector<double> free;
  llvm::SmallVector<Work, 8> deps;
};

/// The most activations `order` holds from F to W (or BW).
double getPeak(const std::vector<Work> &order, const Durations &durations) {
  double live = 0, peak = 0;
  for (const Work &work : order) {
    if (work.kind == PassKind::F)
      live += getActivation(durations, work);
    else if (work.kind == PassKind::W || work.kind == PassKind::BW)
      live -= getActivation(durations, work);
    peak = std::max(peak, live);
  }
  return peak;
}

} // namespace

double sched::getActivation(const Durations &durations, const Work &work) {
  Work owner = work;
  owner.kind = PassKind::F;
  return durations.activation ? durations.activation(owner) : 1.0;
}

std::optional<OrderTiming>
sched::timeOrders(const Pipeline &pipeline,
                  llvm::ArrayRef<std::vector<Work>> orders,
                  const Durations &durations, std::string &error,
                  PassTimes *times) {
  OrderTimer timer(pipeline, durations);
  OrderTiming timing;
  Work stuck;
  if (!timer.time(orders, timing, stuck)) {
    error = "the orders cannot execute: " + toString(stuck) +
            " waits for work that never runs";
    return std::nullopt;
  }
  if (times)
    timer.getTimes(*times);
  return timing;
}

std::vector<double>
sched::getPeakUntilW(const Pipeline &pipeline,
                     const std::vector<std::vector<Work>> &orders,
                     const Durations &durations) {
  (void)pipeline;
  std::vector<double> peaks;
  for (const auto &order : orders)
    peaks.push_back(getPeak(order, durations));
  return peaks;
}

