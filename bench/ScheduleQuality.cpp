//===- ScheduleQuality.cpp - Step time of the memory-capped schedules -----===//
//
// Issue 11's table: for the zero-bubble and V-shape families, p in
// {4, 8, 16}, m in {1, p - 1, p, 2p, 4p} and four cost profiles, the step
// time of the order the building block draws ("block"), of what Sluice
// builds (the block or a list schedule within the same memory cap,
// ImproveOrders.h), for ZB-H1/H2 the zero-bubble authors' heuristic under
// the same cap (PeerZeroBubble.cpp), a lower bound no order can beat (each device's work
// after its first input can arrive; one microbatch's critical path), and,
// where GLPK proves it within the time limit, the exact optimum under the
// same caps (OptimalOrders.h). Timed with the simulator's rules
// (TimeOrders.h: per-peer links in order). Prints a table; exits non-zero
// only if a schedule fails to build or breaks its memory cap.
//
//   build/bin/sluice-bench-schedules [--exact-seconds S] [--p N]
//   build/bin/sluice-bench-schedules --large     (p = 64, m = 512: seconds)
//
// Profiles (per device per microbatch; a V-shape chunk takes half):
//   unit:  F = B = W = 1
//   bw:    F = 1, B = 1.2, W = 0.8, 0.05 per transfer
//   comm:  F = B = W = 1, 0.1 per transfer
//   slow:  F = B = W = 1, the last stage 1.8x
//   link:  F = 1, B = 2, W = 0.5, 1.5 per transfer (beyond the issue's
//          grid: a link slower than a pass)
//
//===----------------------------------------------------------------------===//

#include "PeerZeroBubble.h"

#include "sluice/Schedule/ImproveOrders.h"
#include "sluice/Schedule/OptimalOrders.h"
#include "sluice/Schedule/Schedules.h"
#include "sluice/Schedule/TimeOrders.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>

using namespace mlir;
using namespace mlir::sluice;
using namespace mlir::sluice::sched;

static llvm::cl::opt<double> exactSeconds(
    "exact-seconds",
    llvm::cl::desc("GLPK time limit per case for the exact optimum (0: skip)"),
    llvm::cl::init(20));
static llvm::cl::list<int>
    onlyDevices("p", llvm::cl::desc("only these device counts"),
                llvm::cl::CommaSeparated);
static llvm::cl::opt<int> exactPasses(
    "exact-passes",
    llvm::cl::desc("try the exact optimum up to this many passes"),
    llvm::cl::init(36));

static llvm::cl::opt<bool> large(
    "large", llvm::cl::desc("only time zb-v, v-half and v-min at p = 64, "
                            "m = 512 (issue 11: under 2 s)"));
static llvm::cl::opt<std::string> show(
    "show",
    llvm::cl::desc("print each device's order of the cases whose family and "
                   "costs are FAMILY,COSTS (e.g. v-half,comm)"),
    llvm::cl::init(""));

namespace {
struct Profile {
  const char *name;
  double f, b, w, comm, lastStage;
};

Pipeline makePipeline(const ScheduleInfo &info, int p, int m) {
  return makeSchedulePipeline(info, p, m, info.chunks == 1 ? 1 : 2, 1);
}

std::vector<std::vector<Work>> getOrders(const Program &program) {
  std::vector<std::vector<Work>> orders(program.devices.size());
  for (size_t d = 0; d < program.devices.size(); ++d)
    for (const Instr &instr : program.devices[d])
      if (instr.kind == InstrKind::Exec)
        orders[d].push_back(instr.work);
  return orders;
}

/// No order is faster: a device cannot start before its first input can
/// arrive and then has its whole work to do; one microbatch's F chain, B
/// chain and the first stage's W run one after another.
double getLowerBound(const Pipeline &pipe, const Durations &durations) {
  int stages = pipe.getNumStages();
  auto cost = [&](PassKind kind, int s) {
    return durations.compute(Work{kind, s, 0, 0});
  };
  std::vector<double> firstInput(stages, 0);
  for (int s = 1; s < stages; ++s)
    firstInput[s] = firstInput[s - 1] + cost(PassKind::F, s - 1) +
                    (pipe.getDevice(s) != pipe.getDevice(s - 1)
                         ? durations.transfer
                         : 0);
  double bound = 0;
  for (int d = 0; d < pipe.devices; ++d) {
    double head = std::numeric_limits<double>::infinity(), work = 0;
    for (int s = 0; s < stages; ++s)
      if (pipe.getDevice(s) == d) {
        head = std::min(head, firstInput[s]);
        work += pipe.microbatches * (cost(PassKind::F, s) +
                                     cost(PassKind::B, s) +
                                     cost(PassKind::W, s));
      }
    bound = std::max(bound, head + work);
  }
  double chain = firstInput[stages - 1] + cost(PassKind::F, stages - 1);
  for (int s = stages - 1; s >= 0; --s)
    chain += cost(PassKind::B, s) +
             (s > 0 && pipe.getDevice(s) != pipe.getDevice(s - 1)
                  ? durations.transfer
                  : 0);
  chain += cost(PassKind::W, 0);
  return std::max(bound, chain);
}
} // namespace

int main(int argc, char **argv) {
  llvm::cl::ParseCommandLineOptions(argc, argv,
                                    "schedule quality against bounds\n");
  const Profile profiles[] = {{"unit", 1, 1, 1, 0, 1},
                              {"bw", 1, 1.2, 0.8, 0.05, 1},
                              {"comm", 1, 1, 1, 0.1, 1},
                              {"slow", 1, 1, 1, 0, 1.8},
                              {"link", 1, 2, 0.5, 1.5, 1}};
  std::vector<int> deviceCounts = {4, 8, 16};
  if (!onlyDevices.empty())
    deviceCounts.assign(onlyDevices.begin(), onlyDevices.end());
  bool ok = true;
  if (large) {
    for (const char *name : {"zb-h1", "zb-v", "v-half", "v-min"}) {
      const ScheduleInfo *info = lookupSchedule(name);
      Pipeline pipe = makePipeline(*info, 64, 512);
      auto unit = [&](const Work &w) { return getUnitDuration(pipe, w); };
      std::string error;
      auto start = std::chrono::steady_clock::now();
      FailureOr<Program> built =
          buildSchedule(*info, pipe, Durations{unit, 0.1}, error);
      double seconds = std::chrono::duration<double>(
                           std::chrono::steady_clock::now() - start)
                           .count();
      llvm::outs() << llvm::format("%-7s p=64 m=512 comm 0.1: %s, %.2f s\n",
                                   name, succeeded(built) ? "built" : "failed",
                                   seconds);
      ok &= succeeded(built);
    }
    return ok ? 0 : 1;
  }
  llvm::outs() << llvm::format(
      "%-7s %-5s %3s %4s %9s %9s %9s %9s %9s %7s %7s %6s\n", "family",
      "costs", "p", "m", "block", "sluice", "zb-peer", "bound", "optimum",
      "vs-opt", "vs-bnd", "ms");
  for (const char *name : {"zb-h1", "zb-h2", "zb-v", "v-half", "v-min"}) {
    const ScheduleInfo *info = lookupSchedule(name);
    for (const Profile &profile : profiles)
      for (int p : deviceCounts)
        for (int m : {1, p - 1, p, 2 * p, 4 * p}) {
          Pipeline pipe = makePipeline(*info, p, m);
          int lastStage = pipe.getLastStage();
          double v = pipe.chunks;
          auto compute = [&](const Work &w) {
            double base = w.kind == PassKind::F   ? profile.f
                          : w.kind == PassKind::B ? profile.b
                          : w.kind == PassKind::W ? profile.w
                                                  : 0.0;
            return base / v * (w.stage == lastStage ? profile.lastStage : 1.0);
          };
          auto units = [&](const Work &) { return 1.0 / v; };
          Durations durations{compute, profile.comm, units};
          std::string error;
          FailureOr<Program> block = buildSchedule(
              *info, pipe, durations, error, BuildOptions{false});
          auto start = std::chrono::steady_clock::now();
          FailureOr<Program> built =
              buildSchedule(*info, pipe, durations, error);
          double ms = std::chrono::duration<double, std::milli>(
                          std::chrono::steady_clock::now() - start)
                          .count();
          if (failed(block) || failed(built)) {
            llvm::outs() << name << " " << profile.name << " p=" << p
                         << " m=" << m << ": failed: " << error << "\n";
            ok = false;
            continue;
          }
          auto blockTime = timeOrders(pipe, getOrders(*block), durations, error);
          auto orders = getOrders(*built);
          auto builtTime = timeOrders(pipe, orders, durations, error);
          double cap = *getMemoryCap(info->kind, p);
          std::vector<double> peaks = getPeakUntilW(pipe, orders, durations);
          for (double peak : peaks)
            if (peak > cap + 1e-9) {
              llvm::outs() << name << " " << profile.name << " p=" << p
                           << " m=" << m << ": peak " << peak
                           << " above the cap " << cap << "\n";
              ok = false;
            }
          // The zero-bubble authors' heuristic, for the loop-placed family.
          std::string peer = "-";
          bool isZbv = std::string(name) == "zb-v";
          if (info->placement == PlacementKind::loop || isZbv) {
            auto timeOf = [&](const std::vector<std::vector<Work>> &o) {
              std::string why;
              auto t = timeOrders(pipe, o, durations, why);
              return t ? t->makespan : -1.0;
            };
            auto peerOrders =
                isZbv ? getPeerZeroBubbleVOrders(pipe, durations, cap, timeOf)
                      : getPeerZeroBubbleOrders(pipe, durations, cap, timeOf);
            if (peerOrders) {
              for (double peak : getPeakUntilW(pipe, *peerOrders, durations))
                if (peak > cap + 1e-9)
                  peer = "over cap";
              if (peer == "-")
                peer = llvm::formatv("{0:F2}", timeOf(*peerOrders)).str();
            } else {
              peer = "none";
            }
          }
          double bound = getLowerBound(pipe, durations);
          std::string optimum = "-", vsOpt = "-";
          size_t passes = size_t(pipe.getNumStages()) * m * 3;
          if (exactSeconds > 0 && passes <= size_t(exactPasses)) {
            std::vector<double> caps(p, cap);
            auto exact = findOptimalOrders(pipe, durations,
                                           {caps, exactSeconds}, error);
            if (succeeded(exact) && exact->proven) {
              optimum = llvm::formatv("{0:F2}", exact->makespan).str();
              vsOpt = llvm::formatv("{0:F1}%", 100.0 * (builtTime->makespan /
                                                            exact->makespan -
                                                        1))
                          .str();
            } else if (succeeded(exact)) {
              optimum = llvm::formatv("<={0:F2}", exact->makespan).str();
            }
          }
          llvm::outs() << llvm::format(
              "%-7s %-5s %3d %4d %9.2f %9.2f %9s %9.2f %9s %7s %6.1f%% %6.1f\n",
              name, profile.name, p, m, blockTime->makespan,
              builtTime->makespan, peer.c_str(), bound, optimum.c_str(),
              vsOpt.c_str(),
              100.0 * (builtTime->makespan / bound - 1), ms);
          if (show == std::string(name) + "," + profile.name)
            for (int d = 0; d < p; ++d) {
              llvm::outs() << "  device " << d << ":";
              for (const Work &w : orders[d])
                llvm::outs() << " " << stringifyPassKind(w.kind)
                             << (pipe.chunks > 1
                                     ? std::to_string(pipe.stages[w.stage].chunk)
                                     : "")
                             << "." << w.microbatch;
              llvm::outs() << "\n";
            }
          llvm::outs().flush();
        }
  }
  return ok ? 0 : 1;
}
