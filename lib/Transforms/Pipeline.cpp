//===- Pipeline.cpp - sluice-compile as one pass pipeline -----------------===//

#include "sluice/Transforms/Pipeline.h"

#include "sluice/Schedule/Schedules.h"

#include "mlir/Pass/PassRegistry.h"

using namespace mlir;
using namespace mlir::sluice;

namespace {
/// Each VocabMode's spelling and help, in the enum's order.
constexpr std::pair<const char *, const char *> kVocabModes[] = {
    {"baseline", "on the first and last stages (default)"},
    {"redis", "the baseline with stages balanced by compute"},
    {"naive", "sharded over the devices, three barriers"},
    {"vocab-1", "sharded, Algorithm 1"},
    {"vocab-2", "sharded, Algorithm 2"},
    {"interlaced", "sharded with blocking collectives"}};
static_assert(std::size(kVocabModes) == int(VocabMode::Interlaced) + 1);
} // namespace

llvm::StringRef mlir::sluice::stringifyVocabMode(VocabMode mode) {
  return kVocabModes[int(mode)].first;
}

llvm::cl::ValuesClass mlir::sluice::getVocabModeValues() {
  auto value = [](VocabMode mode) {
    auto [name, help] = kVocabModes[int(mode)];
    return llvm::cl::OptionEnumValue{name, int(mode), help};
  };
  return llvm::cl::values(value(VocabMode::Baseline), value(VocabMode::Redis),
                          value(VocabMode::Naive), value(VocabMode::Vocab1),
                          value(VocabMode::Vocab2),
                          value(VocabMode::Interlaced));
}

llvm::cl::ValuesClass mlir::sluice::getSlicingMethodValues() {
  return llvm::cl::values(
      clEnumValN(SlicingMethod::Uniform, "uniform", "equal slices (default)"),
      clEnumValN(SlicingMethod::Seq1F1B, "seq1f1b", "equal FLOPs"),
      clEnumValN(SlicingMethod::TeraPipe, "terapipe",
                 "TeraPipe's dynamic programme"));
}

llvm::cl::ValuesClass mlir::sluice::getBalanceValues() {
  return llvm::cl::values(
      clEnumValN(sched::Balance::Uniform, "uniform",
                 "as many layers per stage as can be"),
      clEnumValN(sched::Balance::Compute, "compute",
                 "even out the stages' FLOPs"),
      clEnumValN(sched::Balance::Auto, "auto",
                 "uniform, unless moving layers off the vocabulary layers' "
                 "stages makes the costliest stage 5% cheaper"));
}

llvm::cl::ValuesClass mlir::sluice::getRecomputeValues() {
  return llvm::cl::values(
      clEnumValN(RecomputeKind::none, "none",
                 "keep every activation from F to B (default)"),
      clEnumValN(RecomputeKind::selective, "selective",
                 "B recomputes attention and the MLP activation"),
      clEnumValN(RecomputeKind::full, "full",
                 "B runs F again from the stage's input"));
}

void mlir::sluice::buildSluicePipeline(OpPassManager &pm,
                                       const SluicePipelineOptions &o) {
  buildSchedulingPipeline(pm, o);
  buildLoweringPipeline(pm, o);
}

void mlir::sluice::buildSchedulingPipeline(OpPassManager &pm,
                                           const SluicePipelineOptions &o) {
  if (o.seqLen != 0 || o.microBatch != 0 || !o.dtype.empty())
    pm.addPass(createSetMicrobatchShape({o.seqLen, o.microBatch, o.dtype}));

  // What the schedule decides: placement, chunks, the backward's split.
  const sched::ScheduleInfo &info = sched::getSchedule(o.schedule);
  PartitionStagesOptions partition;
  partition.pp = o.pp;
  // virtual=0: the schedule's count; any other value goes to the pass,
  // which names one that is not positive.
  partition.virtualChunks = o.virtualChunks != 0
                                ? int64_t(o.virtualChunks)
                                : int64_t(sched::getDefaultChunks(info));
  partition.placement = info.placement;
  // Redis (Yeung et al., 2024 §7): the baseline's layers,
  // stages balanced by compute.
  // Auto (the default) balances a head left on the last stage; a
  // sharded vocabulary leaves none there, but the stage partition runs
  // before the sharding and would count it: uniform.
  partition.balance = o.balance;
  if (o.vocab == VocabMode::Redis)
    partition.balance = sched::Balance::Compute;
  else if (o.vocab != VocabMode::Baseline && o.balance == sched::Balance::Auto)
    partition.balance = sched::Balance::Uniform;
  pm.addPass(createPartitionStages(partition));

  if (o.vocab != VocabMode::Baseline && o.vocab != VocabMode::Redis) {
    pm.addPass(createPartitionVocab({o.vocab == VocabMode::Interlaced
                                         ? VocabPartition::Interlaced
                                         : VocabPartition::Vocab}));
    // Algorithms 1 and 2 move the naive output shard's barriers (§4).
    if (o.vocab == VocabMode::Vocab1 || o.vocab == VocabMode::Vocab2)
      pm.addPass(
          createReorderSoftmaxBarriers({o.vocab == VocabMode::Vocab1 ? 1 : 2}));
  }
  if (o.slices != "1" || o.slicing != SlicingMethod::Uniform)
    pm.addPass(createSliceTokens({o.slices, o.slicing, o.costs,
                                  o.slicingEpsilon, o.slicingGranularity}));
  pm.addPass(createSplitPasses({info.splitBackward, o.recompute}));
  ScheduleOptions schedule;
  schedule.schedule = o.schedule;
  schedule.microbatches = o.microbatches;
  schedule.slices = 0; // the model's token_slices
  schedule.costs = o.costs;
  schedule.tensorParallel = o.tp;
  schedule.sequenceParallel = o.sequenceParallel;
  pm.addPass(createSchedule(schedule));
}

void mlir::sluice::buildLoweringPipeline(OpPassManager &pm,
                                         const SluicePipelineOptions &o) {
  pm.addPass(createSyncGradients({o.dp, o.zero}));
  pm.addPass(createShardTensors({o.tp, o.sequenceParallel}));
  if (o.simulate)
    pm.addPass(createSimulate({o.costs}));
  if (o.planBuffers)
    pm.addPass(createPlanBuffers());
}

void mlir::sluice::registerSluicePipeline() {
  PassPipelineRegistration<SluicePipelineOptions>(
      "sluice-pipeline",
      "The passes sluice-compile runs, from its flags (pp=, schedule=, "
      "microbatches=, vocab=, slices=, tp=, dp=, ...)",
      buildSluicePipeline);
}
