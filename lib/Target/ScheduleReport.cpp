//===- ScheduleReport.cpp - report.json -----------------------------------===//

#include "sluice/Target/Export.h"

#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::sluice;

/// Per device: busy and idle time, the time its passes waited for tensor-
/// parallel collectives, gradient sync, optimizer, and memory.
static llvm::json::Array getDeviceReports(const ScheduleReportInputs &in) {
  const Simulation &sim = in.simulation;
  std::vector<double> tensorParallel(in.pipeline.devices, 0.0);
  for (const TimelineEvent &e : sim.events)
    if (e.kind == sched::InstrKind::Exec)
      tensorParallel[e.device] += in.costs.getTensorParallelTime(e.work);
  llvm::json::Array devices;
  for (int d = 0; d < in.pipeline.devices; ++d) {
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
        {"recompute_area_bytes", in.costs.getRecomputeAreaBytes(d)},
        {"peak_memory_bytes",
         in.costs.getFixedBytes(d) + stats.peakActivationBytes},
    });
  }
  return devices;
}

/// The vocabulary layers: where they are and, when sharded, how.
static llvm::json::Value getVocabularyReport(const ScheduleReportInputs &in) {
  const sched::VocabLayers &layers = in.pipeline.vocab;
  if (!layers.any())
    return llvm::json::Object{{"sharded", false}};
  const VocabProfile &vocab = in.costs.getVocab();
  const char *form = layers.synchronous      ? "interlaced"
                     : !layers.output        ? "input-only"
                     : layers.algorithm == 1 ? "vocab-1"
                     : layers.algorithm == 2 ? "vocab-2"
                                             : "naive";
  return llvm::json::Object{
      {"sharded", true},
      {"form", form},
      {"input_shard", layers.input},
      {"output_shard", layers.output},
      {"barriers", layers.output ? layers.getBarriers() : 0},
      {"synchronous", layers.synchronous},
      {"padded_vocab", vocab.paddedVocab},
      {"rows_per_device", vocab.getShardRows()},
      {"tied", vocab.tied},
  };
}

/// The pp x tp x dp mesh, and which link each kind of traffic crosses
/// given the ranks' placement.
static llvm::json::Value getMeshReport(const ScheduleReportInputs &in) {
  const MeshShape &mesh = in.costs.getMesh();
  const CostModel &model = in.costs.getCostModel();
  llvm::json::Value nodeDevices = nullptr;
  if (model.getHardware())
    nodeDevices = model.getNodeDevices();
  int64_t pp = in.pipeline.devices;
  // The cost model's dp counts every rank of a device's gradient group;
  // the report's, as the flags, the replicas, each of cp ranks.
  int64_t cp = std::max<int64_t>(1, mesh.cp);
  llvm::json::Object object{{"pp", pp},
                            {"tp", mesh.tp},
                            {"dp", mesh.dp / cp},
                            {"ranks", pp * mesh.tp * mesh.dp},
                            {"ranks_per_node", std::move(nodeDevices)},
                            {"zero", mesh.zero},
                            {"ep", mesh.ep},
                            {"sequence_parallel", mesh.sequenceParallel}};
  // Context parallelism, where there is some.
  if (cp > 1)
    object["cp"] = cp;
  // ZeRO-3's re-shard choice, where it is one.
  if (mesh.zero == 3)
    object["reshard"] = ::sluice::rt::getReshardName(mesh.reshard);
  return object;
}

llvm::json::Value
mlir::sluice::getScheduleReport(const ScheduleReportInputs &in) {
  const sched::Pipeline &pipe = in.pipeline;
  const Simulation &sim = in.simulation;
  const CostModel &model = in.costs.getCostModel();
  // MFU needs seconds: only the analytic models produce them.
  llvm::json::Value mfu = nullptr;
  if (const HardwareProfile *hw = model.getHardware())
    if (sim.stepTime > 0)
      mfu = in.costs.getStepFlops() /
            (double(pipe.devices * in.costs.getMesh().tp *
                    std::max<int64_t>(1, in.costs.getMesh().cp)) *
             hw->peakFlops *
             sim.stepTime);
  llvm::json::Array links;
  for (const LinkUse &use : in.costs.getLinks())
    links.push_back(llvm::json::Object{{"traffic", use.traffic},
                                       {"group_size", use.groupSize},
                                       {"link", stringifyLinkKind(use.link)}});
  llvm::json::Array slices;
  for (int64_t length : in.costs.getSliceLengths())
    slices.push_back(length);
  // How the slices were chosen (sluice-slice-tokens), when they were.
  llvm::json::Value fitError = nullptr, dpLatency = nullptr;
  if (in.slicingFitError >= 0)
    fitError = in.slicingFitError;
  if (in.slicingLatency >= 0)
    dpLatency = in.slicingLatency;
  return llvm::json::Object{
      {"slicing", in.slicing.empty() ? "uniform" : in.slicing},
      {"slicing_fit_error", std::move(fitError)},
      {"slicing_latency", std::move(dpLatency)},
      {"vocabulary", getVocabularyReport(in)},
      {"model", in.model},
      {"schedule", in.schedule},
      {"devices", pipe.devices},
      {"mesh", getMeshReport(in)},
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
      {"per_device", getDeviceReports(in)},
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
