//===- BuildingBlock.cpp - Schedules from repeated building blocks --------===//

#include "sluice/Schedule/BuildingBlock.h"

#include "sluice/Schedule/TimeOrders.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <array>
#include <deque>
#include <functional>
#include <limits>
#include <optional>
#include <queue>

using namespace mlir;
using namespace mlir::sluice;
using namespace mlir::sluice::sched;

BuildingBlock sched::getOneFOneBBlock(const Pipeline &pipeline,
                                      llvm::ArrayRef<int64_t> extraIntervals,
                                      llvm::ArrayRef<int64_t> weightLag) {
  const int64_t interval = 3;
  int64_t p = pipeline.devices;
  BuildingBlock block;
  block.interval = interval;
  for (int stage = 0; stage < pipeline.getNumStages(); ++stage) {
    int64_t d = pipeline.getDevice(stage);
    int64_t extra = extraIntervals.empty() ? 0 : extraIntervals[d];
    block.entries.push_back({Work{PassKind::F, stage, 0, 0}, d});
    // The last device starts the backward right after its F (at p); each
    // earlier device 2 units (one backward) later than the next. Split,
    // the W takes the backward's second unit, `weightLag[d]` intervals on.
    int64_t backward = 3 * p - 2 - 2 * d + interval * extra;
    block.entries.push_back(
        {Work{pipeline.getBackwardKind(), stage, 0, 0}, backward});
    int64_t lag = weightLag.empty() ? 0 : weightLag[d];
    if (pipeline.splitBackward)
      block.entries.push_back(
          {Work{PassKind::W, stage, 0, 0}, backward + 1 + interval * lag});
  }
  return block;
}

BuildingBlock sched::getVShapeBlock(const Pipeline &pipeline, int spacing,
                                    bool lagWeights) {
  const int64_t interval = 6;
  int p = pipeline.devices;
  BuildingBlock block;
  block.interval = interval;
  // Slots (time modulo the interval) taken on each device.
  std::vector<std::array<bool, interval>> taken(p);
  auto place = [&](int device, int64_t ready) {
    int64_t start = ready;
    while (taken[device][start % interval])
      ++start;
    taken[device][start % interval] = true;
    return start;
  };
  int numStages = pipeline.getNumStages();
  int64_t end = 0;
  for (int stage = 0; stage < numStages; ++stage) {
    int64_t ready = stage == 0 ? 0 : end + (stage < p ? spacing : 0);
    int64_t start = place(pipeline.getDevice(stage), ready);
    block.entries.push_back({Work{PassKind::F, stage, 0, 0}, start});
    end = start + 1;
  }
  std::vector<int64_t> backwardEnd(numStages);
  for (int stage = numStages - 1; stage >= 0; --stage) {
    bool slowed = stage >= p && stage < numStages - 1;
    int64_t start =
        place(pipeline.getDevice(stage), end + (slowed ? spacing : 0));
    block.entries.push_back({Work{PassKind::B, stage, 0, 0}, start});
    end = start + 1;
    backwardEnd[stage] = end;
  }
  // Each W takes the first free slot after its B (device d's, with
  // `lagWeights`, d intervals later): a device's two chunks leave exactly
  // two slots of the interval for W, so every W has a place in the steady
  // state and none piles up until the end of the step.
  for (int stage = numStages - 1; stage >= 0; --stage) {
    int device = pipeline.getDevice(stage);
    int64_t lag = lagWeights ? device : 0;
    block.entries.push_back(
        {Work{PassKind::W, stage, 0, 0},
         place(device, backwardEnd[stage] + interval * lag)});
  }
  return block;
}

int64_t sched::getBlockLength(PassKind kind) {
  if (isVocabPass(kind))
    return 0;
  return kind == PassKind::BW ? 2 : 1;
}

/// The entry of `kind` for `stage` in `block`, which must have it.
static const BlockEntry &findEntry(const BuildingBlock &block, PassKind kind,
                                   int stage) {
  for (const BlockEntry &entry : block.entries)
    if (entry.work.kind == kind && entry.work.stage == stage)
      return entry;
  llvm_unreachable("building block lacks a stage's pass");
}

void sched::addVocabularyPasses(const Pipeline &pipeline,
                                BuildingBlock &block) {
  const VocabLayers &vocab = pipeline.vocab;
  int64_t interval = block.interval;
  PassKind backward = pipeline.getBackwardKind();
  if (vocab.output) {
    int64_t widen = vocab.getBarriers() * interval;
    for (BlockEntry &entry : block.entries)
      if (entry.work.kind == backward || entry.work.kind == PassKind::W)
        entry.offset += widen;
  }
  // Read the (widened) positions the shard passes hang from.
  int64_t firstForward = findEntry(block, PassKind::F, 0).offset;
  const BlockEntry &firstBackward = findEntry(block, backward, 0);
  int64_t firstBackwardEnd = firstBackward.offset + getBlockLength(backward);
  int64_t lastForwardEnd =
      findEntry(block, PassKind::F, pipeline.getLastStage()).offset + 1;
  auto everywhere = [&](PassKind kind, int64_t offset) {
    for (int d = 0; d < pipeline.devices; ++d)
      block.entries.push_back({Work{kind, d, 0, 0}, offset, -1});
  };
  if (vocab.output) {
    // One shard pass per interval of the gap; the unit after the last F
    // leaves the broadcast of X (C0) time to arrive.
    int64_t at = lastForwardEnd + 1;
    for (PassKind kind : vocab.getOutputPasses()) {
      everywhere(kind, at);
      at += interval;
    }
  }
  if (vocab.input) {
    // IF one interval ahead, so that the reduce onto the first device has
    // that long; IB a unit after the backward, behind its broadcast.
    everywhere(PassKind::IF, firstForward - interval);
    everywhere(PassKind::IB, firstBackwardEnd + 1);
  }
}

namespace {
/// Slots of one device in a block being aligned: which units of the
/// interval are taken, and the lengths of the passes still to place.
struct DeviceSlots {
  std::vector<bool> taken;
  std::vector<int64_t> remaining;
};
} // namespace

/// Whether `lengths` fit into the free runs of `taken` (a linear view of
/// the interval: unit 0 follows a synchronisation point, so no pass may
/// wrap from the last unit to the first).
static bool fits(const std::vector<bool> &taken,
                 llvm::ArrayRef<int64_t> lengths) {
  std::vector<int64_t> runs;
  int64_t run = 0;
  for (bool t : taken) {
    if (t) {
      if (run)
        runs.push_back(run);
      run = 0;
    } else {
      ++run;
    }
  }
  if (run)
    runs.push_back(run);
  // Place the longest pass first, trying each run: the handful of passes a
  // device holds makes this search tiny.
  std::vector<int64_t> sorted(lengths.begin(), lengths.end());
  std::sort(sorted.rbegin(), sorted.rend());
  std::function<bool(size_t)> place = [&](size_t i) {
    if (i == sorted.size())
      return true;
    for (int64_t &r : runs)
      if (r >= sorted[i]) {
        r -= sorted[i];
        bool ok = place(i + 1);
        r += sorted[i];
        if (ok)
          return true;
      }
    return false;
  };
  return place(0);
}

/// Tries to align with interval `interval`.
static std::optional<BuildingBlock> alignWithInterval(const Pipeline &pipeline,
                                                      const BuildingBlock &base,
                                                      int64_t interval) {
  const VocabLayers &vocab = pipeline.vocab;
  PassKind backward = pipeline.getBackwardKind();
  std::vector<BlockEntry> order;
  for (const BlockEntry &entry : base.entries)
    if (!isVocabPass(entry.work.kind))
      order.push_back(entry);
  std::stable_sort(order.begin(), order.end(),
                   [](const BlockEntry &a, const BlockEntry &b) {
                     return a.offset < b.offset;
                   });
  std::vector<DeviceSlots> slots(pipeline.devices);
  for (DeviceSlots &device : slots)
    device.taken.assign(interval, false);
  for (const BlockEntry &entry : order)
    slots[pipeline.getWorkDevice(entry.work)].remaining.push_back(
        getBlockLength(entry.work.kind));

  auto roundUp = [&](int64_t t) {
    int64_t r = ((t % interval) + interval) % interval;
    return r == 0 ? t : t + interval - r;
  };
  auto roundDown = [&](int64_t t) {
    return t - (((t % interval) + interval) % interval);
  };
  auto mod = [&](int64_t t) { return ((t % interval) + interval) % interval; };

  BuildingBlock block;
  block.interval = interval;
  WorkIndex index(pipeline);
  std::vector<int64_t> end(index.size(), INT64_MIN);
  int64_t syncOutput = INT64_MIN;
  llvm::SmallVector<Work, 4> deps;
  for (const BlockEntry &entry : order) {
    const Work &work = entry.work;
    int device = pipeline.getWorkDevice(work);
    int64_t length = getBlockLength(work.kind);
    int64_t ready = entry.offset;
    deps.clear();
    getDependencies(pipeline, work, deps);
    for (const Work &dep : deps)
      ready = std::max(ready, end[index(dep)]);
    bool lastBackward =
        work.kind == backward && work.stage == pipeline.getLastStage();
    if (vocab.output && lastBackward) {
      // The output layer's synchronisation point: the first one after the
      // last F; the last stage's backward follows it.
      syncOutput = roundUp(end[index(Work{PassKind::F, work.stage, 0, 0})]);
      ready = std::max(ready, syncOutput);
    }
    DeviceSlots &dev = slots[device];
    auto it = llvm::find(dev.remaining, length);
    dev.remaining.erase(it);
    std::optional<int64_t> start;
    for (int64_t t = ready; t < ready + 4 * interval; ++t) {
      bool free = true;
      for (int64_t u = 0; u < length && free; ++u)
        free = !dev.taken[mod(t + u)];
      // A synchronisation point may not fall strictly inside the pass.
      if (!free || (length > 1 && roundUp(t + 1) < t + length))
        continue;
      for (int64_t u = 0; u < length; ++u)
        dev.taken[mod(t + u)] = true;
      if (fits(dev.taken, dev.remaining)) {
        start = t;
        break;
      }
      for (int64_t u = 0; u < length; ++u)
        dev.taken[mod(t + u)] = false;
    }
    if (!start)
      return std::nullopt;
    end[index(work)] = *start + length;
    block.entries.push_back({work, *start, 0});
  }

  // The shard passes at the synchronisation points, in their order.
  auto everywhere = [&](PassKind kind, int64_t offset, int rank) {
    for (int d = 0; d < pipeline.devices; ++d)
      block.entries.push_back({Work{kind, d, 0, 0}, offset, rank});
  };
  if (vocab.output) {
    int rank = -3;
    for (PassKind kind : vocab.getOutputPasses())
      everywhere(kind, syncOutput, rank++);
  }
  if (vocab.input) {
    everywhere(PassKind::IF, roundDown(findEntry(block, PassKind::F, 0).offset),
               -4);
    everywhere(PassKind::IB, roundUp(end[index(Work{backward, 0, 0, 0})]), -4);
  }
  return block;
}

FailureOr<BuildingBlock>
sched::alignSynchronousVocabulary(const Pipeline &pipeline,
                                  const BuildingBlock &base) {
  // Widen the interval (adding idle units) only if the base interval
  // admits no layout.
  for (int64_t interval = base.interval; interval <= 2 * base.interval;
       ++interval)
    if (std::optional<BuildingBlock> block =
            alignWithInterval(pipeline, base, interval))
      return *block;
  return failure();
}

std::vector<std::vector<Work>> sched::expandBlock(const Pipeline &pipeline,
                                                  const BuildingBlock &block) {
  struct Timed {
    int64_t start;
    int rank;
    Work work;
  };
  std::vector<std::vector<Timed>> timed(pipeline.devices);
  for (int mb = 0; mb < pipeline.microbatches; ++mb)
    for (const BlockEntry &entry : block.entries) {
      Work work = entry.work;
      work.microbatch = mb;
      timed[pipeline.getWorkDevice(work)].push_back(
          {entry.offset + mb * block.interval, entry.rank, work});
    }
  std::vector<std::vector<Work>> orders(pipeline.devices);
  for (int d = 0; d < pipeline.devices; ++d) {
    // Ties cannot occur within a well-formed block; the kind breaks them
    // deterministically anyway.
    std::stable_sort(timed[d].begin(), timed[d].end(),
                     [](const Timed &a, const Timed &b) {
                       if (a.start != b.start)
                         return a.start < b.start;
                       if (a.rank != b.rank)
                         return a.rank < b.rank;
                       return a.work.kind > b.work.kind;
                     });
    for (const Timed &t : timed[d])
      orders[d].push_back(t.work);
  }
  return orders;
}

namespace {
/// refineOrders' list scheduler: steps every device through its order in
/// time, one event at a time (the earliest device whose clock is due).
class OrderRefiner {
public:
  OrderRefiner(const Pipeline &pipeline,
               const std::vector<std::vector<Work>> &orders, OrderClock &clock,
               double transfer)
      : pipeline(pipeline), orders(orders), clock(clock), transfer(transfer),
        end(WorkIndex(pipeline).size(), -1.0),
        floatVocab(pipeline.vocab.any() && !pipeline.vocab.synchronous),
        state(pipeline.devices), result(pipeline.devices) {
    for (int d = 0; d < pipeline.devices; ++d)
      result[d].reserve(orders[d].size());
  }

  FailureOr<std::vector<std::vector<Work>>> run(std::string &error) {
    if (floatVocab) {
      for (int d = 0; d < pipeline.devices; ++d)
        events.push({0.0, d});
      while (!events.empty()) {
        auto [time, d] = events.top();
        events.pop();
        if (!state[d].waiting && time == state[d].time)
          step(d);
      }
    } else {
      // Without floating vocabulary passes every decision of a device
      // reads only ends already known (a pass whose producer has not run
      // makes it wait), so the devices can go in any interleaving: each
      // as far as it can, round after round, with no event queue (the
      // queue was a third of a refinement at p 64, m 512). The result is
      // the event order's.
      for (bool moved = true; moved;) {
        moved = false;
        for (int d = 0; d < pipeline.devices; ++d)
          while (advance(d))
            moved = true;
      }
    }
    for (int d = 0; d < pipeline.devices; ++d) {
      const DeviceState &st = state[d];
      if (st.next == orders[d].size() && st.deferred.empty())
        continue;
      const Work &stuck = st.next != orders[d].size() ? orders[d][st.next]
                                                      : st.deferred.front();
      error = "device " + std::to_string(d) + " cannot run " + toString(stuck) +
              ": its inputs are never produced before it";
      return failure();
    }
    return std::move(result);
  }

private:
  struct DeviceState {
    size_t next = 0;
    double time = 0;
    // W passes whose B has run, oldest first; some may have run already.
    std::deque<Work> dueW;
    // Vocabulary passes passed over because their inputs were not ready.
    std::vector<Work> deferred;
    bool waiting = false;
  };

  /// One decision of device `d` at its clock: run a pass (a deferred
  /// vocabulary pass, the next of its order, or a due W in the gap), pass
  /// a late vocabulary pass over, or wait.
  void step(int d) {
    DeviceState &st = state[d];
    if (runDeferred(d)) {
      events.push({st.time, d});
      return;
    }
    // A W that already ran early is skipped at its own place.
    const auto &order = orders[d];
    while (st.next < order.size() && order[st.next].kind == PassKind::W &&
           end[clock.learn(order[st.next])] >= 0)
      ++st.next;
    std::optional<double> ready;
    size_t missing = kNone;
    if (st.next < order.size()) {
      const Work &work = order[st.next];
      ready = readyTime(d, work, missing);
      if (ready && *ready <= st.time) {
        ++st.next;
        runPass(d, work);
        events.push({st.time, d});
        return;
      }
      // A vocabulary pass whose inputs are late does not hold the device
      // up: the passes after it go first (in the warm-up, devices reach
      // the block's nominal place of S long before the last stage's F).
      if (floatVocab && isVocabPass(work.kind)) {
        st.deferred.push_back(work);
        ++st.next;
        events.push({st.time, d});
        return;
      }
      // The next pass cannot start yet: a due W fills the gap, if it ends
      // before the pass's inputs arrive. One that overran would delay the
      // pass, and the delay would cascade down the pipeline (a 0.1 wait
      // for a transfer becoming a whole W); left due, it runs in a later
      // gap that fits or at its own place in the order. While an input's
      // producer has not run, the gap is unknown: the device waits, and is
      // woken with it known.
      if (ready && runDueW(d, *ready)) {
        events.push({st.time, d});
        return;
      }
    } else if (st.deferred.empty()) {
      return;
    }
    wait(d, ready, missing);
  }

  /// step() without vocabulary passes to defer, for the round-robin run:
  /// one decision of device `d` (run the next pass, a due W in the gap
  /// before it, or wait until its inputs are here); false if its order
  /// is done or a producer of the next pass has not run.
  bool advance(int d) {
    DeviceState &st = state[d];
    const auto &order = orders[d];
    while (st.next < order.size() && order[st.next].kind == PassKind::W &&
           end[clock.learn(order[st.next])] >= 0)
      ++st.next;
    if (st.next == order.size())
      return false;
    const Work &work = order[st.next];
    size_t missing = kNone;
    std::optional<double> ready = readyTime(d, work, missing);
    if (!ready)
      return false;
    if (*ready <= st.time) {
      ++st.next;
      runPass(d, work);
    } else if (!runDueW(d, *ready)) {
      st.time = *ready;
    }
    return true;
  }

  /// Runs a deferred vocabulary pass whose inputs are here, if any.
  bool runDeferred(int d) {
    DeviceState &st = state[d];
    for (size_t i = 0; i < st.deferred.size(); ++i) {
      size_t missing = kNone;
      std::optional<double> ready = readyTime(d, st.deferred[i], missing);
      if (ready && *ready <= st.time) {
        Work work = st.deferred[i];
        st.deferred.erase(st.deferred.begin() + i);
        runPass(d, work);
        return true;
      }
    }
    return false;
  }

  /// Waits for the next pass (ready at `ready`, or blocked on `missing`)
  /// or any deferred one, whichever can go first; with none known, until
  /// a blocking producer runs.
  void wait(int d, std::optional<double> ready, size_t missing) {
    DeviceState &st = state[d];
    double wake = ready ? *ready : std::numeric_limits<double>::infinity();
    llvm::SmallVector<size_t, 4> blockers;
    if (missing != kNone)
      blockers.push_back(missing);
    for (const Work &work : st.deferred) {
      size_t absent = kNone;
      std::optional<double> at = readyTime(d, work, absent);
      if (at)
        wake = std::min(wake, *at);
      else
        blockers.push_back(absent);
    }
    if (wake != std::numeric_limits<double>::infinity()) {
      st.time = std::max(st.time, wake);
      events.push({st.time, d});
      return;
    }
    st.waiting = true;
    for (size_t blocker : blockers)
      waiters[blocker].push_back(d);
  }

  void runPass(int d, const Work &work) {
    DeviceState &st = state[d];
    size_t id = clock.learn(work);
    double finish = st.time + clock.getDuration(id);
    end[id] = finish;
    st.time = finish;
    result[d].push_back(work);
    if (work.kind == PassKind::B && pipeline.splitBackward)
      st.dueW.push_back(
          Work{PassKind::W, work.stage, work.microbatch, work.slice});
    auto it = waiters.find(id);
    if (it == waiters.end())
      return;
    for (int waiter : it->second) {
      state[waiter].waiting = false;
      events.push({state[waiter].time, waiter});
    }
    waiters.erase(it);
  }

  /// Runs the oldest due W that has not run yet if it ends by `until`;
  /// false if there is none or it would not.
  bool runDueW(int d, double until) {
    DeviceState &st = state[d];
    while (!st.dueW.empty() && end[clock.learn(st.dueW.front())] >= 0)
      st.dueW.pop_front();
    if (st.dueW.empty() ||
        st.time + clock.getDuration(clock.learn(st.dueW.front())) >
            until + 1e-12)
      return false;
    Work w = st.dueW.front();
    st.dueW.pop_front();
    runPass(d, w);
    return true;
  }

  /// When `work` could start on device d: its inputs' ends (a transfer
  /// later from another device), or nullopt with `missing` set to the
  /// index of one that has not run yet.
  std::optional<double> readyTime(int d, const Work &work, size_t &missing) {
    double ready = 0;
    for (const OrderClock::Input &input : clock.getInputs(clock.learn(work))) {
      double depEnd = end[input.id];
      if (depEnd < 0) {
        missing = input.id;
        return std::nullopt;
      }
      if (input.device != d)
        depEnd += transfer;
      ready = std::max(ready, depEnd);
    }
    return ready;
  }

  static constexpr size_t kNone = ~size_t(0);
  const Pipeline &pipeline;
  const std::vector<std::vector<Work>> &orders;
  OrderClock &clock;
  double transfer;
  std::vector<double> end;
  bool floatVocab;
  std::vector<DeviceState> state;
  std::vector<std::vector<Work>> result;
  llvm::DenseMap<size_t, llvm::SmallVector<int, 2>> waiters;
  using Event = std::pair<double, int>;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events;
};
} // namespace

FailureOr<std::vector<std::vector<Work>>> sched::refineOrders(
    const Pipeline &pipeline, const std::vector<std::vector<Work>> &orders,
    const Durations &durations, std::string &error, OrderClock *clock) {
  if (!clock) {
    OrderClock own(pipeline, durations);
    return refineOrders(pipeline, orders, durations, error, &own);
  }
  return OrderRefiner(pipeline, orders, *clock, durations.transfer).run(error);
}
