//===- Simulator.h - Event simulation of per-device programs ----*- C++ -*-===//
//
// Executes a Program in time: each device issues its instructions in order;
// passes run on its compute stream one after another, each as soon as its
// inputs have arrived; a send occupies the sender's queue to its peer from
// the end of the producing pass for the transfer's duration, so
// communication overlaps compute, and -- as NCCL's connections do --
// sends to different peers overlap each other while those to one peer run
// in order; a receive only marks where the consumer waits. Activation
// memory follows the order: a pass F allocates its microbatch slice's
// activations, its B (or BW) frees them; the peak until W counts them until
// the slice's W instead (what a weight pass still reads).
//
// Vocabulary collectives run in the one order every device issues them,
// a queue per shard: each starts once every device has issued it -- after
// its local contributions -- and the shard's previous one has finished;
// the passes that read it wait for its end. A blocking collective
// (interlaced) also holds its device's compute stream until then.
//
// A paired pass and the one after it (Instr::paired: DualPipe's
// overlapped forward and backward) start together, once both have their
// inputs, and end together, getPairTime after: each one's expert
// all-to-alls run on the device's communication stream while the other
// computes.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_ANALYSIS_SIMULATOR_H
#define SLUICE_ANALYSIS_SIMULATOR_H

#include "sluice/Schedule/Pipeline.h"

#include "llvm/ADT/STLFunctionalExtras.h"

namespace mlir::sluice {

struct SimulationCosts {
  /// Duration of a pass.
  llvm::function_ref<double(const sched::Work &)> compute;
  /// Duration of sending the result of a pass to the next device.
  llvm::function_ref<double(const sched::Work &)> transfer;
  /// Activations the forward pass `work` allocates, in microbatch units
  /// (one microbatch's activations of 1/p of the transformer layers).
  llvm::function_ref<double(const sched::Work &)> activationUnits;
  /// The same in bytes. An S pass allocates its shard's kept logits, and
  /// the shard's T frees them.
  llvm::function_ref<double(const sched::Work &)> activationBytes;
  /// Duration of a vocabulary collective once every device has joined.
  llvm::function_ref<double(const sched::CollectiveId &)> collective;
  /// Bytes of a stage's key/value state for one token-sliced microbatch:
  /// allocated by its first slice's F, freed by its first slice's backward
  /// (the last, backward running in reverse slice order). Null: none.
  llvm::function_ref<double(int)> keyValueBytes = nullptr;
  /// The part of compute(work) that is expert-parallel all-to-all: what a
  /// pair overlaps with the other pass's compute. Null: none.
  llvm::function_ref<double(const sched::Work &)> communication = nullptr;
  /// The sparse layers of a stage, over which a pair interleaves its
  /// parts. Null: one.
  llvm::function_ref<int(int)> sparseLayers = nullptr;
};

/// A pass's time split for pairing: its compute and its expert all-to-all
/// communication (compute() is their sum), and compute that follows it on
/// its lane with no communication (a full backward's W).
struct PassSplit {
  double compute = 0, communication = 0;
  double after = 0;
};

/// How long a forward and a backward take side by side on one device
/// (DeepSeek-AI, 2024, §3.2.1, Figure 4), as Sluice's runtime runs them
/// (runtime/executor/PassLanes.h). Each is a chain of parts over its
/// `layers` sparse layers, in the order the mixture of experts makes its
/// calls: a forward layer computes attention and the routing (half its
/// compute), exchanges the counts, sends the copies out (all-to-alls, a
/// third of its communication each), computes the experts (a quarter),
/// takes the copies back (a third) and combines them (a quarter); a
/// backward layer computes the combine's gradient (a quarter), sends the
/// gradients out (half its communication), computes the experts' (a
/// half), takes them back (half) and computes the routing's and
/// attention's (a quarter); `after` ends the backward's chain. One
/// compute and one communication stream: whenever one is free it takes
/// the part, of the two chains' next, that can start first (the
/// backward's on a tie, as the runtime starts it). The result lies
/// between max(compute sum, communication sum) and the serial sum; all
/// compute or all communication is the serial sum.
double getPairTime(const PassSplit &forward, const PassSplit &backward,
                   int layers);

/// One span on a device's stream, for traces and timelines.
struct TimelineEvent {
  int device = 0;
  StreamKind stream = StreamKind::compute;
  sched::InstrKind kind = sched::InstrKind::Exec;
  sched::Work work;
  int peer = -1;
  /// For collectives.
  sched::CollectiveId collective;
  double start = 0, end = 0;
};

/// A device's activation memory from `time` on (after an F starts or a
/// B/BW ends).
struct MemorySample {
  int device = 0;
  double time = 0;
  /// What the device holds: bytes, and microbatch units.
  double bytes = 0, units = 0;
};

struct DeviceStatistics {
  double busy = 0, idle = 0;
  /// Data-parallel gradient all-reduces: their time on the device's data
  /// stream, and how far the last one ends after every device's last pass
  /// and transfer (what they add to the step).
  double gradientSync = 0, exposedGradientSync = 0;
  /// The optimizer step after the device's last pass and gradient
  /// all-reduce (counted busy).
  double optimizerTime = 0;
  /// Activations held from F to B (BW), in microbatch units; the same
  /// from F to W (a zero-bubble schedule frees part of a microbatch's
  /// activations only when its W has run); the most bytes held.
  double peakActivationUnits = 0, peakActivationUnitsUntilW = 0,
         peakActivationBytes = 0;
};

struct Simulation {
  double stepTime = 0;
  /// 1 - sum of busy time / (devices x step time).
  double bubbleRatio = 0;
  std::vector<DeviceStatistics> devices;
  std::vector<TimelineEvent> events;
  /// Activation memory over time, per device, in time order per device.
  std::vector<MemorySample> memory;
};

/// A data-parallel gradient all-reduce (`sluice.grad_sync`): issued on
/// `device` when pass `after` -- its stage's last there -- ends; a device's
/// run one after another on its data stream, beside the passes still to
/// come; the optimizer step, and so the step, waits for them.
struct GradientSync {
  int device = 0;
  sched::Work after;
  double duration = 0;
};

/// Adds gradient all-reduces, in each device's issue order, to a finished
/// simulation: their events, the step they may lengthen, the devices'
/// idle time and the bubble ratio. Fails if a pass they follow never ran.
LogicalResult addGradientSyncs(const sched::Pipeline &pipeline,
                               llvm::ArrayRef<GradientSync> syncs,
                               Simulation &simulation, std::string &error);

/// Adds each device's optimizer step, `times[d]` long, after everything
/// the device ran (its passes, transfers and gradient all-reduces): the
/// step ends when the last device's update does.
void addOptimizerSteps(llvm::ArrayRef<double> times, Simulation &simulation);

/// Simulates a verified program. Fails, saying where, only if the program
/// cannot run to the end (which verification rules out).
FailureOr<Simulation> simulate(const sched::Pipeline &pipeline,
                               const sched::Program &program,
                               const SimulationCosts &costs,
                               std::string &error);

} // namespace mlir::sluice

#endif // SLUICE_ANALYSIS_SIMULATOR_H
