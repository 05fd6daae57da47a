//===- PlanSearch.h - The best plan for a model and a cluster ---*- C++ -*-===//
//
// `sluice-compile MODEL --search`: given the cluster (GPUs, memory per
// GPU, the hardware preset whose cost model prices compute and links) and
// the global batch, every way of running the model -- pp x tp x dp, ZeRO,
// sequence parallelism, the schedule, the vocabulary layers,
// recomputation, token slices, and the microbatches that make the global
// batch -- compiled and simulated in process, the ones that fit ranked by
// predicted step time. docs/search.md says what is searched and pruned.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_SEARCH_PLANSEARCH_H
#define SLUICE_SEARCH_PLANSEARCH_H

#include "sluice/SluiceOps.h"
#include "sluice/Transforms/Passes.h"
#include "sluice/Transforms/Pipeline.h"

#include "mlir/IR/BuiltinOps.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace mlir::sluice {

/// The cluster and the batch a search plans for.
struct SearchSpace {
  /// GPUs in all: pp x tp x dp of every candidate.
  int64_t gpus = 0;
  /// Memory per GPU a plan may use, bytes: a candidate's busiest device
  /// must fit (the GPU's memory less the headroom).
  double memoryBytes = 0;
  /// The GPU's memory and the headroom left free, for the report.
  double deviceBytes = 0;
  double headroomPercent = 0;
  /// The cost model (sluice-compile --costs: a100, h100, h200, v100, a
  /// profile): compute, links in and across nodes, GPUs per node.
  std::string costs;
  /// The global batch in sequences (of the shaped model's length); each
  /// replica runs globalSequences / dp of them in microbatches of the
  /// model's micro-batch size (a dp that does not divide them is skipped).
  int64_t globalSequences = 0;
  /// Tensor-parallel groups stay within a node (Megatron-LM's rule: their
  /// all-reduces are on every layer's critical path).
  int64_t nodeGpus = 8;
  /// Predicted steps closer than this fraction are a tie the cost model
  /// cannot decide (docs/search.md, "Ties"): among the plans within it of
  /// the fastest, the one needing less memory, then the simpler mesh,
  /// wins.
  double tieMargin = 0.02;
};

/// One way to run the model.
struct PlanChoice {
  int64_t pp = 1, tp = 1, dp = 1, zero = 0;
  /// Context-parallel ranks each replica's sequences split over (--cp).
  int64_t cp = 1;
  /// ZeRO-3's re-shard choice (--reshard).
  ::sluice::rt::Reshard reshard = ::sluice::rt::Reshard::EveryPass;
  /// Expert parallelism over the dp replicas (a mixture of experts).
  int64_t ep = 1;
  bool sequenceParallel = false;
  ScheduleKind schedule = ScheduleKind::OneFOneB;
  int64_t microbatches = 1;
  /// Chunks per device (--virtual) of a schedule that takes any number;
  /// 0: the schedule's own.
  int64_t chunks = 0;
  /// Token slices per microbatch (the sliced schedules), cut where each
  /// costs the same FLOPs (Seq1F1B's partition).
  int64_t slices = 1;
  RecomputeKind recompute = RecomputeKind::none;
  VocabMode vocab = VocabMode::Baseline;

  /// The sluice-compile flags that compile it.
  std::string getFlags() const;
  /// Sets sluice-pipeline's options to it (the rest left as they are).
  void apply(SluicePipelineOptions &options) const;
};

/// A compiled and simulated choice.
struct PlanEstimate {
  PlanChoice choice;
  double stepTime = 0, mfu = 0, bubble = 0;
  /// The busiest device's parameters, gradients, optimizer state and
  /// peak activations, bytes.
  double peakBytes = 0;
  /// The longest busy time of a device that holds neither end of the
  /// pipeline. For the plain plan of a mesh (1F1B, layers in a loop, the
  /// vocabulary layers on the end devices) that is a middle device's
  /// transformer layers and optimizer step, which every loop-placed
  /// schedule of the mesh runs on one device too, with at least that
  /// time (vocabulary shards, recomputation and token slices only add):
  /// a lower bound on their steps. 0 with fewer than three devices.
  double middleBusy = 0;
  /// The expert-parallel all-to-all time in its passes, averaged over the
  /// devices: the most that a schedule overlapping it with other passes'
  /// compute (dualpipev's pairs) can take off the busy time, and so off
  /// the bounds above.
  double expertCommunication = 0;
};

struct SearchResult {
  /// Every choice that fits, fastest first -- but the winner first: of
  /// the plans within SearchSpace::tieMargin of the fastest, the one
  /// needing less memory (by more than 1%), then the simpler mesh (fewer
  /// tensor-parallel shards, then pipeline devices), then the faster.
  std::vector<PlanEstimate> ranked;
  /// Whether the winner is not the fastest (a tie went to memory or the
  /// simpler mesh).
  bool tieBroken = false;
  /// Plain data parallelism (pp 1, tp 1, dp = every GPU) at its leanest
  /// ZeRO stage -- FSDP (ZeRO-3, re-sharding every pass), torchtitan's
  /// default, wherever the model allows it -- the baseline every table
  /// shows; where the batch does not split over the GPUs or the plan does
  /// not fit, each sequence over the fewest context-parallel ranks (dp x
  /// cp = every GPU) that make it; none where no split works or the
  /// compiler refuses it.
  std::optional<PlanEstimate> dataParallel;
  /// Without it, why not.
  std::string dataParallelNote;
  /// The fastest that did not fit (for the diagnostic when none does).
  std::vector<PlanEstimate> overMemory;
  /// Choices compiled and simulated; skipped by a bound before compiling
  /// (memory that the parameters alone exceed, or a step that cannot beat
  /// the best found); refused by the compiler (a schedule's constraints).
  int64_t simulated = 0, prunedMemory = 0, prunedTime = 0, refused = 0;
  /// What the search left out because its costs cannot price it ("" if
  /// nothing): a measured profile times whole passes per token, so token
  /// slices, whose passes are shorter than anything it measured, are not
  /// searched with one.
  std::string unsearched;
  /// The least training state a device of any mesh holds, bytes (what the
  /// memory bound compared).
  double leanestState = 0;
};

/// Searches every choice for `model` (in `module`, its microbatch shape
/// set) on `space`. `progress`, if given, is told each simulated choice.
/// Fails only on a bad space (the caller's flags), with a diagnostic.
FailureOr<SearchResult>
searchPlans(ModuleOp module, ModelOp model, const SearchSpace &space,
            std::function<void(const PlanEstimate &)> progress = {});

} // namespace mlir::sluice

#endif // SLUICE_SEARCH_PLANSEARCH_H
