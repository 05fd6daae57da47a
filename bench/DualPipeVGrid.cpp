//===- DualPipeVGrid.cpp - DualPipeV against ZB-V on MoE costs ------------===//
//
// Issue 55's table: over a grid of pass costs with an expert all-to-all
// of r times a forward's compute in every F and B, the simulated step of
//   zb-v       Sluice's ZB-V (its block, refined and improved within p
//              microbatches, under the passes' whole time c + a);
//   torch      PyTorch's ScheduleDualPipeV action list, re-implemented here
//              from its documented phases (OVERLAP_F_B pairs of an F and a
//              FULL_BACKWARD, a FIFO queue of W actions), independently of
//              the library's generator, lowered with its pairs;
//   dualpipev  what `sluice-compile --schedule dualpipev` builds;
//   serial     the same order with its pairs run one pass after the other
//              (what the overlap is worth);
// all timed by one simulator (Simulator.h: a group on a compute and a
// communication stream, getPairTime), with each schedule's peak
// activations until W in microbatches of a device's stages.
//
//   build/bin/sluice-bench-dualpipev [--p 4,8] [--layers L]
//
// Costs per device per microbatch (a V chunk takes half): F = 1, B = b,
// W = w; the all-to-all r (F) and r (B) on top; t per transfer.
//
//===----------------------------------------------------------------------===//

#include "sluice/Analysis/Simulator.h"
#include "sluice/Schedule/Schedules.h"
#include "sluice/Schedule/VShapeOrders.h"
#include "sluice/Schedule/Verifier.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <deque>
#include <map>

using namespace mlir;
using namespace mlir::sluice;
using namespace mlir::sluice::sched;

static llvm::cl::list<int> onlyDevices("p",
                                       llvm::cl::desc("only these device counts"),
                                       llvm::cl::CommaSeparated);
static llvm::cl::opt<int>
    sparseLayers("layers",
                 llvm::cl::desc("sparse layers per stage a pair overlaps over"),
                 llvm::cl::init(4));

/// PyTorch's ScheduleDualPipeV._calculate_single_rank_operations, per
/// rank: counters per (stage, action), FULL_BACKWARD as B then its W,
/// BACKWARD_INPUT queueing its W, OVERLAP_F_B as a group.
static OverlappedOrders getTorchDualPipeV(const Pipeline &pipeline) {
  int p = pipeline.devices, m = pipeline.microbatches;
  OverlappedOrders out;
  out.orders.resize(p);
  out.pairs.resize(p);
  for (int rank = 0; rank < p; ++rank) {
    int stage0 = rank, stage1 = 2 * p - 1 - rank;
    std::map<std::pair<int, int>, int> counter; // (stage, 0 F / 1 B)
    std::deque<Work> weightQueue;
    auto &actions = out.orders[rank];
    auto &joins = out.pairs[rank];
    auto add = [&](PassKind kind, int stage, int mb, bool join) {
      actions.push_back({kind, stage, mb, 0});
      joins.push_back(join);
    };
    auto forward = [&](int stage, bool join = false) {
      add(PassKind::F, stage, counter[{stage, 0}]++, join);
    };
    auto fullBackward = [&](int stage, bool join = false) {
      int mb = counter[{stage, 1}]++;
      add(PassKind::B, stage, mb, join);
      add(PassKind::W, stage, mb, false);
    };
    auto backwardInput = [&](int stage) {
      int mb = counter[{stage, 1}]++;
      add(PassKind::B, stage, mb, false);
      weightQueue.push_back({PassKind::W, stage, mb, 0});
    };
    auto weightIfPending = [&] {
      if (weightQueue.empty())
        return;
      Work w = weightQueue.front();
      weightQueue.pop_front();
      add(w.kind, w.stage, w.microbatch, false);
    };
    auto overlap = [&](int fStage, int bStage) {
      forward(fStage, true);
      fullBackward(bStage, true);
    };
    for (int i = 0; i < (p - rank - 1) * 2; ++i)
      forward(stage0);
    for (int i = 0; i < rank + 1; ++i) {
      forward(stage0);
      forward(stage1);
    }
    for (int i = 0; i < p - rank - 1; ++i) {
      backwardInput(stage1);
      weightIfPending();
      forward(stage1);
    }
    for (int i = 0; i < m - 2 * p + rank + 1; ++i) {
      if (i == 0 && rank == p - 1) {
        forward(stage0);
        fullBackward(stage1);
      } else {
        overlap(stage0, stage1);
      }
      overlap(stage1, stage0);
    }
    for (int i = 0; i < p - rank - 1; ++i) {
      fullBackward(stage1);
      overlap(stage1, stage0);
    }
    bool zb = false;
    int step6 = rank + 1;
    for (int i = 0; i < step6; ++i) {
      if (i == step6 / 2 && rank % 2 == 1)
        zb = true;
      zb ? backwardInput(stage1) : fullBackward(stage1);
      if (i == step6 / 2 && rank % 2 == 0)
        zb = true;
      zb ? backwardInput(stage0) : fullBackward(stage0);
    }
    for (int i = 0; i < p - rank - 1; ++i) {
      weightIfPending();
      zb ? backwardInput(stage0) : fullBackward(stage0);
    }
    for (int i = 0; i < rank + 1; ++i)
      weightIfPending();
  }
  return out;
}

struct Costs {
  double b, w, r, t;
};

struct Result {
  double step = 0, peak = 0;
};

static Result simulateProgram(const Pipeline &pipe, const Program &program,
                              const Costs &c) {
  auto compute = [&](const Work &w) {
    double base = w.kind == PassKind::F   ? 1.0
                  : w.kind == PassKind::B ? c.b
                                          : c.w;
    double a2a = w.kind == PassKind::W ? 0.0 : c.r;
    return (base + a2a) / 2; // a V chunk: half a device's stages
  };
  auto comm = [&](const Work &w) {
    return w.kind == PassKind::W ? 0.0 : c.r / 2;
  };
  auto transfer = [&](const Work &) { return c.t; };
  auto one = [](const Work &) { return 1.0; };
  auto layers = [](int) { return int(sparseLayers); };
  if (std::optional<Violation> v = verifyProgram(pipe, program)) {
    llvm::errs() << "invalid program: " << v->message << "\n";
    std::exit(1);
  }
  SimulationCosts costs{compute, transfer, one, one};
  costs.communication = comm;
  costs.sparseLayers = layers;
  std::string error;
  FailureOr<Simulation> sim = simulate(pipe, program, costs, error);
  if (failed(sim)) {
    llvm::errs() << "simulation failed: " << error << "\n";
    std::exit(1);
  }
  Result result{sim->stepTime, 0};
  for (const DeviceStatistics &d : sim->devices)
    result.peak = std::max(result.peak, d.peakActivationUnitsUntilW / 2);
  return result;
}

int main(int argc, char **argv) {
  llvm::cl::ParseCommandLineOptions(argc, argv,
                                    "DualPipeV against ZB-V on MoE costs\n");
  std::vector<int> devices = {4, 8, 16};
  if (!onlyDevices.empty())
    devices.assign(onlyDevices.begin(), onlyDevices.end());
  llvm::outs() << llvm::formatv(
      "sparse layers per stage: {0}; step times in units of one forward's "
      "compute per device per microbatch; peak: microbatches of a "
      "device's stages held until W\n\n",
      int(sparseLayers));
  llvm::outs() << "|  p |  m |   B |   W | a2a r | hop | zb-v (peak) | torch "
                  "dualpipev (peak) | sluice dualpipev (peak) | serial | "
                  "dualpipev / zb-v | sluice / torch |\n";
  llvm::outs() << "|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  std::map<double, std::vector<double>> ratios; // by r
  int torchFaster = 0, torchEqual = 0, cases = 0;
  for (int p : devices)
    for (int m : {2 * p, 4 * p})
      for (auto [b, w] : {std::pair{1.0, 1.0}, std::pair{1.2, 0.8}})
        for (double r : {0.0, 0.3, 0.6, 1.0})
          for (double t : {0.0, 0.05}) {
            Costs c{b, w, r, t};
            const ScheduleInfo &zbvInfo = *lookupSchedule("zb-v");
            const ScheduleInfo &dualInfo = *lookupSchedule("dualpipev");
            Pipeline zbvPipe = makeSchedulePipeline(zbvInfo, p, m, 2, 1);
            Pipeline dualPipe = makeSchedulePipeline(dualInfo, p, m, 2, 1);
            auto duration = [&](const Work &work) {
              double base = work.kind == PassKind::F   ? 1.0
                            : work.kind == PassKind::B ? b
                                                       : w;
              return (base + (work.kind == PassKind::W ? 0.0 : r)) / 2;
            };
            std::string error;
            FailureOr<Program> zbv =
                buildSchedule(zbvInfo, zbvPipe, Durations{duration, t}, error);
            FailureOr<Program> dual = buildSchedule(
                dualInfo, dualPipe, Durations{duration, t}, error);
            OverlappedOrders torchOrders = getTorchDualPipeV(dualPipe);
            FailureOr<Program> torch = lowerToProgram(
                dualPipe, torchOrders.orders, error, torchOrders.pairs);
            std::optional<OverlappedOrders> plain =
                getDualPipeVOrders(dualPipe, /*overlap=*/false);
            FailureOr<Program> serial =
                plain ? lowerToProgram(dualPipe, plain->orders, error)
                      : FailureOr<Program>(failure());
            if (failed(zbv) || failed(dual) || failed(torch) ||
                failed(serial)) {
              llvm::errs() << "p=" << p << " m=" << m << ": " << error
                           << "\n";
              return 1;
            }
            Result rz = simulateProgram(zbvPipe, *zbv, c);
            Result rd = simulateProgram(dualPipe, *dual, c);
            Result rt = simulateProgram(dualPipe, *torch, c);
            Result rs = simulateProgram(dualPipe, *serial, c);
            ++cases;
            if (rt.step < rd.step - 1e-9)
              ++torchFaster;
            else if (rt.step <= rd.step + 1e-9)
              ++torchEqual;
            ratios[r].push_back(rd.step / rz.step);
            llvm::outs() << llvm::formatv(
                "| {0,2} | {1,2} | {2,3:F1} | {3,3:F1} | {4,5:F1} | {5,4:F2} "
                "| {6,7:F2} ({7:F1}) | {8,7:F2} ({9:F1}) | {10,7:F2} ({11:F1}) "
                "| {12,7:F2} | {13:F3} | {14:F3} |\n",
                p, m, b, w, r, t, rz.step, rz.peak, rt.step, rt.peak, rd.step,
                rd.peak, rs.step, rd.step / rz.step, rd.step / rt.step);
          }
  llvm::outs() << "\nmedian dualpipev / zb-v step by all-to-all share r:\n";
  for (auto &[r, list] : ratios) {
    std::sort(list.begin(), list.end());
    double median = list.size() % 2
                        ? list[list.size() / 2]
                        : (list[list.size() / 2 - 1] + list[list.size() / 2]) /
                              2;
    llvm::outs() << llvm::formatv(
        "  r = {0:F1}: median {1:F3} (min {2:F3}, max {3:F3}) over {4} "
        "cases\n",
        r, median, list.front(), list.back(), list.size());
  }
  llvm::outs() << llvm::formatv(
      "PyTorch's order faster than Sluice's dualpipev in {0} of {1} cases, "
      "equal in {2}\n",
      torchFaster, cases, torchEqual);
  return 0;
}
