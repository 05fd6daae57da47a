//===- ScheduleQuality.cpp - Step time of the memory-capped schedules -----===//
//
// Issue 11's table: for the zero-bubble and V-shape families, p in
// {4, 8, 16}, m in {1, p - 1, p, 2p, 4p} and four cost profiles, the step
// time of the order the building block draws ("block"), of what Sluice
// builds (the block or a list schedule within the same memory cap,
// ImproveOrders.h), of the peers on the same costs -- "zb-repo": the
// zero-bubble authors' generator for the family (zb.py for ZB-H1/H2 and
// zbv.py for ZB-V under the same cap, PeerZeroBubble.cpp; for V-Half and
// V-Min the controllable-memory repository's cost-aware search,
// v_auto_schedule.py's choice, which is a named mode of the library's own
// V search (getAuthorsVShapeOrders, RepeatVShape.cpp: the same building
// blocks chosen by the authors' timing of equal passes, so what the
// comparison shows is the choice by real costs and the improver, not an
// independent implementation's blocks), "torch":
// PyTorch's order where it has the family (ScheduleInterleavedZeroBubble for
// ZB-H1, ScheduleZBVZeroBubble for ZB-V, PeerPyTorch.cpp); a "+" marks a peer
// holding more than the family's cap until W -- a lower bound no order can beat
// (each device's work after its first input can arrive; one microbatch's
// critical path), and, where GLPK proves it within the time limit, the exact
// optimum under the same caps (OptimalOrders.h). Timed with the simulator's
// rules (TimeOrders.h: per-peer links in order). Prints the table and, per
// family, how Sluice fares against the best peer within the cap; exits
// non-zero only if a schedule fails to build or breaks its memory cap.
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
//   h2:    F = 1, B = 1.2, W = 0.5, 0.15 per transfer, and m = 5p too
//          (issue 52's cases where ZB-H2 lost to zb.py in another
//          simulator)
//
//===----------------------------------------------------------------------===//

#include "PeerPyTorch.h"
#include "PeerZeroBubble.h"

#include "sluice/Schedule/ImproveOrders.h"
#include "sluice/Schedule/OptimalOrders.h"
#include "sluice/Schedule/Schedules.h"
#include "sluice/Schedule/VShapeOrders.h"
#include "sluice/Schedule/TimeOrders.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <cmath>
#include <functional>
#include <map>

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
static llvm::cl::opt<std::string> vGrid(
    "v-grid",
    llvm::cl::desc("only V-Half and V-Min against the controllable-memory "
                   "repository's search (v_auto_schedule.py's choice among the library's "
                   "own V blocks, getAuthorsVShapeOrders) "
                   "on a cost grid: 'dev' (the issue's: F 1, B 1.5, W 0.7, "
                   "comm 0.3) or 'held-out' (fixed before any tuning)"),
    llvm::cl::init(""));
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

/// buildSchedule, timed (milliseconds in `ms`).
FailureOr<Program> buildTimed(const ScheduleInfo &info, const Pipeline &pipe,
                              const Durations &durations, std::string &error,
                              double &ms) {
  auto start = std::chrono::steady_clock::now();
  FailureOr<Program> built = buildSchedule(info, pipe, durations, error);
  ms = std::chrono::duration<double, std::milli>(
           std::chrono::steady_clock::now() - start)
           .count();
  return built;
}

/// Whether every device of Sluice's `orders` holds at most the family's
/// cap until W; prints each that does not.
bool keepsFamilyCap(llvm::StringRef where, const Pipeline &pipe,
                    const std::vector<std::vector<Work>> &orders,
                    const Durations &durations, double cap) {
  bool kept = true;
  for (double peak : getPeakUntilW(pipe, orders, durations))
    if (peak > cap + 1e-9) {
      llvm::outs() << where << ": peak " << peak << " above the cap " << cap
                   << "\n";
      kept = false;
    }
  return kept;
}

/// A peer's cell: its step time, or why there is none; a time followed by
/// "+" is a peer that holds more than the family's cap until W.
struct PeerResult {
  std::string text;
  double seconds = -1;
  bool withinCap = true;
};

PeerResult judgePeer(
    const std::optional<std::vector<std::vector<Work>>> &orders,
    const Pipeline &pipe, const Durations &durations, double cap,
    llvm::function_ref<double(const std::vector<std::vector<Work>> &)>
        timeOf) {
  if (!orders)
    return {"none"};
  PeerResult result;
  result.seconds = timeOf(*orders);
  if (result.seconds < 0)
    return {"stuck"};
  for (double peak : getPeakUntilW(pipe, *orders, durations))
    result.withinCap &= peak <= cap + 1e-9;
  result.text = llvm::formatv("{0:F2}{1}", result.seconds,
                              result.withinCap ? "" : "+")
                    .str();
  return result;
}

/// Sluice against the best peer at the same memory, per family.
struct Tally {
  int faster = 0, equal = 0, slower = 0;
  double worst = -1;
  // Peers that hold more memory than the cap, and how often they win.
  int overCap = 0, overCapFaster = 0;
};

/// --v-grid: V-Half and V-Min against the authors' cost-aware V search on
/// the costs it takes (one chunk's F, B, W and a hop), at the family's cap.
int runVGrid() {
  struct Costs {
    const char *name;
    double f, b, w, comm;
  };
  std::vector<Costs> grid;
  std::vector<int> deviceCounts;
  std::function<std::vector<int>(int)> counts;
  if (vGrid == "dev") {
    // The cases: the costs it names, and two more at comm 0.
    grid = {{"issue", 1, 1.5, 0.7, 0.3},
            {"unit", 1, 1, 1, 0},
            {"b2w.5", 1, 2, 0.5, 0}};
    deviceCounts = {4, 6, 12};
    counts = [](int p) { return std::vector<int>{p, 2 * p, 3 * p + 1}; };
  } else if (vGrid == "held-out") {
    // Fixed before Sluice's V search was written or tuned (2026-11-27):
    // unequal F/B/W, a hop up to half a forward, device and microbatch
    // counts the dev grid does not have.
    grid = {{"h1", 1, 1.3, 0.6, 0.45},
            {"h2", 1, 2, 1, 0.2},
            {"h3", 1, 1, 0.5, 0.5},
            {"h4", 1, 1.6, 1.2, 0.05}};
    deviceCounts = {5, 8, 10};
    counts = [](int p) { return std::vector<int>{p + 1, 2 * p + 3, 4 * p}; };
  } else {
    llvm::errs() << "sluice-bench-schedules: unknown --v-grid '" << vGrid
                 << "' (dev, held-out)\n";
    return 2;
  }
  if (!onlyDevices.empty())
    deviceCounts.assign(onlyDevices.begin(), onlyDevices.end());
  llvm::outs() << llvm::format("%-7s %-6s %3s %4s %9s %9s %8s %9s %9s\n",
                               "family", "costs", "p", "m", "sluice", "v-auto",
                               "ratio", "sluice-ms", "v-auto-ms");
  bool ok = true;
  std::map<std::string, Tally> tallies;
  for (const char *name : {"v-half", "v-min"}) {
    const ScheduleInfo *info = lookupSchedule(name);
    for (const Costs &c : grid)
      for (int p : deviceCounts)
        for (int m : counts(p)) {
          Pipeline pipe = makePipeline(*info, p, m);
          auto compute = [&](const Work &w) {
            return w.kind == PassKind::F   ? c.f
                   : w.kind == PassKind::B ? c.b
                   : w.kind == PassKind::W ? c.w
                                           : 0.0;
          };
          auto units = [&](const Work &) { return 0.5; };
          Durations durations{compute, c.comm, units};
          std::string error;
          double ms = 0;
          FailureOr<Program> built =
              buildTimed(*info, pipe, durations, error, ms);
          if (failed(built)) {
            llvm::outs() << name << " " << c.name << " p=" << p << " m=" << m
                         << ": failed: " << error << "\n";
            ok = false;
            continue;
          }
          auto orders = getOrders(*built);
          auto sluice = timeOrders(pipe, orders, durations, error);
          double cap = *getMemoryCap(info->kind, p);
          ok &= keepsFamilyCap(
              llvm::formatv("{0} {1} p={2} m={3}", name, c.name, p, m).str(),
              pipe, orders, durations, cap);
          auto timeOf = [&](const std::vector<std::vector<Work>> &o) {
            std::string why;
            auto t = timeOrders(pipe, o, durations, why);
            return t ? t->makespan : -1.0;
          };
          auto start = std::chrono::steady_clock::now();
          auto peerOrders = sched::getAuthorsVShapeOrders(pipe, c.f, c.b, c.w, c.comm,
                                               int(std::lround(2 * cap)));
          double peerMs = std::chrono::duration<double, std::milli>(
                              std::chrono::steady_clock::now() - start)
                              .count();
          PeerResult peer = judgePeer(peerOrders, pipe, durations, cap, timeOf);
          std::string ratio = "-";
          Tally &tally = tallies[name];
          if (peer.seconds > 0 && peer.withinCap) {
            double r = sluice->makespan / peer.seconds;
            ratio = llvm::formatv("{0:F3}", r).str();
            ++(r > 1 + 1e-9   ? tally.slower
               : r < 1 - 1e-9 ? tally.faster
                              : tally.equal);
            tally.worst = std::max(tally.worst, r - 1);
          }
          llvm::outs() << llvm::format(
              "%-7s %-6s %3d %4d %9.2f %9s %8s %9.1f %9.1f\n", name, c.name, p,
              m, sluice->makespan, peer.text.c_str(), ratio.c_str(), ms,
              peerMs);
          llvm::outs().flush();
        }
  }
  llvm::outs() << "\nSluice against v_auto_schedule.py's search within the "
                  "family's cap:\n";
  for (const char *name : {"v-half", "v-min"}) {
    const Tally &t = tallies[name];
    llvm::outs() << llvm::format(
        "  %-7s faster %3d, equal %3d, slower %3d (worst %+.1f%%)\n", name,
        t.faster, t.equal, t.slower, 100.0 * std::max(t.worst, 0.0));
  }
  return ok ? 0 : 1;
}
} // namespace

int main(int argc, char **argv) {
  llvm::cl::ParseCommandLineOptions(argc, argv,
                                    "schedule quality against bounds\n");
  if (!vGrid.empty())
    return runVGrid();
  const Profile profiles[] = {{"unit", 1, 1, 1, 0, 1},
                              {"bw", 1, 1.2, 0.8, 0.05, 1},
                              {"comm", 1, 1, 1, 0.1, 1},
                              {"slow", 1, 1, 1, 0, 1.8},
                              {"link", 1, 2, 0.5, 1.5, 1},
                              {"h2", 1, 1.2, 0.5, 0.15, 1}};
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
      "%-7s %-5s %3s %4s %9s %9s %9s %9s %9s %9s %7s %7s %6s\n", "family",
      "costs", "p", "m", "block", "sluice", "zb-repo", "torch", "bound",
      "optimum", "vs-opt", "vs-bnd", "ms");
  std::map<std::string, Tally> tallies;
  const char *families[] = {"zb-h1", "zb-h2", "zb-v", "v-half", "v-min"};
  for (const char *name : families) {
    const ScheduleInfo *info = lookupSchedule(name);
    for (const Profile &profile : profiles)
      for (int p : deviceCounts)
        for (int m : {1, p - 1, p, 2 * p, 4 * p, 5 * p}) {
          // 5p: issue 52's ZB-H2 cases (p 8, m 40; p 16, m 80), on its
          // costs only.
          if (m == 5 * p && std::string(profile.name) != "h2")
            continue;
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
          double ms = 0;
          FailureOr<Program> built =
              buildTimed(*info, pipe, durations, error, ms);
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
          ok &= keepsFamilyCap(
              llvm::formatv("{0} {1} p={2} m={3}", name, profile.name, p, m)
                  .str(),
              pipe, orders, durations, cap);
          // The peers: the zero-bubble repository's generator for the
          // family and PyTorch's order where it has one, timed alike.
          auto timeOf = [&](const std::vector<std::vector<Work>> &o) {
            std::string why;
            auto t = timeOrders(pipe, o, durations, why);
            return t ? t->makespan : -1.0;
          };
          std::string family = name;
          std::optional<std::vector<std::vector<Work>>> repoOrders,
              torchOrders;
          if (info->placement == PlacementKind::loop)
            repoOrders = getPeerZeroBubbleOrders(pipe, durations, cap, timeOf);
          else if (family == "zb-v")
            repoOrders = getGreedyZbvOrders(
                pipe, durations, std::vector<double>(size_t(p), cap));
          else
            repoOrders = sched::getAuthorsVShapeOrders(pipe, profile.f / v, profile.b / v,
                                            profile.w / v, profile.comm,
                                            int(std::lround(2 * cap)));
          if (family == "zb-h1")
            torchOrders = getPyTorchZeroBubbleOrders(pipe);
          else if (family == "zb-v")
            torchOrders = getHandcraftedZbvOrders(pipe);
          PeerResult repo = judgePeer(repoOrders, pipe, durations, cap, timeOf);
          PeerResult torch =
              family == "zb-h1" || family == "zb-v"
                  ? judgePeer(torchOrders, pipe, durations, cap, timeOf)
                  : PeerResult{"-"};
          Tally &tally = tallies[family];
          double bestPeer = -1;
          for (const PeerResult *peer : {&repo, &torch})
            if (peer->seconds >= 0 && peer->withinCap &&
                (bestPeer < 0 || peer->seconds < bestPeer))
              bestPeer = peer->seconds;
          if (bestPeer >= 0) {
            double ratio = builtTime->makespan / bestPeer - 1;
            ++(ratio > 1e-9 ? tally.slower : ratio < -1e-9 ? tally.faster
                                                           : tally.equal);
            tally.worst = std::max(tally.worst, ratio);
          }
          for (const PeerResult *peer : {&repo, &torch})
            if (peer->seconds >= 0 && !peer->withinCap) {
              ++tally.overCap;
              if (builtTime->makespan > peer->seconds + 1e-9)
                ++tally.overCapFaster;
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
              "%-7s %-5s %3d %4d %9.2f %9.2f %9s %9s %9.2f %9s %7s %6.1f%% "
              "%6.1f\n",
              name, profile.name, p, m, blockTime->makespan,
              builtTime->makespan, repo.text.c_str(), torch.text.c_str(), bound,
              optimum.c_str(),
              vsOpt.c_str(),
              100.0 * (builtTime->makespan / bound - 1), ms);
          if (show == std::string(name) + "," + profile.name) {
            auto print = [&](const char *who,
                             const std::vector<std::vector<Work>> &o) {
              for (int d = 0; d < p; ++d) {
                llvm::outs() << "  " << who << " device " << d << ":";
                for (const Work &w : o[d])
                  llvm::outs()
                      << " " << stringifyPassKind(w.kind)
                      << (pipe.chunks > 1
                              ? std::to_string(pipe.stages[w.stage].chunk)
                              : "")
                      << "." << w.microbatch;
                llvm::outs() << "\n";
              }
            };
            print("sluice", orders);
            if (repoOrders)
              print("zb-repo", *repoOrders);
            if (torchOrders)
              print("torch", *torchOrders);
          }
          llvm::outs().flush();
        }
  }
  llvm::outs() << "\nSluice against the best peer within the family's cap "
                  "(zb-repo, torch):\n";
  for (const char *name : families) {
    const Tally &t = tallies[name];
    llvm::outs() << llvm::format(
        "  %-7s faster %3d, equal %3d, slower %3d (worst %+.1f%%); peers over "
        "the cap: %d, faster than Sluice in %d\n",
        name, t.faster, t.equal, t.slower, 100.0 * std::max(t.worst, 0.0),
        t.overCap, t.overCapFaster);
  }
  return ok ? 0 : 1;
}
