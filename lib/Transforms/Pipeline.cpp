//===- Pipeline.cpp - sluice-compile as one pass pipeline -----------------===//

#include "sluice/Transforms/Pipeline.h"

#include "sluice/Schedule/Schedules.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

#include <limits>

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
                 "stages makes the costliest stage 5% cheaper and the "
                 "simulated step no longer"));
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

/// The stage partition the options ask for: the schedule's placement and
/// chunks, and the balance after the vocabulary mode's rules.
static PartitionStagesOptions
getPartitionOptions(const SluicePipelineOptions &o) {
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
  return partition;
}

static void addShapePass(OpPassManager &pm, const SluicePipelineOptions &o) {
  if (o.seqLen != 0 || o.microBatch != 0 || !o.dtype.empty())
    pm.addPass(createSetMicrobatchShape({o.seqLen, o.microBatch, o.dtype}));
}

void mlir::sluice::buildSchedulingPipeline(OpPassManager &pm,
                                           const SluicePipelineOptions &o) {
  addShapePass(pm, o);
  const sched::ScheduleInfo &info = sched::getSchedule(o.schedule);
  pm.addPass(createPartitionStages(getPartitionOptions(o)));

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
    pm.addPass(createSliceTokens(
        {o.slices, o.slicing, o.costs, o.slicingEpsilon,
         // Context parallelism cuts every slice into 2 cp chunks.
         o.slicingGranularity == 0 && o.cp > 1 ? 2 * o.cp
                                               : int64_t(o.slicingGranularity)}));
  pm.addPass(createSplitPasses({info.splitBackward, o.recompute}));
  ScheduleOptions schedule;
  schedule.schedule = o.schedule;
  schedule.microbatches = o.microbatches;
  schedule.slices = 0; // the model's token_slices
  schedule.costs = o.costs;
  schedule.tensorParallel = o.tp;
  schedule.sequenceParallel = o.sequenceParallel;
  schedule.repeats = o.repeats;
  schedule.overlap = o.overlapGroups;
  pm.addPass(createSchedule(schedule));
}

void mlir::sluice::buildLoweringPipeline(OpPassManager &pm,
                                         const SluicePipelineOptions &o) {
  pm.addPass(createSyncGradients(
      {o.dp, o.zero, o.ep, o.expertCapacity, o.reshardPerStep, o.cp}));
  pm.addPass(createShardTensors({o.tp, o.sequenceParallel}));
  if (o.simulate)
    pm.addPass(o.consumeSimulation
                   ? createSimulate({o.costs}, o.consumeSimulation)
                   : createSimulate({o.costs}));
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

/// The layers of each stage of `module`'s model as `balance` splits it,
/// on a copy; empty where the split fails (the real run says why).
static std::vector<size_t> getStageSizes(ModuleOp module,
                                         const SluicePipelineOptions &o,
                                         sched::Balance balance) {
  OwningOpRef<ModuleOp> copy = module.clone();
  PassManager pm(module.getContext());
  addShapePass(pm, o);
  PartitionStagesOptions partition = getPartitionOptions(o);
  partition.balance = balance;
  pm.addPass(createPartitionStages(partition));
  std::vector<size_t> sizes;
  if (failed(pm.run(*copy)))
    return sizes;
  copy->walk([&](StageOp stage) {
    sizes.push_back(stage.getBody().front().getOperations().size());
  });
  return sizes;
}

/// The simulated step of `module` compiled with `balance`, on a copy;
/// infinity where it does not compile.
static double getStepTime(ModuleOp module, const SluicePipelineOptions &o,
                          sched::Balance balance) {
  OwningOpRef<ModuleOp> copy = module.clone();
  SluicePipelineOptions with;
  with.copyOptionValuesFrom(o);
  with.balance = balance;
  with.simulate = true;
  with.planBuffers = false;
  PassManager pm(module.getContext());
  buildSluicePipeline(pm, with);
  double infinity = std::numeric_limits<double>::infinity();
  if (failed(pm.run(*copy)) || copy->getOps<ProgramOp>().empty())
    return infinity;
  return (*copy->getOps<ProgramOp>().begin()).getStepTime().value_or(infinity);
}

bool mlir::sluice::splitsDiffer(ModuleOp module,
                                const SluicePipelineOptions &o) {
  if (getPartitionOptions(o).balance != sched::Balance::Auto)
    return false;
  // The copies' diagnostics are the real run's to give.
  ScopedDiagnosticHandler quiet(module.getContext(),
                                [](Diagnostic &) { return success(); });
  std::vector<size_t> uniform =
      getStageSizes(module, o, sched::Balance::Uniform);
  std::vector<size_t> balanced = getStageSizes(module, o, sched::Balance::Auto);
  return !uniform.empty() && !balanced.empty() && uniform != balanced;
}

sched::Balance mlir::sluice::chooseBalance(ModuleOp module,
                                           const SluicePipelineOptions &o) {
  if (!splitsDiffer(module, o))
    return o.balance;
  ScopedDiagnosticHandler quiet(module.getContext(),
                                [](Diagnostic &) { return success(); });
  // Moving layers off the head's stage evens the stages' costs, which
  // need not shorten the schedule built on them: uniform stages where they
  // give a shorter step. On a tie (costs per pass, which do not see the
  // head's FLOPs, simulate both alike), the split the FLOPs chose.
  return pickBalance(getStepTime(module, o, sched::Balance::Uniform),
                     getStepTime(module, o, sched::Balance::Auto));
}
