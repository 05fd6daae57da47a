//===- Executor.h - Run one device's program of a plan ----------*- C++ -*-===//
//
// The Executor interprets its device's instruction list (docs/plan-format.md):
// it dispatches passes, sends, receives, collectives and gradient sums in
// the program's order and keeps every transfer's buffer alive exactly as
// long as the plan says. What it dispatches to lives in runtime/executor/:
// the transfers in flight (Transfers.h), the tensor-parallel group's sums
// (TensorSums.h), the data-parallel sums and ZeRO-1 (GradientSync.h), the
// global gradient norm's accounting (GradientNorm.h), the profiler
// (Profiler.h) and the slice calibration (Calibrate.h).
//
// Threading: one thread per rank drives a trainer and its backend.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_EXECUTOR_H
#define SLUICE_RUNTIME_EXECUTOR_H

#include "Backend.h"
#include "Calibrate.h"
#include "Data.h"
#include "ExpertParallel.h"
#include "GradientNorm.h"
#include "GradientSync.h"
#include "Parameters.h"
#include "PassLanes.h"
#include "Plan.h"
#include "Profiler.h"
#include "ReferenceTrainer.h"
#include "Stage.h"
#include "StepTokens.h"
#include "TensorSums.h"
#include "Trainer.h"
#include "Transfers.h"
#include "Vocab.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace sluice::rt {

class Executor final : public Trainer {
public:
  /// Runs device `deviceIndex`'s program of `plan` on `device`; `comm`
  /// spans the pipeline's devices (rank = device index). With
  /// data-parallel replicas (plan.dp > 1), `replicas` spans this device's
  /// replicas, whose gradients its grad_sync instructions average; `data`
  /// then gives this replica's microbatches. With tensor parallelism
  /// (plan.tp > 1), `tensorGroup` spans the device's shards (rank = shard
  /// index); `comm` then links this shard with the same shard of the
  /// other devices. With expert parallelism (plan.ep > 1), `experts` spans
  /// the expert group of this device's shard (rank = member) and
  /// `expertReplicas` the replicas holding its experts (dp > ep).
  Executor(const Plan &plan, int deviceIndex, Device &device,
           Communicator &comm, TokenSource &data,
           const TrainerOptions &options, Communicator *replicas = nullptr,
           Communicator *tensorGroup = nullptr,
           Communicator *experts = nullptr,
           Communicator *expertReplicas = nullptr,
           Communicator *contexts = nullptr);
  ~Executor() override;

  Status prepare() override;
  Status runStep(int64_t step, double &meanLoss) override;
  /// The training program with its gradient work left out: every rank of
  /// the plan runs the same instruction lists, with B's and W's compute,
  /// the gradient syncs and the tensor-parallel sums in them skipped on
  /// each alike, so transfers stay paired and slots stay valid (F keeps
  /// its state for a B that does not read it).
  Status evaluateStep(int64_t step, double &meanLoss) override;
  Status finalizeGradients() override;
  Status gradientNorm(double &norm) override;
  Status applyOptimizer(int64_t step, float gradientScale) override;
  ParameterStore &getParameters() override { return parameters; }
  Status shardOptimizerState() override;
  Status expertLoad(std::vector<double> &copies) override;
  Status gatherOptimizerState() override;

  const StepTimes &getTimes() const { return times; }
  /// The last step's passes and collectives (Chrome trace: sluice-run
  /// --trace).
  std::vector<TraceSpan> getTrace() const { return profiler.getTrace(); }
  /// (stage or shard name, pass) -> measured time, over all steps run.
  std::map<std::pair<std::string, std::string>, PassProfile>
  getProfile() const {
    return profiler.getProfile();
  }

  /// With `on` (sluice-run --profile), each optimizer step is timed on
  /// its own: the device is synchronized before and after it.
  void setTimeOptimizer(bool on) { timeOptimizer = on; }
  /// The optimizer steps' mean seconds (their update and ZeRO-1's
  /// all-gather), 0 before one was timed.
  double getOptimizerSeconds() const {
    return optimizerSteps ? optimizerSeconds / double(optimizerSteps) : 0;
  }

  using SliceSample = rt::SliceSample;
  /// Times every stage of this device over a grid of slice lengths and
  /// contexts (Calibrate.h), its tensor-parallel sums off: the rank
  /// calibrates alone.
  Status calibrateSlices(int repeats,
                         std::map<std::string, std::vector<SliceSample>> &out);

private:
  // prepare()'s steps.
  Status prepareParameters();
  void prepareStages();
  Status allocateBuffers();
  Status planGradients();
  // runStep()'s steps: the program's interpreter.
  /// Runs instruction `instruction`, or the overlapped group it starts
  /// (moving `instruction` to the group's last member).
  Status dispatch(size_t &instruction, float lossScale);
  /// --fail-at-instruction on this rank: fails at instruction
  /// `instruction` (or, with --fail-hang, waits there forever).
  Status injectFault(size_t instruction) const;
  /// The sends and receives adjacent to `instruction` in the order, as
  /// one group of the communicator (Communicator::startGroup); `instruction`
  /// ends at the last of them.
  Status issueTransfers(size_t &instruction);
  /// A transfer's waits on the pipeline stream: for the pass that last
  /// touched its slot, and a receive's for the send still reading it.
  Status prepareTransfer(size_t instruction);
  void postTransfer(size_t instruction);
  Status issueGradSync(size_t instruction);
  Status runExec(size_t instruction, float lossScale);
  /// An exec's inputs and slots, before its pass: the collectives it
  /// reads, the receive filling its input, the sends still reading the
  /// slots it writes.
  Status prepareExec(size_t instruction);
  /// Instructions [first, last], one overlapped group (Instruction::paired):
  /// every member's inputs, then its forward and its backward on two
  /// lanes (PassLanes.h), each with a workspace of its own.
  Status runGroup(size_t first, size_t last, float lossScale);
  /// ZeRO-2: after layer `layer`'s W, its group's reduce-scatter (a
  /// failure kept for takeScatterFailure, after the pass).
  void scatterLayer(int layer);
  void scatterGroup(size_t group);
  /// ZeRO-3: before layer `layer`'s part of a pass, its group's gather,
  /// and the start of the one of `next`, the layer the pass runs next
  /// (-1: none); a failure kept as the reduce-scatter's is.
  void gatherLayer(int layer, int next);
  Status takeScatterFailure();
  /// Who sums which gradients over the replicas, and ZeRO's parts: needs
  /// the parameters laid out, not allocated (ZeRO-3 allocates only the
  /// replica's parts of the weights).
  Status planSums();
  Status finishStep(double &hostLoss);
  Status finishFp8Step();
  Status reduceLoss(double &hostLoss);
  /// Splits the step's time where the device runs asynchronously.
  void accountStep(double dispatchIdle);

  /// Orders `stream` after the pending send out of `slot`, if any, so the
  /// slot may be written (the plan-buffers contract: the planner freed it
  /// only where that send is sure to complete).
  Status settle(int32_t slot, Stream &stream);
  /// Orders the compute stream after the collectives an exec reads.
  /// Sets `waited` if `instr` has collective inputs.
  Status waitForCollectives(const Instruction &instr, bool &waited);
  /// Runs one exec instruction's pass on the compute stream, with
  /// `scratch` as its workspace.
  Status runPass(const Instruction &instr, float lossScale, DevicePtr scratch);
  DevicePtr slot(int32_t index) const {
    return index < 0 ? DevicePtr() : buffers[index].get();
  }

  const Plan &plan;
  int deviceIndex;
  Device &device;
  Kernels &kernels;
  Stream &compute, &pipeline;
  Communicator &comm;
  TokenSource &data;
  TrainerOptions options;
  /// This device's data-parallel replicas and tensor-parallel shards
  /// (null: none).
  Communicator *replicas = nullptr, *tensorGroup = nullptr;
  /// The replicas holding this member's experts (plan.dp > plan.ep > 1).
  Communicator *expertReplicas = nullptr;
  /// The ranks this rank's sequences split over (plan.cp > 1).
  Communicator *contexts = nullptr;
  StepTimes times;
  TransferEngine transfers;
  ParameterStore parameters;
  std::vector<std::unique_ptr<StageRunner>> stages; // by stage index
  /// The vocabulary shards, with Vocabulary Parallelism.
  std::unique_ptr<VocabularyShards> shards;
  TensorGroupSums tensorSums;
  ExpertParallel expertParallel;
  GradientSync gradientSync;
  std::unique_ptr<ZeroOne> zero; // plan.zero 1 to 3
  /// Which grad_sync averages each parameter (planSums).
  std::map<std::string, size_t> averagedBy;
  /// ZeRO-2/3: the tensor group's sums of the vectors' gradients, at the
  /// step's end (TensorGroupSums::sumAt's key).
  static constexpr size_t kVectorSums = ~size_t(0);
  /// ZeRO-2/3's per-layer reduce-scatters and ZeRO-3's gathers: off while
  /// calibrating alone.
  /// Whether the collectives inside the passes (ZeRO's, context
  /// parallelism's) run, and the first failure of one, kept for the pass's
  /// end (the runner's calls return nothing).
  bool scatterEnabled = true;
  Status scatterFailure = Status::ok();
  /// Context parallelism's calls for the stage runners.
  block::ContextGroup getContextCalls();
  GradientNormPlan normPlan;
  PassProfiler profiler;
  bool timeOptimizer = false;
  double optimizerSeconds = 0;
  int64_t optimizerSteps = 0;

  std::vector<DeviceBuffer> buffers;
  DeviceBuffer workspace;
  /// An overlapped group's second workspace (the backward lane's), where
  /// groups run overlapped (when the options allow).
  DeviceBuffer laneWorkspace;
  bool overlapGroups = false;
  /// Adjacent transfers go out as one group where the transport groups
  /// (issueTransfers); SLUICE_GROUP_TRANSFERS=0 issues them one at a
  /// time (an A/B).
  bool groupTransfers = true;
  /// Under tensor parallelism a BW pass's B accumulates the row-parallel
  /// projections' weight gradients while the group sums input gradients
  /// (StageRunner::backwardInput); not under ZeRO-2 or 3, whose gradient
  /// window holds one layer's at a time, during its W;
  /// SLUICE_TP_OVERLAP=0 leaves them to W (an A/B).
  bool overlapTensorSums = false;
  /// The backward lane's thread, kept from group to group.
  std::unique_ptr<PassLanes> lanes;
  /// On a device with lanes (Device::openLanes): where lane 1's stream
  /// starts after lane 0's work before the group, and where lane 0's
  /// waits for lane 1's at its end.
  std::unique_ptr<Event> laneFork, laneJoin;
  /// Per stage, the fp8 precision's scaling records (empty otherwise).
  std::vector<DeviceBuffer> fp8States;
  /// Per stage, its sparse layers' routing over the step (bindLoad).
  std::vector<DeviceBuffer> loads;
  /// Per slice, a message's size in activation elements.
  std::vector<int64_t> messageElements;
  StepTokens stepTokens;
  /// evaluateStep: the step runs its forward passes only.
  bool evaluating = false;
  /// The step's summed cross-entropy (f64), read once per step.
  DeviceBuffer lossSum;
  /// The receive that will fill each slot, until its consumer waits on it.
  std::vector<std::unique_ptr<Request>> incoming;
  /// The step's sends, and for each slot the one still reading it (-1).
  std::vector<std::unique_ptr<Request>> outgoing;
  std::vector<int64_t> sendOf;
  /// Per instruction, the pass a transfer waits for on the pipeline
  /// stream (-1: none this step): a send's slot's writer, a receive's
  /// slot's last reader or writer (allocateBuffers).
  std::vector<int64_t> transferAfter;
  /// Orders the context stream after the compute work before a ring step.
  std::unique_ptr<Event> ringReady;
  /// Ranks sharing a tied embedding table, if the two ends are apart.
  std::vector<int> tiedGroup;
};

} // namespace sluice::rt

#endif // SLUICE_RUNTIME_EXECUTOR_H
