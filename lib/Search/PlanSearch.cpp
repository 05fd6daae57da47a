//===- PlanSearch.cpp - The best plan for a model and a cluster -----------===//
//
// Enumerates the choices a user would compare by hand, compiles each with
// the pipeline sluice-compile runs (on a clone of the shaped module) and
// reads the simulator's step time and the busiest device's memory. Two
// bounds skip most of the space without compiling:
//
//  * memory: a device holds at least its share of the parameters' training
//    state (getParameterStateBytes, as the runtime allocates it: its
//    sharded part divided over the replicas under ZeRO); a mesh whose
//    share alone exceeds the GPU is not compiled at all (ZeRO 0 to 3, and
//    ZeRO-3's two re-shard choices, are each a choice of the mesh);
//  * time: on one mesh, no schedule, vocabulary placement or slicing does
//    less compute than the devices' summed busy time of the plain 1F1B
//    plan without recomputation spread perfectly over the pipeline; a
//    choice whose mesh cannot beat the best step found is skipped. And a
//    schedule runs at least the work a middle device (one holding neither
//    end of the model) has in the first plan of its placement without
//    vocabulary shards, recomputation or slices -- the plain plan for the
//    loop, the first interleaved or V-shaped plan for theirs: in deep
//    meshes, where layers do not divide evenly over the stages, that
//    device's work is well above the average, and a placement's schedules
//    are skipped once it reaches the best step.
//
// Recomputation only adds compute in the cost model, so for each
// (mesh, schedule, vocabulary, slices) it is tried in the order none,
// selective, full and the first that fits is kept.
//
// A mesh's ZeRO stages share their schedules: everything up to the
// schedule reads neither dp nor ZeRO (buildSchedulingPipeline), so each
// choice is scheduled once and lowered, simulated and ranked once per
// ZeRO stage the memory bound leaves (a third to half of a search's time
// was scheduling the same program twice).
//
// The meshes are searched on every core (SLUICE_SEARCH_THREADS caps the
// threads): each compile runs on its own clone, and the best step so far,
// which every worker prunes against, only falls. Which choices the bounds
// skip can then depend on timing; the best plan cannot (no choice faster
// than it is ever skipped, and ties in step and memory are broken by the
// flags). The rows below it are the simulated choices in order: one the
// bound skipped in one run (it could not beat the best) may be listed in
// another.
//
//===----------------------------------------------------------------------===//

#include "sluice/Search/PlanSearch.h"

#include "sluice/Analysis/CostModel.h"
#include "sluice/Analysis/ModelSummary.h"
#include "sluice/Analysis/Simulator.h"
#include "sluice/Schedule/Schedules.h"
#include "sluice/Target/Export.h"
#include "sluice/Target/Plan.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <limits>
#include <map>
#include <mutex>
#include <thread>

using namespace mlir;
using namespace mlir::sluice;

std::string PlanChoice::getFlags() const {
  std::string flags = llvm::formatv("--pp {0} --tp {1} --dp {2}", pp, tp, dp);
  if (cp > 1)
    flags += llvm::formatv(" --cp {0}", cp).str();
  if (zero)
    flags += llvm::formatv(" --zero {0}", zero).str();
  if (zero == 3 && reshard == rt::Reshard::Step)
    flags += " --reshard step";
  if (ep > 1)
    flags += llvm::formatv(" --ep {0}", ep);
  if (sequenceParallel)
    flags += " --sequence-parallel";
  flags += llvm::formatv(" --schedule {0} --microbatches {1}",
                         stringifyScheduleKind(schedule), microbatches);
  if (chunks)
    flags += llvm::formatv(" --virtual {0}", chunks);
  if (slices > 1)
    flags += llvm::formatv(" --slices {0} --slicing seq1f1b", slices);
  if (recompute != RecomputeKind::none)
    flags += (" --recompute " + stringifyRecomputeKind(recompute)).str();
  if (vocab != VocabMode::Baseline)
    flags += (" --vocab " + stringifyVocabMode(vocab)).str();
  return flags;
}

void PlanChoice::apply(SluicePipelineOptions &o) const {
  o.pp = pp;
  o.tp = tp;
  o.dp = dp;
  o.cp = cp;
  o.zero = zero;
  o.reshardPerStep = zero == 3 && reshard == rt::Reshard::Step;
  o.ep = ep;
  o.sequenceParallel = sequenceParallel;
  o.schedule = schedule;
  o.microbatches = microbatches;
  o.virtualChunks = chunks;
  o.slices = std::to_string(slices);
  o.slicing = slices > 1 ? SlicingMethod::Seq1F1B : SlicingMethod::Uniform;
  o.recompute = recompute;
  o.vocab = vocab;
}

/// Whether `a` and `b` are the same plan under two schedule names: the
/// same mesh, microbatches, vocabulary layers, slices and recomputation,
/// and the same simulated step, bubble and peak memory.
static bool isSamePlan(const PlanEstimate &a, const PlanEstimate &b) {
  const PlanChoice &x = a.choice, &y = b.choice;
  return x.pp == y.pp && x.tp == y.tp && x.dp == y.dp && x.cp == y.cp &&
         x.zero == y.zero &&
         x.reshard == y.reshard && x.ep == y.ep &&
         x.sequenceParallel == y.sequenceParallel &&
         x.microbatches == y.microbatches && x.slices == y.slices &&
         x.recompute == y.recompute && x.vocab == y.vocab &&
         a.stepTime == b.stepTime &&
         // The same idle time summed in another order may differ in the
         // last bits (zb-h1 and zb-h2 at m = p under cp).
         std::abs(a.bubble - b.bubble) <= 1e-12 && a.peakBytes == b.peakBytes;
}

/// Ties (docs/search.md): among the plans within `margin` of the fastest,
/// the one needing less memory (by more than 1%), then the simpler mesh,
/// then the faster goes first; the rest keep their order. Whether the
/// winner changed.
static bool breakTies(std::vector<PlanEstimate> &ranked, double margin) {
  if (ranked.size() < 2)
    return false;
  double limit = ranked.front().stepTime * (1.0 + margin);
  auto better = [](const PlanEstimate &a, const PlanEstimate &b) {
    double most = std::max(a.peakBytes, b.peakBytes);
    if (std::abs(a.peakBytes - b.peakBytes) > 0.01 * most)
      return a.peakBytes < b.peakBytes;
    if (a.choice.tp != b.choice.tp)
      return a.choice.tp < b.choice.tp;
    if (a.choice.pp != b.choice.pp)
      return a.choice.pp < b.choice.pp;
    return a.stepTime < b.stepTime;
  };
  auto winner = ranked.begin();
  for (auto it = ranked.begin(); it != ranked.end() && it->stepTime <= limit;
       ++it)
    if (better(*it, *winner))
      winner = it;
  if (winner == ranked.begin())
    return false;
  std::rotate(ranked.begin(), winner, winner + 1);
  return true;
}

namespace {

/// A ZeRO stage and, for ZeRO-3, its re-shard choice.
struct ZeroChoice {
  int64_t zero = 0;
  rt::Reshard reshard = rt::Reshard::EveryPass;
};

/// The ZeRO choices a mesh of `dp` replicas has: none without replicas;
/// else stages 0 to 3, ZeRO-3 re-sharding every pass and per step.
SmallVector<ZeroChoice> getZeroChoices(int64_t dp) {
  if (dp == 1)
    return {ZeroChoice{}};
  return {{0},
          {1},
          {2},
          {3, rt::Reshard::EveryPass},
          {3, rt::Reshard::Step}};
}

/// The search's state: the space, the model's figures, the best so far.
class Searcher {
public:
  Searcher(ModuleOp module, ModelOp model, const SearchSpace &space,
           std::function<void(const PlanEstimate &)> progress)
      : Searcher(module, summarizeModel(model), space, std::move(progress)) {
    // The context-parallel sizes the search tries: up to 8, where 2 cp
    // divides the sequence (a sliced plan's slices are cut in multiples
    // of it).
    rt::ModelConfig config = getModelConfig(model);
    for (int64_t cp : {2, 4, 8})
      if (rt::checkContextParallel(config, cp, {config.seqLen}).empty())
        contextSizes.push_back(cp);
  }
  Searcher(ModuleOp module, const ModelSummary &summary,
           const SearchSpace &space,
           std::function<void(const PlanEstimate &)> progress)
      : module(module), space(space), progress(std::move(progress)),
        params(summary.totalParams), expertParams(summary.expertParams),
        expertsDivisor(summary.expertsDivisor),
        microBatch(std::max<int64_t>(1, summary.microBatch)),
        precision(summary.dtype == "f32" ? rt::Precision::fp32()
                                         : rt::Precision::bf16()) {
    // A profile gives seconds per token of whole passes: a slice's pass
    // priced at its share of them leaves out what a shorter pass loses
    // (on 2 CPU ranks Seq1F1B with 4 slices of 32 tokens, predicted 9%
    // faster than 1F1B, ran 1.35x slower: bench/results/
    // cpu-2026-11-27-ranking/slices.txt). Rather than rank plans on a
    // guess, the search leaves slicing out and says so.
    std::string ignored;
    std::optional<CostModel> costs = CostModel::parse(space.costs, ignored);
    if (costs && costs->getKind() == CostModel::Kind::Measured) {
      slicesPriced = false;
      result.unsearched =
          "token slices (Seq1F1B, Seq1F1B-I, TeraPipe): the profile '" +
          space.costs +
          "' times whole passes, not the shorter passes of a slice";
    }
  }

  SearchResult run();

private:
  /// Compiles and simulates `choice` at each of `zeros` (its ZeRO stages,
  /// one schedule for all); nullopt where the compiler refuses it.
  std::vector<std::optional<PlanEstimate>>
  evaluate(const PlanChoice &choice, llvm::ArrayRef<ZeroChoice> zeros);
  /// evaluate's compile with the stages split by `balance`, counting
  /// nothing.
  std::vector<std::optional<PlanEstimate>>
  evaluateSplit(const PlanChoice &choice, llvm::ArrayRef<ZeroChoice> zeros,
                sched::Balance balance);
  /// Every schedule, vocabulary placement, slicing and recomputation on
  /// one mesh, at the ZeRO stages whose plain plans are `plains`. On one
  /// device every schedule is the same plan and the vocabulary layers stay
  /// whole (sharding them over one device is the same computation): one
  /// schedule, no vocabulary shards, so that each plan is one row.
  void searchMesh(llvm::ArrayRef<PlanEstimate> plains);
  /// The least step any plan of the mesh of `plain` can take: its
  /// devices' mean busy time, less the all-to-all time overlapped pairs
  /// could hide.
  static double getStepBound(const PlanEstimate &plain) {
    return plain.stepTime * (1.0 - plain.bubble) - plain.expertCommunication;
  }
  /// The training state a device of this mesh holds at least, bytes.
  double getStateBound(const PlanChoice &mesh) const;
  void keep(const PlanEstimate &estimate);
  double getBest() const {
    std::lock_guard<std::mutex> lock(mutex);
    return result.ranked.empty() ? std::numeric_limits<double>::infinity()
                                 : result.ranked.front().stepTime;
  }
  /// What a plan must beat to matter: the best step, or a tie with it
  /// (every plan within the tie margin is found, so that the tie is
  /// decided over all of them).
  double getBound() const { return getBest() * (1.0 + space.tieMargin); }
  /// Plain data parallelism over every GPU, its leaner ZeRO stage.
  void findDataParallel();
  /// Counts a refusal, a simulation or a pruned choice (under the lock).
  void count(int64_t SearchResult::*counter) {
    std::lock_guard<std::mutex> lock(mutex);
    ++(result.*counter);
  }
  /// Runs `work(i)` for i < n on the search's threads.
  void forEach(size_t n, llvm::function_ref<void(size_t)> work);

  ModuleOp module;
  const SearchSpace &space;
  std::function<void(const PlanEstimate &)> progress;
  int64_t params, expertParams, expertsDivisor, microBatch;
  /// The context-parallel sizes to try (1: none).
  std::vector<int64_t> contextSizes = {1};
  /// What the compiled plans train in (the shaped model's element type).
  rt::Precision precision;
  bool slicesPriced = true;
  SearchResult result;
  mutable std::mutex mutex;
};

} // namespace

std::vector<std::optional<PlanEstimate>>
Searcher::evaluate(const PlanChoice &choice, llvm::ArrayRef<ZeroChoice> zeros) {
  SluicePipelineOptions options;
  choice.apply(options);
  options.costs = space.costs;
  // Where --balance auto moves layers off the head's stage, the compile
  // simulates both splits and keeps uniform stages if they are faster
  // (chooseBalance); so does the search here, per ZeRO stage, with the
  // same rule -- each split scheduled once, not the compile's three times
  // -- so that the winner's flags compile to the plan priced.
  std::vector<std::optional<PlanEstimate>> estimates;
  if (!splitsDiffer(module, options)) {
    estimates = evaluateSplit(choice, zeros, options.balance);
  } else {
    estimates = evaluateSplit(choice, zeros, sched::Balance::Auto);
    std::vector<std::optional<PlanEstimate>> uniform =
        evaluateSplit(choice, zeros, sched::Balance::Uniform);
    double never = std::numeric_limits<double>::infinity();
    for (auto [mine, other] : llvm::zip(estimates, uniform))
      if (pickBalance(other ? other->stepTime : never,
                      mine ? mine->stepTime : never) ==
          sched::Balance::Uniform)
        mine = std::move(other);
  }
  for (const std::optional<PlanEstimate> &estimate : estimates) {
    count(estimate ? &SearchResult::simulated : &SearchResult::refused);
    if (estimate && progress) {
      std::lock_guard<std::mutex> lock(mutex);
      progress(*estimate);
    }
  }
  return estimates;
}

std::vector<std::optional<PlanEstimate>>
Searcher::evaluateSplit(const PlanChoice &choice,
                        llvm::ArrayRef<ZeroChoice> zeros,
                        sched::Balance balance) {
  std::vector<std::optional<PlanEstimate>> estimates(zeros.size());
  auto start = std::chrono::steady_clock::now();
  auto log = [&](const PlanChoice &variant) {
    static bool enabled = std::getenv("SLUICE_SEARCH_LOG") != nullptr;
    // One write per line: the search's threads log side by side.
    if (enabled)
      llvm::errs() << llvm::formatv(
                          "search: {0:F3} s {1}\n",
                          std::chrono::duration<double>(
                              std::chrono::steady_clock::now() - start)
                              .count(),
                          variant.getFlags())
                          .str();
    start = std::chrono::steady_clock::now();
  };
  SluicePipelineOptions options;
  choice.apply(options);
  options.costs = space.costs;
  options.planBuffers = false;
  // Simulated once, below, for the step and the per-device figures; the
  // IR is verified once, after the last pass, not after each (the
  // verifier between passes and a second simulation were a third of a
  // search's time).
  options.simulate = false;
  options.balance = balance;
  OwningOpRef<ModuleOp> scheduled = module.clone();
  PassManager scheduling(module.getContext());
  scheduling.enableVerifier(false);
  buildSchedulingPipeline(scheduling, options);
  if (failed(scheduling.run(*scheduled)))
    return estimates;

  for (auto [i, zero] : llvm::enumerate(zeros)) {
    PlanChoice variant = choice;
    variant.zero = zero.zero;
    variant.reshard = zero.reshard;
    // Only the lowering reads them (the schedule is shared).
    options.zero = variant.zero;
    options.reshardPerStep =
        variant.zero == 3 && variant.reshard == rt::Reshard::Step;
    // The last stage lowers the scheduled module itself.
    OwningOpRef<ModuleOp> copy =
        i + 1 < zeros.size() ? scheduled->clone() : scheduled.release();
    PassManager lowering(module.getContext());
    lowering.enableVerifier(false);
    buildLoweringPipeline(lowering, options);
    if (failed(lowering.run(*copy)) || failed(verify(*copy)) ||
        copy->getOps<ProgramOp>().empty()) {
      log(variant);
      continue;
    }
    ProgramOp program = *copy->getOps<ProgramOp>().begin();
    PlanEstimate estimate{variant};
    if (failed(simulateProgram(program, space.costs, [&](ScheduleFiles &files) {
          for (int d = 0; d < files.pipeline.devices; ++d) {
            estimate.peakBytes =
                std::max(estimate.peakBytes,
                         files.costs.getFixedBytes(d) +
                             files.simulation.devices[d].peakActivationBytes);
            if (d != files.pipeline.getDevice(0) &&
                d != files.pipeline.getDevice(files.pipeline.getLastStage()))
              estimate.middleBusy = std::max(estimate.middleBusy,
                                             files.simulation.devices[d].busy);
          }
          for (const TimelineEvent &e : files.simulation.events)
            if (e.kind == sched::InstrKind::Exec)
              estimate.expertCommunication +=
                  files.costs.getExpertParallelTime(e.work) /
                  double(files.pipeline.devices);
          return success();
        }))) {
      log(variant);
      continue;
    }
    estimate.stepTime = program.getStepTime().value_or(0);
    estimate.bubble = program.getBubbleRatio().value_or(0);
    estimate.mfu = program.getMfu().value_or(0);
    log(variant);
    estimates[i] = std::move(estimate);
  }
  return estimates;
}

double Searcher::getStateBound(const PlanChoice &mesh) const {
  // A member holds 1 / ep of the experts, their sharded state over the
  // ranks holding them: dp / ep replicas' cp context ranks each.
  double split = double(mesh.pp * mesh.tp);
  double dense = double(params - expertParams) / split,
         experts = double(expertParams) / split / double(mesh.ep);
  rt::ParameterStateBytes state =
      rt::getParameterStateBytes(precision, int(mesh.zero), mesh.reshard);
  // ZeRO shards over every rank that sums the gradients: dp x cp.
  return dense * (double(state.replicated) +
                  double(state.sharded) /
                      double(mesh.zero ? mesh.dp * mesh.cp : 1)) +
         experts *
             (double(state.replicated) +
              double(state.sharded) /
                  double(mesh.zero ? mesh.dp / mesh.ep * mesh.cp : 1));
}

void Searcher::keep(const PlanEstimate &estimate) {
  std::string flags = estimate.choice.getFlags();
  std::lock_guard<std::mutex> lock(mutex);
  std::vector<PlanEstimate> &list = estimate.peakBytes <= space.memoryBytes
                                        ? result.ranked
                                        : result.overMemory;
  // Whichever thread finishes first, the same order: step, memory, flags.
  auto at = std::upper_bound(list.begin(), list.end(), estimate,
                             [&](const PlanEstimate &a, const PlanEstimate &b) {
                               if (a.stepTime != b.stepTime)
                                 return a.stepTime < b.stepTime;
                               if (a.peakBytes != b.peakBytes)
                                 return a.peakBytes < b.peakBytes;
                               return flags < b.choice.getFlags();
                             });
  // Two schedule names that order the same passes alike (GPipe and 1F1B
  // with one microbatch) are one plan: one row, the first flags.
  if (at != list.begin() && isSamePlan(*std::prev(at), estimate))
    return;
  if (at != list.end() && isSamePlan(*at, estimate)) {
    *at = estimate;
    return;
  }
  list.insert(at, estimate);
}

void Searcher::forEach(size_t n, llvm::function_ref<void(size_t)> work) {
  unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  if (const char *cap = std::getenv("SLUICE_SEARCH_THREADS"))
    threads = unsigned(std::clamp(std::atoi(cap), 1, 256));
  threads = unsigned(std::min<size_t>(threads, n));
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i = next++; i < n; i = next++)
      work(i);
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t)
    pool.emplace_back(worker);
  worker();
  for (std::thread &thread : pool)
    thread.join();
}

void Searcher::searchMesh(llvm::ArrayRef<PlanEstimate> plains) {
  const PlanChoice &mesh = plains.front().choice;
  // Per placement (loop, interleaved, V) and chunk count, the middle
  // devices' work of its first plan without vocabulary shards,
  // recomputation or slices: every schedule placing the stages alike runs
  // at least that on one device (PlanEstimate::middleBusy), at the
  // least of the ZeRO stages. The loop's is the plain plans'.
  double loopBound = plains.front().middleBusy;
  for (const PlanEstimate &plain : plains)
    loopBound = std::min(loopBound, plain.middleBusy);
  std::map<std::pair<PlacementKind, int64_t>, double> placementBound = {
      {{PlacementKind::loop, 0}, loopBound}};
  for (const sched::ScheduleInfo &info : sched::getSchedules()) {
    if (mesh.pp == 1 && info.kind != mesh.schedule)
      continue; // one device: every schedule is the same plan
    // A schedule that takes any number of chunks tries 2, 4 and 8 (more
    // chunks, a smaller bubble and more transfers; the compiler refuses
    // counts the layers cannot fill).
    std::vector<int64_t> chunkCounts = {0};
    if (info.chunks == 0)
      chunkCounts = {2, 4, 8};
    std::vector<int64_t> sliceCounts = {1};
    if (info.sliced && !slicesPriced)
      continue;
    if (info.sliced)
      sliceCounts = {2, 4};
    for (int64_t chunks : chunkCounts) {
      // An overlapping schedule's busy time is below the passes' sum:
      // the placement's bound does not hold it (its own key keeps it and
      // the others apart).
      bool overlaps = info.kind == ScheduleKind::DualPipeV;
      auto placement = std::make_pair(info.placement, overlaps ? -1 : chunks);
      auto known = placementBound.find(placement);
      if (!overlaps && known != placementBound.end() &&
          known->second >= getBound()) {
        count(&SearchResult::prunedTime);
        continue;
      }
      for (VocabMode vocab :
           {VocabMode::Baseline, VocabMode::Vocab1, VocabMode::Vocab2})
        for (int64_t slices : sliceCounts) {
          if (mesh.pp == 1 && vocab != VocabMode::Baseline)
            continue; // one device: the vocabulary layers stay whole
          // The ZeRO stages still looking for the least recomputation
          // that fits.
          std::vector<const PlanEstimate *> open;
          for (const PlanEstimate &plain : plains)
            open.push_back(&plain);
          for (RecomputeKind recompute :
               {RecomputeKind::none, RecomputeKind::selective,
                RecomputeKind::full}) {
            llvm::erase_if(open, [&](const PlanEstimate *plain) {
              if (getStepBound(*plain) < getBound())
                return false;
              count(&SearchResult::prunedTime);
              return true;
            });
            if (open.empty())
              break;
            PlanChoice choice = mesh;
            choice.schedule = info.kind;
            choice.chunks = chunks;
            choice.vocab = vocab;
            choice.slices = slices;
            choice.recompute = recompute;
            if (choice.schedule == mesh.schedule &&
                choice.vocab == mesh.vocab && slices == 1 &&
                recompute == RecomputeKind::none) {
              // The plain plans, done; those over memory go on.
              llvm::erase_if(open, [&](const PlanEstimate *plain) {
                return plain->peakBytes <= space.memoryBytes;
              });
              continue;
            }
            SmallVector<ZeroChoice> zeros;
            for (const PlanEstimate *plain : open)
              zeros.push_back({plain->choice.zero, plain->choice.reshard});
            std::vector<std::optional<PlanEstimate>> estimates =
                evaluate(choice, zeros);
            std::vector<const PlanEstimate *> next;
            for (auto [plain, estimate] : llvm::zip(open, estimates)) {
              if (!estimate)
                continue; // the same refusal with more recomputation
              if (vocab == VocabMode::Baseline && slices == 1 &&
                  recompute == RecomputeKind::none) {
                auto [at, added] =
                    placementBound.emplace(placement, estimate->middleBusy);
                if (!added)
                  at->second = std::min(at->second, estimate->middleBusy);
              }
              keep(*estimate);
              // More recomputation only adds time.
              if (estimate->peakBytes > space.memoryBytes)
                next.push_back(plain);
            }
            open = std::move(next);
            if (open.empty())
              break;
          }
        }
    }
  }
}

SearchResult Searcher::run() {
  // A choice the compiler refuses (a schedule's constraints on p, m or
  // chunks) is one fewer candidate, not an error the user sees.
  ScopedDiagnosticHandler quiet(module.getContext(),
                                [](Diagnostic &) { return success(); });
  // Every mesh's plain plan (1F1B, no recomputation, vocabulary layers on
  // the end stages): its step bounds the mesh's.
  // Each mesh with the ZeRO stages the memory bound leaves it.
  std::vector<std::pair<PlanChoice, SmallVector<ZeroChoice>>> meshes;
  for (int64_t tp = 1; tp <= std::min(space.gpus, space.nodeGpus); ++tp) {
    if (space.gpus % tp)
      continue;
    for (int64_t pp = 1; pp <= space.gpus / tp; ++pp) {
      if ((space.gpus / tp) % pp)
        continue;
      // Context parallelism: each replica's sequences over cp ranks,
      // where the model and the sequence allow it.
      for (int64_t cp : contextSizes) {
      if ((space.gpus / (tp * pp)) % cp)
        continue;
      int64_t dp = space.gpus / (tp * pp * cp);
      // Each replica's share of the batch, in whole microbatches.
      if (space.globalSequences % (dp * microBatch))
        continue;
      int64_t perReplica = space.globalSequences / (dp * microBatch);
      // Expert parallelism: every size that divides the replicas and
      // each sparse layer's experts (1 for a dense model).
      for (int64_t ep = 1; ep <= dp; ++ep)
      for (bool sp : {false, true}) {
        if (dp % ep ||
            (ep > 1 && (expertsDivisor == 0 || expertsDivisor % ep != 0)))
          break;
        if (sp && tp == 1)
          continue;
        PlanChoice mesh;
        mesh.pp = pp, mesh.tp = tp, mesh.dp = dp, mesh.ep = ep;
        mesh.cp = cp;
        mesh.sequenceParallel = sp;
        mesh.microbatches = perReplica;
        mesh.schedule = ScheduleKind::OneFOneB;
        SmallVector<ZeroChoice> zeros;
        for (ZeroChoice zero : getZeroChoices(dp * cp)) {
          mesh.zero = zero.zero;
          mesh.reshard = zero.reshard;
          double state = getStateBound(mesh);
          if (result.leanestState == 0 || state < result.leanestState)
            result.leanestState = state;
          if (state > space.memoryBytes) {
            ++result.prunedMemory;
            continue;
          }
          zeros.push_back(zero);
        }
        mesh.zero = 0;
        mesh.reshard = rt::Reshard::EveryPass;
        if (!zeros.empty())
          meshes.push_back({mesh, zeros});
      }
      }
    }
  }
  std::vector<std::vector<PlanEstimate>> plains(meshes.size());
  forEach(meshes.size(), [&](size_t i) {
    for (std::optional<PlanEstimate> &plain :
         evaluate(meshes[i].first, meshes[i].second))
      if (plain) {
        keep(*plain);
        plains[i].push_back(std::move(*plain));
      }
  });
  llvm::erase_if(plains, [](const auto &list) { return list.empty(); });
  // The meshes that may be fastest first: the best found early bounds
  // the rest, and most meshes end at their bound without a compile.
  auto meshBound = [](const std::vector<PlanEstimate> &list) {
    double least = getStepBound(list.front());
    for (const PlanEstimate &plain : list)
      least = std::min(least, getStepBound(plain));
    return least;
  };
  std::stable_sort(plains.begin(), plains.end(),
                   [&](const auto &a, const auto &b) {
                     return meshBound(a) < meshBound(b);
                   });
  forEach(plains.size(), [&](size_t i) {
    if (meshBound(plains[i]) >= getBound()) {
      for (size_t z = 0; z < plains[i].size(); ++z)
        count(&SearchResult::prunedTime);
      return;
    }
    searchMesh(plains[i]);
  });
  result.tieBroken = breakTies(result.ranked, space.tieMargin);
  findDataParallel();
  return std::move(result);
}

void Searcher::findDataParallel() {
  // Every GPU a replica, as a torchtitan user starts; where the batch does
  // not split over that many, or the leanest such plan does not fit, each
  // sequence over the fewest context-parallel ranks that make it.
  std::string note;
  for (int64_t cp : contextSizes) {
    if (space.gpus % cp)
      continue;
    PlanChoice plain;
    plain.cp = cp;
    plain.dp = space.gpus / cp;
    if (space.globalSequences % plain.dp ||
        (space.globalSequences / plain.dp) % microBatch) {
      if (note.empty())
        note = llvm::formatv("{0} sequences do not split over {1} replicas "
                             "in whole microbatches of {2}",
                             space.globalSequences, plain.dp, microBatch);
      continue;
    }
    plain.microbatches = space.globalSequences / plain.dp / microBatch;
    std::optional<PlanEstimate> leanest;
    for (std::optional<PlanEstimate> &estimate :
         evaluate(plain, getZeroChoices(plain.dp * cp)))
      if (estimate &&
          (!leanest || estimate->peakBytes < leanest->peakBytes))
        leanest = std::move(*estimate);
    if (!leanest)
      continue;
    // None fitting, the row is the first (the fewest cp ranks).
    bool fits = leanest->peakBytes <= space.memoryBytes;
    if (!result.dataParallel || fits)
      result.dataParallel = std::move(*leanest);
    if (fits)
      return;
  }
  if (!result.dataParallel)
    result.dataParallelNote =
        note.empty() ? "the compiler refuses it for this model" : note;
}

FailureOr<SearchResult>
mlir::sluice::searchPlans(ModuleOp module, ModelOp model,
                          const SearchSpace &space,
                          std::function<void(const PlanEstimate &)> progress) {
  if (space.gpus < 1)
    return model.emitError("--search needs --gpus of at least 1, got ")
           << space.gpus;
  if (!(space.memoryBytes > 0))
    return model.emitError("--search needs a positive --gpu-memory");
  if (space.globalSequences < 1)
    return model.emitError(
               "--search needs --global-batch of at least 1 sequence, got ")
           << space.globalSequences;
  return Searcher(module, model, space, std::move(progress)).run();
}
