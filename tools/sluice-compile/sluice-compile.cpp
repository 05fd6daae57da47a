//===- sluice-compile.cpp - The user's driver -----------------------------===//
//
// sluice-compile MODEL [--seq-len S] [--micro-batch B]
//                      [--pp P --microbatches M --schedule S [--virtual V]
//                       [--slices K|auto [--slicing uniform|seq1f1b|terapipe]]
//                       [--balance auto|uniform|compute]
//                       [--vocab baseline|redis|naive|vocab-1|vocab-2|
//                                interlaced]
//                       [--costs unit|a100|h100|v100|F=..,B=..]
//                       [--trace FILE] [--svg FILE]]
//                      [--emit model|program|plan] [-o FILE]
//                      [--print-pipeline] [--summary] [--report FILE]
// sluice-compile PROGRAM.mlir -o PLAN.json
//
// MODEL is a model-level .mlir file or a Hugging Face config.json. A
// compile runs the registered sluice-pipeline in a PassManager (MLIR's
// pass-manager flags apply); sluice-opt --sluice-pipeline replays it. The
// driver's flags are documented in docs/sluice-compile.md.
//
//===----------------------------------------------------------------------===//

#include "sluice/Analysis/CostModel.h"
#include "sluice/Analysis/ModelSummary.h"
#include "sluice/Import/HFConfig.h"
#include "sluice/PipelineIR/PipelineIR.h"
#include "sluice/Schedule/Schedules.h"
#include "sluice/Search/PlanSearch.h"
#include "sluice/SluiceOps.h"
#include "sluice/Target/Export.h"
#include "sluice/Target/Plan.h"
#include "sluice/Transforms/Passes.h"
#include "sluice/Transforms/Pipeline.h"
#include "sluice/Version.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Support/Timing.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>

using namespace mlir;
using namespace mlir::sluice;
namespace cl = llvm::cl;

namespace {
enum class EmitKind { None, Model, Program, Plan };

cl::OptionCategory category("sluice-compile options");

cl::opt<std::string> modelPath(cl::Positional,
                               cl::desc("<model.mlir | config.json>"),
                               cl::Required, cl::cat(category));
cl::opt<int64_t> seqLen("seq-len", cl::desc("Override the sequence length"),
                        cl::init(0), cl::value_desc("S"), cl::cat(category));
cl::opt<int64_t> microBatch("micro-batch",
                            cl::desc("Override the micro-batch size"),
                            cl::init(0), cl::value_desc("B"),
                            cl::cat(category));
cl::opt<std::string> precision(
    "precision",
    cl::desc("Element types the plan trains in: bf16 (activations; fp32 "
             "master weights, gradients, Adam moments), fp8 (bf16, and the "
             "transformer layers' GEMMs on FP8 operands) or fp32 (default: "
             "the model's dtype)"),
    cl::value_desc("bf16|fp8|fp32"), cl::cat(category));
cl::opt<EmitKind> emit(
    "emit", cl::desc("IR to print"), cl::init(EmitKind::None),
    cl::values(clEnumValN(EmitKind::Model, "model", "the model-level module"),
               clEnumValN(EmitKind::Program, "program",
                          "the partitioned model and its program"),
               clEnumValN(EmitKind::Plan, "plan",
                          "the runtime plan (JSON; also -o FILE.json)")),
    cl::cat(category));
cl::opt<int64_t> pp("pp", cl::desc("Pipeline devices (enables scheduling)"),
                    cl::init(0), cl::value_desc("P"), cl::cat(category));
cl::opt<int64_t> dp("dp",
                    cl::desc("Data-parallel replicas of each pipeline "
                             "device (ranks = pp x tp x dp)"),
                    cl::init(1), cl::value_desc("D"), cl::cat(category));
cl::opt<int64_t> zero("zero",
                      cl::desc("ZeRO stage: 1 shards the optimizer state over "
                               "the data-parallel replicas (Megatron-LM's "
                               "distributed optimizer); 0 (default) does not"),
                      cl::init(0), cl::value_desc("0|1"), cl::cat(category));
cl::opt<int64_t> tp("tp",
                    cl::desc("Tensor-parallel shards of each pipeline "
                             "device, splitting every transformer layer"),
                    cl::init(1), cl::value_desc("T"), cl::cat(category));
cl::opt<bool> sequenceParallel(
    "sequence-parallel",
    cl::desc("Megatron-LM's sequence parallelism (needs --tp of at least "
             "2): each shard keeps 1/T of the tokens between the layers' "
             "tensor-parallel regions; all-gathers and reduce-scatters "
             "replace the all-reduces"),
    cl::init(false), cl::cat(category));
// Typed: cl refuses a value it does not list, naming the option.
cl::opt<RecomputeKind>
    recompute("recompute", cl::desc("Activation recomputation of every stage"),
              getRecomputeValues(), cl::init(RecomputeKind::none),
              cl::cat(category));
cl::opt<int64_t> microbatches("microbatches",
                              cl::desc("Microbatches per training step (per "
                                       "data-parallel replica)"),
                              cl::init(0), cl::value_desc("M"),
                              cl::cat(category));
cl::opt<std::string> scheduleName("schedule", cl::desc("Pipeline schedule"),
                                  cl::init("1f1b"), cl::value_desc("S"),
                                  cl::cat(category));
cl::opt<int64_t>
    virtualChunks("virtual",
                  cl::desc("Chunks per device (default: the schedule's)"),
                  cl::init(0), cl::value_desc("V"), cl::cat(category));
cl::opt<std::string> slices("slices",
                            cl::desc("Token slices per microbatch, or auto "
                                     "(--slicing terapipe)"),
                            cl::init("1"), cl::value_desc("K"),
                            cl::cat(category));
cl::opt<SlicingMethod> slicingMethod("slicing",
                                     cl::desc("Where slices cut a sequence"),
                                     getSlicingMethodValues(),
                                     cl::init(SlicingMethod::Uniform),
                                     cl::cat(category));
cl::opt<double> slicingEpsilon(
    "slicing-epsilon",
    cl::desc("TeraPipe's least step between bounds, seconds (1e-4)"),
    cl::init(1e-4), cl::cat(category));
cl::opt<int64_t> slicingGranularity(
    "slicing-granularity",
    cl::desc("TeraPipe's slice lengths are multiples of this (0: auto)"),
    cl::init(0), cl::cat(category));
cl::opt<sched::Balance> balance("balance", cl::desc("Layers per stage"),
                                getBalanceValues(),
                                cl::init(sched::Balance::Auto),
                                cl::cat(category));
/// --vocab: where the vocabulary layers go and, sharded, how many
/// barriers the output shard's softmax has (docs/vocabulary.md).
cl::opt<VocabMode> vocabMode("vocab",
                             cl::desc("Vocabulary layers (docs/vocabulary.md)"),
                             getVocabModeValues(),
                             cl::init(VocabMode::Baseline), cl::cat(category));
cl::opt<std::string>
    costs("costs",
          cl::desc("Cost model: unit (default), a100, h100, h200, v100 "
                   "(NAME:key=value,... overrides its node: docs/costs.md), "
                   "a profile.json from sluice-run --profile, or "
                   "F=..,B=..,..."),
          cl::init("unit"), cl::cat(category));
cl::opt<std::string> tracePath("trace",
                               cl::desc("Write a Chrome trace (Perfetto)"),
                               cl::value_desc("FILE"), cl::cat(category));
cl::opt<std::string> svgPath("svg", cl::desc("Write an SVG timeline"),
                             cl::value_desc("FILE"), cl::cat(category));
cl::opt<bool> summary("summary",
                      cl::desc("Print parameters and FLOPs per layer kind"),
                      cl::cat(category));
cl::opt<std::string> reportPath("report",
                                cl::desc("Write the figures as JSON to FILE"),
                                cl::value_desc("FILE"), cl::cat(category));
cl::opt<bool> printPipeline(
    "print-pipeline",
    cl::desc("Print the sluice-opt command line that replays this compile "
             "(sluice-opt MODEL --sluice-pipeline=...) and exit"),
    cl::cat(category));
cl::OptionCategory searchCategory(
    "sluice-compile --search: the best plan for a cluster (docs/search.md)");
cl::opt<bool> search(
    "search",
    cl::desc("Search pp x tp x dp, ZeRO, sequence parallelism, schedule, "
             "vocabulary layers, recomputation, token slices and the "
             "microbatches of --global-batch on --gpus GPUs of --costs "
             "under --gpu-memory; print the ranked table and compile the "
             "fastest plan that fits (-o)"),
    cl::cat(searchCategory));
cl::opt<int64_t> gpus("gpus", cl::desc("GPUs to plan for (--search)"),
                      cl::init(0), cl::value_desc("N"),
                      cl::cat(searchCategory));
cl::opt<double> gpuMemory(
    "gpu-memory",
    cl::desc("Memory per GPU, GiB (--search; default: the --costs GPU's, "
             "80 for a100 and h100, 140 for h200, 32 for v100)"),
    cl::init(0), cl::value_desc("GiB"), cl::cat(searchCategory));
cl::opt<int64_t> globalBatch(
    "global-batch",
    cl::desc("Sequences per training step over all replicas (--search)"),
    cl::init(0), cl::value_desc("SEQUENCES"), cl::cat(searchCategory));
cl::opt<int64_t> globalTokens(
    "global-batch-tokens",
    cl::desc("Tokens per training step over all replicas (--search; "
             "instead of --global-batch, a whole number of sequences)"),
    cl::init(0), cl::value_desc("TOKENS"), cl::cat(searchCategory));
// The cluster, where it differs from the --costs GPU's usual node: these
// become the cost model's overrides (`h100:gpus-per-node=4,...`).
cl::opt<int64_t> gpusPerNode(
    "gpus-per-node",
    cl::desc("GPUs a node joins by its fast link (analytic --costs; "
             "default the preset's, 8)"),
    cl::init(0), cl::value_desc("N"), cl::cat(category));
cl::opt<double> nodeBandwidth(
    "node-bandwidth",
    cl::desc("Bandwidth inside a node (NVLink), GB/s per GPU and direction "
             "(analytic --costs; h100: 450)"),
    cl::init(0), cl::value_desc("GB/s"), cl::cat(category));
cl::opt<double> networkBandwidth(
    "network-bandwidth",
    cl::desc("Bandwidth between nodes (InfiniBand), GB/s per GPU and "
             "direction (analytic --costs; h100: 50)"),
    cl::init(0), cl::value_desc("GB/s"), cl::cat(category));
cl::opt<double> nodeLatency(
    "node-latency",
    cl::desc("Latency of a message inside a node, microseconds (analytic "
             "--costs; h100: 5)"),
    cl::init(0), cl::value_desc("us"), cl::cat(category));
cl::opt<double> networkLatency(
    "network-latency",
    cl::desc("Latency of a message between nodes, microseconds (analytic "
             "--costs; h100: 8)"),
    cl::init(0), cl::value_desc("us"), cl::cat(category));
cl::opt<int64_t> searchTop("top",
                           cl::desc("Rows of the --search table (default 10)"),
                           cl::init(10), cl::value_desc("K"),
                           cl::cat(searchCategory));
cl::opt<std::string> outputPath("o", cl::desc("Output file for the emitted IR"),
                                cl::value_desc("FILE"), cl::init("-"),
                                cl::cat(category));

/// --slices as a number; 0 for auto.
int64_t sliceCount = 1;
/// --search set --slices to its winner's (no occurrence on the command
/// line, but given all the same).
bool searchSetSlices = false;

/// Prints each diagnostic on one line, `location: severity: message`: users
/// grep and parse these, so they never span lines.
class OneLineDiagnostics {
public:
  explicit OneLineDiagnostics(MLIRContext *context)
      : handler(context, [](Diagnostic &diag) {
          print(diag);
          for (Diagnostic &note : diag.getNotes())
            print(note);
          return success();
        }) {}

private:
  static void print(Diagnostic &diag) {
    llvm::raw_ostream &os = llvm::errs();
    if (auto loc = dyn_cast<FileLineColLoc>(getFileLoc(diag.getLocation())))
      os << loc.getFilename().getValue() << ":" << loc.getLine() << ":"
         << loc.getColumn() << ": ";
    else
      os << "sluice-compile: ";
    switch (diag.getSeverity()) {
    case DiagnosticSeverity::Error:
      os << "error: ";
      break;
    case DiagnosticSeverity::Warning:
      os << "warning: ";
      break;
    case DiagnosticSeverity::Note:
      os << "note: ";
      break;
    case DiagnosticSeverity::Remark:
      os << "remark: ";
      break;
    }
    std::string message = diag.str();
    std::replace(message.begin(), message.end(), '\n', ' ');
    os << message << "\n";
  }

  /// The innermost file location of `loc` (through names and fusions).
  static Location getFileLoc(Location loc) {
    if (auto name = dyn_cast<NameLoc>(loc))
      return getFileLoc(name.getChildLoc());
    if (auto callSite = dyn_cast<CallSiteLoc>(loc))
      return getFileLoc(callSite.getCallee());
    if (auto fused = dyn_cast<FusedLoc>(loc))
      for (Location inner : fused.getLocations())
        if (isa<FileLineColLoc>(getFileLoc(inner)))
          return getFileLoc(inner);
    return loc;
  }

  ScopedDiagnosticHandler handler;
};

int fail(const llvm::Twine &message) {
  llvm::errs() << "sluice-compile: error: " << message << "\n";
  return 1;
}

/// fail() where a LogicalResult is returned.
LogicalResult failWith(const llvm::Twine &message) {
  fail(message);
  return failure();
}

/// Checks the pipeline flags against the schedule before any IR changes,
/// so that errors speak of flags rather than pass options.
const sched::ScheduleInfo *checkPipelineFlags() {
  const sched::ScheduleInfo *info = sched::lookupSchedule(scheduleName);
  if (!info) {
    SmallVector<StringRef> names;
    for (const sched::ScheduleInfo &s : sched::getSchedules())
      names.push_back(s.getName());
    fail("unknown schedule '" + scheduleName + "' (expected " +
         llvm::join(names, ", ") + ")");
    return nullptr;
  }
  auto positive = [](const cl::opt<int64_t> &flag, StringRef name) {
    if (flag >= 1)
      return true;
    fail("--" + name + " must be positive, got " + Twine(int64_t(flag)));
    return false;
  };
  if (microbatches.getNumOccurrences() == 0 && !search) {
    // No default: the microbatch count is the batch size, which changes
    // what trains, not only how fast.
    fail("--pp " + Twine(int64_t(pp)) +
         " needs --microbatches M, the microbatches of a step (each "
         "--micro-batch sequences); the bubble shrinks as M grows past the "
         "pipeline's depth: M = 4 x pp is a common start");
    return nullptr;
  }
  if (!positive(pp, "pp") || !positive(microbatches, "microbatches") ||
      !positive(dp, "dp") || !positive(tp, "tp"))
    return nullptr;
  bool tokenSliced = info->kind == ScheduleKind::Seq1F1B ||
                     info->kind == ScheduleKind::Seq1F1BI ||
                     info->kind == ScheduleKind::TeraPipe;
  if (tokenSliced && slices.getNumOccurrences() == 0 && !searchSetSlices) {
    // Without slices these schedules are 1F1B, interleaved 1F1B and
    // GPipe: say so rather than compile them as that.
    fail("--schedule " + scheduleName.getValue() +
         " slices each microbatch along its tokens: give --slices K (2 or "
         "more; --slicing seq1f1b cuts equal-FLOP slices), or --slices auto "
         "--slicing terapipe for TeraPipe's choice; --slices 1 is the "
         "unsliced schedule");
    return nullptr;
  }
  if (slices == "auto") {
    if (slicingMethod != SlicingMethod::TeraPipe) {
      fail("--slices auto needs --slicing terapipe (its dynamic programme "
           "picks the count); --slicing " +
           stringifySlicingMethod(slicingMethod).str() + " needs a number");
      return nullptr;
    }
    sliceCount = 0;
  } else if (StringRef(slices).getAsInteger(10, sliceCount) || sliceCount < 1) {
    fail("--slices must be a positive number or auto, got '" + slices + "'");
    return nullptr;
  }
  int64_t chunks =
      virtualChunks ? int64_t(virtualChunks) : sched::getDefaultChunks(*info);
  if (chunks < 1) {
    fail("--virtual must be positive, got " + Twine(chunks));
    return nullptr;
  }
  sched::Pipeline shape;
  shape.devices = int(pp);
  shape.chunks = int(chunks);
  shape.microbatches = int(microbatches);
  // With --slices auto the count is the DP's: check the rest with 2.
  shape.slices = int(sliceCount ? sliceCount : 2);
  shape.splitBackward = info->splitBackward;
  for (int s = 0; s < pp * chunks; ++s)
    shape.stages.push_back(
        info->placement == PlacementKind::vshape && s >= pp
            ? sched::StagePlacement{int(2 * pp - 1 - s), 1}
            : sched::StagePlacement{int(s % pp), int(s / pp)});
  std::string problem = sched::checkPipeline(*info, shape);
  if (!problem.empty()) {
    fail(problem);
    return nullptr;
  }
  std::string error;
  if (!CostModel::parse(costs, error)) {
    fail(error);
    return nullptr;
  }
  if (vocabMode == VocabMode::Redis && balance.getNumOccurrences() &&
      balance != sched::Balance::Compute) {
    fail(std::string("--vocab redis balances the stages by compute; it "
                     "cannot be combined with --balance ") +
         (balance == sched::Balance::Uniform ? "uniform" : "auto"));
    return nullptr;
  }
  bool sharded =
      vocabMode != VocabMode::Baseline && vocabMode != VocabMode::Redis;
  if (sharded && !sched::isBuildingBlockSchedule(info->kind)) {
    shape.vocab.output = true;
    fail(sched::checkPipeline(*info, shape));
    return nullptr;
  }
  return info;
}

/// The split --balance asks for. Its default, auto, balances the head's
/// cost where the vocabulary layers stay on the end stages; the paper's
/// Baseline named explicitly (--vocab baseline) keeps its uniform split,
/// and sharded vocabulary layers leave no head to balance (the stage
/// partition runs before they are sharded: auto would count the head on
/// the last stage).
sched::Balance getBalance() {
  if (balance != sched::Balance::Auto)
    return balance;
  if (vocabMode == VocabMode::Redis)
    return sched::Balance::Compute;
  if (vocabMode != VocabMode::Baseline ||
      (vocabMode.getNumOccurrences() && !balance.getNumOccurrences()))
    return sched::Balance::Uniform;
  return sched::Balance::Auto;
}

/// The flags as sluice-pipeline's options (the shape flags aside: they
/// run first, before the summary).
void fillPipelineOptions(SluicePipelineOptions &o) {
  o.pp = pp;
  // checkPipelineFlags has refused a name no schedule has.
  o.schedule = sched::lookupSchedule(scheduleName)->kind;
  o.microbatches = microbatches;
  o.virtualChunks = virtualChunks;
  o.balance = getBalance();
  o.vocab = vocabMode;
  o.slices = slices;
  o.slicing = slicingMethod;
  o.slicingEpsilon = slicingEpsilon;
  o.slicingGranularity = slicingGranularity;
  o.recompute = recompute;
  o.costs = costs;
  o.dp = dp;
  o.zero = zero;
  o.tp = tp;
  o.sequenceParallel = sequenceParallel;
  o.planBuffers = emit == EmitKind::Plan;
}

/// A pass manager with the MLIR flags applied (--mlir-print-ir-*,
/// --mlir-timing, --mlir-pass-pipeline-crash-reproducer).
LogicalResult configure(PassManager &pm) {
  if (failed(applyPassManagerCLOptions(pm)))
    return failure();
  auto timing = std::make_unique<DefaultTimingManager>();
  applyDefaultTimingManagerCLOptions(*timing);
  if (timing->isEnabled())
    pm.enableTiming(std::move(timing));
  return success();
}

/// Writes the report, trace and timeline the flags ask for: the simulation
/// again, with files (the pipeline's passes write none).
/// Each device's peak memory (its parameters and optimizer state as the
/// report counts them, plus its peak activations), bytes, from the
/// simulation writeScheduleFiles runs: the prediction line states it, so
/// that schedules are compared by what a device holds, not by
/// microbatches of differently sized stages.
static std::vector<double> peakMemoryBytes;

LogicalResult writeScheduleFiles(ProgramOp program,
                                 const ModelSummary &summary) {
  return simulateProgram(program, costs, [&](ScheduleFiles &files) {
    peakMemoryBytes.clear();
    for (int d = 0; d < files.pipeline.devices; ++d)
      peakMemoryBytes.push_back(
          double(files.costs.getParameterBytes(d)) +
          files.simulation.devices[d].peakActivationBytes);
    if (reportPath.empty() && tracePath.empty() && svgPath.empty())
      return success();
    files.report = reportPath;
    files.trace = tracePath;
    files.svg = svgPath;
    // The schedule report extends the model summary's report.
    files.reportExtras = std::move(*toJSON(summary).getAsObject());
    return writeScheduleFiles(files);
  });
}

/// Reads MODEL as a config.json or as MLIR, by extension.
OwningOpRef<ModuleOp> loadModel(StringRef path, MLIRContext *context) {
  std::string errorMessage;
  std::unique_ptr<llvm::MemoryBuffer> buffer =
      openInputFile(path, &errorMessage);
  if (!buffer) {
    fail(errorMessage);
    return nullptr;
  }
  if (llvm::sys::path::extension(path) == ".json")
    return importHFConfig(buffer->getBuffer(), path, context);

  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(buffer), llvm::SMLoc());
  return parseSourceFile<ModuleOp>(sourceMgr, context);
}
} // namespace

/// The activation element type --precision asks for ("bf16", "f32", or
/// "" for the model's), or nullopt after an error.
static std::optional<std::string> getDtype() {
  if (precision == "bf16" || precision == "fp8" || precision == "fp32")
    return std::string(precision == "fp32" ? "f32" : "bf16");
  if (!precision.empty()) {
    fail("unknown --precision '" + precision +
         "' (expected bf16, fp8 or fp32)");
    return std::nullopt;
  }
  return std::string();
}

/// --print-pipeline: the sluice-opt command that replays this compile.
static void printReplay(StringRef dtype) {
  SluicePipelineOptions options;
  fillPipelineOptions(options);
  options.seqLen = seqLen;
  options.microBatch = microBatch;
  options.dtype = dtype.str();
  std::string text;
  llvm::raw_string_ostream os(text);
  options.print(os);
  // sluice-opt reads IR: a Hugging Face config is imported first, into
  // the model-level module sluice-compile --emit model writes.
  std::string input = modelPath;
  if (StringRef(modelPath).ends_with(".json")) {
    input = llvm::sys::path::stem(modelPath).str() + ".mlir";
    llvm::outs() << "sluice-compile " << modelPath << " --emit model -o "
                 << input << "\n";
  }
  // print() writes {opt=value ...}: the option string without braces.
  llvm::outs() << "sluice-opt " << input << " --sluice-pipeline=\""
               << StringRef(text).drop_front().drop_back() << "\"\n";
}

/// The runtime plan of the module's one program (planning its buffers if
/// sluice-opt did not), written atomically to -o.
static LogicalResult writePlan(ModuleOp module, bool scheduling) {
  // Without --pp: a program compiled before (sluice-opt
  // --sluice-pipeline="... plan-buffers=true"), translated as it is.
  auto programs = llvm::to_vector(module.getOps<ProgramOp>());
  if (programs.size() != 1)
    return failWith(scheduling ? "the compile made no program"
                               : "--emit plan needs --pp, or a model with its "
                                 "compiled sluice.program");
  ProgramOp program = programs.front();
  bool planned =
      llvm::all_of(program.getBody().getOps<DeviceOp>(),
                   [](DeviceOp device) { return bool(device.getBuffers()); });
  if (!planned && failed(planBuffers(program)))
    return failure();
  std::string text;
  llvm::raw_string_ostream os(text);
  if (failed(exportPlan(program, os, /*fp8Gemms=*/precision == "fp8")))
    return failure();
  std::string error;
  if (outputPath == "-")
    llvm::outs() << text;
  else if (failed(writeFileAtomically(outputPath, text, error)))
    return failWith(error);
  return success();
}

/// The module's IR, as sluice-opt prints it (a replay compares the two
/// byte for byte).
static LogicalResult writeIR(ModuleOp module) {
  std::string errorMessage;
  auto output = openOutputFile(outputPath, &errorMessage);
  if (!output)
    return failWith("cannot write '" + outputPath + "': " + errorMessage);
  module.print(output->os());
  output->os() << "\n";
  output->keep();
  return success();
}

/// The slice lengths the compile chose, with the latency fit's error.
static void printSlices(ModelOp model) {
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

/// For `GPU:calibrate=PROFILE.json`, the efficiency the profile gives the
/// model: "calibrated: ..."; nullopt for other costs, and with `error` set
/// where the profile cannot calibrate this model.
static std::optional<std::string>
getCalibrationNote(const CostModel &model, ModelOp shaped, std::string &error) {
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

/// The prediction: step time, bubble ratio, the most loaded device's peak
/// activation, and the MFU where the cost model has a peak.
static void printPrediction(ProgramOp program) {
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
    mesh += llvm::formatv(" x {0} data-parallel replicas", program.getDp());
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

/// The plan with the least memory of `estimates`.
static const PlanEstimate &leanest(ArrayRef<PlanEstimate> estimates) {
  return *std::min_element(estimates.begin(), estimates.end(),
                           [](const PlanEstimate &a, const PlanEstimate &b) {
                             return a.peakBytes < b.peakBytes;
                           });
}

/// The --search table: the fastest --top plans that fit, then why the
/// best beats the runner-up.
static void printSearchTable(const SearchResult &found,
                             const SearchSpace &space, int64_t seqLength,
                             double seconds,
                             const std::optional<std::string> &calibration) {
  llvm::raw_ostream &os = llvm::outs();
  os << llvm::formatv(
      "search: {0} GPUs of {1} GiB ({2}), {3} sequences a step: {4} plans "
      "simulated, {5} meshes over memory before compiling, {6} skipped by "
      "the step bound, {7} refused by their schedule; {8} fit ({9:F1} s)\n",
      space.gpus, llvm::format("%.4g", space.memoryBytes / double(1ull << 30)),
      space.costs, space.globalSequences, found.simulated, found.prunedMemory,
      found.prunedTime, found.refused, found.ranked.size(), seconds);
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
  int64_t rows = std::min<int64_t>(searchTop, int64_t(found.ranked.size()));
  for (int64_t i = 0; i < rows; ++i) {
    const PlanEstimate &e = found.ranked[i];
    double perGpu = double(space.globalSequences) * double(seqLength) /
                    (e.stepTime * double(space.gpus));
    os << llvm::formatv(
        "{0,4} {1,12} {2,7} {3,13} {4,9} {5}\n", i + 1,
        llvm::formatv("{0} {1}", llvm::format("%.4g", e.stepTime), unit).str(),
        timed && hasPeak ? llvm::formatv("{0:P1}", e.mfu).str() : "-",
        timed ? llvm::formatv("{0:F0}", perGpu).str() : "-",
        llvm::format("%.4g", e.peakBytes / double(1ull << 30)),
        e.choice.getFlags());
  }
  if (found.ranked.size() > 1) {
    // Why: the flags the two differ in, and where the time goes.
    const PlanEstimate &a = found.ranked[0], &b = found.ranked[1];
    SmallVector<StringRef> mine, theirs;
    std::string flagsA = a.choice.getFlags(), flagsB = b.choice.getFlags();
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
    os << llvm::formatv(
        "the best is {0:P2} faster than the runner-up:{1} bubble {2:P1} "
        "against {3:P1}, {4} against {5} GiB\n",
        b.stepTime / a.stepTime - 1.0, differs, a.bubble, b.bubble,
        llvm::format("%.4g", a.peakBytes / double(1ull << 30)),
        llvm::format("%.4g", b.peakBytes / double(1ull << 30)));
  }
}

/// Checks the flags against each other; false after an error.
static bool checkFlags(bool scheduling) {
  if (seqLen < 0 || microBatch < 0) {
    fail(seqLen < 0
             ? "--seq-len must be positive, got " + llvm::Twine(int64_t(seqLen))
             : "--micro-batch must be positive, got " +
                   llvm::Twine(int64_t(microBatch)));
    return false;
  }
  if (!scheduling &&
      (microbatches != 0 || !tracePath.empty() || !svgPath.empty() ||
       emit == EmitKind::Program || dp != 1 || tp != 1 || sequenceParallel ||
       recompute != RecomputeKind::none || printPipeline)) {
    fail("--microbatches, --dp, --tp, --sequence-parallel, --recompute, "
         "--trace, --svg, --print-pipeline and --emit program need --pp");
    return false;
  }
  return !scheduling || checkPipelineFlags();
}

/// The passes after parsing: the shape (the summary describes the model
/// as given, before partitioning), then with --pp the pipeline; the plan
/// or IR written; the summary, slices and prediction printed.
static int compileModel(ModuleOp module, ModelOp model, StringRef dtype) {
  MLIRContext *context = module.getContext();
  bool scheduling = pp != 0;
  PassManager shape(context);
  if (failed(configure(shape)))
    return 1;
  shape.addPass(createSetMicrobatchShape({seqLen, microBatch, dtype.str()}));
  if (failed(shape.run(module)))
    return 1;
  ModelSummary figures = summarizeModel(model);
  if (scheduling) {
    PassManager pm(context);
    if (failed(configure(pm)))
      return 1;
    SluicePipelineOptions options;
    fillPipelineOptions(options);
    buildSluicePipeline(pm, options);
    if (failed(pm.run(module)) ||
        failed(
            writeScheduleFiles(*module.getOps<ProgramOp>().begin(), figures)))
      return 1;
  }

  if (emit == EmitKind::Plan) {
    if (failed(writePlan(module, scheduling)))
      return 1;
  } else if (emit != EmitKind::None || (scheduling && outputPath != "-")) {
    if (failed(writeIR(module)))
      return 1;
  }

  // Asked for nothing on stdout (at most a --report file): the summary is
  // the most useful answer; with a schedule, the prediction.
  if (summary || (emit == EmitKind::None && outputPath == "-" && !scheduling))
    printModelSummary(figures, llvm::outs());
  // The chosen slices and the prediction, unless stdout carries the
  // emitted IR or plan: the same lines for -o plan.mlir and -o plan.json.
  if (scheduling && !(emit != EmitKind::None && outputPath == "-")) {
    printSlices(model);
    printPrediction(*module.getOps<ProgramOp>().begin());
  }
  if (!scheduling && !reportPath.empty()) {
    // writeFileAtomically writes a temporary file and renames it: a reader
    // never sees half a report, and an old report survives a failed run.
    std::string error;
    if (failed(writeFileAtomically(
            reportPath, llvm::formatv("{0:2}\n", toJSON(figures)).str(),
            error)))
      return fail(error);
    if (!(emit != EmitKind::None && outputPath == "-"))
      llvm::outs() << "wrote the report " << reportPath << "\n";
  }
  return 0;
}

/// --search: the ranked table, then the winner compiled as its flags
/// would compile it (its plan to -o, its prediction printed).
/// Folds --gpus-per-node and the link flags into --costs as the analytic
/// model's overrides; false (said) where --costs names no GPU.
static bool applyClusterFlags() {
  std::string overrides;
  auto add = [&](const cl::Option &flag, const char *key, double value) {
    if (!flag.getNumOccurrences())
      return;
    overrides += (overrides.empty() ? "" : ",") + std::string(key) + "=" +
                 llvm::formatv("{0}", llvm::format("%.17g", value)).str();
  };
  add(gpusPerNode, "gpus-per-node", double(gpusPerNode));
  add(nodeBandwidth, "node-bandwidth", nodeBandwidth);
  add(networkBandwidth, "network-bandwidth", networkBandwidth);
  add(nodeLatency, "node-latency", nodeLatency);
  add(networkLatency, "network-latency", networkLatency);
  if (overrides.empty())
    return true;
  std::string error;
  std::optional<CostModel> model = CostModel::parse(costs, error);
  if (!model || !model->getHardware()) {
    fail("--gpus-per-node and the link flags describe the GPUs of an "
         "analytic --costs (a100, h100, h200, v100), not '" +
         costs + "'");
    return false;
  }
  costs = costs + (StringRef(costs).contains(':') ? "," : ":") + overrides;
  // The values are checked where the model reads them.
  if (!CostModel::parse(costs, error)) {
    fail(error);
    return false;
  }
  return true;
}

static int searchAndCompile(ModuleOp module, ModelOp model, StringRef dtype) {
  if (pp != 0 || tp != 1 || dp != 1 || zero != 0 || sequenceParallel ||
      microbatches != 0 || recompute != RecomputeKind::none ||
      vocabMode != VocabMode::Baseline || slices != "1" ||
      scheduleName != "1f1b" || virtualChunks != 0)
    return fail("--search chooses --pp, --tp, --dp, --zero, "
                "--sequence-parallel, --schedule, --virtual, --microbatches, "
                "--slices, --recompute and --vocab itself; leave them out");
  if (printPipeline)
    return fail("--print-pipeline replays one compile, not a --search");
  if (!checkFlags(/*scheduling=*/false))
    return 1;
  std::string error;
  std::optional<CostModel> costModel = CostModel::parse(costs, error);
  if (!costModel)
    return fail(error);
  const HardwareProfile *hw = costModel->getHardware();
  SearchSpace space;
  space.gpus = gpus;
  space.globalSequences = globalBatch;
  space.costs = costs;
  space.nodeGpus = hw ? hw->nodeGpus : 8;
  double gib = gpuMemory;
  if (gib == 0 && hw)
    gib = hw->memoryGiB;
  if (gib <= 0)
    return fail("--search needs --gpu-memory (GiB): --costs " + costs +
                " names no GPU whose memory it knows");
  space.memoryBytes = gib * double(1ull << 30);
  PassManager shape(module.getContext());
  if (failed(configure(shape)))
    return 1;
  shape.addPass(createSetMicrobatchShape({seqLen, microBatch, dtype.str()}));
  if (failed(shape.run(module)))
    return 1;
  if (globalTokens.getNumOccurrences()) {
    int64_t sequenceTokens = summarizeModel(model).seqLen;
    if (globalBatch.getNumOccurrences())
      return fail("give the batch once: --global-batch (sequences) or "
                  "--global-batch-tokens, not both");
    if (globalTokens < 1 || sequenceTokens < 1 || globalTokens % sequenceTokens)
      return fail("--global-batch-tokens " +
                  llvm::Twine(int64_t(globalTokens)) +
                  " is not a positive whole number of " +
                  llvm::Twine(sequenceTokens) + "-token sequences");
    space.globalSequences = globalTokens / sequenceTokens;
    globalBatch = space.globalSequences;
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
  printSearchTable(*found, space, summarizeModel(model).seqLen, seconds,
                   calibration);
  if (found->ranked.empty()) {
    if (found->overMemory.empty() && found->prunedMemory > 0)
      return fail(llvm::formatv("no plan fits {0} GiB per GPU: the "
                                "parameters' training state alone needs "
                                "{1} GiB a device on the leanest mesh "
                                "({2} GPUs)",
                                llvm::format("%.4g", gib),
                                llvm::format("%.4g", found->leanestState /
                                                         double(1ull << 30)),
                                int64_t(gpus))
                      .str());
    if (found->overMemory.empty())
      return fail("no plan compiles for " + llvm::Twine(int64_t(gpus)) +
                  " GPUs and a global batch of " +
                  llvm::Twine(int64_t(globalBatch)) +
                  " sequences (each replica's share must be whole "
                  "microbatches of the model's " +
                  llvm::Twine(summarizeModel(model).microBatch) +
                  " sequences, and some schedule must accept the count)");
    return fail(llvm::formatv(
                    "no plan fits {0} GiB per GPU: the leanest "
                    "needs {1} GiB ({2})",
                    llvm::format("%.4g", gib),
                    llvm::format("%.4g", leanest(found->overMemory).peakBytes /
                                             double(1ull << 30)),
                    leanest(found->overMemory).choice.getFlags())
                    .str());
  }
  // The winner, compiled as the user would with its flags.
  const PlanChoice &best = found->ranked.front().choice;
  pp = best.pp, tp = best.tp, dp = best.dp, zero = best.zero;
  sequenceParallel = best.sequenceParallel;
  scheduleName = stringifyScheduleKind(best.schedule).str();
  microbatches = best.microbatches;
  virtualChunks = best.chunks;
  slices = std::to_string(best.slices);
  searchSetSlices = true;
  if (best.slices > 1)
    slicingMethod = SlicingMethod::Seq1F1B;
  recompute = best.recompute;
  vocabMode = best.vocab;
  if (!checkFlags(/*scheduling=*/true))
    return 1;
  if (emit == EmitKind::None && StringRef(outputPath).ends_with(".json"))
    emit = EmitKind::Plan;
  llvm::outs() << "best: sluice-compile " << modelPath << " " << best.getFlags()
               << " --costs " << costs << "\n";
  return compileModel(module, model, dtype);
}

int main(int argc, char **argv) {
  llvm::InitLLVM initLLVM(argc, argv);
  // MLIR's pass-manager flags work here as in sluice-opt; --help lists
  // sluice-compile's own (--help-hidden all).
  registerPassManagerCLOptions();
  registerDefaultTimingManagerCLOptions();
  cl::HideUnrelatedOptions({&category, &searchCategory});
  ::sluice::setVersionPrinter();
  // --schedule stays a string (its error names the offending value and
  // lists the choices); --help lists them from the schedule table.
  static std::string scheduleHelp = [] {
    std::string help = "Pipeline schedule (default 1f1b):";
    for (const sched::ScheduleInfo &s : sched::getSchedules())
      help += "\n    " + s.getName().str() + ": " + s.summary.str();
    return help;
  }();
  scheduleName.setDescription(scheduleHelp);
  cl::ParseCommandLineOptions(
      argc, argv,
      "sluice-compile: compile a transformer model for pipeline-parallel "
      "training\n");

  MLIRContext context;
  context.loadDialect<SluiceDialect>();
  // Users read the location and message; a dump of the op in generic form
  // would only bury them.
  context.printOpOnDiagnostic(false);
  OneLineDiagnostics diagnostics(&context);

  OwningOpRef<ModuleOp> module = loadModel(modelPath, &context);
  if (!module)
    return 1;
  auto models = llvm::to_vector(module->getOps<ModelOp>());
  if (models.size() != 1)
    return fail("'" + modelPath +
                "' must hold exactly one sluice.model, found " +
                llvm::Twine(models.size()));
  if (!applyClusterFlags())
    return 1;
  bool scheduling = pp != 0;
  std::optional<std::string> dtype = getDtype();
  if (!dtype)
    return 1;
  if (search)
    return searchAndCompile(*module, models.front(), *dtype);
  if (!checkFlags(scheduling))
    return 1;
  // A .json output is the runtime plan: buffers planned, then translated
  // (without --pp, from the program the module holds).
  if (emit == EmitKind::None && StringRef(outputPath).ends_with(".json") &&
      (scheduling || !module->getOps<ProgramOp>().empty()))
    emit = EmitKind::Plan;
  if (printPipeline) {
    printReplay(*dtype);
    return 0;
  }
  return compileModel(*module, models.front(), *dtype);
}
