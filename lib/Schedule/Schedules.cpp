//===- Schedules.cpp - The pipeline schedules Sluice generates ------------===//

#include "sluice/Schedule/Schedules.h"

#include "sluice/Schedule/ExtendOrders.h"
#include "sluice/Schedule/ImproveOrders.h"
#include "sluice/Schedule/TimeOrders.h"
#include "sluice/Schedule/VShapeOrders.h"
#include "llvm/Support/ErrorHandling.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <optional>

using namespace mlir;
using namespace mlir::sluice;
using namespace mlir::sluice::sched;

static const ScheduleInfo kSchedules[] = {
    {ScheduleKind::GPipe, PlacementKind::loop, false, false, 1,
     "all forwards, then all backwards (Huang et al. 2019)"},
    {ScheduleKind::OneFOneB, PlacementKind::loop, false, false, 1,
     "one forward, one backward (Harlap et al. 2018)"},
    {ScheduleKind::Interleaved1F1B, PlacementKind::interleaved, false, false, 0,
     "Megatron's interleaved 1F1B over virtual chunks"},
    {ScheduleKind::ZBH1, PlacementKind::loop, true, false, 1,
     "zero-bubble with 1F1B's memory: W fills the bubbles"},
    {ScheduleKind::ZBH2, PlacementKind::loop, true, false, 1,
     "zero-bubble with up to 2p - 1 microbatches in flight"},
    {ScheduleKind::ZBV, PlacementKind::vshape, true, false, 2,
     "zero-bubble V-shape, at most p microbatches of activations"},
    {ScheduleKind::VHalf, PlacementKind::vshape, true, false, 2,
     "V-shape with about half of 1F1B's activations"},
    {ScheduleKind::VMin, PlacementKind::vshape, true, false, 2,
     "V-shape with about a third of 1F1B's activations"},
    {ScheduleKind::Seq1F1B, PlacementKind::loop, false, true, 1,
     "1F1B over token slices (Seq1F1B)"},
    {ScheduleKind::Seq1F1BI, PlacementKind::interleaved, false, true, 0,
     "interleaved 1F1B over token slices (Seq1F1B-I)"},
    {ScheduleKind::TeraPipe, PlacementKind::loop, false, true, 1,
     "GPipe over token slices (TeraPipe)"},
    {ScheduleKind::DualPipeV, PlacementKind::vshape, true, false, 2,
     "DeepSeek's DualPipeV: F beside another microbatch's backward, "
     "all-to-alls overlapped"},
};

llvm::ArrayRef<ScheduleInfo> sched::getSchedules() { return kSchedules; }

bool sched::isBuildingBlockSchedule(ScheduleKind kind) {
  switch (kind) {
  case ScheduleKind::OneFOneB:
  case ScheduleKind::ZBH1:
  case ScheduleKind::ZBH2:
  case ScheduleKind::ZBV:
  case ScheduleKind::VHalf:
  case ScheduleKind::VMin:
    return true;
  default:
    return false;
  }
}

const ScheduleInfo *sched::lookupSchedule(llvm::StringRef name) {
  for (const ScheduleInfo &info : kSchedules)
    if (info.getName() == name)
      return &info;
  return nullptr;
}

const ScheduleInfo &sched::getSchedule(ScheduleKind kind) {
  for (const ScheduleInfo &info : kSchedules)
    if (info.kind == kind)
      return info;
  llvm_unreachable("a schedule kind without a table entry");
}

int sched::getDefaultChunks(const ScheduleInfo &info) {
  return info.chunks == 0 ? 2 : info.chunks;
}

/// Names of the schedules matching `predicate`, comma-separated.
template <typename Pred> static std::string listSchedules(Pred predicate) {
  llvm::SmallVector<llvm::StringRef> names;
  for (const ScheduleInfo &info : kSchedules)
    if (predicate(info))
      names.push_back(info.getName());
  return llvm::join(names, ", ");
}

/// The device and chunk stage `stage` of `numStages` has under `placement`.
static StagePlacement getPlacement(PlacementKind placement, int devices,
                                   int stage) {
  switch (placement) {
  case PlacementKind::loop:
  case PlacementKind::interleaved:
    return {stage % devices, stage / devices};
  case PlacementKind::vshape:
    if (stage < devices)
      return {stage, 0};
    return {2 * devices - 1 - stage, 1};
  }
  llvm_unreachable("unknown placement");
}

Pipeline sched::makeSchedulePipeline(const ScheduleInfo &schedule, int devices,
                                     int microbatches, int chunks, int slices) {
  Pipeline pipe;
  pipe.devices = devices;
  pipe.microbatches = microbatches;
  pipe.chunks = chunks;
  pipe.slices = slices;
  pipe.splitBackward = schedule.splitBackward;
  for (int s = 0; s < devices * chunks; ++s)
    pipe.stages.push_back(getPlacement(schedule.placement, devices, s));
  return pipe;
}

std::string sched::checkPipeline(const ScheduleInfo &schedule,
                                 const Pipeline &pipeline) {
  std::string name = schedule.getName().str();
  int p = pipeline.devices, m = pipeline.microbatches;
  int v = pipeline.chunks, k = pipeline.slices;
  if (p < 1)
    return llvm::formatv("pp must be at least 1, got {0}", p);
  if (m < 1)
    return llvm::formatv("microbatches must be at least 1, got {0}", m);
  if (k < 1)
    return llvm::formatv("slices must be at least 1, got {0}", k);
  if (schedule.chunks == 1 && v != 1)
    return llvm::formatv(
        "schedule '{0}' has no chunks: virtual must be 1, got {1} "
        "(schedules with chunks: {2})",
        name, v,
        listSchedules([](const ScheduleInfo &i) { return i.chunks != 1; }));
  if (schedule.chunks == 0 && v < 2)
    return llvm::formatv("schedule '{0}' needs at least 2 chunks per device: "
                         "virtual must be 2 or more, got {1}",
                         name, v);
  if (schedule.chunks > 1 && v != schedule.chunks)
    return llvm::formatv("schedule '{0}' places exactly {1} chunks per "
                         "device: virtual must be {1}, got {2}",
                         name, schedule.chunks, v);
  if (!schedule.sliced && k != 1)
    return llvm::formatv(
        "schedule '{0}' does not slice tokens: slices must be 1, got {1} "
        "(token-sliced schedules: {2})",
        name, k, listSchedules([](const ScheduleInfo &i) { return i.sliced; }));
  if (pipeline.vocab.any() && !isBuildingBlockSchedule(schedule.kind))
    return llvm::formatv(
        "schedule '{0}' is not built from building blocks, so it cannot "
        "place the vocabulary shards' passes (Yeung et al., 2024, "
        "§5.2); schedules that can: {1}",
        name, listSchedules([](const ScheduleInfo &i) {
          return isBuildingBlockSchedule(i.kind);
        }));
  int expectedStages = p * v;
  if (pipeline.getNumStages() != expectedStages)
    return llvm::formatv("schedule '{0}' needs pp * virtual = {1} stages, "
                         "got {2}",
                         name, expectedStages, pipeline.getNumStages());
  for (int s = 0; s < pipeline.getNumStages(); ++s) {
    StagePlacement want = getPlacement(schedule.placement, p, s);
    const StagePlacement &have = pipeline.stages[s];
    if (have.device != want.device || have.chunk != want.chunk)
      return llvm::formatv(
          "schedule '{0}' needs the {1} placement: stage {2} must be on "
          "device {3} chunk {4}, got device {5} chunk {6}",
          name, stringifyPlacementKind(schedule.placement), s, want.device,
          want.chunk, have.device, have.chunk);
  }
  if (pipeline.splitBackward != schedule.splitBackward)
    return llvm::formatv(
        "schedule '{0}' runs the backward {1}, but the stages' passes are "
        "{2}",
        name, schedule.splitBackward ? "split into B and W" : "unsplit (BW)",
        pipeline.splitBackward ? "split into B and W" : "unsplit (BW)");
  // DualPipeV's steady state starts on the first device only after its
  // 2p - 1 warm-up forwards (DeepSeek-AI, 2024, §3.2.1).
  if (schedule.kind == ScheduleKind::DualPipeV && m < 2 * p)
    return llvm::formatv("schedule '{0}' needs at least 2 * pp = {1} "
                         "microbatches, got {2}",
                         name, 2 * p, m);
  return "";
}

double sched::getUnitDuration(const Pipeline &pipeline, const Work &work) {
  double perDevice = 0;
  switch (work.kind) {
  case PassKind::F:
  case PassKind::B:
  case PassKind::W:
    perDevice = 1;
    break;
  case PassKind::BW:
    perDevice = 2;
    break;
  default:
    // Vocabulary and input-layer passes cost nothing in unit costs.
    return 0;
  }
  return perDevice / (pipeline.chunks * pipeline.slices);
}

//===----------------------------------------------------------------------===//
// Orders that follow their papers directly
//===----------------------------------------------------------------------===//

/// GPipe, and TeraPipe over token slices: every forward in (microbatch,
/// slice) order, then every backward in the reverse order -- reverse slice
/// order is required (§3 of Li et al., 2021), reverse microbatch order
/// frees the most recent activations first.
static std::vector<std::vector<Work>> getGPipeOrders(const Pipeline &pipe) {
  std::vector<std::vector<Work>> orders(pipe.devices);
  for (int stage = 0; stage < pipe.getNumStages(); ++stage) {
    auto &order = orders[pipe.getDevice(stage)];
    for (int mb = 0; mb < pipe.microbatches; ++mb)
      for (int k = 0; k < pipe.slices; ++k)
        order.push_back({PassKind::F, stage, mb, k});
    for (int mb = pipe.microbatches - 1; mb >= 0; --mb)
      for (int k = pipe.slices - 1; k >= 0; --k)
        order.push_back({pipe.getBackwardKind(), stage, mb, k});
  }
  return orders;
}

/// Megatron's interleaved 1F1B (Narayanan et al. 2021), generalised to
/// token slices for Seq1F1B-I (Sun et al., 2024 §3.3) and to any number
/// of units: the unit of work is a (microbatch, slice) pair; forwards run
/// rounds of units through chunk 0, then chunk 1, ...; backwards the same
/// rounds through the chunks in reverse, each microbatch's slices in
/// reverse. Megatron's rounds hold p units, so it needs the unit count to
/// be a multiple of p; as in PyTorch's flexible interleaving, the units are
/// cut into max(1, units / p) rounds of as equal sizes as possible (each at
/// least p, so that a unit's next chunk never comes back to device 0 before
/// the round's last unit has left it).
///
/// Device d runs `warmup` forwards, then alternates forward and backward.
/// Its i-th backward (microbatch b) transitively needs b's last slice to
/// have passed its last chunk, so that forward must come among the first
/// warmup + i; on top, 2 (p - d - 1) forwards cover the round trip to the
/// last device and back. For k = 1 and full rounds this is Megatron's
/// warm-up, 2 (p - d - 1) + (v - 1) p.
static std::vector<std::vector<Work>>
getInterleavedOrders(const Pipeline &pipe) {
  int p = pipe.devices, v = pipe.chunks, k = pipe.slices;
  int units = pipe.microbatches * k;
  int total = units * v;
  // Round r holds units [first[r], first[r + 1]); the first rounds get one
  // unit more when the count does not divide.
  int rounds = std::max(1, units / p);
  std::vector<int> first(rounds + 1, 0);
  for (int r = 0; r < rounds; ++r)
    first[r + 1] = first[r] + units / rounds + (r < units % rounds ? 1 : 0);
  std::vector<int> roundOf(units);
  for (int r = 0; r < rounds; ++r)
    for (int u = first[r]; u < first[r + 1]; ++u)
      roundOf[u] = r;
  // Position of unit u on chunk c in a device's forward sequence, and back.
  auto forwardIndex = [&](int unit, int chunk) {
    int r = roundOf[unit], size = first[r + 1] - first[r];
    return first[r] * v + chunk * size + (unit - first[r]);
  };
  std::vector<std::pair<int, int>> atIndex(total); // (unit, chunk)
  for (int u = 0; u < units; ++u)
    for (int c = 0; c < v; ++c)
      atIndex[forwardIndex(u, c)] = {u, c};
  auto unitWork = [&](int index, bool forward, int device) {
    auto [unit, chunk] = atIndex[index];
    int mb = unit / k, slice = unit % k;
    if (!forward) {
      chunk = v - 1 - chunk;
      slice = k - 1 - slice;
    }
    int stage = chunk * p + device;
    return Work{forward ? PassKind::F : pipe.getBackwardKind(), stage, mb,
                slice};
  };
  int lookahead = 0;
  for (int i = 0; i < total; ++i) {
    int mb = unitWork(i, false, 0).microbatch;
    lookahead =
        std::max(lookahead, forwardIndex(mb * k + k - 1, v - 1) + 1 - i);
  }
  std::vector<std::vector<Work>> orders(pipe.devices);
  for (int d = 0; d < p; ++d) {
    int warmup = std::min(total, 2 * (p - d - 1) + lookahead - 1);
    auto &order = orders[d];
    for (int i = 0; i < warmup; ++i)
      order.push_back(unitWork(i, true, d));
    for (int i = 0; i < total - warmup; ++i) {
      order.push_back(unitWork(warmup + i, true, d));
      order.push_back(unitWork(i, false, d));
    }
    for (int i = total - warmup; i < total; ++i)
      order.push_back(unitWork(i, false, d));
  }
  return orders;
}

/// Seq1F1B (Sun et al., 2024 §3.2): 1F1B over (microbatch, slice) units
/// with the backward of each microbatch in reverse slice order (FIFO over
/// microbatches, LIFO over slices). Device d runs p - d - 1 + k forwards
/// before its first backward, so it holds (p + k - 1) / k microbatches of
/// activations at most.
static std::vector<std::vector<Work>> getSeq1F1BOrders(const Pipeline &pipe) {
  int p = pipe.devices, k = pipe.slices;
  int total = pipe.microbatches * k;
  std::vector<std::vector<Work>> orders(p);
  for (int d = 0; d < p; ++d) {
    auto forward = [&](int i) { return Work{PassKind::F, d, i / k, i % k}; };
    auto backward = [&](int i) {
      return Work{pipe.getBackwardKind(), d, i / k, k - 1 - i % k};
    };
    int warmup = std::min(total, p - d - 1 + k);
    auto &order = orders[d];
    for (int i = 0; i < warmup; ++i)
      order.push_back(forward(i));
    for (int i = 0; i < total - warmup; ++i) {
      order.push_back(backward(i));
      order.push_back(forward(warmup + i));
    }
    for (int i = total - warmup; i < total; ++i)
      order.push_back(backward(i));
  }
  return orders;
}

/// The V-shape schedules' blocks: the spacing between the first chunk's
/// forwards and the second chunk's backwards, and whether W lags.
static std::pair<int, bool> getVShapeSpacing(ScheduleKind kind) {
  switch (kind) {
  case ScheduleKind::ZBV:
    return {4, true};
  case ScheduleKind::VHalf:
    return {1, false};
  default:
    return {0, false};
  }
}

/// The family's other blocks (the zero-bubble and V-shape blocks with and
/// without the W lag, and the V-shapes' other spacings): drawn for unit
/// costs like the named one, any of them may be faster under the real
/// costs, and the improver keeps one only if it holds the named one's cap.
/// The named block itself is not repeated (its orders are the first
/// candidate already).
static std::vector<BuildingBlock>
getAlternativeBlocks(const ScheduleInfo &schedule, const Pipeline &pipeline) {
  std::vector<BuildingBlock> blocks;
  int p = pipeline.devices;
  if (schedule.placement == PlacementKind::vshape) {
    std::pair<int, bool> named = getVShapeSpacing(schedule.kind);
    for (int spacing : {0, 1, 4})
      for (bool lag : {false, true})
        if (std::pair{spacing, lag} != named)
          blocks.push_back(getVShapeBlock(pipeline, spacing, lag));
    return blocks;
  }
  if (schedule.kind != ScheduleKind::ZBH1 &&
      schedule.kind != ScheduleKind::ZBH2)
    return blocks;
  for (bool h2 : {false, true})
    for (bool lagged : {false, true}) {
      if ((h2 && schedule.kind == ScheduleKind::ZBH1) ||
          (lagged && h2 == (schedule.kind == ScheduleKind::ZBH2)))
        continue;
      std::vector<int64_t> extra(p, 0), lag(p, 0);
      for (int d = 0; d < p; ++d) {
        lag[d] = lagged ? d : 0;
        extra[d] = h2 ? p - 1 - d : 0;
      }
      blocks.push_back(getOneFOneBBlock(pipeline, extra, lag));
    }
  return blocks;
}

std::optional<double> sched::getMemoryCap(ScheduleKind kind, int devices) {
  int p = devices;
  switch (kind) {
  case ScheduleKind::ZBH1:
  case ScheduleKind::ZBV:
    return p;
  case ScheduleKind::ZBH2:
    return 2 * p - 1;
  case ScheduleKind::VHalf:
    return (p + 1) / 2 + 1;
  case ScheduleKind::VMin:
    return (p + 4) / 3;
  default:
    return std::nullopt;
  }
}

/// The fastest order found within the schedule's memory cap
/// (`microbatches` of activations per device): `orders`, the schedule's
/// other blocks, the papers' own constructions and list schedules.
static FailureOr<Improved>
improveWithinCap(const ScheduleInfo &schedule, const Pipeline &pipeline,
                 const Durations &durations, double microbatches,
                 const std::vector<std::vector<Work>> &orders,
                 OrderClock &clock, std::string &error) {
  MemoryCaps caps;
  for (int d = 0; d < pipeline.devices; ++d)
    caps.push_back(microbatches *
                   getMicrobatchActivation(pipeline, durations, d));
  std::vector<std::vector<std::vector<Work>>> candidates{orders};
  for (const BuildingBlock &other : getAlternativeBlocks(schedule, pipeline)) {
    auto refined = refineOrders(pipeline, expandBlock(pipeline, other),
                                durations, error, &clock);
    if (failed(refined))
      return failure();
    candidates.push_back(std::move(*refined));
  }
  // The controllable-memory paper's own V-Half / V-Min construction
  // (its squeezing is quadratic in the microbatches per device: up to
  // 20,000 passes, like the list schedules' full set of policies).
  if ((schedule.kind == ScheduleKind::VHalf ||
       schedule.kind == ScheduleKind::VMin) &&
      6 * size_t(pipeline.devices) * pipeline.microbatches <= 20000)
    if (auto squeezed = getSqueezedVShapeOrders(
            pipeline, schedule.kind == ScheduleKind::VHalf))
      candidates.push_back(std::move(*squeezed));
  // Issue 37: the cost-aware V search -- the same construction over the
  // paper's whole space of building blocks, squeezed as above and as the
  // paper's framework reorders them (RepeatVShape.cpp), the fastest few
  // under the real costs and the cap. Each block costs a squeeze and a
  // timing; past 3,072 passes the blocks are ranked on fewer microbatches
  // (VShapeSearch.cpp), and past p = 20 the blocks above and the list
  // schedules stand alone.
  if (schedule.kind == ScheduleKind::VHalf ||
      schedule.kind == ScheduleKind::VMin)
    for (auto search : {searchVShapeBlocks, searchRepeatedVShapes})
      for (auto &orders : search(pipeline, durations, caps, 3))
        candidates.push_back(std::move(orders));
  // The zero-bubble paper's handcrafted ZB-V and its authors' cost-aware
  // heuristic (linear in the passes per setting, a handful of settings).
  if (schedule.kind == ScheduleKind::ZBV) {
    if (auto handcrafted = getHandcraftedZbvOrders(pipeline))
      candidates.push_back(std::move(*handcrafted));
    if (auto greedy = getGreedyZbvOrders(pipeline, durations, caps))
      candidates.push_back(std::move(*greedy));
  }
  return improveOrders(pipeline, candidates, durations, caps, error, &clock);
}

/// The schedule's orders for `pipeline`: its block (or construction),
/// refined, and improved within its memory cap.
static FailureOr<std::vector<std::vector<Work>>>
buildOrders(const ScheduleInfo &schedule, const Pipeline &pipeline,
            const Durations &durations, std::string &error,
            const BuildOptions &options) {
  std::vector<std::vector<Work>> orders;
  std::optional<BuildingBlock> block;
  switch (schedule.kind) {
  case ScheduleKind::GPipe:
  case ScheduleKind::TeraPipe:
    orders = getGPipeOrders(pipeline);
    break;
  case ScheduleKind::Interleaved1F1B:
  case ScheduleKind::Seq1F1BI:
    orders = getInterleavedOrders(pipeline);
    break;
  case ScheduleKind::Seq1F1B:
    orders = getSeq1F1BOrders(pipeline);
    break;
  case ScheduleKind::DualPipeV:
    // Its order without the pairs (buildSchedule lowers it with them).
    if (std::optional<OverlappedOrders> dual =
            getDualPipeVOrders(pipeline, /*overlap=*/false))
      orders = std::move(dual->orders);
    break;
  case ScheduleKind::OneFOneB:
    block = getOneFOneBBlock(pipeline, {}, {});
    break;
  case ScheduleKind::ZBH1:
  case ScheduleKind::ZBH2: {
    // ZB-H2 admits p - 1 - d more microbatches before device d's first B,
    // filling the warm-up bubble at up to 2p - 1 in flight.
    std::vector<int64_t> extra(pipeline.devices, 0), lag(pipeline.devices);
    for (int d = 0; d < pipeline.devices; ++d) {
      lag[d] = d;
      if (schedule.kind == ScheduleKind::ZBH2)
        extra[d] = pipeline.devices - 1 - d;
    }
    block = getOneFOneBBlock(pipeline, extra, lag);
    break;
  }
  case ScheduleKind::ZBV:
  case ScheduleKind::VHalf:
  case ScheduleKind::VMin: {
    auto [spacing, lag] = getVShapeSpacing(schedule.kind);
    block = getVShapeBlock(pipeline, spacing, lag);
    break;
  }
  }
  if (block) {
    // §5.2: the vocabulary passes go into the building block.
    if (pipeline.vocab.any() && pipeline.vocab.synchronous) {
      FailureOr<BuildingBlock> aligned =
          alignSynchronousVocabulary(pipeline, *block);
      if (failed(aligned)) {
        error = "cannot align the '" + schedule.getName().str() +
                "' building block to the interlaced vocabulary layers' "
                "synchronisation points";
        return failure();
      }
      block = std::move(*aligned);
    } else if (pipeline.vocab.any()) {
      addVocabularyPasses(pipeline, *block);
    }
    orders = expandBlock(pipeline, *block);
  }
  // One clock for the refinement and the improver: a pass's duration and
  // inputs are learned once per compile.
  OrderClock clock(pipeline, durations);
  if (pipeline.splitBackward ||
      (pipeline.vocab.any() && !pipeline.vocab.synchronous)) {
    auto advanced = refineOrders(pipeline, orders, durations, error, &clock);
    if (failed(advanced))
      return failure();
    orders = std::move(*advanced);
  }
  // Issue 11: the block is drawn for unit costs; under the real ones
  // another block or a list schedule within the same memory may be faster.
  if (std::optional<double> microbatches =
          getMemoryCap(schedule.kind, pipeline.devices);
      options.improve && microbatches && !pipeline.vocab.any()) {
    FailureOr<Improved> improved = improveWithinCap(
        schedule, pipeline, durations, *microbatches, orders, clock, error);
    if (failed(improved))
      return failure();
    orders = std::move(improved->orders);
  }
  return orders;
}

/// Issue 52: a deep pipeline's improved orders drawn for fewer
/// microbatches and extended (ExtendOrders.h) -- the improvement's list
/// schedules, refinements and timings are linear in the passes and were
/// most of a 64-device compile. Taken only where the extension keeps
/// every device's memory cap and is no slower than the schedule's own
/// block at full length (timed here; the steady state the extension
/// repeats is the improved one's); nullopt otherwise, and the caller
/// improves the whole pipeline as before.
static std::optional<std::vector<std::vector<Work>>>
buildByExtension(const ScheduleInfo &schedule, const Pipeline &pipeline,
                 const Durations &durations, const BuildOptions &options) {
  // Past this many passes a compile extends; below it the whole pipeline
  // is improved (every test and benchmark grid of the schedules' quality
  // is below it).
  constexpr size_t kExtendAbovePasses = 50'000;
  std::optional<double> cap = getMemoryCap(schedule.kind, pipeline.devices);
  if (!options.improve || !options.extend || !cap || pipeline.vocab.any())
    return std::nullopt;
  size_t passes = size_t(pipeline.getNumStages()) * pipeline.slices *
                  (pipeline.splitBackward ? 3 : 2) * pipeline.microbatches;
  // Enough microbatches for the warm-up, a steady state of several
  // periods and the cool-down on every device (at p + 16 the V shapes'
  // improved orders often have no steady state yet; at 2p + 8 they did
  // on the grid of bench/results/cpu-2026-11-28-plan-repeats).
  int shorter = 2 * pipeline.devices + 8;
  if (passes <= kExtendAbovePasses || pipeline.microbatches <= 2 * shorter)
    return std::nullopt;
  Pipeline drawn = pipeline;
  drawn.microbatches = shorter;
  std::string why;
  FailureOr<std::vector<std::vector<Work>>> orders =
      buildOrders(schedule, drawn, durations, why, options);
  if (failed(orders))
    return std::nullopt;
  std::optional<std::vector<std::vector<Work>>> extended =
      extendOrders(pipeline, *orders, shorter);
  if (!extended)
    return std::nullopt;
  // Within the cap, and deadlock-free (timed) and no slower than the
  // block's own order at full length.
  std::vector<double> peaks = getPeakUntilW(pipeline, *extended, durations);
  for (int d = 0; d < pipeline.devices; ++d)
    if (peaks[d] > *cap * getMicrobatchActivation(pipeline, durations, d) +
                       1e-9)
      return std::nullopt;
  OrderClock clock(pipeline, durations);
  std::optional<OrderTiming> timing = clock.time(*extended, why);
  if (!timing)
    return std::nullopt;
  BuildOptions plain = options;
  plain.improve = false;
  FailureOr<std::vector<std::vector<Work>>> block =
      buildOrders(schedule, pipeline, durations, why, plain);
  if (succeeded(block))
    if (std::optional<OrderTiming> own = clock.time(*block, why);
        own && own->makespan < timing->makespan - 1e-9)
      return std::nullopt;
  return extended;
}

FailureOr<Program> sched::buildSchedule(const ScheduleInfo &schedule,
                                        const Pipeline &pipeline,
                                        const Durations &durations,
                                        std::string &error,
                                        const BuildOptions &options) {
  std::optional<std::vector<std::vector<Work>>> extended =
      buildByExtension(schedule, pipeline, durations, options);
  if (options.extended)
    *options.extended = extended.has_value();
  if (extended)
    return lowerToProgram(pipeline, *extended, error);
  // DualPipeV is its phases' order with its pairs, as published: neither
  // refined nor improved (a moved pass would break a pair).
  if (schedule.kind == ScheduleKind::DualPipeV) {
    std::optional<OverlappedOrders> dual =
        getDualPipeVOrders(pipeline, options.overlap);
    if (!dual) {
      error = "schedule 'dualpipev' needs a V of two stages per device, "
              "the backward split, no token slices and no vocabulary "
              "shards";
      return failure();
    }
    return lowerToProgram(pipeline, dual->orders, error, dual->pairs);
  }
  FailureOr<std::vector<std::vector<Work>>> orders =
      buildOrders(schedule, pipeline, durations, error, options);
  if (failed(orders))
    return failure();
  return lowerToProgram(pipeline, *orders, error);
}
