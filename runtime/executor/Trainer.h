//===- Trainer.h - What trains one rank's part of a model -------*- C++ -*-===//
//
// A Trainer runs training steps of one model on one rank: the pipelined
// Executor follows its device's instruction list from a plan
// (Executor.h); the ReferenceTrainer runs the whole model unpartitioned --
// the oracle a pipelined run must match (ReferenceTrainer.h). The training
// session (runtime/session) drives either through this interface.
//
// Threading: one thread per rank drives a trainer and its backend.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_TRAINER_H
#define SLUICE_RUNTIME_TRAINER_H

#include "Backend.h"
#include "Parameters.h"
#include "Plan.h"

#include <string>
#include <vector>

namespace sluice::rt {

struct TrainerOptions {
  uint64_t seed = 1;
  /// Adam's constants and weight decay; its learning rate is the
  /// schedule's at each step.
  AdamConfig adam;
  LearningRateSchedule schedule;
  /// The optimizer's settings at optimizer step `step` (from 1).
  AdamConfig getAdam(int64_t step) const {
    AdamConfig c = adam;
    c.learningRate = schedule.at(step);
    return c;
  }
  /// Fault injection: this rank fails before running this instruction of
  /// its list (-1: never).
  int64_t failAtInstruction = -1;
  /// ... and there waits forever instead (a peer that never joins).
  bool failHang = false;
  /// Seconds a wait for a peer's transfer may last (--comm-timeout).
  double commTimeout = 600;
  /// ZeRO-1: also all-gather the summed gradients after each step, so
  /// that every replica holds them whole (for --dump-grads and
  /// --check-against; training needs only each replica's part).
  bool wholeGradients = false;
  /// Runs an overlapped group's forward and backward interleaved
  /// (PassLanes.h): on a host device, one computes while the other's
  /// all-to-all is in flight; on a GPU, each on a compute stream of its
  /// own (Device::openLanes). Off, one after the other (the same
  /// computation: what the overlap is worth). Needs MPI's
  /// MPI_THREAD_SERIALIZED.
  bool overlapGroups = true;
  /// Benchmarks only (--slow-all-to-all): seconds every expert all-to-all
  /// takes at least.
  double allToAllDelay = 0;
};

/// Where a rank's step time went (passes timed with device events).
struct StepTimes {
  double total = 0;
  double compute = 0;  // inside passes
  double commWait = 0; // waiting for transfers and the loss all-reduce
  double data = 0;     // fetching the step's tokens
  /// The executor's own time: dispatch, bookkeeping, posting transfers.
  double overhead() const { return total - compute - commWait - data; }
  /// Vocabulary collectives (sharded output layer): their time on the
  /// vocabulary stream, and how much of it a pass ran beside on the
  /// compute stream (paper section 6.1: they should hide behind passes).
  double vocabCollectives = 0;
  double vocabOverlapped = 0;
  /// Data-parallel gradient sums: their time on the data stream, and how
  /// much of it a pass ran beside (they should hide behind the backward
  /// passes of the stages after them).
  double gradSyncs = 0;
  double gradSyncsOverlapped = 0;
};

/// One interval of the last step on a device stream, in seconds after the
/// step began: a pass on "compute" or a collective on "vocabulary".
struct TraceSpan {
  std::string name;
  std::string stream;
  double start = 0, end = 0;
};

/// Measured time per pass kind per stage, for --profile.
struct PassProfile {
  double seconds = 0;
  int64_t runs = 0;
  int64_t tokens = 0;
};

class Trainer {
public:
  virtual ~Trainer() = default;
  /// Allocates and initialises everything on the device; before any step.
  virtual Status prepare() = 0;
  /// Runs one step's forward and backward passes; gradients accumulate.
  /// `meanLoss` is the loss of the whole step (every rank gets it).
  virtual Status runStep(int64_t step, double &meanLoss) = 0;
  /// The step's loss as runStep gives it, for evaluation: the forward
  /// passes only -- no input or weight gradients, no gradient sums. The
  /// parameters do not change; gradients a vocabulary shard's passes add
  /// (they make the loss and the gradient together) are left for the
  /// caller to clear.
  virtual Status evaluateStep(int64_t step, double &meanLoss) = 0;
  /// Makes gradients final: sums those of parameters two ranks share.
  virtual Status finalizeGradients() = 0;
  /// The global L2 norm of the final gradients (after finalizeGradients):
  /// every parameter counted once however the run splits it -- over the
  /// pipeline's devices, the tensor-parallel shards (whose norms and
  /// shared key/value heads are alike on each) and ZeRO-1's parts -- so
  /// every partitioning reports the reference's norm. Every rank gets it.
  virtual Status gradientNorm(double &norm) = 0;
  /// One Adam step on the gradients times `gradientScale` (clipping's
  /// factor), then clears the gradients (enqueued on the device).
  virtual Status applyOptimizer(int64_t step, float gradientScale) = 0;
  virtual ParameterStore &getParameters() = 0;
  /// ZeRO-1 (plan.zero): keep only this replica's part of the optimizer
  /// state (after a checkpoint is loaded), or gather it whole on every
  /// replica (before one is written). No-ops otherwise.
  virtual Status shardOptimizerState() { return Status::ok(); }
  virtual Status gatherOptimizerState() { return Status::ok(); }
  /// The last training step's copies per expert of every sparse layer
  /// (ExpertLoad.h: model order), summed over the whole run: every rank
  /// calls it and gets it. Empty without a mixture of experts.
  virtual Status expertLoad(std::vector<double> &copies) {
    copies.clear();
    return Status::ok();
  }
};

/// Every parameter `device` holds: its stages' layers (tensor-parallel
/// shard `shard`'s slices of them, expert-group member `member`'s
/// experts), then its vocabulary table shards (a tied table once).
std::vector<ParameterSpec> getDeviceParameters(const Plan &plan, int device,
                                               int shard = 0, int member = 0);
/// The scratch `device` needs: the largest of its stages' over every slice,
/// in bytes of the plan's precision.
int64_t getDeviceWorkspaceBytes(const Plan &plan, int device);

} // namespace sluice::rt

#endif // SLUICE_RUNTIME_TRAINER_H
