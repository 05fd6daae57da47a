//===- Passes.h - Sluice compiler passes ------------------------*- C++ -*-===//

#ifndef SLUICE_TRANSFORMS_PASSES_H
#define SLUICE_TRANSFORMS_PASSES_H

#include "sluice/Schedule/Schedules.h"
#include "sluice/Schedule/StagePartition.h"
#include "sluice/SluiceOps.h"
#include "sluice/Target/Export.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "llvm/Support/JSON.h"

#include <functional>
#include <memory>

namespace mlir::sluice {

/// How sluice-partition-vocab places the vocabulary layers: as they are,
/// sharded over the devices (Vocabulary Parallelism), or sharded with
/// blocking collectives (the interlaced baseline).
enum class VocabPartition { Baseline, Vocab, Interlaced };
// Where sluice-slice-tokens cuts a sequence (SlicingMethod: equal slices,
// equal FLOPs as Seq1F1B, or TeraPipe's dynamic programme) is the dialect
// enum the model's `slicing` attribute holds.

/// The values of the enum-typed pass options, shared by the passes, the
/// sluice-pipeline options and sluice-compile's flags, so that all spell
/// them alike (lib/Transforms/Pipeline.cpp).
llvm::cl::ValuesClass getSlicingMethodValues();
llvm::cl::ValuesClass getBalanceValues();

/// schedule='s values: every schedule of sched::getSchedules(), by its
/// name, so that the names are written once (a cl modifier, applied like
/// cl::values).
struct ScheduleValues {
  template <typename Opt> void apply(Opt &option) const {
    for (const sched::ScheduleInfo &s : sched::getSchedules())
      option.getParser().addLiteralOption(s.getName(), s.kind, s.summary);
  }
};
inline ScheduleValues getScheduleValues() { return {}; }
llvm::cl::ValuesClass getRecomputeValues();

#define GEN_PASS_DECL
#include "sluice/Transforms/Passes.h.inc"

/// Sets `seq_len`, `micro_batch` and `dtype` of `model` (zero or empty
/// keeps a value; dtype "bf16" or "f32") and retypes every activation to
/// match. Emits an error on the model and fails for a negative size or
/// another dtype.
LogicalResult setMicrobatchShape(ModelOp model, int64_t seqLen,
                                 int64_t microBatch, StringRef dtype = "");

/// What sluice-partition-stages does, callable without a pass manager.
struct StagePartitionOptions {
  int64_t pp = 1;
  int64_t virtualChunks = 1;
  PlacementKind placement = PlacementKind::loop;
  sched::Balance balance = sched::Balance::Uniform;
};
LogicalResult partitionStages(ModelOp model, const StagePartitionOptions &opts);

/// What sluice-partition-vocab does to one partitioned model.
LogicalResult partitionVocab(ModelOp model, VocabPartition mode);

/// What sluice-reorder-softmax-barriers does to one output shard.
LogicalResult reorderSoftmaxBarriers(VocabOutputOp shard, int64_t algorithm);

/// What sluice-slice-tokens does to one model.
struct TokenSlicingOptions {
  /// Number of slices; 0: auto (terapipe only).
  int64_t slices = 1;
  SlicingMethod method = SlicingMethod::Uniform;
  std::string costs = "a100";
  double epsilon = 1e-4;
  int64_t granularity = 0;
};
LogicalResult sliceTokens(ModelOp model, const TokenSlicingOptions &opts);

/// What sluice-split-passes does to one model.
/// `recompute` (other than none) is set on every stage.
LogicalResult splitPasses(ModelOp model, bool split,
                          RecomputeKind recompute = RecomputeKind::none);

/// What sluice-schedule does: builds and inserts the program.
struct SchedulingOptions {
  ScheduleKind schedule = ScheduleKind::OneFOneB;
  int64_t microbatches = 1;
  /// 0: as many as the model's `token_slices` (1 without).
  int64_t slices = 0;
  std::string costs = "unit";
  std::string programName = "plan";
  /// The tensor-parallel shards the program will run on (sluice-compile
  /// --tp): a cost-driven schedule then orders the passes of one shard,
  /// their all-reduces included. The sluice-schedule pass schedules whole
  /// layers.
  int64_t tensorParallel = 1;
  /// With Megatron-LM's sequence parallelism (MeshShape).
  bool sequenceParallel = false;
  /// Periodic stretches as sluice.repeat blocks (writeProgram).
  bool repeats = false;
  /// dualpipev: mark its overlapped groups (false: the same order, one
  /// pass after the other).
  bool overlap = true;
};
FailureOr<ProgramOp> schedulePipeline(ModelOp model,
                                      const SchedulingOptions &opts);

struct ProgramView;

/// What sluice-verify-schedule checks of one program; emits the first
/// violation at the offending instruction. With `view`, also the program
/// as it read it (the simulation reads it once, not twice).
LogicalResult verifySchedule(ProgramOp program, ProgramView *view = nullptr);

/// What sluice-simulate does to one program under `costs` (a cost-model
/// name or F=..,B=..): verifies it, predicts its step, sets step_time,
/// bubble_ratio, peak_activation(_until_w) and mfu; then hands the
/// simulation to `consume` (the driver writes its files from it).
LogicalResult
simulateProgram(ProgramOp program, StringRef costs,
                function_ref<LogicalResult(ScheduleFiles &)> consume = {});

/// sluice-simulate that hands each program's simulation to `consume`.
std::unique_ptr<Pass>
createSimulate(const SimulateOptions &options,
               std::function<LogicalResult(ScheduleFiles &)> consume);

/// What sluice-plan-buffers does to one program.
LogicalResult planBuffers(ProgramOp program);

/// What sluice-sync-gradients does to one program: `dataParallel`
/// replicas, a grad_sync after each stage's and shard's last pass, the
/// experts split over `expertParallel` of them; ZeRO stage `zero`
/// (`reshardPerStep`: ZeRO-3 keeps the gathered weights for the step);
/// each replica's sequences split over `contextParallel` ranks.
LogicalResult syncGradients(ProgramOp program, int64_t dataParallel,
                            int64_t zero = 0, int64_t expertParallel = 1,
                            double expertCapacity = 0,
                            bool reshardPerStep = false,
                            int64_t contextParallel = 1);

/// What sluice-shard-tensors does to one program: checks that every layer
/// splits over `tensorParallel` shards, gives each its shard body (the
/// shard's work and its collectives) and sets the program's tp.
/// With `sequenceParallel`, the bodies keep the activation between the
/// layers as each shard's token slice (Megatron-LM's sequence
/// parallelism).
LogicalResult shardTensors(ProgramOp program, int64_t tensorParallel,
                           bool sequenceParallel = false);

#define GEN_PASS_REGISTRATION
#include "sluice/Transforms/Passes.h.inc"

} // namespace mlir::sluice

#endif // SLUICE_TRANSFORMS_PASSES_H
