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
// MODEL is a model-level .mlir file or a Hugging Face config.json. This
// file is the command line: it parses the flags into a CompileRequest and
// hands it to lib/Driver, which runs the registered sluice-pipeline in a
// PassManager (MLIR's pass-manager flags apply; sluice-opt
// --sluice-pipeline replays it). The flags are documented in
// docs/sluice-compile.md.
//
//===----------------------------------------------------------------------===//

#include "sluice/Driver/Compile.h"
#include "sluice/Schedule/Schedules.h"
#include "sluice/SluiceOps.h"
#include "sluice/Transforms/Passes.h"
#include "sluice/Transforms/Pipeline.h"
#include "sluice/Support/Flags.h"
#include "sluice/Version.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/Timing.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif

using namespace mlir;
using namespace mlir::sluice;
using namespace mlir::sluice::driver;
namespace cl = llvm::cl;

namespace {
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
                             "device (ranks = pp x tp x dp x cp)"),
                    cl::init(1), cl::value_desc("D"), cl::cat(category));
cl::opt<int64_t> cp("cp",
                    cl::desc("Context-parallel ranks each replica's "
                             "sequences split over (ranks = pp x tp x dp x "
                             "cp): attention's keys and values gathered "
                             "over them, every slice cut into 2 x cp "
                             "chunks"),
                    cl::init(1), cl::value_desc("C"), cl::cat(category));
cl::opt<int64_t> zero("zero",
                      cl::desc("ZeRO stage: 1 shards the optimizer state over "
                               "the data-parallel replicas (Megatron-LM's "
                               "distributed optimizer); 2 the gradients too, "
                               "each layer's reduce-scattered after its W; "
                               "3 the weights too (FSDP), each layer's "
                               "gathered where a pass uses it; 0 (default) "
                               "shards nothing"),
                      cl::init(0), cl::value_desc("0|1|2|3"),
                      cl::cat(category));
cl::opt<::sluice::rt::Reshard> reshard(
    "reshard",
    cl::desc("With --zero 3: when a layer's gathered weights are dropped"),
    cl::values(clEnumValN(::sluice::rt::Reshard::EveryPass, "every-pass",
                          "after each pass that used them: two layers' "
                          "copies live, gathered before every pass "
                          "(default)"),
               clEnumValN(::sluice::rt::Reshard::Step, "step",
                          "at the update: the device's whole working "
                          "weights live, each layer gathered once a step")),
    cl::init(::sluice::rt::Reshard::EveryPass), cl::cat(category));
cl::opt<int64_t> ep("ep",
                    cl::desc("Expert parallelism: the experts of every "
                             "mixture-of-experts layer split over this many "
                             "of the --dp replicas (it divides --dp and each "
                             "sparse layer's experts; tokens reach their "
                             "experts by all-to-all)"),
                    cl::init(1), cl::value_desc("E"), cl::cat(category));
cl::opt<double> expertCapacity(
    "expert-capacity",
    cl::desc("With --ep: size what each member's experts compute on for C "
             "times the balanced share of token copies (at least 1) instead "
             "of the most any routing sends (0, the default: dropless); a "
             "step whose routing sends a member more stops with the expert "
             "named"),
    cl::init(0), cl::value_desc("C"), cl::cat(category));
cl::opt<double> expertBiasUpdate(
    "expert-bias-update",
    cl::desc("DeepSeek-V3's auxiliary-loss-free balancing (Liu et al. 2024, "
             "section 2.1.2): after each step every sigmoid router's bias "
             "falls by G for an expert the step's batch overloaded and rises "
             "by G for one it underloaded (the paper trains with 0.001); 0 "
             "(default): the biases stay as loaded"),
    cl::init(0), cl::value_desc("G"), cl::cat(category));
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
cl::opt<bool> overlapGroups(
    "overlap-groups",
    cl::desc("With --schedule dualpipev: pair each forward with another "
             "microbatch's backward, so that one's expert all-to-alls run "
             "while the other computes (default true); false keeps "
             "DualPipeV's order with every pass on its own (what the "
             "overlap is worth, predicted and measured)"),
    cl::init(true), cl::cat(category));
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
cl::opt<bool> expandPlan(
    "expand-plan",
    cl::desc("Write every instruction of a .json plan, without repeat "
             "blocks (to read or edit it by hand; docs/plan-format.md)"),
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
    cl::desc("Memory per GPU, GiB (--search; default: what the --costs GPU "
             "reports: 80 for a100, 79.65 for h100, 140.4 for h200, 31.75 "
             "for v100)"),
    cl::init(0), cl::value_desc("GiB"), cl::cat(searchCategory));
cl::opt<double> memoryHeadroom(
    "memory-headroom",
    cl::desc("Percent of --gpu-memory left free for what the plan does not "
             "count: the CUDA context, NCCL's buffers, fragmentation "
             "(--search; default 5)"),
    cl::init(5), cl::value_desc("PERCENT"), cl::cat(searchCategory));
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

} // namespace

/// The flags as the driver's request.
static CompileRequest getRequest() {
  CompileRequest r;
  r.modelPath = modelPath;
  r.seqLen = seqLen;
  r.microBatch = microBatch;
  r.precision = precision;
  r.emit = emit;
  r.outputPath = outputPath;
  r.tracePath = tracePath;
  r.svgPath = svgPath;
  r.reportPath = reportPath;
  r.summary = summary;
  r.expandPlan = expandPlan;
  r.printPipeline = printPipeline;
  r.pp = pp, r.dp = dp, r.cp = cp, r.zero = zero, r.tp = tp, r.ep = ep;
  r.reshard = reshard;
  r.reshardGiven = reshard.getNumOccurrences() > 0;
  r.expertCapacity = expertCapacity;
  r.expertBiasUpdate = expertBiasUpdate;
  r.sequenceParallel = sequenceParallel;
  r.overlapGroups = overlapGroups;
  r.microbatches = microbatches;
  r.microbatchesGiven = microbatches.getNumOccurrences();
  r.scheduleName = scheduleName;
  r.virtualChunks = virtualChunks;
  r.slices = slices;
  r.slicesGiven = slices.getNumOccurrences();
  r.slicing = slicingMethod;
  r.slicingEpsilon = slicingEpsilon;
  r.slicingGranularity = slicingGranularity;
  r.balance = balance;
  r.balanceGiven = balance.getNumOccurrences();
  r.vocab = vocabMode;
  r.vocabGiven = vocabMode.getNumOccurrences();
  r.recompute = recompute;
  r.costs = costs;
  return r;
}

/// The link flags as overrides of the --costs GPU's node.
static ClusterOverrides getClusterOverrides() {
  ClusterOverrides cluster;
  auto given = [](const auto &flag) -> std::optional<double> {
    if (!flag.getNumOccurrences())
      return std::nullopt;
    return double(flag.getValue());
  };
  cluster.gpusPerNode = given(gpusPerNode);
  cluster.nodeBandwidth = given(nodeBandwidth);
  cluster.networkBandwidth = given(networkBandwidth);
  cluster.nodeLatency = given(nodeLatency);
  cluster.networkLatency = given(networkLatency);
  return cluster;
}

/// --search's flags.
static SearchRequest getSearchRequest() {
  SearchRequest r;
  r.gpus = gpus;
  r.gpuMemory = gpuMemory;
  r.memoryHeadroom = memoryHeadroom;
  r.globalBatch = globalBatch;
  r.globalBatchGiven = globalBatch.getNumOccurrences();
  if (globalTokens.getNumOccurrences())
    r.globalTokens = globalTokens;
  r.top = searchTop;
  return r;
}

int main(int argc, char **argv) {
  llvm::InitLLVM initLLVM(argc, argv);
#ifdef __GLIBC__
  // A compile allocates and frees tables of a few MB again and again (one
  // per device, per timing); glibc maps each anew and hands it back, and
  // the page faults of mapping it were a fifth of a p 64 compile's CPU.
  // A short-lived batch tool keeps them in its heap instead.
  mallopt(M_MMAP_THRESHOLD, 256 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
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
  if (!::sluice::parseFlags(
      argc, argv,
      "sluice-compile: compile a transformer model for pipeline-parallel "
      "training\n"))
    return 1;

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
  CompileRequest request = getRequest();
  if (!applyClusterOverrides(request, getClusterOverrides()))
    return 1;
  std::optional<std::string> dtype = getDtype(request);
  if (!dtype)
    return 1;
  if (search)
    return searchAndCompile(*module, models.front(), request,
                            getSearchRequest(), *dtype);
  if (!checkRequest(request))
    return 1;
  // A .json output is the runtime plan: buffers planned, then translated
  // (without --pp, from the program the module holds).
  if (request.emit == EmitKind::None &&
      StringRef(request.outputPath).ends_with(".json") &&
      (request.isScheduling() || !module->getOps<ProgramOp>().empty()))
    request.emit = EmitKind::Plan;
  if (request.printPipeline) {
    printReplay(request, *dtype);
    return 0;
  }
  int status = compileModel(*module, models.front(), request, *dtype);
  // The process ends here: the exit returns the module's memory at once,
  // where erasing a deep pipeline's program op by op took a twentieth of
  // its compile (as clang's -disable-free).
  (void)module.release();
  return status;
}
