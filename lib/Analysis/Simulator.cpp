//===- Simulator.cpp - Event simulation of per-device programs ------------===//

#include "sluice/Analysis/Simulator.h"

#include "llvm/ADT/DenseMap.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::sluice;
using namespace mlir::sluice::sched;

/// Each device's idle time and the bubble ratio, once the step is known.
static void finishStatistics(Simulation &sim) {
  double busy = 0;
  for (DeviceStatistics &stats : sim.devices) {
    stats.idle = sim.stepTime - stats.busy;
    busy += stats.busy;
  }
  double capacity = double(sim.devices.size()) * sim.stepTime;
  sim.bubbleRatio = capacity > 0 ? 1.0 - busy / capacity : 0.0;
}

FailureOr<Simulation> mlir::sluice::simulate(const Pipeline &pipeline,
                                             const Program &program,
                                             const SimulationCosts &costs,
                                             std::string &error) {
  int p = pipeline.devices;
  WorkIndex index(pipeline);
  CollectiveIndex cindex(pipeline);
  std::vector<double> finished(index.size(), -1.0);
  // Arrival time of a pass's result at a device: (work, device) -> time.
  llvm::DenseMap<std::pair<size_t, int>, double> arrival;

  // Collectives: issue times, how many devices issued, when each ends.
  std::vector<double> latestIssue(cindex.size(), 0.0);
  std::vector<int> joined(cindex.size(), 0);
  std::vector<double> collectiveEnd(cindex.size(), -1.0);
  // Each shard's collectives in their issue order, a queue of their own.
  std::vector<CollectiveId> order[2];
  if (p > 0)
    for (const Instr &instr : program.devices[0])
      if (instr.kind == InstrKind::Collective)
        order[int(instr.collective.shard)].push_back(instr.collective);
  size_t completedOf[2] = {0, 0};
  double freeOf[2] = {0, 0};

  struct DeviceState {
    size_t next = 0;
    double computeFree = 0;
    /// When each peer's send queue is free: NCCL runs sends to different
    /// peers at once (each on its own connection) and those to one peer in
    /// order.
    std::vector<double> sendFree;
    double activationUnits = 0;
    double activationBytes = 0;
    /// Activations from F to W (to BW when the backward is not split): what
    /// a weight pass still reads after B.
    double unitsUntilW = 0;
    // The collective at `next` has been joined (blocking ones wait there).
    bool joinedNext = false;
  };
  std::vector<DeviceState> state(p);
  for (DeviceState &st : state)
    st.sendFree.assign(p, 0.0);
  Simulation result;
  result.devices.resize(p);
  llvm::SmallVector<Work, 4> deps, contributions;
  llvm::SmallVector<CollectiveId, 2> inputs;

  // Completes, in the issue order, every collective all devices joined.
  auto settle = [&](ShardKind shard) {
    std::vector<CollectiveId> &queue = order[int(shard)];
    size_t &completed = completedOf[int(shard)];
    double &vocabFree = freeOf[int(shard)];
    while (completed < queue.size() && joined[cindex(queue[completed])] == p) {
      const CollectiveId &id = queue[completed++];
      double start = std::max(latestIssue[cindex(id)], vocabFree);
      double end = start + costs.collective(id);
      collectiveEnd[cindex(id)] = vocabFree = end;
      for (int d = 0; d < p; ++d)
        result.events.push_back(
            {d,
             pipeline.vocab.synchronous ? StreamKind::compute
                                        : StreamKind::vocab,
             InstrKind::Collective, Work{}, -1, id, start, end});
      result.stepTime = std::max(result.stepTime, end);
    }
  };

  // A device waits only at a receive, a pass reading an unfinished
  // collective, or a blocking collective; keep sweeping the devices until
  // a sweep moves nothing.
  for (bool moved = true; moved;) {
    moved = false;
    for (int d = 0; d < p; ++d) {
      DeviceState &st = state[d];
      size_t before = st.next;
      bool joinedBefore = st.joinedNext;
      DeviceStatistics &stats = result.devices[d];
      const auto &instrs = program.devices[d];
      for (; st.next < instrs.size(); ++st.next) {
        const Instr &instr = instrs[st.next];
        if (instr.kind == InstrKind::Recv) {
          if (!arrival.count({index(instr.work), d}))
            break;
          continue;
        }
        if (instr.kind == InstrKind::Collective) {
          size_t c = cindex(instr.collective);
          if (!st.joinedNext) {
            // Joined once the local contributions are done (asynchronous)
            // or when the device reaches it (blocking).
            double issue = instr.blocking ? st.computeFree : 0.0;
            contributions.clear();
            getCollectiveContributions(pipeline, instr.collective, d,
                                       contributions);
            for (const Work &w : contributions)
              issue = std::max(issue, finished[index(w)]);
            latestIssue[c] = std::max(latestIssue[c], issue);
            ++joined[c];
            st.joinedNext = true;
            settle(instr.collective.shard);
          }
          if (instr.blocking) {
            if (collectiveEnd[c] < 0)
              break;
            st.computeFree = std::max(st.computeFree, collectiveEnd[c]);
          }
          st.joinedNext = false;
          continue;
        }
        if (instr.kind == InstrKind::Send) {
          double ready = finished[index(instr.work)];
          double &queue = st.sendFree[instr.peer];
          double start = std::max(ready, queue);
          double end = start + costs.transfer(instr.work);
          queue = end;
          arrival[{index(instr.work), instr.peer}] = end;
          result.events.push_back({d, StreamKind::comm, InstrKind::Send,
                                   instr.work, instr.peer, CollectiveId{},
                                   start, end});
          result.stepTime = std::max(result.stepTime, end);
          continue;
        }
        // A pass starts when the stream is free and every input is here.
        double start = st.computeFree;
        inputs.clear();
        getCollectiveInputs(pipeline, instr.work, inputs);
        bool waiting = false;
        for (const CollectiveId &id : inputs) {
          if (collectiveEnd[cindex(id)] < 0) {
            waiting = true;
            break;
          }
          start = std::max(start, collectiveEnd[cindex(id)]);
        }
        if (waiting)
          break;
        deps.clear();
        getDependencies(pipeline, instr.work, deps);
        for (const Work &dep : deps) {
          if (pipeline.getWorkDevice(dep) == d)
            start = std::max(start, finished[index(dep)]);
          else
            start = std::max(start, arrival.lookup({index(dep), d}));
        }
        double duration = costs.compute(instr.work);
        double end = start + duration;
        finished[index(instr.work)] = end;
        st.computeFree = end;
        stats.busy += duration;
        result.events.push_back({d, StreamKind::compute, InstrKind::Exec,
                                 instr.work, -1, CollectiveId{}, start, end});
        result.stepTime = std::max(result.stepTime, end);

        // Activations live from the start of F to the end of B (or BW); a
        // shard's kept logits from its S to its T. What W reads lives on
        // until W ends.
        PassKind kind = instr.work.kind;
        if (kind == PassKind::F || kind == PassKind::W ||
            kind == PassKind::BW) {
          Work owner = instr.work;
          owner.kind = PassKind::F;
          st.unitsUntilW += (kind == PassKind::F ? 1.0 : -1.0) *
                            costs.activationUnits(owner);
          stats.peakActivationUnitsUntilW =
              std::max(stats.peakActivationUnitsUntilW, st.unitsUntilW);
        }
        bool allocates = kind == PassKind::F || kind == PassKind::S;
        bool frees =
            kind == PassKind::B || kind == PassKind::BW || kind == PassKind::T;
        if (allocates || frees) {
          Work owner = instr.work;
          owner.kind = isVocabPass(kind) ? PassKind::S : PassKind::F;
          double sign = allocates ? 1.0 : -1.0;
          if (!isVocabPass(kind))
            st.activationUnits += sign * costs.activationUnits(owner);
          st.activationBytes += sign * costs.activationBytes(owner);
          // A sliced microbatch's keys and values live from its first
          // slice's F to that slice's backward, its last.
          if (costs.keyValueBytes && !isVocabPass(kind) &&
              instr.work.slice == 0 && pipeline.slices > 1)
            st.activationBytes += sign * costs.keyValueBytes(instr.work.stage);
          stats.peakActivationUnits =
              std::max(stats.peakActivationUnits, st.activationUnits);
          stats.peakActivationBytes =
              std::max(stats.peakActivationBytes, st.activationBytes);
          result.memory.push_back({d, allocates ? start : end,
                                   st.activationBytes, st.activationUnits});
        }
      }
      moved |= st.next != before || st.joinedNext != joinedBefore;
    }
  }
  for (int d = 0; d < p; ++d)
    if (state[d].next < program.devices[d].size()) {
      const Instr &instr = program.devices[d][state[d].next];
      error = "device " + std::to_string(d) + " never gets past " +
              (instr.kind == InstrKind::Collective ? toString(instr.collective)
                                                   : toString(instr.work));
      return failure();
    }

  finishStatistics(result);
  return result;
}

void mlir::sluice::addOptimizerSteps(llvm::ArrayRef<double> times,
                                     Simulation &sim) {
  std::vector<double> last(sim.devices.size(), 0.0);
  for (const TimelineEvent &e : sim.events)
    if (e.device >= 0 && size_t(e.device) < last.size())
      last[e.device] = std::max(last[e.device], e.end);
  for (size_t d = 0; d < sim.devices.size() && d < times.size(); ++d) {
    if (times[d] <= 0)
      continue;
    sim.devices[d].optimizerTime = times[d];
    sim.devices[d].busy += times[d];
    sim.stepTime = std::max(sim.stepTime, last[d] + times[d]);
  }
  finishStatistics(sim);
}

LogicalResult mlir::sluice::addGradientSyncs(const Pipeline &pipeline,
                                             llvm::ArrayRef<GradientSync> syncs,
                                             Simulation &sim,
                                             std::string &error) {
  if (syncs.empty())
    return success();
  WorkIndex index(pipeline);
  std::vector<double> finished(index.size(), -1.0);
  for (const TimelineEvent &e : sim.events)
    if (e.kind == InstrKind::Exec)
      finished[index(e.work)] = e.end;
  std::vector<double> streamFree(pipeline.devices, 0.0);
  double passesEnd = sim.stepTime;
  for (const GradientSync &sync : syncs) {
    double ready = finished[index(sync.after)];
    if (ready < 0) {
      error = "the gradient all-reduce after " + toString(sync.after) +
              " on device " + std::to_string(sync.device) +
              " follows a pass that never ran";
      return failure();
    }
    double start = std::max(ready, streamFree[sync.device]);
    double end = start + sync.duration;
    streamFree[sync.device] = end;
    sim.events.push_back({sync.device, StreamKind::data, InstrKind::GradSync,
                          sync.after, -1, CollectiveId{}, start, end});
    DeviceStatistics &stats = sim.devices[sync.device];
    stats.gradientSync += sync.duration;
    stats.exposedGradientSync =
        std::max(stats.exposedGradientSync, end - passesEnd);
    sim.stepTime = std::max(sim.stepTime, end);
  }
  finishStatistics(sim);
  return success();
}
