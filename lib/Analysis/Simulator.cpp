//===- Simulator.cpp - Event simulation of per-device programs ------------===//

#include "sluice/Analysis/Simulator.h"
#include "sluice/Schedule/ProgramRunner.h"

#include "llvm/ADT/DenseMap.h"

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

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

namespace {
/// One part of a pass's chain in a layer: compute or communication, and
/// its share of the pass's total of that kind (getPairTime).
struct Part {
  bool compute;
  double share;
};
constexpr Part kForwardLayer[] = {{true, 0.5},     {false, 1.0 / 3},
                                  {false, 1.0 / 3}, {true, 0.25},
                                  {false, 1.0 / 3}, {true, 0.25}};
constexpr Part kBackwardLayer[] = {
    {true, 0.25}, {false, 0.5}, {true, 0.5}, {false, 0.5}, {true, 0.25}};
} // namespace

double mlir::sluice::getPairTime(const PassSplit &forward,
                                 const PassSplit &backward, int layers) {
  layers = std::max(1, layers);
  struct Chain {
    std::vector<std::pair<bool, double>> parts; // compute?, seconds
    size_t next = 0;
    double ready = 0;
  };
  auto build = [&](const PassSplit &split, llvm::ArrayRef<Part> layer) {
    Chain chain;
    for (int l = 0; l < layers; ++l)
      for (const Part &part : layer)
        chain.parts.push_back(
            {part.compute,
             (part.compute ? split.compute : split.communication) *
                 part.share / layers});
    if (split.after > 0)
      chain.parts.push_back({true, split.after});
    return chain;
  };
  // The backward first: it wins ties, as the runtime starts it.
  Chain chains[2] = {build(backward, kBackwardLayer),
                     build(forward, kForwardLayer)};
  double streamFree[2] = {0, 0}; // compute, communication
  double end = 0;
  while (true) {
    int best = -1;
    double bestStart = 0;
    for (int c = 0; c < 2; ++c) {
      Chain &chain = chains[c];
      if (chain.next >= chain.parts.size())
        continue;
      double start = std::max(chain.ready,
                              streamFree[chain.parts[chain.next].first ? 0 : 1]);
      if (best < 0 || start < bestStart) {
        best = c;
        bestStart = start;
      }
    }
    if (best < 0)
      break;
    Chain &chain = chains[best];
    auto [compute, length] = chain.parts[chain.next++];
    double finish = bestStart + length;
    chain.ready = streamFree[compute ? 0 : 1] = finish;
    end = std::max(end, finish);
  }
  return end;
}

namespace {
/// Times and memory for the program runner's steps (ProgramRunner.h):
/// collectives start when their last part is issued and their queue is
/// free, sends when their pass has finished and their peer's queue is
/// free, passes when the compute stream is free and every input is there.
class TimingObserver : public ProgramObserver {
public:
  TimingObserver(const Pipeline &pipeline, const SimulationCosts &costs)
      : pipeline(pipeline), costs(costs), index(pipeline), cindex(pipeline),
        finished(index.size(), -1.0), latestIssue(cindex.size(), 0.0),
        collectiveEnd(cindex.size(), -1.0), state(pipeline.devices) {
    for (DeviceState &st : state)
      st.sendFree.assign(pipeline.devices, 0.0);
    result.devices.resize(pipeline.devices);
  }

  Simulation result;

  /// Joined once the local contributions are done (asynchronous) or when
  /// the device reaches it (blocking).
  void joined(int d, const Instr &instr) override {
    double issue = instr.blocking ? state[d].computeFree : 0.0;
    contributions.clear();
    getCollectiveContributions(pipeline, instr.collective, d, contributions);
    for (const Work &w : contributions)
      issue = std::max(issue, finished[index(w)]);
    double &latest = latestIssue[cindex(instr.collective)];
    latest = std::max(latest, issue);
  }

  void completed(const CollectiveId &id) override {
    double &queueFree = shardFree[int(id.shard)];
    double start = std::max(latestIssue[cindex(id)], queueFree);
    double end = start + costs.collective(id);
    collectiveEnd[cindex(id)] = queueFree = end;
    for (int d = 0; d < pipeline.devices; ++d)
      result.events.push_back(
          {d,
           pipeline.vocab.synchronous ? StreamKind::compute
                                      : StreamKind::vocab,
           InstrKind::Collective, Work{}, -1, id, start, end});
    result.stepTime = std::max(result.stepTime, end);
  }

  void passedBlocking(int d, const Instr &instr) override {
    state[d].computeFree = std::max(state[d].computeFree,
                                    collectiveEnd[cindex(instr.collective)]);
  }

  /// NCCL runs sends to different peers at once (each on its own
  /// connection) and those to one peer in order.
  void sent(int d, const Instr &instr) override {
    double ready = finished[index(instr.work)];
    double &queue = state[d].sendFree[instr.peer];
    double start = std::max(ready, queue);
    double end = start + costs.transfer(instr.work);
    queue = end;
    arrival[{index(instr.work), instr.peer}] = end;
    result.events.push_back({d, StreamKind::comm, InstrKind::Send, instr.work,
                             instr.peer, CollectiveId{}, start, end});
    result.stepTime = std::max(result.stepTime, end);
  }

  void executed(int d, const Instr &instr) override {
    DeviceState &st = state[d];
    if (instr.paired) {
      // The rest of its group comes next: the group is timed as one.
      st.pending.push_back(instr.work);
      return;
    }
    if (!st.pending.empty()) {
      st.pending.push_back(instr.work);
      runGroup(d, st.pending);
      st.pending.clear();
      return;
    }
    double start = std::max(st.computeFree, getReady(d, instr.work));
    double duration = costs.compute(instr.work);
    double end = start + duration;
    finished[index(instr.work)] = end;
    st.computeFree = end;
    result.devices[d].busy += duration;
    result.events.push_back({d, StreamKind::compute, InstrKind::Exec,
                             instr.work, -1, CollectiveId{}, start, end});
    result.stepTime = std::max(result.stepTime, end);
    trackMemory(d, instr.work, start, end);
  }

private:
  /// When `work`'s inputs are on device `d`: the collectives it reads,
  /// its own earlier passes, other devices' results arrived.
  double getReady(int d, const Work &work) {
    double ready = 0;
    inputs.clear();
    getCollectiveInputs(pipeline, work, inputs);
    for (const CollectiveId &id : inputs)
      ready = std::max(ready, collectiveEnd[cindex(id)]);
    deps.clear();
    getDependencies(pipeline, work, deps);
    for (const Work &dep : deps) {
      if (pipeline.getWorkDevice(dep) == d)
        ready = std::max(ready, finished[index(dep)]);
      else
        ready = std::max(ready, arrival.lookup({index(dep), d}));
    }
    return ready;
  }

  PassSplit getSplit(const Work &work) const {
    double total = costs.compute(work);
    double comm = costs.communication
                      ? std::clamp(costs.communication(work), 0.0, total)
                      : 0.0;
    return {total - comm, comm};
  }

  /// An overlapped group side by side: its forward on one lane, the
  /// other members (a backward: B, B then W, or BW) on the other. The
  /// members start once all have their inputs and end together (their
  /// results leave after the group).
  void runGroup(int d, llvm::ArrayRef<Work> group) {
    DeviceState &st = state[d];
    double start = st.computeFree;
    for (const Work &w : group)
      start = std::max(start, getReady(d, w));
    PassSplit lanes[2];
    int layers = 1;
    const Work *forward = nullptr;
    for (const Work &w : group) {
      bool isForward = w.kind == PassKind::F && !forward;
      if (isForward)
        forward = &w;
      PassSplit split = getSplit(w);
      PassSplit &lane = lanes[isForward ? 0 : 1];
      if (w.kind == PassKind::W) {
        // A full backward's W: compute after its B on the same lane.
        lane.after += split.compute + split.communication;
      } else {
        lane.compute += split.compute;
        lane.communication += split.communication;
      }
      if (costs.sparseLayers)
        layers = std::max(layers, costs.sparseLayers(w.stage));
    }
    double duration = getPairTime(lanes[0], lanes[1], layers);
    double end = start + duration;
    st.computeFree = end;
    result.devices[d].busy += duration;
    for (const Work &w : group) {
      finished[index(w)] = end;
      result.events.push_back({d, StreamKind::compute, InstrKind::Exec, w, -1,
                               CollectiveId{}, start, end});
    }
    result.stepTime = std::max(result.stepTime, end);
    // The forward allocates at the start, the backward frees at the end.
    if (forward)
      trackMemory(d, *forward, start, end);
    for (const Work &w : group)
      if (&w != forward)
        trackMemory(d, w, start, end);
  }

  /// Activations live from the start of F to the end of B (or BW); a
  /// shard's kept logits from its S to its T. What W reads lives on until
  /// W ends.
  void trackMemory(int d, const Work &work, double start, double end) {
    DeviceState &st = state[d];
    DeviceStatistics &stats = result.devices[d];
    PassKind kind = work.kind;
    if (kind == PassKind::F || kind == PassKind::W || kind == PassKind::BW) {
      Work owner = work;
      owner.kind = PassKind::F;
      st.unitsUntilW +=
          (kind == PassKind::F ? 1.0 : -1.0) * costs.activationUnits(owner);
      stats.peakActivationUnitsUntilW =
          std::max(stats.peakActivationUnitsUntilW, st.unitsUntilW);
    }
    bool allocates = kind == PassKind::F || kind == PassKind::S;
    bool frees =
        kind == PassKind::B || kind == PassKind::BW || kind == PassKind::T;
    if (!allocates && !frees)
      return;
    Work owner = work;
    owner.kind = isVocabPass(kind) ? PassKind::S : PassKind::F;
    double sign = allocates ? 1.0 : -1.0;
    if (!isVocabPass(kind))
      st.activationUnits += sign * costs.activationUnits(owner);
    st.activationBytes += sign * costs.activationBytes(owner);
    // A sliced microbatch's keys and values live from its first slice's F
    // to that slice's backward, its last.
    if (costs.keyValueBytes && !isVocabPass(kind) && work.slice == 0 &&
        pipeline.slices > 1)
      st.activationBytes += sign * costs.keyValueBytes(work.stage);
    stats.peakActivationUnits =
        std::max(stats.peakActivationUnits, st.activationUnits);
    stats.peakActivationBytes =
        std::max(stats.peakActivationBytes, st.activationBytes);
    result.memory.push_back(
        {d, allocates ? start : end, st.activationBytes, st.activationUnits});
  }

  struct DeviceState {
    double computeFree = 0;
    /// When each peer's send queue is free.
    std::vector<double> sendFree;
    double activationUnits = 0;
    double activationBytes = 0;
    /// Activations from F to W (to BW when the backward is not split):
    /// what a weight pass still reads after B.
    double unitsUntilW = 0;
    /// The overlapped group being issued (Instr::paired).
    std::vector<Work> pending;
  };

  const Pipeline &pipeline;
  const SimulationCosts &costs;
  WorkIndex index;
  CollectiveIndex cindex;
  std::vector<double> finished;
  /// Arrival time of a pass's result at a device: (work, device) -> time.
  llvm::DenseMap<std::pair<size_t, int>, double> arrival;
  std::vector<double> latestIssue;
  std::vector<double> collectiveEnd;
  /// When each shard's collective queue is free.
  double shardFree[2] = {0, 0};
  std::vector<DeviceState> state;
  llvm::SmallVector<Work, 4> deps, contributions;
  llvm::SmallVector<CollectiveId, 2> inputs;
};
} // namespace

FailureOr<Simulation> mlir::sluice::simulate(const Pipeline &pipeline,
                                             const Program &program,
                                             const SimulationCosts &costs,
                                             std::string &error) {
  TimingObserver timing(pipeline, costs);
  ProgramRun run = runProgram(pipeline, program, timing);
  for (int d = 0; d < pipeline.devices; ++d)
    if (run.getNext(d) < program.devices[d].size()) {
      const Instr &instr = program.devices[d][run.getNext(d)];
      error = "device " + std::to_string(d) + " never gets past " +
              (instr.kind == InstrKind::Collective ? toString(instr.collective)
                                                   : toString(instr.work));
      return failure();
    }
  finishStatistics(timing.result);
  return std::move(timing.result);
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
