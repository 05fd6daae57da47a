//===- TimeOrders.cpp - Orders executed strictly, in time -----------------===//

#include "sluice/Schedule/TimeOrders.h"

#include <algorithm>
#include <cassert>
#include <limits>

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
    sends.resize(size_t(p) * p);
    for (auto &list : sends)
      list.clear();

    size_t total = 0;
    for (const auto &order : orders)
      total += order.size();
    timing = OrderTiming{};
    reference.reset();
    if (!run(orders, total, timing, stuck, /*retiming=*/false))
      return false;
    reference = timing;
    return true;
  }

  /// time() for `orders` that differ from the last ones timed only in
  /// `device`'s positions [first, last], which hold the same passes in
  /// another order (the polisher's moves). Every pass that started before
  /// the earliest of those is unaffected -- its inputs ended before that,
  /// and each link's sends before it are the same ones in the same order
  /// -- so the devices resume from there; the last timing's times are put
  /// back afterwards, so every candidate is timed against them. A pass's
  /// end is the same sum of the same operands whether timed whole or
  /// resumed, so the step time is the one time() gives, and the sum of
  /// ends differs from the last timing's by exactly the changes.
  bool retime(llvm::ArrayRef<std::vector<Work>> orders, int device,
              size_t first, size_t last, OrderTiming &timing, Work &stuck) {
    int p = int(orders.size());
    if (!reference || p != int(next.size()))
      return time(orders, timing, stuck);
    double from = std::numeric_limits<double>::infinity();
    for (size_t j = first; j <= last; ++j)
      from = std::min(from, start[learn(orders[device][j])]);
    // Where each device resumes: its first pass that started at `from` or
    // later (a device runs its passes in order, so starts only grow).
    timing = OrderTiming{};
    size_t remaining = 0;
    linkFree.assign(size_t(p) * p, 0.0);
    for (int d = 0; d < p; ++d) {
      const std::vector<Work> &order = orders[d];
      size_t limit = d == device ? first : order.size();
      size_t cut = size_t(
          std::partition_point(order.begin(), order.begin() + limit,
                               [&](const Work &w) {
                                 return start[learn(w)] < from;
                               }) -
          order.begin());
      next[d] = cut;
      free[d] = cut > 0 ? ends[learn(order[cut - 1])].end : 0.0;
      timing.makespan = std::max(timing.makespan, free[d]);
      remaining += order.size() - cut;
      // The link to each peer is free after the last send to it so far.
      for (int c = 0; c < p; ++c) {
        const auto &list = sends[size_t(d) * p + c];
        auto after = std::partition_point(
            list.begin(), list.end(),
            [&](const Send &send) { return send.position < cut; });
        if (after != list.begin())
          linkFree[size_t(d) * p + c] = std::prev(after)->arrival;
      }
      for (size_t j = cut; j < order.size(); ++j) {
        size_t id = learn(order[j]);
        saved.push_back({id, start[id], ends[id]});
        start[id] = -1;
        ends[id] = End{};
      }
    }
    if (savedEnd.size() < extent)
      savedEnd.resize(extent);
    for (const Saved &entry : saved)
      savedEnd[entry.id] = entry.ends.end;
    bool ran = run(orders, remaining, timing, stuck, /*retiming=*/true);
    timing.totalEnd += reference->totalEnd;
    for (const Saved &entry : saved) {
      start[entry.id] = entry.start;
      ends[entry.id] = entry.ends;
    }
    saved.clear();
    return ran;
  }

  /// Runs the devices from next[d] until `remaining` more passes have
  /// run, adding to `timing` (retiming: each pass's change of end). A
  /// device runs until a pass's input is missing and then waits on that
  /// input, woken when it ends: polling every device in rounds cost a
  /// round per device-to-device hop against the pipeline's direction,
  /// each round a look at every device (most of a timing at p 64). The
  /// times do not depend on which device runs first: a pass starts when
  /// its inputs and its device are free, and each link's sends are its
  /// device's, in that device's order.
  bool run(llvm::ArrayRef<std::vector<Work>> orders, size_t remaining,
           OrderTiming &timing, Work &stuck, bool retiming) {
    int p = int(orders.size());
    size_t done = 0;
    if (waitHead.size() < ends.size())
      waitHead.resize(ends.size(), -1);
    waitNext.assign(p, -1);
    waitingOn.assign(p, kNone);
    runnable.clear();
    for (int d = p - 1; d >= 0; --d)
      runnable.push_back(d);
    while (!runnable.empty()) {
      int d = runnable.back();
      runnable.pop_back();
      const auto &order = orders[d];
      while (next[d] < order.size()) {
        size_t id = learn(order[next[d]]);
        double begin = 0;
        size_t missing = kNone;
        const Input *input = inputs.data() + firstInput[id];
        for (uint32_t k = 0; k < inputCount[id]; ++k, ++input) {
          const End &dep = ends[input->id];
          double depEnd = dep.end;
          if (depEnd < 0) {
            missing = input->id;
            break;
          }
          // From another device: through the link (a vocabulary
          // collective's contribution: one transfer later).
          if (input->device != d)
            depEnd =
                dep.arrival >= 0 ? dep.arrival : depEnd + durations.transfer;
          begin = std::max(begin, depEnd);
        }
        if (missing != kNone) {
          waitingOn[d] = missing;
          waitNext[d] = waitHead[missing];
          waitHead[missing] = d;
          break;
        }
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
          if (!retiming)
            sends[size_t(d) * p + consumer[id]].push_back({next[d], link});
        }
        timing.makespan = std::max(timing.makespan, finish);
        timing.totalEnd += retiming ? finish - savedEnd[id] : finish;
        ++next[d];
        ++done;
        for (int w = waitHead[id]; w >= 0; w = waitNext[w]) {
          waitingOn[w] = kNone;
          runnable.push_back(w);
        }
        waitHead[id] = -1;
      }
    }
    if (done == remaining)
      return true;
    for (int d = 0; d < p; ++d)
      if (waitingOn[d] != kNone)
        waitHead[waitingOn[d]] = -1;
    for (int d = 0; d < p; ++d)
      if (next[d] < orders[d].size()) {
        stuck = orders[d][next[d]];
        break;
      }
    return false;
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
  /// The last whole timing's result, while its times are in the tables.
  std::optional<OrderTiming> reference;
  /// retime(): the times it overwrote, and each such pass's former end.
  struct Saved {
    size_t id;
    double start;
    End ends;
  };
  std::vector<Saved> saved;
  std::vector<double> savedEnd;
  /// The last whole timing's sends per link (device * p + peer), in
  /// order: where in its device's order each was and when it arrived.
  struct Send {
    size_t position;
    double arrival;
  };
  std::vector<std::vector<Send>> sends;
  /// run(): the devices ready to go on, and those waiting, per pass, on
  /// its end (a list through waitNext; -1 ends it).
  static constexpr size_t kNone = ~size_t(0);
  std::vector<int> runnable, waitHead, waitNext;
  std::vector<size_t> waitingOn;
};

OrderClock::OrderClock(const Pipeline &pipeline, const Durations &durations)
    : tables(std::make_unique<Tables>(pipeline, durations)) {}

OrderClock::~OrderClock() = default;

size_t OrderClock::learn(const Work &work) { return tables->learn(work); }

double OrderClock::getDuration(size_t id) const { return tables->duration[id]; }

std::optional<OrderTiming>
OrderClock::retime(llvm::ArrayRef<std::vector<Work>> orders, int device,
                   size_t first, size_t last, std::string &error) {
  OrderTiming timing;
  Work stuck;
  if (!tables->retime(orders, device, first, last, timing, stuck)) {
    error = "the orders cannot execute: " + toString(stuck) +
            " waits for work that never runs";
    return std::nullopt;
  }
  return timing;
}

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
