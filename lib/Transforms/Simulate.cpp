//===- Simulate.cpp - Predict step time, bubbles and memory ---------------===//

#include "sluice/Analysis/CostModel.h"
#include "sluice/Analysis/Simulator.h"
#include "sluice/PipelineIR/PipelineIR.h"
#include "sluice/Target/Export.h"
#include "sluice/Transforms/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringMap.h"

namespace mlir::sluice {
#define GEN_PASS_DEF_SIMULATE
#include "sluice/Transforms/Passes.h.inc"
} // namespace mlir::sluice

using namespace mlir;
using namespace mlir::sluice;

LogicalResult mlir::sluice::simulateProgram(
    ProgramOp program, StringRef costModel,
    function_ref<LogicalResult(ScheduleFiles &)> consume) {
  std::string error;
  std::optional<CostModel> costs = CostModel::parse(costModel, error);
  if (!costs)
    return program.emitOpError("cannot be simulated: ") << error;
  // Only a correct program has a meaningful prediction.
  ProgramView view;
  if (failed(verifySchedule(program, &view)))
    return failure();
  ModelOp model = *getProgramModel(program);
  sched::Pipeline pipeline =
      *getPipeline(model, program.getMicrobatches(), program.getSlices());

  // The cost model's dp counts a device's whole gradient group, the
  // context-parallel ranks among them (MeshShape::cp).
  MeshShape mesh{program.getTp(), program.getDp() * program.getCp(),
                 int64_t(program.getZero()), program.getSequenceParallel(),
                 program.getEp()};
  mesh.cp = program.getCp();
  if (program.getReshardPerStep())
    mesh.reshard = ::sluice::rt::Reshard::Step;
  PipelineCosts table(model, pipeline, *costs, mesh);
  std::string gap =
      costs->checkCoverage(table.getStages(), sched::getStagePasses(pipeline));
  if (gap.empty())
    gap = table.getCalibrationError();
  if (!gap.empty())
    return program.emitOpError("cannot be simulated: ") << gap;
  auto compute = [&](const sched::Work &w) { return table.getComputeTime(w); };
  auto transfer = [&](const sched::Work &w) {
    return table.getTransferTime(w);
  };
  auto units = [&](const sched::Work &w) {
    return table.getActivationUnits(w);
  };
  auto bytes = [&](const sched::Work &w) {
    return table.getActivationBytes(w);
  };
  auto collective = [&](const sched::CollectiveId &id) {
    return table.getCollectiveTime(id);
  };
  auto keyValues = [&](int stage) {
    return table.getKeyValueStateBytes(stage);
  };
  // What an overlapped group (dualpipev) hides: the expert all-to-alls,
  // layer by layer.
  auto communication = [&](const sched::Work &w) {
    return table.getExpertParallelTime(w);
  };
  auto sparseLayers = [&](int stage) {
    return int(llvm::count_if(table.getStage(stage).layers,
                              [](const TransformerShape &l) {
                                return l.experts > 0;
                              }));
  };
  FailureOr<Simulation> sim =
      simulate(pipeline, view.program,
               SimulationCosts{compute, transfer, units, bytes, collective,
                               keyValues, communication, sparseLayers},
               error);
  if (failed(sim))
    return program.emitOpError("cannot be simulated: ") << error;
  // The data-parallel gradient all-reduces, each after the last pass of
  // its stage on the device (the pass just before it in the IR).
  std::vector<GradientSync> syncs;
  for (auto [d, device] : llvm::enumerate(view.devices)) {
    // The op's last instruction: a repeat block's body op stands for
    // each of its runs, and the last run ends the block.
    llvm::DenseMap<Operation *, const sched::Instr *> instrOf;
    for (auto [op, instr] : llvm::zip(view.ops[d], view.program.devices[d]))
      instrOf[op] = &instr;
    llvm::StringMap<sched::Work> lastPass;
    auto seePass = [&](Operation &op) {
      if (auto exec = dyn_cast<ExecOp>(op))
        if (const sched::Instr *instr = instrOf.lookup(&op))
          lastPass[exec.getStage()] = instr->work;
    };
    for (Operation &op : device.getBody().front()) {
      if (auto repeat = dyn_cast<RepeatOp>(op)) {
        llvm::for_each(repeat.getBody().front(), seePass);
      } else if (isa<ExecOp>(op)) {
        seePass(op);
      } else if (auto sync = dyn_cast<GradSyncOp>(op)) {
        auto it = lastPass.find(sync.getStage());
        if (it == lastPass.end())
          return sync.emitOpError("follows no pass of @") << sync.getStage();
        syncs.push_back(
            {int(d), it->second, table.getGradientSyncTime(sync.getStage())});
      }
    }
  }
  if (failed(addGradientSyncs(pipeline, syncs, *sim, error)))
    return program.emitOpError("cannot be simulated: ") << error;
  SmallVector<double> optimizer;
  for (int d = 0; d < pipeline.devices; ++d)
    optimizer.push_back(table.getOptimizerTime(d));
  addOptimizerSteps(optimizer, *sim);

  SmallVector<double> peaks, peaksUntilW;
  for (const DeviceStatistics &d : sim->devices) {
    peaks.push_back(d.peakActivationUnits);
    peaksUntilW.push_back(d.peakActivationUnitsUntilW);
  }
  program.setStepTime(sim->stepTime);
  program.setBubbleRatio(sim->bubbleRatio);
  program.setPeakActivation(peaks);
  program.setPeakActivationUntilW(peaksUntilW);
  if (const HardwareProfile *hw = costs->getHardware())
    if (sim->stepTime > 0)
      // A replica's FLOPs over its GPUs: devices x tp x cp.
      program.setMfu(table.getStepFlops() /
                     (double(pipeline.devices * program.getTp() *
                             program.getCp()) *
                      hw->peakFlops * sim->stepTime));

  if (!consume)
    return success();
  ScheduleFiles files{program, model, pipeline, table, *costs, *sim};
  return consume(files);
}

namespace {
struct SimulatePass : public mlir::sluice::impl::SimulateBase<SimulatePass> {
  using Base::Base;
  SimulatePass(const SimulateOptions &options,
               std::function<LogicalResult(ScheduleFiles &)> consume)
      : Base(options), consume(std::move(consume)) {}

  void runOnOperation() override {
    // An empty std::function would make a callable (and throwing)
    // function_ref: none then.
    function_ref<LogicalResult(ScheduleFiles &)> handOver;
    if (consume)
      handOver = consume;
    for (ProgramOp program : getOperation().getOps<ProgramOp>())
      if (failed(simulateProgram(program, costs, handOver)))
        return signalPassFailure();
  }

  std::function<LogicalResult(ScheduleFiles &)> consume;
};
} // namespace

std::unique_ptr<Pass> mlir::sluice::createSimulate(
    const SimulateOptions &options,
    std::function<LogicalResult(ScheduleFiles &)> consume) {
  return std::make_unique<SimulatePass>(options, std::move(consume));
}
