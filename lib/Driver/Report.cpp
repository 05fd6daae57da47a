//===- Report.cpp - What sluice-compile prints ----------------------------===//
//
// The prediction after a compile and the --search table: the figures are
// the simulation's (attributes of the program) and the search's; this
// file only words them.
//
//===----------------------------------------------------------------------===//

#include "Report.h"

#include "sluice/PipelineIR/PipelineIR.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::sluice;
using namespace mlir::sluice::driver;

void driver::printSlices(ModelOp model) {
  std::optional<ArrayRef<int64_t>> lengths = model.getTokenSlices();
  if (!lengths)
    return;
  llvm::outs() << stringifySlicingMethod(
                      model.getSlicing().value_or(SlicingMethod::Uniform))
               << " slicing: " << lengths->size() << " slices ";
  llvm::interleaveComma(*lengths, llvm::outs());
  if (std::optional<double> fit = model.getSlicingFitError())
    llvm::outs() << llvm::formatv(" (latency model fit error {0:P1})", *fit);
  llvm::outs() << "\n";
}

/// The index of the largest entry (the first of equals).
static int64_t argmax(ArrayRef<double> values) {
  int64_t best = 0;
  for (int64_t d = 1; d < int64_t(values.size()); ++d)
    if (values[d] > values[best] + 1e-9)
      best = d;
  return best;
}

std::optional<std::string> driver::getCalibrationNote(const CostModel &model,
                                                      ModelOp shaped,
                                                      std::string &error) {
  if (model.getCalibrationPath().empty())
    return std::nullopt;
  std::optional<double> efficiency = model.calibrateEfficiency(shaped, error);
  if (!efficiency)
    return std::nullopt;
  return llvm::formatv("calibrated: {0} at {1}% of its peak FLOP/s, the "
                       "efficiency at which its passes of the whole model take "
                       "what '{2}' measured",
                       model.getHardware()->name,
                       llvm::format("%.3g", 100 * *efficiency),
                       model.getCalibrationPath())
      .str();
}

void driver::printPrediction(ProgramOp program, StringRef costs,
                             ArrayRef<double> peakMemoryBytes) {
  std::optional<double> stepTime = program.getStepTime();
  std::optional<ArrayRef<double>> peaks = program.getPeakActivation();
  if (!stepTime || !peaks || peaks->empty())
    return;
  std::string ignored;
  StringRef timeUnit = CostModel::parse(costs, ignored)->getTimeUnit();
  int64_t busiest = argmax(*peaks);
  std::string mesh;
  if (program.getTp() > 1)
    mesh += llvm::formatv(" x {0} tensor-parallel shards{1}", program.getTp(),
                          program.getSequenceParallel() ? " (sequence-parallel)"
                                                        : "");
  if (program.getDp() > 1)
    mesh += llvm::formatv(" x {0} data-parallel replicas{1}", program.getDp(),
                          program.getEp() > 1
                              ? llvm::formatv(" (experts over {0})",
                                              program.getEp())
                                    .str()
                              : std::string());
  if (program.getCp() > 1)
    mesh += llvm::formatv(" x {0} context-parallel ranks", program.getCp());
  llvm::outs() << llvm::formatv(
      "{0} on {1} devices{8}, {2} microbatches: step time {3} {4}, bubble "
      "ratio {5:F4}, peak activation {6} microbatches on device {7}\n",
      stringifyScheduleKind(program.getSchedule()), program.getDevices(),
      program.getMicrobatches(), llvm::format("%.4g", *stepTime), timeUnit,
      program.getBubbleRatio().value_or(0), (*peaks)[busiest], busiest, mesh);
  // A zero-bubble schedule keeps what W reads beyond B: say so where it
  // makes the peak higher.
  ArrayRef<double> untilW =
      program.getPeakActivationUntilW().value_or(ArrayRef<double>());
  int64_t heaviest = argmax(untilW);
  if (!untilW.empty() && untilW[heaviest] > (*peaks)[busiest] + 1e-9)
    llvm::outs() << llvm::formatv(
        "  until W runs: peak activation {0} microbatches on device {1}\n",
        untilW[heaviest], heaviest);
  if (!peakMemoryBytes.empty()) {
    int64_t fullest = argmax(peakMemoryBytes);
    llvm::outs() << llvm::formatv(
        "  peak memory {0:F2} GiB on device {1} (parameters, gradients and "
        "optimizer state, and activations)\n",
        peakMemoryBytes[fullest] / double(1ull << 30), fullest);
  }
  if (std::optional<double> mfu = program.getMfu())
    llvm::outs() << llvm::formatv("  MFU {0:P1} of {1}\n", *mfu, costs);
  FailureOr<ModelOp> model = getProgramModel(program);
  if (succeeded(model))
    if (std::optional<std::string> note = getCalibrationNote(
            *CostModel::parse(costs, ignored), *model, ignored))
      llvm::outs() << "  " << *note << "\n";
}

const PlanEstimate &driver::getLeanest(ArrayRef<PlanEstimate> estimates) {
  return *std::min_element(estimates.begin(), estimates.end(),
                           [](const PlanEstimate &a, const PlanEstimate &b) {
                             return a.peakBytes < b.peakBytes;
                           });
}

/// The flags `a` sets differently from `b`: " --flag value (runner-up:
/// other);" each.
static std::string describeDifferences(const PlanChoice &a,
                                       const PlanChoice &b) {
  SmallVector<StringRef> mine, theirs;
  std::string flagsA = a.getFlags(), flagsB = b.getFlags();
  SplitString(flagsA, mine, " ");
  SplitString(flagsB, theirs, " ");
  std::string differs;
  for (size_t i = 0; i + 1 < mine.size(); ++i)
    if (mine[i].starts_with("--")) {
      StringRef value = i + 1 < mine.size() && !mine[i + 1].starts_with("--")
                            ? mine[i + 1]
                            : "";
      auto at = llvm::find(theirs, mine[i]);
      StringRef other =
          at == theirs.end() ? "(not set)"
          : at + 1 == theirs.end() || (at + 1)->starts_with("--") ? ""
                                                                  : *(at + 1);
      if (at == theirs.end() || other != value)
        differs += llvm::formatv(" {0} {1} (runner-up: {2});", mine[i], value,
                                 at == theirs.end() ? "not set" : other);
    }
  // And what the runner-up sets that the best does not.
  for (size_t i = 0; i < theirs.size(); ++i)
    if (theirs[i].starts_with("--") && !llvm::is_contained(mine, theirs[i]))
      differs += llvm::formatv(
          " {0} not set (runner-up: {1});", theirs[i],
          i + 1 < theirs.size() && !theirs[i + 1].starts_with("--")
              ? theirs[i + 1]
              : StringRef("set"));
  return differs;
}

/// Why the winner beats the runner-up: the flags they differ in, where the
/// time goes, and, when their steps are within the cost model's stated
/// error, what decided the tie.
static void printRunnerUp(llvm::raw_ostream &os, const SearchResult &found,
                          const SearchSpace &space) {
  const PlanEstimate &a = found.ranked[0], &b = found.ranked[1];
  auto gib = [](double bytes) {
    return llvm::format("%.4g", bytes / double(1ull << 30));
  };
  double gap = b.stepTime / a.stepTime - 1.0;
  std::string differs = describeDifferences(a.choice, b.choice);
  os << llvm::formatv(
      "the best is {0:P2} {1} than the runner-up:{2} bubble {3:P1} against "
      "{4:P1}, {5} against {6} GiB\n",
      std::abs(gap), gap >= 0 ? "faster" : "slower", differs, a.bubble,
      b.bubble, gib(a.peakBytes), gib(b.peakBytes));
  if (std::abs(gap) > space.tieMargin)
    return;
  // A tie: say what decided it.
  double most = std::max(a.peakBytes, b.peakBytes);
  std::string why =
      std::abs(a.peakBytes - b.peakBytes) > 0.01 * most
          ? llvm::formatv("it needs less memory ({0} against {1} GiB)",
                          gib(a.peakBytes), gib(b.peakBytes))
                .str()
      : a.choice.tp != b.choice.tp || a.choice.pp != b.choice.pp
          ? llvm::formatv("the same memory, and the simpler mesh (tp {0}, pp "
                          "{1} against tp {2}, pp {3})",
                          a.choice.tp, a.choice.pp, b.choice.tp, b.choice.pp)
                .str()
          : std::string("the same memory and mesh, and the faster prediction");
  os << llvm::formatv("a tie: {0:P2} apart is within the cost model's stated "
                      "error of {1:P0} (docs/search.md, \"Ties\"); {2} "
                      "decides\n",
                      std::abs(gap), space.tieMargin, why);
}

void driver::printSearchTable(const SearchResult &found,
                              const SearchSpace &space, int64_t seqLength,
                              int64_t top, double seconds,
                              const std::optional<std::string> &calibration) {
  llvm::raw_ostream &os = llvm::outs();
  os << llvm::formatv(
      "search: {0} GPUs of {1} GiB ({2}; plans fit in {3} GiB, {4}% "
      "headroom), {5} sequences a step: {6} plans simulated, {7} meshes "
      "over memory before compiling, {8} skipped by the step bound, {9} "
      "refused by their schedule; {10} fit ({11:F1} s)\n",
      space.gpus,
      llvm::format("%.4g", (space.deviceBytes > 0 ? space.deviceBytes
                                                  : space.memoryBytes) /
                               double(1ull << 30)),
      space.costs, llvm::format("%.4g", space.memoryBytes / double(1ull << 30)),
      llvm::format("%g", space.headroomPercent), space.globalSequences,
      found.simulated, found.prunedMemory, found.prunedTime, found.refused,
      found.ranked.size(), seconds);
  if (calibration)
    os << *calibration << "\n";
  if (!found.unsearched.empty())
    os << "not searched: " << found.unsearched << "\n";
  if (found.ranked.empty())
    return;
  os << llvm::formatv("{0,4} {1,12} {2,7} {3,13} {4,9} {5}\n", "rank", "step",
                      "MFU", "tokens/s/GPU", "GiB", "plan");
  // Unit and explicit costs count steps in units: no rate, no MFU.
  std::string ignored;
  std::optional<CostModel> costModel = CostModel::parse(space.costs, ignored);
  StringRef unit = costModel ? costModel->getTimeUnit() : "s";
  bool timed = unit == "s";
  // A profile measures seconds, not a GPU's peak: no MFU.
  bool hasPeak = costModel && costModel->getHardware();
  int64_t rows = std::min<int64_t>(top, int64_t(found.ranked.size()));
  auto printRow = [&](StringRef rank, const PlanEstimate &e,
                      StringRef note) {
    double perGpu = double(space.globalSequences) * double(seqLength) /
                    (e.stepTime * double(space.gpus));
    os << llvm::formatv(
        "{0,4} {1,12} {2,7} {3,13} {4,9} {5}{6}\n", rank,
        llvm::formatv("{0} {1}", llvm::format("%.4g", e.stepTime), unit).str(),
        timed && hasPeak ? llvm::formatv("{0:P1}", e.mfu).str() : "-",
        timed ? llvm::formatv("{0:F0}", perGpu).str() : "-",
        llvm::format("%.4g", e.peakBytes / double(1ull << 30)),
        e.choice.getFlags(), note);
  };
  for (int64_t i = 0; i < rows; ++i)
    printRow(std::to_string(i + 1), found.ranked[i], "");
  // The baseline every user compares with: the same GPUs as plain data
  // replicas, FSDP (ZeRO-3) where the model allows it, as torchtitan
  // trains by default.
  if (const std::optional<PlanEstimate> &dp = found.dataParallel; dp)
    printRow(dp->choice.zero == 3 ? "fsdp" : "dp", *dp,
             dp->peakBytes > space.memoryBytes
                 ? "  (does not fit)"
                 : llvm::formatv("  (the best is {0:F2}x its throughput)",
                                 dp->stepTime / found.ranked[0].stepTime)
                       .str());
  else if (!found.dataParallelNote.empty())
    os << llvm::formatv("{0,4} no plain data-parallel plan: {1}\n", "dp",
                        found.dataParallelNote);
  if (found.ranked.size() > 1)
    printRunnerUp(os, found, space);
}
