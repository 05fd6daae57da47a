//===- ScheduleReport.cpp - report.json -----------------------------------===//

#include "sluice/Target/Export.h"

#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::sluice;

llvm::json::Value
mlir::sluice::getScheduleReport(const ScheduleReportInputs &in) {
  const sched::Pipeline &pipe = in.pipeline;
  const Simulation &sim = in.simulation;
  const CostModel &model = in.costs.getCostModel();

  const MeshShape &mesh = in.costs.getMesh();
  // The tensor-parallel all-reduces each device's passes waited for.
  std::vector<double> tensorParallel(pipe.devices, 0.0);
  for (const TimelineEvent &e : sim.events)
    if (e.kind == sched::InstrKind::Exec)
      tensorParallel[e.device] += in.costs.getTensorParallelTime(e.work);
  llvm::json::Array devices;
  for (int d = 0; d < pipe.devices; ++d) {
    const DeviceStatistics &stats = sim.devices[d];
    int64_t params = in.costs.getParameterBytes(d);
    devices.push_back(llvm::json::Object{
        {"device", d},
        {"busy", stats.busy},
        {"idle", stats.idle},
        {"tensor_parallel_time", tensorParallel[d]},
        {"gradient_sync_time", stats.gradientSync},
        {"gradient_sync_exposed", stats.exposedGradientSync},
        {"optimizer_time", stats.optimizerTime},
        {"optimizer_bytes", in.costs.getOptimizerBytes(d)},
        {"peak_activation_microbatches", stats.peakActivationUnits},
        {"peak_activation_microbatches_until_w",
         stats.peakActivationUnitsUntilW},
        {"peak_activation_bytes", stats.peakActivationBytes},
        {"parameter_bytes", params},
        {"peak_memory_bytes", double(params) + stats.peakActivationBytes},
    });
  }
  // MFU needs seconds: only the analytic models produce them.
  llvm::json::Value mfu = nullptr;
  if (const HardwareProfile *hw = model.getHardware())
    if (sim.stepTime > 0)
      mfu = in.costs.getStepFlops() /
            (double(pipe.devices * mesh.tp) * hw->peakFlops * sim.stepTime);
  // Which link each kind of traffic crosses, given the ranks' placement.
  llvm::json::Array links;
  for (const LinkUse &use : in.costs.getLinks())
    links.push_back(llvm::json::Object{{"traffic", use.traffic},
                                       {"group_size", use.groupSize},
                                       {"link", stringifyLinkKind(use.link)}});
  llvm::json::Value nodeDevices = nullptr;
  if (model.getHardware())
    nodeDevices = model.getNodeDevices();
  llvm::json::Array slices;
  for (int64_t length : in.costs.getSliceLengths())
    slices.push_back(length);
  // The vocabulary layers: where they are and, when sharded, how.
  const VocabProfile &vocab = in.costs.getVocab();
  llvm::json::Value vocabulary = llvm::json::Object{{"sharded", false}};
  if (pipe.vocab.any()) {
    const char *form = pipe.vocab.synchronous      ? "interlaced"
                       : !pipe.vocab.output        ? "input-only"
                       : pipe.vocab.algorithm == 1 ? "vocab-1"
                       : pipe.vocab.algorithm == 2 ? "vocab-2"
                                                   : "naive";
    vocabulary = llvm::json::Object{
        {"sharded", true},
        {"form", form},
        {"input_shard", pipe.vocab.input},
        {"output_shard", pipe.vocab.output},
        {"barriers", pipe.vocab.output ? pipe.vocab.getBarriers() : 0},
        {"synchronous", pipe.vocab.synchronous},
        {"padded_vocab", vocab.paddedVocab},
        {"rows_per_device", vocab.getShardRows()},
        {"tied", vocab.tied},
    };
  }
  // How the slices were chosen (sluice-slice-tokens), when they were.
  llvm::json::Value slicing = in.slicing.empty()
                                  ? llvm::json::Value("uniform")
                                  : llvm::json::Value(in.slicing);
  llvm::json::Value fitError = nullptr, dpLatency = nullptr;
  if (in.slicingFitError >= 0)
    fitError = in.slicingFitError;
  if (in.slicingLatency >= 0)
    dpLatency = in.slicingLatency;
  return llvm::json::Object{
      {"slicing", std::move(slicing)},
      {"slicing_fit_error", std::move(fitError)},
      {"slicing_latency", std::move(dpLatency)},
      {"vocabulary", std::move(vocabulary)},
      {"model", in.model},
      {"schedule", in.schedule},
      {"devices", pipe.devices},
      {"mesh", llvm::json::Object{{"pp", pipe.devices},
                                  {"tp", mesh.tp},
                                  {"dp", mesh.dp},
                                  {"ranks", pipe.devices * mesh.tp * mesh.dp},
                                  {"ranks_per_node", std::move(nodeDevices)},
                                  {"zero", mesh.zero},
                                  {"sequence_parallel",
                                   mesh.sequenceParallel}}},
      {"links", std::move(links)},
      {"virtual", pipe.chunks},
      {"microbatches", pipe.microbatches},
      {"slices", pipe.slices},
      {"token_slices", std::move(slices)},
      {"split_backward", pipe.splitBackward},
      {"costs", model.getSpec()},
      {"time_unit", model.getTimeUnit()},
      {"verified", in.verified},
      {"step_time", sim.stepTime},
      {"bubble_ratio", sim.bubbleRatio},
      {"step_flops", in.costs.getStepFlops()},
      {"mfu", std::move(mfu)},
      {"per_device", std::move(devices)},
  };
}

LogicalResult mlir::sluice::writeFileAtomically(llvm::StringRef path,
                                                llvm::StringRef contents,
                                                std::string &error) {
  if (llvm::Error e = llvm::writeToOutput(path, [&](llvm::raw_ostream &os) {
        os << contents;
        return llvm::Error::success();
      })) {
    error =
        "cannot write '" + path.str() + "': " + llvm::toString(std::move(e));
    return failure();
  }
  return success();
}
