//===- Search.cpp - sluice-compile --search -------------------------------===//
//
// The ranked table of the plans that fit, then the winner applied to the
// request and compiled by compileModel, as its printed flags would
// compile it (docs/search.md).
//
//===----------------------------------------------------------------------===//

#include "sluice/Driver/Compile.h"

#include "Report.h"

#include "sluice/Analysis/ModelSummary.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>

using namespace mlir;
using namespace mlir::sluice;
using namespace mlir::sluice::driver;

/// The flags the search chooses itself, refused when given; 0 or 1.
static int checkSearchFlags(const CompileRequest &r) {
  CompileRequest defaults;
  if (r.isScheduling() || r.tp != 1 || r.dp != 1 || r.cp != 1 ||
      r.zero != 0 || r.ep != 1 ||
      r.sequenceParallel || r.microbatches != 0 ||
      r.recompute != RecomputeKind::none || r.vocab != VocabMode::Baseline ||
      r.slices != defaults.slices || r.scheduleName != defaults.scheduleName ||
      r.virtualChunks != 0)
    return fail("--search chooses --pp, --tp, --dp, --cp, --zero, --ep, "
                "--sequence-parallel, --schedule, --virtual, --microbatches, "
                "--slices, --recompute and --vocab itself; leave them out");
  if (r.printPipeline)
    return fail("--print-pipeline replays one compile, not a --search");
  return checkRequest(r) ? 0 : 1;
}

/// The diagnostic where no plan is ranked: over memory, or none compiles.
static int failNoPlan(const SearchResult &found, const SearchRequest &search,
                      int64_t globalSequences, int64_t microBatch,
                      const SearchSpace &space) {
  auto gib = [](double bytes) {
    return llvm::format("%.4g", bytes / double(1ull << 30));
  };
  // What a plan had to fit in, and why that is below the GPU's memory.
  std::string room =
      space.headroomPercent > 0
          ? llvm::formatv("{0} GiB per GPU ({1} GiB less the {2}% "
                          "--memory-headroom)",
                          gib(space.memoryBytes), gib(space.deviceBytes),
                          llvm::format("%g", space.headroomPercent))
                .str()
          : llvm::formatv("{0} GiB per GPU", gib(space.memoryBytes)).str();
  if (found.overMemory.empty() && found.prunedMemory > 0)
    return fail(llvm::formatv("no plan fits {0}: the parameters' training "
                              "state alone needs {1} GiB a device on the "
                              "leanest mesh ({2} GPUs)",
                              room, gib(found.leanestState), search.gpus)
                    .str());
  if (found.overMemory.empty())
    return fail("no plan compiles for " + llvm::Twine(search.gpus) +
                " GPUs and a global batch of " + llvm::Twine(globalSequences) +
                " sequences (each replica's share must be whole "
                "microbatches of the model's " +
                llvm::Twine(microBatch) +
                " sequences, and some schedule must accept the count)");
  const PlanEstimate &leanest = getLeanest(found.overMemory);
  return fail(llvm::formatv("no plan fits {0}: the leanest needs {1} GiB "
                            "({2})",
                            room, gib(leanest.peakBytes),
                            leanest.choice.getFlags())
                  .str());
}

int driver::searchAndCompile(ModuleOp module, ModelOp model,
                             CompileRequest &request,
                             const SearchRequest &search, StringRef dtype) {
  if (checkSearchFlags(request))
    return 1;
  std::string error;
  std::optional<CostModel> costModel = CostModel::parse(request.costs, error);
  if (!costModel)
    return fail(error);
  const HardwareProfile *hw = costModel->getHardware();
  SearchSpace space;
  space.gpus = search.gpus;
  space.globalSequences = search.globalBatch;
  space.costs = request.costs;
  space.nodeGpus = hw ? hw->nodeGpus : 8;
  double gib = search.gpuMemory;
  if (gib == 0 && hw)
    gib = hw->memoryGiB;
  if (gib <= 0)
    return fail("--search needs --gpu-memory (GiB): --costs " + request.costs +
                " names no GPU whose memory it knows");
  if (!(search.memoryHeadroom >= 0 && search.memoryHeadroom < 100))
    return fail(llvm::formatv("--memory-headroom {0} is not a percentage in "
                              "[0, 100)",
                              llvm::format("%g", search.memoryHeadroom))
                    .str());
  space.deviceBytes = gib * double(1ull << 30);
  space.headroomPercent = search.memoryHeadroom;
  space.memoryBytes = space.deviceBytes * (1.0 - search.memoryHeadroom / 100);
  if (failed(setShape(module, request, dtype)))
    return 1;
  ModelSummary figures = summarizeModel(model);
  if (search.globalTokens) {
    int64_t tokens = *search.globalTokens, sequenceTokens = figures.seqLen;
    if (search.globalBatchGiven)
      return fail("give the batch once: --global-batch (sequences) or "
                  "--global-batch-tokens, not both");
    if (tokens < 1 || sequenceTokens < 1 || tokens % sequenceTokens)
      return fail("--global-batch-tokens " + llvm::Twine(tokens) +
                  " is not a positive whole number of " +
                  llvm::Twine(sequenceTokens) + "-token sequences");
    space.globalSequences = tokens / sequenceTokens;
  }
  // A calibration this model cannot take fails here, by name, not as
  // every plan refused.
  error.clear();
  std::optional<std::string> calibration =
      getCalibrationNote(*costModel, model, error);
  if (!calibration && !error.empty())
    return fail(error);
  auto start = std::chrono::steady_clock::now();
  FailureOr<SearchResult> found = searchPlans(module, model, space);
  if (failed(found))
    return 1;
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  printSearchTable(*found, space, figures.seqLen, search.top, seconds,
                   calibration);
  if (found->ranked.empty())
    return failNoPlan(*found, search, space.globalSequences, figures.microBatch,
                      space);
  // The winner, compiled as the user would with its flags.
  const PlanChoice &best = found->ranked.front().choice;
  request.apply(best);
  if (!checkRequest(request))
    return 1;
  if (request.emit == EmitKind::None &&
      StringRef(request.outputPath).ends_with(".json"))
    request.emit = EmitKind::Plan;
  llvm::outs() << "best: sluice-compile " << request.modelPath << " "
               << best.getFlags() << " --costs " << request.costs << "\n";
  return compileModel(module, model, request, dtype);
}
