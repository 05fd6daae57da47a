//===- Executor.h - Run a plan, or the single-device reference --*- C++ -*-===//
//
// A Trainer runs training steps of one model on one rank: the pipelined
// Executor follows its device's instruction list from a plan; the
// ReferenceTrainer runs the whole model unpartitioned -- the oracle a
// pipelined run must match.
//
// Threading: one thread per rank drives a trainer and its backend.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_EXECUTOR_H
#define SLUICE_RUNTIME_EXECUTOR_H

#include "Backend.h"
#include "Data.h"
#include "Parameters.h"
#include "Plan.h"
#include "Stage.h"
#include "Vocab.h"

#include <map>
#include <memory>
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
};

/// Every parameter `device` holds: its stages' layers (tensor-parallel
/// shard `shard`'s slices of them), then its vocabulary table shards (a
/// tied table once).
std::vector<ParameterSpec> getDeviceParameters(const Plan &plan, int device,
                                               int shard = 0);
/// The scratch `device` needs: the largest of its stages' over every slice,
/// in bytes of the plan's precision.
int64_t getDeviceWorkspaceBytes(const Plan &plan, int device);

class Executor final : public Trainer {
public:
  /// Runs device `deviceIndex`'s program of `plan` on `device`; `comm`
  /// spans the pipeline's devices (rank = device index). With
  /// data-parallel replicas (plan.dp > 1), `replicas` spans this device's
  /// replicas, whose gradients its grad_sync instructions average; `data`
  /// then gives this replica's microbatches. With tensor parallelism
  /// (plan.tp > 1), `tensorGroup` spans the device's shards (rank = shard
  /// index); `comm` then links this shard with the same shard of the
  /// other devices.
  Executor(const Plan &plan, int deviceIndex, Device &device,
           Communicator &comm, TokenSource &data,
           const TrainerOptions &options, Communicator *replicas = nullptr,
           Communicator *tensorGroup = nullptr);

  Status prepare() override;
  Status runStep(int64_t step, double &meanLoss) override;
  Status finalizeGradients() override;
  Status gradientNorm(double &norm) override;
  Status applyOptimizer(int64_t step, float gradientScale) override;
  ParameterStore &getParameters() override { return parameters; }
  Status shardOptimizerState() override;
  Status gatherOptimizerState() override;

  const StepTimes &getTimes() const { return times; }
  /// The last step's passes and collectives (Chrome trace: sluice-run
  /// --trace).
  std::vector<TraceSpan> getTrace() const;

  /// One timing of a stage's forward and backward (F, B and W, or F and
  /// BW) on a slice of `tokens` tokens after `context`, in seconds.
  struct SliceSample {
    int64_t tokens = 0, context = 0;
    double seconds = 0;
  };
  /// Times every stage of this device over a grid of slice lengths and
  /// contexts (the best of `repeats` runs each), on synthetic data: the
  /// samples equation 9 of Li et al., 2021 is fitted to
  /// (`sluice-run --profile-slices`). Stage name -> samples.
  Status calibrateSlices(int repeats,
                         std::map<std::string, std::vector<SliceSample>> &out);
  /// (stage or shard name, pass) -> measured time, over all steps run.
  std::map<std::pair<std::string, std::string>, PassProfile> getProfile() const;

private:
  // prepare()'s steps.
  Status prepareParameters();
  void prepareStages();
  /// The tensor-parallel collectives a stage runner issues.
  StageRunner::TensorGroup getTensorGroupCalls();
  Status prepareGroupSums();
  Status allocateBuffers();
  void createEvents();
  Status planGradientSyncs(std::map<std::string, size_t> &averagedBy);
  Status planZero(const std::map<std::string, size_t> &averagedBy);
  void planGradientNorm();
  // runStep()'s steps.
  void uploadTokens(int64_t step);
  Status issueTransfer(const Instruction &instr);
  Status issueGradSync(size_t instruction);
  Status runExec(size_t instruction, float lossScale);
  Status finishStep(double &hostLoss);
  double accountPasses();
  Status reduceLoss(double &hostLoss);

  /// Orders `stream` after the pending send out of `slot`, if any, so the
  /// slot may be written (the plan-buffers contract: the planner freed it
  /// only where that send is sure to complete).
  Status settle(int32_t slot, Stream &stream);
  /// Waits until `request` needs the host no more, then orders `stream`
  /// after it -- advancing every other transfer meanwhile: a host-staged
  /// transport posts a send or a collective only when advanced, so a rank
  /// waiting on one transfer must not hold back another rank's.
  Status await(Request &request, Stream &stream);
  /// Advances every send and receive in flight, never blocking.
  void progressTransfers();
  /// The same, and the vocabulary collectives.
  Status progressAll();
  /// Orders the compute stream after the collectives an exec reads.
  /// Sets `waited` if `instr` has collective inputs.
  Status waitForCollectives(const Instruction &instr, bool &waited);
  /// Runs one exec instruction's pass on the compute stream.
  Status runPass(const Instruction &instr, float lossScale);
  DevicePtr slot(int32_t index) const {
    return index < 0 ? DevicePtr() : buffers[index].get();
  }
  /// Index into `profile` of a pass of a stage (or of a shard: stage -1).
  size_t profileIndex(int stage, Shard shard, Pass pass) const;

  const Plan &plan;
  int deviceIndex;
  Device &device;
  Kernels &kernels;
  Stream &compute, &pipeline, &dataStream;
  Communicator &comm;
  TokenSource &data;
  TrainerOptions options;
  ParameterStore parameters;
  std::vector<std::unique_ptr<StageRunner>> stages; // by stage index
  /// The vocabulary shards, with Vocabulary Parallelism.
  std::unique_ptr<VocabularyShards> shards;
  std::vector<DeviceBuffer> buffers;
  DeviceBuffer workspace;
  /// The step's tokens, every microbatch, uploaded once per step.
  DeviceBuffer tokens;
  std::vector<int32_t> hostTokens;
  std::vector<TokenRows> batches;
  /// The step's summed cross-entropy (f64), read once per step.
  DeviceBuffer lossSum;
  /// The receive that will fill each slot, until its consumer waits on it.
  std::vector<std::unique_ptr<Request>> incoming;
  /// The step's sends, and for each slot the one still reading it (-1).
  std::vector<std::unique_ptr<Request>> outgoing;
  std::vector<int64_t> sendOf;
  /// The transfers the host may still have work for (progressAll).
  std::vector<Request *> active;
  /// Orders the pipeline stream after the compute work before a transfer.
  std::unique_ptr<Event> ready;
  /// Per exec instruction, events around its pass, and per grad_sync
  /// instruction around its sums on the data stream (null for others).
  std::vector<std::unique_ptr<Event>> passStart, passEnd;
  /// On the compute stream when the step begins.
  std::unique_ptr<Event> stepBegin;
  /// Per exec instruction, whether it waited for a transfer or collective
  /// (the device's idle time before it is communication, not dispatch).
  std::vector<char> waited;
  /// Ranks sharing a tied embedding table, if the two ends are apart.
  std::vector<int> tiedGroup;
  /// This device's data-parallel replicas (null: none).
  Communicator *replicas = nullptr;
  /// Per grad_sync instruction, the (offset, count) runs of the gradient
  /// buffer it averages; a parameter two of them share (a tied table)
  /// goes with the later one, when both stages' parts are in.
  std::map<size_t, std::vector<std::pair<int64_t, int64_t>>> syncRuns;
  /// The step's gradient averages in flight, until finalizeGradients.
  std::vector<std::unique_ptr<Request>> gradSyncs;
  /// ZeRO-1: each sync run split over the replicas (ceil(count / dp)
  /// elements each, the last ones fewer): per replica its element count,
  /// and where this replica's summed part sits in `packedGrads`.
  struct ZeroRun {
    int64_t offset = 0;
    std::vector<int64_t> counts;
    int64_t packedAt = 0;
  };
  std::map<size_t, std::vector<ZeroRun>> zeroRuns;
  /// This replica's parts of the flat buffers, in packed order, and its
  /// summed gradients there.
  std::vector<IndexRange> ownedRanges;
  DeviceBuffer packedGrads;
  /// All-gathers the parts of every run of `buffer` (each replica's own
  /// part to all) and waits for them on the compute stream.
  Status gatherParts(DevicePtr buffer);
  /// This device's tensor-parallel shards (null: layers whole), and which
  /// shard this rank is.
  Communicator *tensorGroup = nullptr;
  int shardIndex = 0;
  /// Whether the stages sum over the shards (not while calibrating), and
  /// the first failure of such a sum.
  bool tensorSums = true;
  Status tensorFailure = Status::ok();
  /// A layer whose key/value heads this shard holds alike with `group`
  /// (rank in tensorGroup): the K and V columns of its QKV projection.
  struct ReplicatedKeyValues {
    std::string weight, bias;
    int64_t queries = 0, keyValues = 0; // local columns
    std::vector<int> group;
    /// ZeRO-1: the grad_sync (instruction) that reduces the layer.
    size_t syncInstruction = 0;
  };
  Status sumReplicatedKeyValues(const ReplicatedKeyValues &r);
  /// Sequence parallelism: a parameter whose gradient each shard has for
  /// its tokens only (isTokenSummed), summed over the group before the
  /// update -- ZeRO-1: at its grad_sync (instruction), before the
  /// reduce-scatter; else once the step's passes are done.
  struct TokenSummed {
    std::string name;
    int64_t count = 0;
    size_t syncInstruction = 0;
  };
  std::vector<TokenSummed> tokenSummed;
  Status sumOverShards(const TokenSummed &t);
  /// ZeRO-1: the flat offset of a tied table whose other end is on another
  /// device (its own sync run), else -1.
  int64_t tiedRun = -1;
  std::vector<ReplicatedKeyValues> replicatedKv;
  /// What gradientNorm sums on this rank: strided blocks of the gradient
  /// buffer (ZeRO-1: of `packedGrads`), each counted `weight` times -- a
  /// copy another rank counts is left out, or taken out (-1).
  struct NormPart {
    int64_t offset = 0, rows = 1, cols = 0, stride = 0;
    double weight = 1;
  };
  std::vector<NormPart> normParts;
  DeviceBuffer normSum;
  DeviceBuffer kvScratch;
  int64_t kvScratchElements = 0;
  StepTimes times;
  /// The last step's passes (by instruction) and collectives, in seconds
  /// after `stepBegin`; named only when getTrace() asks.
  struct PassSpan {
    size_t instruction;
    double start, end;
  };
  std::vector<PassSpan> passSpans, syncSpans;
  std::vector<VocabularyShards::Span> collectiveSpans;
  /// Per (stage or shard, pass), accumulated over the steps.
  std::vector<PassProfile> profile;
};

/// The unpartitioned model on this rank alone: each microbatch's forward
/// over the whole sequence, then its backward.
class ReferenceTrainer final : public Trainer {
public:
  ReferenceTrainer(const ModelConfig &model, int microbatches,
                   const Precision &precision, Device &device,
                   TokenSource &data, const TrainerOptions &options);
  Status prepare() override;
  Status runStep(int64_t step, double &meanLoss) override;
  Status finalizeGradients() override { return Status::ok(); }
  Status gradientNorm(double &norm) override;
  Status applyOptimizer(int64_t step, float gradientScale) override;
  ParameterStore &getParameters() override { return parameters; }

private:
  ModelConfig model;
  int microbatches;
  Precision precision;
  Device &device;
  TokenSource &data;
  TrainerOptions options;
  ParameterStore parameters;
  std::unique_ptr<StageRunner> stage;
  DeviceBuffer forward, weight, kv, work, tokens, lossSum, normSum;
  std::vector<int32_t> hostTokens;
};

} // namespace sluice::rt

#endif // SLUICE_RUNTIME_EXECUTOR_H
