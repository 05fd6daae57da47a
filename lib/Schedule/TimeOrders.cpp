//===- TimeOrders.cpp - Orders executed strictly, in time -----------------===//

#include "sluice/Schedule/TimeOrders.h"

#include <algorithm>
#include <cassert>

using namespace mlir::sluice;
using namespace mlir::sluice::sched;

/// What timing needs of each pass, by WorkIndex, filled the first time an
/// order holds the pass: its duration, device, the device its result goes
/// to (-1: its own or none) and its inputs' indices (with their devices).
struct OrderClock::Tables {
  Tables(const Pipeline &pipeline, const Durations &durations)
      : pipeline(pipeline), durations(durations), index(pipeline),
        known(index.size(), false), duration(index.size()),
        device(index.size()), consumer(index.size()), firstInput(index.size()),
        inputCount(index.size()), start(index.size(), -1.0),
        ends(index.size()) {
    assert(index.size() <= UINT32_MAX && "passes indexed in 32 bits");
  }

  size_t learn(const Work &work) {
    size_t id = index(work);
    if (known[id])
      return id;
    known[id] = true;
    duration[id] = durations.compute(work);
    device[id] = pipeline.getWorkDevice(work);
    int stage = getConsumerStage(pipeline, work);
    consumer[id] = stage >= 0 && pipeline.getDevice(stage) != device[id]
                       ? pipeline.getDevice(stage)
                       : -1;
    deps.clear();
    getAllDependencies(pipeline, work, deps);
    firstInput[id] = uint32_t(inputs.size());
    inputCount[id] = uint32_t(deps.size());
    extent = std::max(extent, id + 1);
    for (const Work &dep : deps) {
      size_t input = index(dep);
      extent = std::max(extent, input + 1);
      inputs.push_back({uint32_t(input), pipeline.getWorkDevice(dep)});
    }
    return id;
  }

  /// Runs each device's order as far as its inputs allow, round after
  /// round; false with `stuck` set if a pass never becomes ready.
  bool time(llvm::ArrayRef<std::vector<Work>> orders, OrderTiming &timing,
            Work &stuck) {
    int p = int(orders.size());
    // Only passes the clock knows, or their inputs, are ever written or
    // read; the rest stay as built. (The index has room for every kind of
    // pass, vocabulary ones included: refilling it all was a quarter of a
    // timing at p 64, m 512.) Learning during the run can only grow the
    // extent over entries still untouched.
    std::fill(start.begin(), start.begin() + extent, -1.0);
    std::fill(ends.begin(), ends.begin() + extent, End{});
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
          size_t id = learn(order[next[d]]);
          double begin = 0;
          bool ready = true;
          const Input *input = inputs.data() + firstInput[id];
          for (uint32_t k = 0; k < inputCount[id]; ++k, ++input) {
            const End &dep = ends[input->id];
            double depEnd = dep.end;
            if (depEnd < 0) {
              ready = false;
              break;
            }
            // From another device: through the link (a vocabulary
            // collective's contribution: one transfer later).
            if (input->device != d)
              depEnd =
                  dep.arrival >= 0 ? dep.arrival : depEnd + durations.transfer;
            begin = std::max(begin, depEnd);
          }
          if (!ready)
            break;
          begin = std::max(begin, free[d]);
          double finish = begin + duration[id];
          start[id] = begin;
          ends[id].end = finish;
          free[d] = finish;
          // The result travels to the consumer's device behind the
          // link's earlier sends (NCCL: one connection per peer, in
          // order; different peers overlap).
          if (consumer[id] >= 0) {
            double &link = linkFree[size_t(d) * p + consumer[id]];
            link = std::max(link, finish) + durations.transfer;
            ends[id].arrival = link;
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
    times.start = start;
    times.end.resize(ends.size());
    times.arrival.resize(ends.size());
    for (size_t i = 0; i < ends.size(); ++i) {
      times.end[i] = ends[i].end;
      times.arrival[i] = ends[i].arrival < 0 ? ends[i].end : ends[i].arrival;
    }
  }

  using Input = OrderClock::Input;
  const Pipeline &pipeline;
  const Durations &durations;
  WorkIndex index;
  std::vector<bool> known;
  std::vector<double> duration;
  std::vector<int> device, consumer;
  std::vector<uint32_t> firstInput, inputCount;
  std::vector<Input> inputs;
  /// A pass's end and, when its result goes to another device, when it
  /// arrives there (-1: not yet), side by side: a timing reads both.
  struct End {
    double end = -1, arrival = -1;
  };
  std::vector<double> start;
  std::vector<End> ends;
  /// One past the largest index learned or read as an input.
  size_t extent = 0;
  std::vector<double> linkFree;
  std::vector<size_t> next;
  std::vector<double> free;
  llvm::SmallVector<Work, 8> deps;
};

OrderClock::OrderClock(const Pipeline &pipeline, const Durations &durations)
    : tables(std::make_unique<Tables>(pipeline, durations)) {}

OrderClock::~OrderClock() = default;

size_t OrderClock::learn(const Work &work) { return tables->learn(work); }

double OrderClock::getDuration(size_t id) const { return tables->duration[id]; }

llvm::ArrayRef<OrderClock::Input> OrderClock::getInputs(size_t id) const {
  return llvm::ArrayRef<Input>(tables->inputs)
      .slice(tables->firstInput[id], tables->inputCount[id]);
}

std::optional<OrderTiming>
OrderClock::time(llvm::ArrayRef<std::vector<Work>> orders, std::string &error,
                 PassTimes *times) {
  OrderTiming timing;
  Work stuck;
  if (!tables->time(orders, timing, stuck)) {
    error = "the orders cannot execute: " + toString(stuck) +
            " waits for work that never runs";
    return std::nullopt;
  }
  if (times)
    tables->getTimes(*times);
  return timing;
}

namespace {
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

std::optional<OrderTiming> sched::timeOrders(
    const Pipeline &pipeline, llvm::ArrayRef<std::vector<Work>> orders,
    const Durations &durations, std::string &error, PassTimes *times) {
  return OrderClock(pipeline, durations).time(orders, error, times);
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
