//===- Simulator.cpp - Event simulation of per-device programs ------------===//

#include "sluice/Analysis/Simulator.h"

#include "llvm/ADT/DenseMap.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::sluice;
using namespace mlir::sluice::sched;

FailureOr<Simulation> mlir::sluice::simulate(const Pipeline &pipeline,
                                             const Program &program,
                                             const SimulationCosts &costs,
                                             std::string &error) {
  int p = pipeline.devices;
  WorkIndex index(pipeline);
  std::vector<double> finished(index.size(), -1.0);
  // Arrival time of a pass's result at a device: (work, device) -> time.
  llvm::DenseMap<std::pair<size_t, int>, double> arrival;

  struct DeviceState {
    size_t next = 0;
    double computeFree = 0;
    double commFree = 0;
    double activationUnits = 0;
    double activationBytes = 0;
  };
  std::vector<DeviceState> state(p);
  Simulation result;
  result.devices.resize(p);
  llvm::SmallVector<Work, 4> deps;

  // Only a receive can wait for another device; keep sweeping the devices
  // until a sweep issues nothing.
  for (bool moved = true; moved;) {
    moved = false;
    for (int d = 0; d < p; ++d) {
      DeviceState &st = state[d];
      size_t before = st.next;
      DeviceStatistics &stats = result.devices[d];
      const auto &instrs = program.devices[d];
      for (; st.next < instrs.size(); ++st.next) {
        const Instr &instr = instrs[st.next];
        if (instr.kind == InstrKind::Recv) {
          if (!arrival.count({index(instr.work), d}))
            break;
          continue;
        }
        if (instr.kind == InstrKind::Send) {
          double ready = finished[index(instr.work)];
          double start = std::max(ready, st.commFree);
          double end = start + costs.transfer(instr.work);
          st.commFree = end;
          arrival[{index(instr.work), instr.peer}] = end;
          result.events.push_back({d, StreamKind::comm, InstrKind::Send,
                                   instr.work, instr.peer, start, end});
          result.stepTime = std::max(result.stepTime, end);
          continue;
        }
        // A pass starts when the stream is free and every input is here.
        double start = st.computeFree;
        deps.clear();
        getDependencies(pipeline, instr.work, deps);
        for (const Work &dep : deps) {
          if (pipeline.getDevice(dep.stage) == d)
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
                                 instr.work, -1, start, end});
        result.stepTime = std::max(result.stepTime, end);

        // Activations live from the start of F to the end of B (or BW).
        PassKind kind = instr.work.kind;
        if (kind == PassKind::F || kind == PassKind::B ||
            kind == PassKind::BW) {
          Work forward = instr.work;
          forward.kind = PassKind::F;
          double sign = kind == PassKind::F ? 1.0 : -1.0;
          st.activationUnits += sign * costs.activationUnits(forward);
          st.activationBytes += sign * costs.activationBytes(forward);
          stats.peakActivationUnits =
              std::max(stats.peakActivationUnits, st.activationUnits);
          stats.peakActivationBytes =
              std::max(stats.peakActivationBytes, st.activationBytes);
          result.memory.push_back({d, kind == PassKind::F ? start : end,
                                   st.activationBytes, st.activationUnits});
        }
      }
      moved |= st.next != before;
    }
  }
  for (int d = 0; d < p; ++d)
    if (state[d].next < program.devices[d].size()) {
      error = "device " + std::to_string(d) + " never receives " +
              toString(program.devices[d][state[d].next].work);
      return failure();
    }

  double busy = 0;
  for (DeviceStatistics &stats : result.devices) {
    stats.idle = result.stepTime - stats.busy;
    busy += stats.busy;
  }
  result.bubbleRatio =
      result.stepTime > 0 ? 1.0 - busy / (double(p) * result.stepTime) : 0.0;
  return result;
}
