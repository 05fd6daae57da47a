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
                                      llvm::ArrayRef<int64_t> extraIntervals) {
  const int64_t interval = 3;
  int64_t p = pipeline.devices;
  BuildingBlock block;
  block.interval = interval;
  for (int stage = 0; stage < pipeline.getNumStages(); ++stage) {
    int64_t d = pipeline.getDevice(stage);
    int64_t extra = extraIntervals.empty() ? 0 : extraIntervals[d];
    block.entries.push_back({Work{PassKind::F, stage, 0, 0}, d});
    // The last device starts the backward right after its F (at p); each
    // earlier device 2 units (one backward) later than the next.
    block.entries.push_back({Work{pipeline.getBackwardKind(), stage, 0, 0},
                             3 * p - 2 - 2 * d + interval * extra});
  }
  return block;
}

BuildingBlock sched::getVShapeBlock(const Pipeline &pipeline, int spacing) {
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
  for (int stage = numStages - 1; stage >= 0; --stage) {
    bool slowed = stage >= p && stage < numStages - 1;
    int64_t start =
        place(pipeline.getDevice(stage), end + (slowed ? spacing : 0));
    block.entries.push_back({Work{PassKind::B, stage, 0, 0}, start});
    end = start + 1;
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
sched::fillWeightPasses(const Pipeline &pipeline,
                        std::vector<std::vector<Work>> orders,
                        const Durations &durations, std::string &error) {
  int p = pipeline.devices;
  WorkIndex index(pipeline);
  std::vector<double> end(index.size(), -1.0);
  struct DeviceState {
    size_t next = 0;
    double time = 0;
    std::deque<Work> pendingW;
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
      st.pendingW.push_back(
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
  auto runPendingW = [&](int d) {
    Work w = state[d].pendingW.front();
    state[d].pendingW.pop_front();
    run(d, w);
  };

  llvm::SmallVector<Work, 4> deps;
  while (!events.empty()) {
    auto [time, d] = events.top();
    events.pop();
    DeviceState &st = state[d];
    if (st.waiting || time != st.time)
      continue;
    if (st.next == orders[d].size()) {
      // Out of passes: the remaining W's run back to back.
      while (!st.pendingW.empty())
        runPendingW(d);
      continue;
    }
    const Work &work = orders[d][st.next];
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
    } else if (!st.pendingW.empty()) {
      // The next pass cannot start now: a W fills the gap.
      runPendingW(d);
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
