//===- BuildingBlock.cpp - Schedules from repeated building blocks --------===//

#include "sluice/Schedule/BuildingBlock.h"

#include "llvm/ADT/DenseMap.h"

#include <algorithm>
#include <array>
#include <deque>
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

std::vector<std::vector<Work>> sched::expandBlock(const Pipeline &pipeline,
                                                  const BuildingBlock &block) {
  struct Timed {
    int64_t start;
    Work work;
  };
  std::vector<std::vector<Timed>> timed(pipeline.devices);
  for (int mb = 0; mb < pipeline.microbatches; ++mb)
    for (const BlockEntry &entry : block.entries) {
      Work work = entry.work;
      work.microbatch = mb;
      timed[pipeline.getDevice(work.stage)].push_back(
          {entry.offset + mb * block.interval, work});
    }
  std::vector<std::vector<Work>> orders(pipeline.devices);
  for (int d = 0; d < pipeline.devices; ++d) {
    // Ties cannot occur within a well-formed block; the kind breaks them
    // deterministically anyway.
    std::stable_sort(timed[d].begin(), timed[d].end(),
                     [](const Timed &a, const Timed &b) {
                       if (a.start != b.start)
                         return a.start < b.start;
                       return a.work.kind > b.work.kind;
                     });
    for (const Timed &t : timed[d])
      orders[d].push_back(t.work);
  }
  return orders;
}

FailureOr<std::vector<std::vector<Work>>>
sched::advanceWeightPasses(const Pipeline &pipeline,
                           const std::vector<std::vector<Work>> &orders,
                           const Durations &durations, std::string &error) {
  int p = pipeline.devices;
  WorkIndex index(pipeline);
  std::vector<double> end(index.size(), -1.0);
  struct DeviceState {
    size_t next = 0;
    double time = 0;
    // W passes whose B has run, oldest first; some may have run already.
    std::deque<Work> dueW;
    bool waiting = false;
  };
  std::vector<DeviceState> state(p);
  std::vector<std::vector<Work>> result(p);
  llvm::DenseMap<size_t, llvm::SmallVector<int, 2>> waiters;
  using Event = std::pair<double, int>;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events;
  for (int d = 0; d < p; ++d)
    events.push({0.0, d});

  auto run = [&](int d, const Work &work) {
    DeviceState &st = state[d];
    double finish = st.time + durations.compute(work);
    end[index(work)] = finish;
    st.time = finish;
    result[d].push_back(work);
    if (work.kind == PassKind::B)
      st.dueW.push_back(
          Work{PassKind::W, work.stage, work.microbatch, work.slice});
    auto it = waiters.find(index(work));
    if (it == waiters.end())
      return;
    for (int waiter : it->second) {
      state[waiter].waiting = false;
      events.push({state[waiter].time, waiter});
    }
    waiters.erase(it);
  };
  // Runs the oldest due W that has not run yet; false if there is none.
  auto runDueW = [&](int d) {
    DeviceState &st = state[d];
    while (!st.dueW.empty() && end[index(st.dueW.front())] >= 0)
      st.dueW.pop_front();
    if (st.dueW.empty())
      return false;
    Work w = st.dueW.front();
    st.dueW.pop_front();
    run(d, w);
    return true;
  };

  llvm::SmallVector<Work, 4> deps;
  while (!events.empty()) {
    auto [time, d] = events.top();
    events.pop();
    DeviceState &st = state[d];
    if (st.waiting || time != st.time)
      continue;
    // A W that already ran early is skipped at its own place.
    const auto &order = orders[d];
    while (st.next < order.size() && order[st.next].kind == PassKind::W &&
           end[index(order[st.next])] >= 0)
      ++st.next;
    if (st.next == order.size())
      continue;
    const Work &work = order[st.next];
    deps.clear();
    getDependencies(pipeline, work, deps);
    double ready = 0;
    const Work *missing = nullptr;
    for (const Work &dep : deps) {
      double depEnd = end[index(dep)];
      if (depEnd < 0) {
        missing = &dep;
        break;
      }
      if (pipeline.getDevice(dep.stage) != d)
        depEnd += durations.transfer;
      ready = std::max(ready, depEnd);
    }
    if (!missing && ready <= st.time) {
      ++st.next;
      run(d, work);
    } else if (runDueW(d)) {
      // The next pass cannot start yet: a due W fills the gap.
    } else if (!missing) {
      st.time = ready;
    } else {
      st.waiting = true;
      waiters[index(*missing)].push_back(d);
      continue;
    }
    events.push({st.time, d});
  }
  for (int d = 0; d < p; ++d)
    if (state[d].next != orders[d].size()) {
      error = "device " + std::to_string(d) + " cannot run " +
              toString(orders[d][state[d].next]) +
              ": its inputs are never produced before it";
      return failure();
    }
  return result;
}
