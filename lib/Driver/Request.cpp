//===- Request.cpp - sluice-compile's flags, checked and applied ----------===//
//
// The request's checks run before any IR changes, so that errors speak of
// flags rather than pass options; the request becomes sluice-pipeline's
// options in one place (fillPipelineOptions), which --print-pipeline and
// the compile share.
//
//===----------------------------------------------------------------------===//

#include "sluice/Driver/Compile.h"

#include "sluice/Analysis/CostModel.h"
#include "sluice/Search/PlanSearch.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::sluice;
using namespace mlir::sluice::driver;

int driver::fail(const llvm::Twine &message) {
  llvm::errs() << "sluice-compile: error: " << message << "\n";
  return 1;
}

void CompileRequest::apply(const PlanChoice &choice) {
  pp = choice.pp, tp = choice.tp, dp = choice.dp, zero = choice.zero;
  cp = choice.cp;
  // ZeRO-3's re-shard choice is part of the plan (a winner that keeps
  // the gathered weights for the step was compiled re-sharding every pass
  // before this line).
  reshard = choice.reshard;
  ep = choice.ep;
  sequenceParallel = choice.sequenceParallel;
  scheduleName = stringifyScheduleKind(choice.schedule).str();
  microbatches = choice.microbatches;
  microbatchesGiven = true;
  virtualChunks = choice.chunks;
  slices = std::to_string(choice.slices);
  slicesGiven = true;
  // The search cuts slices where each costs the same FLOPs.
  if (choice.slices > 1)
    slicing = SlicingMethod::Seq1F1B;
  recompute = choice.recompute;
  // Not vocabGiven: the search priced the choice with --balance's default
  // for an unstated --vocab.
  vocab = choice.vocab;
}

/// The split --balance asks for. Its default, auto, balances the head's
/// cost where the vocabulary layers stay on the end stages; the paper's
/// Baseline named explicitly (--vocab baseline) keeps its uniform split,
/// and sharded vocabulary layers leave no head to balance (the stage
/// partition runs before they are sharded: auto would count the head on
/// the last stage).
static sched::Balance getBalance(const CompileRequest &r) {
  if (r.balance != sched::Balance::Auto)
    return r.balance;
  if (r.vocab == VocabMode::Redis)
    return sched::Balance::Compute;
  if (r.vocab != VocabMode::Baseline || (r.vocabGiven && !r.balanceGiven))
    return sched::Balance::Uniform;
  return sched::Balance::Auto;
}

void CompileRequest::fillPipelineOptions(SluicePipelineOptions &o) const {
  o.pp = pp;
  // checkRequest has refused a name no schedule has.
  o.schedule = sched::lookupSchedule(scheduleName)->kind;
  o.microbatches = microbatches;
  o.virtualChunks = virtualChunks;
  o.balance = getBalance(*this);
  o.vocab = vocab;
  o.slices = slices;
  o.slicing = slicing;
  o.slicingEpsilon = slicingEpsilon;
  o.slicingGranularity = slicingGranularity;
  o.recompute = recompute;
  o.costs = costs;
  o.dp = dp;
  o.cp = cp;
  o.zero = zero;
  o.reshardPerStep = reshard == ::sluice::rt::Reshard::Step;
  o.ep = ep;
  o.expertCapacity = expertCapacity;
  o.tp = tp;
  o.sequenceParallel = sequenceParallel;
  o.overlapGroups = overlapGroups;
  o.planBuffers = emit == EmitKind::Plan;
  // Programs as deep pipelines need them: a device's periodic stretches
  // once (sluice.repeat), so the passes after the schedule and the plan
  // grow with the devices, not the microbatches.
  o.repeats = true;
}

/// The pipeline flags against the schedule; false after an error.
static bool checkPipeline(const CompileRequest &r) {
  const sched::ScheduleInfo *info = sched::lookupSchedule(r.scheduleName);
  if (!info) {
    SmallVector<StringRef> names;
    for (const sched::ScheduleInfo &s : sched::getSchedules())
      names.push_back(s.getName());
    fail("unknown schedule '" + r.scheduleName + "' (expected " +
         llvm::join(names, ", ") + ")");
    return false;
  }
  if (!r.microbatchesGiven) {
    // No default: the microbatch count is the batch size, which changes
    // what trains, not only how fast.
    fail("--pp " + Twine(r.pp) +
         " needs --microbatches M, the microbatches of a step (each "
         "--micro-batch sequences); the bubble shrinks as M grows past the "
         "pipeline's depth: M = 4 x pp is a common start");
    return false;
  }
  using Count = std::pair<int64_t, const char *>;
  for (auto [value, name] :
       {Count{r.pp, "pp"}, Count{r.microbatches, "microbatches"},
        Count{r.dp, "dp"}, Count{r.cp, "cp"}, Count{r.tp, "tp"},
        Count{r.ep, "ep"}})
    if (value < 1) {
      fail("--" + Twine(name) + " must be positive, got " + Twine(value));
      return false;
    }
  // Expert parallelism splits the experts over members of the
  // data-parallel group (Megatron-LM's expert-model-parallel size): the
  // model's side (a sparse layer, experts that divide) is the pass's.
  if (r.reshardGiven && r.zero != 3) {
    fail("--reshard " + Twine(::sluice::rt::getReshardName(r.reshard)) +
         " chooses when ZeRO-3 drops the gathered weights: it needs --zero "
         "3 (got --zero " +
         Twine(r.zero) + ")");
    return false;
  }
  if (r.dp % r.ep != 0) {
    fail("--ep " + Twine(r.ep) + " must divide --dp " + Twine(r.dp) +
         ": each expert group is ep of the data-parallel replicas");
    return false;
  }
  if (r.expertCapacity != 0 && (r.ep < 2 || !(r.expertCapacity >= 1))) {
    std::string capacity;
    llvm::raw_string_ostream(capacity) << llvm::format("%g", r.expertCapacity);
    fail("--expert-capacity " + capacity +
         (r.ep < 2 ? " sizes expert parallelism's buffers: it needs --ep of "
                     "at least 2"
                   : " must be at least 1 (the balanced share; 0: dropless)"));
    return false;
  }

  bool tokenSliced = info->kind == ScheduleKind::Seq1F1B ||
                     info->kind == ScheduleKind::Seq1F1BI ||
                     info->kind == ScheduleKind::TeraPipe;
  if (tokenSliced && !r.slicesGiven) {
    // Without slices these schedules are 1F1B, interleaved 1F1B and
    // GPipe: say so rather than compile them as that.
    fail("--schedule " + r.scheduleName +
         " slices each microbatch along its tokens: give --slices K (2 or "
         "more; --slicing seq1f1b cuts equal-FLOP slices), or --slices auto "
         "--slicing terapipe for TeraPipe's choice; --slices 1 is the "
         "unsliced schedule");
    return false;
  }
  int64_t sliceCount = 0;
  if (r.slices == "auto") {
    if (r.slicing != SlicingMethod::TeraPipe) {
      fail("--slices auto needs --slicing terapipe (its dynamic programme "
           "picks the count); --slicing " +
           stringifySlicingMethod(r.slicing).str() + " needs a number");
      return false;
    }
  } else if (StringRef(r.slices).getAsInteger(10, sliceCount) ||
             sliceCount < 1) {
    fail("--slices must be a positive number or auto, got '" + r.slices + "'");
    return false;
  }
  int64_t chunks =
      r.virtualChunks ? r.virtualChunks : sched::getDefaultChunks(*info);
  if (chunks < 1) {
    fail("--virtual must be positive, got " + Twine(chunks));
    return false;
  }
  sched::Pipeline shape;
  shape.devices = int(r.pp);
  shape.chunks = int(chunks);
  shape.microbatches = int(r.microbatches);
  // With --slices auto the count is the DP's: check the rest with 2.
  shape.slices = int(sliceCount ? sliceCount : 2);
  shape.splitBackward = info->splitBackward;
  for (int s = 0; s < r.pp * chunks; ++s)
    shape.stages.push_back(
        info->placement == PlacementKind::vshape && s >= r.pp
            ? sched::StagePlacement{int(2 * r.pp - 1 - s), 1}
            : sched::StagePlacement{int(s % r.pp), int(s / r.pp)});
  std::string problem = sched::checkPipeline(*info, shape);
  if (!problem.empty()) {
    fail(problem);
    return false;
  }
  std::string error;
  if (!CostModel::parse(r.costs, error)) {
    fail(error);
    return false;
  }
  if (r.vocab == VocabMode::Redis && r.balanceGiven &&
      r.balance != sched::Balance::Compute) {
    fail(std::string("--vocab redis balances the stages by compute; it "
                     "cannot be combined with --balance ") +
         (r.balance == sched::Balance::Uniform ? "uniform" : "auto"));
    return false;
  }
  bool sharded = r.vocab != VocabMode::Baseline && r.vocab != VocabMode::Redis;
  if (sharded && !sched::isBuildingBlockSchedule(info->kind)) {
    shape.vocab.output = true;
    fail(sched::checkPipeline(*info, shape));
    return false;
  }
  return true;
}

bool driver::checkRequest(const CompileRequest &r) {
  if (r.seqLen < 0 || r.microBatch < 0) {
    fail(r.seqLen < 0
             ? "--seq-len must be positive, got " + Twine(r.seqLen)
             : "--micro-batch must be positive, got " + Twine(r.microBatch));
    return false;
  }
  if (!r.isScheduling() &&
      (r.microbatches != 0 || !r.tracePath.empty() || !r.svgPath.empty() ||
       r.emit == EmitKind::Program || r.dp != 1 || r.cp != 1 || r.tp != 1 ||
       r.ep != 1 ||
       r.sequenceParallel || r.recompute != RecomputeKind::none ||
       r.printPipeline)) {
    fail("--microbatches, --dp, --cp, --tp, --ep, --sequence-parallel, "
         "--recompute, "
         "--trace, --svg, --print-pipeline and --emit program need --pp");
    return false;
  }
  return !r.isScheduling() || checkPipeline(r);
}

bool driver::applyClusterOverrides(CompileRequest &request,
                                   const ClusterOverrides &cluster) {
  std::string overrides;
  auto add = [&](const std::optional<double> &value, const char *key) {
    if (!value)
      return;
    overrides += (overrides.empty() ? "" : ",") + std::string(key) + "=" +
                 llvm::formatv("{0}", llvm::format("%.17g", *value)).str();
  };
  add(cluster.gpusPerNode, "gpus-per-node");
  add(cluster.nodeBandwidth, "node-bandwidth");
  add(cluster.networkBandwidth, "network-bandwidth");
  add(cluster.nodeLatency, "node-latency");
  add(cluster.networkLatency, "network-latency");
  if (overrides.empty())
    return true;
  std::string error;
  std::optional<CostModel> model = CostModel::parse(request.costs, error);
  if (!model || !model->getHardware()) {
    fail("--gpus-per-node and the link flags describe the GPUs of an "
         "analytic --costs (a100, h100, h200, v100), not '" +
         request.costs + "'");
    return false;
  }
  request.costs +=
      (StringRef(request.costs).contains(':') ? "," : ":") + overrides;
  // The values are checked where the model reads them.
  if (!CostModel::parse(request.costs, error)) {
    fail(error);
    return false;
  }
  return true;
}

std::optional<std::string> driver::getDtype(const CompileRequest &request) {
  StringRef precision = request.precision;
  if (precision == "bf16" || precision == "fp8" || precision == "fp32")
    return std::string(precision == "fp32" ? "f32" : "bf16");
  if (!precision.empty()) {
    fail("unknown --precision '" + precision +
         "' (expected bf16, fp8 or fp32)");
    return std::nullopt;
  }
  return std::string();
}

void driver::printReplay(const CompileRequest &request, StringRef dtype) {
  SluicePipelineOptions options;
  request.fillPipelineOptions(options);
  options.seqLen = request.seqLen;
  options.microBatch = request.microBatch;
  options.dtype = dtype.str();
  std::string text;
  llvm::raw_string_ostream os(text);
  options.print(os);
  // sluice-opt reads IR: a Hugging Face config is imported first, into
  // the model-level module sluice-compile --emit model writes.
  std::string input = request.modelPath;
  if (StringRef(input).ends_with(".json")) {
    input = llvm::sys::path::stem(request.modelPath).str() + ".mlir";
    llvm::outs() << "sluice-compile " << request.modelPath
                 << " --emit model -o " << input << "\n";
  }
  // print() writes {opt=value ...}: the option string without braces.
  llvm::outs() << "sluice-opt " << input << " --sluice-pipeline=\""
               << StringRef(text).drop_front().drop_back() << "\"\n";
}
