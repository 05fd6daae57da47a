//===- Pipeline.h - sluice-compile as one pass pipeline ---------*- C++ -*-===//
//
// The passes a compile runs, in order, as the registered `sluice-pipeline`:
// sluice-compile builds its PassManager from it (so --mlir-print-ir-*,
// --mlir-timing and crash reproducers apply), and
// `sluice-opt --sluice-pipeline="..."` replays a compile from its options.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_TRANSFORMS_PIPELINE_H
#define SLUICE_TRANSFORMS_PIPELINE_H

#include "sluice/Transforms/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

namespace mlir::sluice {

/// Where the vocabulary layers go and, sharded, how many barriers the
/// output shard's softmax has (sluice-compile --vocab; docs/vocabulary.md).
enum class VocabMode { Baseline, Redis, Naive, Vocab1, Vocab2, Interlaced };

/// A mode's spelling in --vocab and vocab= ("vocab-2").
llvm::StringRef stringifyVocabMode(VocabMode mode);
/// --vocab's and vocab='s values (Passes.h has the other enums').
llvm::cl::ValuesClass getVocabModeValues();

/// sluice-compile's flags, as pass-pipeline options of the same names
/// (sluice-compile --pp P is pp=P).
struct SluicePipelineOptions
    : public PassPipelineOptions<SluicePipelineOptions> {
  Option<int64_t> seqLen{*this, "seq-len",
                         llvm::cl::desc("sequence length (0: the model's)"),
                         llvm::cl::init(0)};
  Option<int64_t> microBatch{
      *this, "micro-batch",
      llvm::cl::desc("sequences per microbatch (0: the model's)"),
      llvm::cl::init(0)};
  Option<std::string> dtype{
      *this, "dtype",
      llvm::cl::desc("activation element type, bf16 or f32 (empty: the "
                     "model's)"),
      llvm::cl::init("")};
  Option<int64_t> pp{*this, "pp", llvm::cl::desc("pipeline devices"),
                     llvm::cl::init(1)};
  Option<ScheduleKind> schedule{
      *this, "schedule", llvm::cl::desc("pipeline schedule"),
      llvm::cl::init(ScheduleKind::OneFOneB), getScheduleValues()};
  Option<int64_t> microbatches{*this, "microbatches",
                               llvm::cl::desc("microbatches per step"),
                               llvm::cl::init(1)};
  Option<int64_t> virtualChunks{
      *this, "virtual", llvm::cl::desc("stages per device (0: the schedule's)"),
      llvm::cl::init(0)};
  Option<sched::Balance> balance{
      *this, "balance", llvm::cl::desc("layers per stage"),
      llvm::cl::init(sched::Balance::Auto), getBalanceValues()};
  Option<VocabMode> vocab{*this, "vocab", llvm::cl::desc("vocabulary layers"),
                          llvm::cl::init(VocabMode::Baseline),
                          getVocabModeValues()};
  Option<std::string> slices{
      *this, "slices",
      llvm::cl::desc("token slices per microbatch, or auto (terapipe)"),
      llvm::cl::init("1")};
  Option<SlicingMethod> slicing{
      *this, "slicing", llvm::cl::desc("where slices cut a sequence"),
      llvm::cl::init(SlicingMethod::Uniform), getSlicingMethodValues()};
  Option<double> slicingEpsilon{
      *this, "slicing-epsilon",
      llvm::cl::desc("terapipe: the least step between bounds, seconds"),
      llvm::cl::init(1e-4)};
  Option<int64_t> slicingGranularity{
      *this, "slicing-granularity",
      llvm::cl::desc("terapipe: slice lengths are multiples of this (0: "
                     "automatic)"),
      llvm::cl::init(0)};
  Option<RecomputeKind> recompute{
      *this, "recompute",
      llvm::cl::desc("activation recomputation of every stage"),
      llvm::cl::init(RecomputeKind::none), getRecomputeValues()};
  Option<std::string> costs{*this, "costs",
                            llvm::cl::desc("cost model: unit, a100, h100, "
                                           "h200, v100 (NAME:key=value,... "
                                           "overrides its node), or "
                                           "F=..,B=..,..."),
                            llvm::cl::init("unit")};
  Option<int64_t> dp{*this, "dp", llvm::cl::desc("data-parallel replicas"),
                     llvm::cl::init(1)};
  Option<int64_t> cp{*this, "cp",
                     llvm::cl::desc("context-parallel ranks each replica's "
                                    "sequences split over"),
                     llvm::cl::init(1)};
  Option<int64_t> zero{*this, "zero",
                       llvm::cl::desc("ZeRO stage (0 to 3)"),
                       llvm::cl::init(0)};
  Option<bool> reshardPerStep{
      *this, "reshard-per-step",
      llvm::cl::desc("ZeRO-3: gather each layer once a step"),
      llvm::cl::init(false)};
  Option<int64_t> ep{*this, "ep",
                     llvm::cl::desc("expert-parallel members (of the dp "
                                    "replicas) each sparse layer's experts "
                                    "split over"),
                     llvm::cl::init(1)};
  Option<double> expertCapacity{
      *this, "expert-capacity",
      llvm::cl::desc("a member's experts' copies as a multiple of the "
                     "balanced share (0: dropless)"),
      llvm::cl::init(0)};
  Option<int64_t> tp{*this, "tp",
                     llvm::cl::desc("tensor-parallel shards per device"),
                     llvm::cl::init(1)};
  Option<bool> sequenceParallel{
      *this, "sequence-parallel",
      llvm::cl::desc("Megatron-LM sequence parallelism over the tp shards"),
      llvm::cl::init(false)};
  Option<bool> planBuffers{
      *this, "plan-buffers",
      llvm::cl::desc("assign the runtime's buffers (what a plan needs)"),
      llvm::cl::init(false)};
  Option<bool> repeats{
      *this, "repeats",
      llvm::cl::desc("state periodic stretches once, as sluice.repeat "
                     "blocks (sluice-compile does)"),
      llvm::cl::init(false)};
  Option<bool> overlapGroups{
      *this, "overlap-groups",
      llvm::cl::desc("dualpipev: pair its passes into overlapped groups "
                     "(false: the same order, every pass on its own)"),
      llvm::cl::init(true)};
  Option<bool> simulate{
      *this, "simulate",
      llvm::cl::desc("predict the step (off where the caller simulates "
                     "the program itself, as the plan search does)"),
      llvm::cl::init(true)};

  /// Not a flag: where the pipeline's sluice-simulate hands its
  /// simulation (sluice-compile's prediction, report, trace and timeline
  /// come from it), so that a compile simulates once and its passes are
  /// still the pipeline's, for MLIR's pass-manager flags.
  std::function<LogicalResult(ScheduleFiles &)> consumeSimulation;
};

/// Adds the compile's passes to `pm` (on the module): the microbatch shape,
/// stage partitioning, the vocabulary shards and their barriers, token
/// slicing, the pass split, the schedule, data- and tensor-parallel
/// lowering, the simulation (simulate) and (plan-buffers) the buffer plan. The
/// schedule's name decides the placement, the chunks per device and
/// whether B and W split (schedule= is an enum option: a name no
/// schedule has is refused when the options are parsed).
void buildSluicePipeline(OpPassManager &pm,
                         const SluicePipelineOptions &options);
/// buildSluicePipeline in two parts: up to and including the schedule,
/// and what follows it (data- and tensor-parallel lowering, simulation,
/// buffers). The first does not read dp= or zero=, so the plan search
/// schedules once for the ZeRO stages of a mesh.
void buildSchedulingPipeline(OpPassManager &pm,
                             const SluicePipelineOptions &options);
void buildLoweringPipeline(OpPassManager &pm,
                           const SluicePipelineOptions &options);

/// --balance auto decided on the schedule it gives, so that the default
/// never loses to the split it replaced: where auto moves layers off the
/// head's stage (its split of `module`'s model is not the uniform one),
/// compiles and simulates both on copies and returns Uniform if its step
/// is shorter, else Auto; any other case, `options.balance`.
sched::Balance chooseBalance(ModuleOp module,
                             const SluicePipelineOptions &options);
/// Whether chooseBalance has anything to decide for `options`: --balance
/// auto, and auto's split of the model differs from the uniform one.
bool splitsDiffer(ModuleOp module, const SluicePipelineOptions &options);
/// chooseBalance's rule, for a caller that simulated both itself (the plan
/// search): uniform stages only where their step is strictly shorter.
inline sched::Balance pickBalance(double uniformStep, double autoStep) {
  return uniformStep < autoStep ? sched::Balance::Uniform
                                : sched::Balance::Auto;
}

/// Registers `sluice-pipeline` with the pass registry (sluice-opt).
void registerSluicePipeline();

} // namespace mlir::sluice

#endif // SLUICE_TRANSFORMS_PIPELINE_H
