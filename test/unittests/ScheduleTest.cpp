//===- ScheduleTest.cpp - Schedules against the papers' formulas ----------===//
//
// Unit costs, exact figures: bubble ratios and peak activation memory in
// microbatch units (one microbatch's activations of 1/p of the layers).

#include "Require.h"
#include "sluice/Analysis/Simulator.h"
#include "sluice/Schedule/ExtendOrders.h"
#include "sluice/Schedule/ImproveOrders.h"
#include "sluice/Schedule/OptimalOrders.h"
#include "sluice/Schedule/Schedules.h"
#include "sluice/Schedule/TimeOrders.h"
#include "sluice/Schedule/VShapeOrders.h"
#include "sluice/Schedule/Verifier.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace mlir;
using namespace mlir::sluice;
using namespace mlir::sluice::sched;

namespace {

struct Outcome {
  double bubble = 0;
  std::vector<double> peak;
  /// Activations held until W (BW) rather than B.
  std::vector<double> peakUntilW;
  double maxPeak() const { return *std::max_element(peak.begin(), peak.end()); }
  double maxPeakUntilW() const {
    return *std::max_element(peakUntilW.begin(), peakUntilW.end());
  }
};

Pipeline makePipeline(const ScheduleInfo &info, int p, int m, int v, int k) {
  return makeSchedulePipeline(info, p, m, v, k);
}

/// Builds, verifies and simulates `name` with unit costs.
Outcome run(llvm::StringRef name, int p, int m, int v = 1, int k = 1) {
  const ScheduleInfo *info = lookupSchedule(name);
  EXPECT_TRUE(info) << name.str();
  Pipeline pipe = makePipeline(*info, p, m, v, k);
  EXPECT_EQ(checkPipeline(*info, pipe), "");
  auto unit = [&](const Work &w) { return getUnitDuration(pipe, w); };
  std::string error;
  FailureOr<Program> program =
      buildSchedule(*info, pipe, Durations{unit, 0.0}, error);
  EXPECT_TRUE(succeeded(program)) << error;
  if (failed(program))
    return {};
  std::optional<Violation> violation = verifyProgram(pipe, *program);
  EXPECT_FALSE(violation) << name.str() << " p=" << p << " m=" << m
                          << " v=" << v << " k=" << k << ": "
                          << violation->message;
  auto zero = [](const Work &) { return 0.0; };
  auto units = [&](const Work &) { return 1.0 / (v * k); };
  FailureOr<Simulation> sim = simulate(
      pipe, *program, SimulationCosts{unit, zero, units, units}, error);
  EXPECT_TRUE(succeeded(sim)) << error;
  Outcome outcome;
  outcome.bubble = sim->bubbleRatio;
  for (const DeviceStatistics &d : sim->devices) {
    outcome.peak.push_back(d.peakActivationUnits);
    outcome.peakUntilW.push_back(d.peakActivationUnitsUntilW);
  }
  return outcome;
}

constexpr int p = 8, m = 24;
constexpr double kEps = 1e-12;

TEST(Schedules, GPipeAndOneFOneBBubbleIsPMinusOneOverMPlusPMinusOne) {
  Outcome gpipe = run("gpipe", p, m), onef1b = run("1f1b", p, m);
  EXPECT_NEAR(gpipe.bubble, 7.0 / 31.0, kEps);
  EXPECT_NEAR(onef1b.bubble, 7.0 / 31.0, kEps);
  EXPECT_DOUBLE_EQ(gpipe.peak[0], 24.0);
  EXPECT_DOUBLE_EQ(onef1b.peak[0], 8.0);
}

TEST(Schedules, ZBH1BubbleIsAThirdOfOneFOneB) {
  Outcome zb = run("zb-h1", p, m);
  EXPECT_NEAR(zb.bubble, 7.0 / 79.0, kEps);
  EXPECT_DOUBLE_EQ(zb.peak[0], 8.0);
  EXPECT_DOUBLE_EQ(zb.maxPeak(), 8.0);
}

TEST(Schedules, ZBH2HoldsAtMostTwoPMinusOne) {
  Outcome h2 = run("zb-h2", p, m), h1 = run("zb-h1", p, m);
  EXPECT_LE(h2.maxPeak(), 2.0 * p - 1);
  EXPECT_LE(h2.bubble, h1.bubble + kEps);
}

TEST(Schedules, ZBVHoldsAtMostPWithLessBubbleThanZBH1) {
  Outcome zbv = run("zb-v", p, m, 2), h1 = run("zb-h1", p, m);
  EXPECT_LE(zbv.maxPeak(), double(p));
  EXPECT_LE(zbv.bubble, h1.bubble + kEps);
}

TEST(Schedules, InterleavedBubbleShrinksWithChunks) {
  const int v = 2;
  Outcome inter = run("interleaved-1f1b", p, m, v);
  EXPECT_NEAR(inter.bubble, double(p - 1) / (v * m + p - 1), kEps);
}

TEST(Schedules, VHalfAndVMinMemoryBounds) {
  Outcome half = run("v-half", p, m, 2), min = run("v-min", p, m, 2);
  double onef1b = 7.0 / 31.0;
  EXPECT_LE(half.maxPeak(), std::ceil(p / 2.0) + 1);
  EXPECT_LE(min.maxPeak(), double((p + 4) / 3));
  EXPECT_LT(half.bubble, onef1b);
  EXPECT_LT(min.bubble, onef1b);
}

TEST(Schedules, Seq1F1BSlicesTheBubbleAndTheMemory) {
  const int k = 4;
  Outcome seq = run("seq1f1b", p, m, 1, k);
  EXPECT_NEAR(seq.bubble, double(p - 1) / (k * m + p - 1), kEps);
  EXPECT_DOUBLE_EQ(seq.peak[0], double(p + k - 1) / k);
}

TEST(Schedules, TeraPipeSlicesTheBubbleButKeepsGPipesMemory) {
  const int k = 4;
  Outcome tera = run("terapipe", p, m, 1, k);
  EXPECT_NEAR(tera.bubble, double(p - 1) / (k * m + p - 1), kEps);
  EXPECT_DOUBLE_EQ(tera.peak[0], double(m));
}

// Every schedule verifies (and simulates) over the grid the issue names.
TEST(Schedules, EveryScheduleVerifiesOnTheGrid) {
  for (const ScheduleInfo &info : getSchedules())
    for (int pp = 2; pp <= 16; ++pp)
      for (int mm : {1, 2, pp - 1, pp, 2 * pp, 4 * pp})
        for (int v : {1, 2})
          for (int k : {1, 2, 4}) {
            if (mm < 1)
              continue;
            Pipeline pipe = makePipeline(info, pp, mm, v, k);
            if (!checkPipeline(info, pipe).empty())
              continue;
            auto unit = [&](const Work &w) { return getUnitDuration(pipe, w); };
            std::string error;
            FailureOr<Program> program =
                buildSchedule(info, pipe, Durations{unit, 0.0}, error);
            ASSERT_TRUE(succeeded(program))
                << info.getName().str() << " p=" << pp << " m=" << mm << ": "
                << error;
            std::optional<Violation> violation = verifyProgram(pipe, *program);
            ASSERT_FALSE(violation)
                << info.getName().str() << " p=" << pp << " m=" << mm
                << " v=" << v << " k=" << k << ": " << violation->message;
          }
}

// W passes fill bubbles but never pile up: a device holds the inputs of at
// most p pending weight gradients (B run, W not yet), so deferring W does
// not turn into GPipe's memory.
TEST(Schedules, WeightPassesNeverPileUp) {
  for (const ScheduleInfo &info : getSchedules()) {
    if (!info.splitBackward)
      continue;
    for (int pp = 2; pp <= 16; ++pp)
      for (int mm : {pp, 2 * pp, 4 * pp}) {
        Pipeline pipe = makePipeline(info, pp, mm, info.chunks, 1);
        if (!checkPipeline(info, pipe).empty()) // dualpipev: m >= 2p
          continue;
        auto unit = [&](const Work &w) { return getUnitDuration(pipe, w); };
        std::string error;
        FailureOr<Program> program =
            buildSchedule(info, pipe, Durations{unit, 0.0}, error);
        ASSERT_TRUE(succeeded(program)) << error;
        for (const auto &instrs : program->devices) {
          int pending = 0, most = 0;
          for (const Instr &instr : instrs) {
            if (instr.kind != InstrKind::Exec)
              continue;
            pending += instr.work.kind == PassKind::B   ? 1
                       : instr.work.kind == PassKind::W ? -1
                                                        : 0;
            most = std::max(most, pending);
          }
          EXPECT_LE(most, pp * info.chunks)
              << info.getName().str() << " p=" << pp << " m=" << mm;
        }
      }
  }
}

// Interleaved 1F1B takes any microbatch count (PyTorch's flexible
// interleaving): Megatron's rounds of p units become max(1, m / p) rounds
// of at least p, and the bubble keeps Megatron's (p - 1) / (V m + p - 1)
// for every m >= p, multiple of p or not.
TEST(Schedules, InterleavingTakesAnyMicrobatchCount) {
  const ScheduleInfo *inter = lookupSchedule("interleaved-1f1b");
  for (int pp : {2, 3, 4, 8})
    for (int v : {2, 3})
      for (int mm = pp; mm <= 3 * pp + 1; ++mm) {
        Pipeline pipe = makePipeline(*inter, pp, mm, v, 1);
        ASSERT_EQ(checkPipeline(*inter, pipe), "");
        Outcome o = run("interleaved-1f1b", pp, mm, v, 1);
        EXPECT_NEAR(o.bubble, double(pp - 1) / (v * mm + pp - 1), kEps)
            << "p=" << pp << " m=" << mm << " v=" << v;
      }
}

TEST(Schedules, ChunksAndSlicesOnlyWhereTheScheduleHasThem) {
  const ScheduleInfo *onef1b = lookupSchedule("1f1b");
  EXPECT_EQ(
      checkPipeline(*onef1b, makePipeline(*lookupSchedule("1f1b"), 4, 8, 2, 1)),
      "schedule '1f1b' has no chunks: virtual must be 1, got 2 "
      "(schedules with chunks: interleaved-1f1b, zb-v, v-half, v-min, "
      "seq1f1b-i, dualpipev)");
  EXPECT_EQ(checkPipeline(*onef1b, makePipeline(*onef1b, 4, 8, 1, 4)),
            "schedule '1f1b' does not slice tokens: slices must be 1, got 4 "
            "(token-sliced schedules: seq1f1b, seq1f1b-i, terapipe)");
}

} // namespace

// A token-sliced microbatch's key/value state lives from its first slice's
// F to its first slice's backward (the last): Seq1F1B on 2 devices, 2
// microbatches of 2 slices; device 0 runs F(0,0) F(0,1) F(1,0) B(0,1) F(1,1)
// B(0,0) ..., holding both microbatches' states at once.
TEST(Schedules, SlicedMicrobatchesKeepTheirKeyValueState) {
  const ScheduleInfo *info = lookupSchedule("seq1f1b");
  Pipeline pipe = makePipeline(*info, 2, 2, 1, 2);
  auto unit = [&](const Work &w) { return getUnitDuration(pipe, w); };
  std::string error;
  FailureOr<Program> program =
      buildSchedule(*info, pipe, Durations{unit, 0.0}, error);
  ASSERT_TRUE(succeeded(program)) << error;
  auto zero = [](const Work &) { return 0.0; };
  auto one = [](const Work &) { return 1.0; };
  auto freeCollective = [](const CollectiveId &) { return 0.0; };
  auto kv = [](int) { return 1000.0; };
  FailureOr<Simulation> sim = simulate(
      pipe, *program, SimulationCosts{unit, zero, one, one, freeCollective, kv},
      error);
  ASSERT_TRUE(succeeded(sim)) << error;
  EXPECT_DOUBLE_EQ(sim->devices[0].peakActivationBytes, 2003.0);
  EXPECT_DOUBLE_EQ(sim->devices[0].peakActivationUnits, 3.0);
}

// With links slower than a pass, a V-shape device's sends to its two
// neighbours overlap (NCCL's per-peer connections); sends to one peer stay
// in order and never overlap.
TEST(Simulator, SendsToDifferentPeersOverlap) {
  const ScheduleInfo *info = lookupSchedule("v-half");
  Pipeline pipe = makePipeline(*info, 4, 8, 2, 1);
  auto unit = [&](const Work &w) { return getUnitDuration(pipe, w); };
  std::string error;
  FailureOr<Program> program =
      buildSchedule(*info, pipe, Durations{unit, 0.0}, error);
  ASSERT_TRUE(succeeded(program)) << error;
  auto slow = [](const Work &) { return 3.0; };
  auto units = [](const Work &) { return 0.5; };
  FailureOr<Simulation> sim = simulate(
      pipe, *program, SimulationCosts{unit, slow, units, units}, error);
  ASSERT_TRUE(succeeded(sim)) << error;
  bool overlapped = false;
  for (const TimelineEvent &a : sim->events)
    for (const TimelineEvent &b : sim->events) {
      if (&a == &b || a.kind != InstrKind::Send || b.kind != InstrKind::Send ||
          a.device != b.device)
        continue;
      bool overlap = a.start < b.end && b.start < a.end;
      if (a.peer == b.peer)
        EXPECT_FALSE(overlap) << "two sends to one peer at once";
      else
        overlapped |= overlap;
    }
  EXPECT_TRUE(overlapped);
}

// The report counts activations until W too: what a weight pass still
// reads. Every memory-capped schedule keeps its cap until W (ZB-H1 and
// ZB-V p, ZB-H2 2p - 1, V-Half ceil(p/2) + 1, V-Min floor((p + 4)/3)); the
// ZB-V block alone would hold 2p - 1 (the improver picks an order within
// p); never less than until B anywhere.
TEST(Schedules, PeaksUntilWeightPasses) {
  for (const char *name :
       {"1f1b", "zb-h1", "zb-h2", "zb-v", "v-half", "v-min"}) {
    const ScheduleInfo *info = lookupSchedule(name);
    Outcome o = run(name, p, m, info->chunks, 1);
    for (size_t d = 0; d < o.peak.size(); ++d)
      EXPECT_GE(o.peakUntilW[d], o.peak[d]) << name << " device " << d;
  }
  EXPECT_DOUBLE_EQ(run("1f1b", p, m).maxPeakUntilW(), double(p));
  EXPECT_DOUBLE_EQ(run("zb-h1", p, m).maxPeakUntilW(), double(p));
  EXPECT_DOUBLE_EQ(run("zb-h2", p, m).maxPeakUntilW(), double(2 * p - 1));
  EXPECT_LE(run("zb-v", p, m, 2).maxPeakUntilW(), double(p));
  EXPECT_LE(run("v-half", p, m, 2).maxPeakUntilW(), double((p + 1) / 2 + 1));
  EXPECT_LE(run("v-min", p, m, 2).maxPeakUntilW(), double((p + 4) / 3));
}

// Issue 11's case: p = 8, m = 8, F = B = W = 1, 0.1 per transfer. A W
// that starts in a gap must end before the next pass's input arrives,
// else a 0.1 wait becomes a whole W and cascades: 38.4 with W started
// anywhere, 33.6 for the block with W only where it fits; the improver's
// list schedule reaches 32.4, the optimum of the zero-bubble paper's ILP.
TEST(Schedules, WeightPassesGoOnlyWhereTheyFit) {
  const ScheduleInfo *info = lookupSchedule("zb-h1");
  Pipeline pipe = makePipeline(*info, 8, 8, 1, 1);
  auto one = [](const Work &w) {
    return w.kind == PassKind::F || w.kind == PassKind::B ||
                   w.kind == PassKind::W
               ? 1.0
               : 0.0;
  };
  auto comm = [](const Work &) { return 0.1; };
  auto units = [](const Work &) { return 1.0; };
  for (auto [improve, step] : {std::pair{false, 33.6}, std::pair{true, 32.4}}) {
    std::string error;
    FailureOr<Program> program = buildSchedule(*info, pipe, Durations{one, 0.1},
                                               error, BuildOptions{improve});
    ASSERT_TRUE(succeeded(program)) << error;
    ASSERT_FALSE(verifyProgram(pipe, *program));
    FailureOr<Simulation> sim = simulate(
        pipe, *program, SimulationCosts{one, comm, units, units}, error);
    ASSERT_TRUE(succeeded(sim)) << error;
    EXPECT_NEAR(sim->stepTime, step, 1e-9) << "improve=" << improve;
    EXPECT_LE(sim->devices[0].peakActivationUnitsUntilW, 8.0);
  }
}

namespace {
/// Every order of device d's passes that keeps each microbatch's F, B and
/// W (one stage per device) in that order.
std::vector<std::vector<Work>> getDeviceOrders(int stage, int m) {
  std::vector<Work> passes;
  for (int mb = 0; mb < m; ++mb)
    for (PassKind kind : {PassKind::F, PassKind::B, PassKind::W})
      passes.push_back(Work{kind, stage, mb, 0});
  std::vector<int> perm(passes.size());
  for (size_t i = 0; i < perm.size(); ++i)
    perm[i] = int(i);
  std::vector<std::vector<Work>> result;
  do {
    std::vector<int> seen(m, 0);
    bool ok = true;
    for (int i : perm) {
      int mb = i / 3, step = i % 3;
      if (seen[mb] != step) {
        ok = false;
        break;
      }
      ++seen[mb];
    }
    if (!ok)
      continue;
    std::vector<Work> order;
    for (int i : perm)
      order.push_back(passes[i]);
    result.push_back(order);
  } while (std::next_permutation(perm.begin(), perm.end()));
  return result;
}

/// The shortest step over every combination of device orders whose
/// activations stay within `caps` (F to W, one per microbatch).
double bruteForceOptimum(const Pipeline &pipe, const Durations &durations,
                         const std::vector<double> &caps) {
  int p = pipe.devices;
  std::vector<std::vector<std::vector<Work>>> choices;
  for (int d = 0; d < p; ++d) {
    std::vector<std::vector<Work>> fit;
    for (auto &order : getDeviceOrders(d, pipe.microbatches)) {
      std::vector<std::vector<Work>> one{order};
      if (caps.empty() || getPeakUntilW(pipe, one, durations)[0] <= caps[d])
        fit.push_back(order);
    }
    choices.push_back(fit);
  }
  double best = std::numeric_limits<double>::infinity();
  std::vector<size_t> pick(p, 0);
  std::vector<std::vector<Work>> orders(p);
  std::string error;
  while (true) {
    for (int d = 0; d < p; ++d)
      orders[d] = choices[d][pick[d]];
    if (auto timing = timeOrders(pipe, orders, durations, error))
      best = std::min(best, timing->makespan);
    int d = 0;
    while (d < p && ++pick[d] == choices[d].size())
      pick[d++] = 0;
    if (d == p)
      break;
  }
  return best;
}
} // namespace

// The exact schedule (GLPK) equals the best of every order on pipelines
// small enough to enumerate, with and without memory caps, with B != W and
// transfers.
TEST(OptimalOrders, MatchesBruteForce) {
  const ScheduleInfo *info = lookupSchedule("zb-h1");
  struct Case {
    int p, m;
    double f, b, w, comm, cap;
  };
  for (Case c : {Case{2, 2, 1, 1, 1, 0, 0}, Case{2, 2, 1, 1.5, 0.5, 0.3, 1},
                 Case{3, 2, 1, 1, 1, 0.1, 0}, Case{3, 2, 1, 2, 0.5, 0.5, 1},
                 Case{2, 3, 1, 1, 1, 0.2, 2}}) {
    Pipeline pipe = makePipeline(*info, c.p, c.m, 1, 1);
    auto cost = [&](const Work &w) {
      return w.kind == PassKind::F ? c.f : w.kind == PassKind::B ? c.b : c.w;
    };
    Durations durations{cost, c.comm};
    std::vector<double> caps;
    if (c.cap > 0)
      caps.assign(c.p, c.cap);
    std::string error;
    FailureOr<OptimalResult> optimal =
        findOptimalOrders(pipe, durations, {caps, 60}, error);
    ASSERT_TRUE(succeeded(optimal)) << error;
    EXPECT_TRUE(optimal->proven);
    double brute = bruteForceOptimum(pipe, durations, caps);
    EXPECT_NEAR(optimal->makespan, brute, 1e-6)
        << "p=" << c.p << " m=" << c.m << " comm=" << c.comm
        << " cap=" << c.cap;
    // Its orders execute in that time.
    auto timing = timeOrders(pipe, optimal->orders, durations, error);
    ASSERT_TRUE(timing) << error;
    EXPECT_NEAR(timing->makespan, optimal->makespan, 1e-6);
  }
}

// A cap no schedule can keep is refused by name.
TEST(OptimalOrders, RefusesAnImpossibleCap) {
  const ScheduleInfo *info = lookupSchedule("zb-h1");
  Pipeline pipe = makePipeline(*info, 2, 2, 1, 1);
  auto one = [](const Work &) { return 1.0; };
  std::string error;
  FailureOr<OptimalResult> optimal =
      findOptimalOrders(pipe, Durations{one, 0}, {{0.5, 0.5}, 10}, error);
  EXPECT_TRUE(failed(optimal));
  EXPECT_NE(error.find("memory cap"), std::string::npos) << error;
}

// The generated schedules against the proven optimum under the same memory
// cap (the family's, F to W): never below it (a check of both), within 2%
// of it (issue 11; equal on every case here), and the gap is printed. The
// cases are small enough for GLPK to prove each within its limit.
TEST(OptimalOrders, GeneratedScheduleAgainstTheOptimum) {
  int proven = 0;
  struct Case {
    const char *schedule;
    int p, m;
    double f, b, w, comm;
  };
  for (Case c :
       {Case{"zb-h1", 3, 3, 1, 1, 1, 0.1},
        Case{"zb-h1", 3, 3, 1, 1.2, 0.8, 0.05},
        Case{"zb-h1", 2, 3, 1, 1.5, 0.5, 0.3},
        Case{"zb-h1", 2, 3, 1, 1, 1, 0.5}, Case{"zb-h2", 3, 3, 1, 1, 1, 0.1},
        Case{"zb-v", 2, 2, 1, 1.2, 0.8, 0.05}, Case{"v-half", 3, 2, 1, 1, 1, 0},
        Case{"v-min", 3, 2, 1, 1, 1, 0.1}}) {
    const ScheduleInfo *info = lookupSchedule(c.schedule);
    int v = info->chunks == 1 ? 1 : 2;
    Pipeline pipe = makePipeline(*info, c.p, c.m, v, 1);
    auto cost = [&](const Work &w) {
      return (w.kind == PassKind::F   ? c.f
              : w.kind == PassKind::B ? c.b
                                      : c.w) /
             v;
    };
    auto units = [&](const Work &) { return 1.0 / v; };
    Durations durations{cost, c.comm, units};
    std::string error;
    FailureOr<Program> program = buildSchedule(*info, pipe, durations, error);
    ASSERT_TRUE(succeeded(program)) << error;
    std::vector<std::vector<Work>> orders(c.p);
    for (int d = 0; d < c.p; ++d)
      for (const Instr &instr : program->devices[d])
        if (instr.kind == InstrKind::Exec)
          orders[d].push_back(instr.work);
    auto built = timeOrders(pipe, orders, durations, error);
    ASSERT_TRUE(built) << error;
    std::vector<double> caps(c.p, *getMemoryCap(info->kind, c.p));
    for (double peak : getPeakUntilW(pipe, orders, durations))
      EXPECT_LE(peak, caps[0] + 1e-9) << c.schedule;
    FailureOr<OptimalResult> optimal =
        findOptimalOrders(pipe, durations, {caps, 60}, error);
    ASSERT_TRUE(succeeded(optimal)) << error;
    // An unproven result (the limit passed, as on a loaded machine) is only
    // the best order found: no bound on either side.
    if (optimal->proven) {
      ++proven;
      EXPECT_GE(built->makespan, optimal->makespan - 1e-6) << c.schedule;
      EXPECT_LE(built->makespan, 1.02 * optimal->makespan) << c.schedule;
    }
    std::printf("%s p=%d m=%d F=%g B=%g W=%g comm=%g: %.2f, optimum %.2f%s "
                "(+%.1f%%)\n",
                c.schedule, c.p, c.m, c.f, c.b, c.w, c.comm, built->makespan,
                optimal->makespan, optimal->proven ? "" : " (unproven)",
                100.0 * (built->makespan / optimal->makespan - 1));
  }
  // Each proves in seconds on an idle machine; most must prove anywhere.
  EXPECT_GE(proven, 6);
}

// The improver on a grid of families, sizes and cost profiles: every
// program verifies, keeps its family's cap until W on every device, and is
// never slower than the family's own block where that keeps the cap.
TEST(ImproveOrders, KeepsTheCapAndNeverLosesToTheBlock) {
  struct Profile {
    double f, b, w, comm, last;
  };
  for (const char *name : {"zb-h1", "zb-h2", "zb-v", "v-half", "v-min"})
    for (int p : {2, 4, 5})
      for (int m : {1, 3, 2 * p + 1})
        for (Profile c : {Profile{1, 1, 1, 0, 1}, Profile{1, 1.2, 0.8, 0.05, 1},
                          Profile{1, 1, 1, 0.1, 1}, Profile{1, 1, 1, 0, 1.8},
                          Profile{1, 2, 0.5, 1.5, 1}}) {
          const ScheduleInfo *info = lookupSchedule(name);
          int v = info->chunks == 1 ? 1 : 2;
          Pipeline pipe = makePipeline(*info, p, m, v, 1);
          auto cost = [&](const Work &w) {
            double base = w.kind == PassKind::F   ? c.f
                          : w.kind == PassKind::B ? c.b
                                                  : c.w;
            return base / v * (w.stage == pipe.getLastStage() ? c.last : 1);
          };
          auto units = [&](const Work &) { return 1.0 / v; };
          Durations durations{cost, c.comm, units};
          std::string error,
              where = std::string(name) + " p=" + std::to_string(p) +
                      " m=" + std::to_string(m) + " B=" + std::to_string(c.b) +
                      " comm=" + std::to_string(c.comm);
          std::vector<double> timesAndPeaks[2];
          for (bool improve : {false, true}) {
            FailureOr<Program> program = buildSchedule(
                *info, pipe, durations, error, BuildOptions{improve});
            ASSERT_TRUE(succeeded(program)) << where << ": " << error;
            std::optional<Violation> violation = verifyProgram(pipe, *program);
            ASSERT_FALSE(violation) << where << ": " << violation->message;
            std::vector<std::vector<Work>> orders(p);
            for (int d = 0; d < p; ++d)
              for (const Instr &instr : program->devices[d])
                if (instr.kind == InstrKind::Exec)
                  orders[d].push_back(instr.work);
            auto timing = timeOrders(pipe, orders, durations, error);
            ASSERT_TRUE(timing) << where << ": " << error;
            std::vector<double> peaks = getPeakUntilW(pipe, orders, durations);
            timesAndPeaks[improve] = {
                timing->makespan,
                *std::max_element(peaks.begin(), peaks.end())};
          }
          double cap = *::sluice::test::require(getMemoryCap(info->kind, p),
                                                "the schedule's memory cap");
          EXPECT_LE(timesAndPeaks[1][1], cap + 1e-9) << where;
          if (timesAndPeaks[0][1] <= cap + 1e-9) {
            EXPECT_LE(timesAndPeaks[1][0], timesAndPeaks[0][0] + 1e-9) << where;
          }
        }
}

// The V-shape papers' own orders (VShapeOrders.h) execute and keep their
// family's cap until W, and what Sluice builds is never slower than them:
// they are among the improver's candidates. The polish (critical-path
// moves) then beats the controllable-memory paper's V-Half where the list
// schedules do not.
TEST(ImproveOrders, NeverLosesToThePapersOrders) {
  auto cost = [](const Work &w) {
    return (w.kind == PassKind::B   ? 1.2
            : w.kind == PassKind::W ? 0.8
                                    : 1.0) /
           2;
  };
  auto units = [](const Work &) { return 0.5; };
  for (const char *name : {"zb-v", "v-half", "v-min"})
    for (int p : {4, 6})
      for (int m : {p, 2 * p})
        for (double comm : {0.0, 0.1}) {
          const ScheduleInfo *info = lookupSchedule(name);
          Pipeline pipe = makePipeline(*info, p, m, 2, 1);
          Durations durations{cost, comm, units};
          std::string error, where = std::string(name) +
                                     " p=" + std::to_string(p) +
                                     " m=" + std::to_string(m);
          double cap = *::sluice::test::require(getMemoryCap(info->kind, p),
                                                "the schedule's memory cap");
          std::vector<std::optional<std::vector<std::vector<Work>>>> papers;
          if (std::string(name) == "zb-v") {
            papers.push_back(getHandcraftedZbvOrders(pipe));
            papers.push_back(getGreedyZbvOrders(
                pipe, durations,
                MemoryCaps(p,
                           cap * getMicrobatchActivation(pipe, durations, 0))));
          } else {
            papers.push_back(
                getSqueezedVShapeOrders(pipe, std::string(name) == "v-half"));
          }
          double fastest = -1;
          for (const auto &paper : papers) {
            ASSERT_TRUE(paper) << where;
            auto theirs = timeOrders(pipe, *paper, durations, error);
            ASSERT_TRUE(theirs) << where << ": " << error;
            std::vector<double> peaks = getPeakUntilW(pipe, *paper, durations);
            for (int d = 0; d < p; ++d)
              EXPECT_LE(peaks[d],
                        cap * getMicrobatchActivation(pipe, durations, d) +
                            1e-9)
                  << where << " device " << d;
            if (fastest < 0 || theirs->makespan < fastest)
              fastest = theirs->makespan;
          }
          FailureOr<Program> program =
              buildSchedule(*info, pipe, durations, error);
          ASSERT_TRUE(succeeded(program)) << where << ": " << error;
          std::vector<std::vector<Work>> orders(p);
          for (int d = 0; d < p; ++d)
            for (const Instr &instr : program->devices[d])
              if (instr.kind == InstrKind::Exec)
                orders[d].push_back(instr.work);
          auto ours = timeOrders(pipe, orders, durations, error);
          ASSERT_TRUE(ours) << where << ": " << error;
          EXPECT_LE(ours->makespan, fastest + 1e-9) << where;
        }

  // V-Half, p = 4, m = 8, B = 1.2, W = 0.8, 0.05 per transfer.
  const ScheduleInfo *vhalf = lookupSchedule("v-half");
  Pipeline pipe = makePipeline(*vhalf, 4, 8, 2, 1);
  Durations durations{cost, 0.05, units};
  auto squeezed = getSqueezedVShapeOrders(pipe, /*half=*/true);
  ASSERT_TRUE(squeezed);
  std::string error;
  auto theirs = timeOrders(pipe, *squeezed, durations, error);
  ASSERT_TRUE(theirs) << error;
  EXPECT_NEAR(theirs->makespan, 28.8, 1e-9);
  MemoryCaps caps(4, *getMemoryCap(vhalf->kind, 4) *
                         getMicrobatchActivation(pipe, durations, 0));
  FailureOr<Improved> improved =
      improveOrders(pipe, {*squeezed}, durations, caps, error);
  ASSERT_TRUE(succeeded(improved)) << error;
  EXPECT_LT(improved->makespan, 28.8 - 1e-9) << improved->source;
  EXPECT_NE(improved->source.find("polished"), std::string::npos)
      << improved->source << " " << improved->makespan;
}

// Issue 37: the cost-aware V search (VShapeOrders.h) -- both of its
// constructions return orders that execute, keep the family's cap until
// W, fastest first; and V-Half / V-Min are never slower than what the
// controllable-memory authors' search (v_auto_schedule.py, bench's
// PeerVAuto.cpp) picks on the cases where Sluice lost to it before the
// search: one chunk's F 1, B 2, W 0.5 (V-Min, p 4, m 4: 58.5 before,
// theirs 53.5) and F 1, B 1.5, W 0.7, a hop 0.3 (V-Half, p 4, m 4: 43.3,
// theirs 41.5; V-Min, p 6, m 6: 81.9, theirs 76.0); and past 3,072
// passes, where the blocks are ranked on fewer microbatches, the
// benchmark's link costs (a chunk's F 0.5, B 1, W 0.25, a hop 1.5) at
// p 16, m 64 (V-Half 737.0 before, theirs 730.0; V-Min 1036.5, theirs
// 1031.5).
TEST(VShapeSearch, OrdersKeepTheCapAndBeatTheAuthorsSearch) {
  auto units = [](const Work &) { return 0.5; };
  for (const char *name : {"v-half", "v-min"})
    for (int p : {4, 6})
      for (int m : {p, 2 * p + 1}) {
        const ScheduleInfo *info = lookupSchedule(name);
        Pipeline pipe = makePipeline(*info, p, m, 2, 1);
        auto cost = [](const Work &w) {
          return w.kind == PassKind::B ? 1.3 : w.kind == PassKind::W ? 0.6 : 1;
        };
        Durations durations{cost, 0.2, units};
        double cap = *::sluice::test::require(getMemoryCap(info->kind, p),
                                              "the schedule's memory cap");
        MemoryCaps caps(p, cap * getMicrobatchActivation(pipe, durations, 0));
        std::string where = std::string(name) + " p=" + std::to_string(p) +
                            " m=" + std::to_string(m);
        for (auto search : {searchVShapeBlocks, searchRepeatedVShapes}) {
          auto found = search(pipe, durations, caps, 3);
          ASSERT_FALSE(found.empty()) << where;
          double previous = 0;
          for (const auto &orders : found) {
            std::string error;
            auto timing = timeOrders(pipe, orders, durations, error);
            ASSERT_TRUE(timing) << where << ": " << error;
            EXPECT_GE(timing->makespan, previous - 1e-9) << where;
            previous = timing->makespan;
            std::vector<double> peaks = getPeakUntilW(pipe, orders, durations);
            for (int d = 0; d < p; ++d)
              EXPECT_LE(peaks[d], caps[d] + 1e-9) << where << " device " << d;
          }
        }
      }

  struct Case {
    const char *name;
    int p, m;
    double f, b, w, comm, theirs;
  };
  for (const Case &c : {Case{"v-min", 4, 4, 1, 2, 0.5, 0, 53.5},
                        Case{"v-half", 4, 4, 1, 1.5, 0.7, 0.3, 41.5},
                        Case{"v-min", 6, 6, 1, 1.5, 0.7, 0.3, 76.0},
                        Case{"v-half", 16, 64, 0.5, 1, 0.25, 1.5, 730.0},
                        Case{"v-min", 16, 64, 0.5, 1, 0.25, 1.5, 1031.5}}) {
    const ScheduleInfo *info = lookupSchedule(c.name);
    Pipeline pipe = makePipeline(*info, c.p, c.m, 2, 1);
    auto cost = [&](const Work &w) {
      return w.kind == PassKind::B ? c.b : w.kind == PassKind::W ? c.w : c.f;
    };
    Durations durations{cost, c.comm, units};
    std::string error;
    FailureOr<Program> program = buildSchedule(*info, pipe, durations, error);
    ASSERT_TRUE(succeeded(program)) << c.name << ": " << error;
    std::vector<std::vector<Work>> orders(c.p);
    for (int d = 0; d < c.p; ++d)
      for (const Instr &instr : program->devices[d])
        if (instr.kind == InstrKind::Exec)
          orders[d].push_back(instr.work);
    auto ours = timeOrders(pipe, orders, durations, error);
    ASSERT_TRUE(ours) << error;
    EXPECT_LE(ours->makespan, c.theirs + 1e-9) << c.name << " p=" << c.p;
  }
}

namespace {
/// The pass order of each device of `program`.
std::vector<std::vector<Work>> getOrders(const Pipeline &pipe,
                                         const Program &program) {
  std::vector<std::vector<Work>> orders(pipe.devices);
  for (int d = 0; d < pipe.devices; ++d)
    for (const Instr &instr : program.devices[d])
      if (instr.kind == InstrKind::Exec)
        orders[d].push_back(instr.work);
  return orders;
}
} // namespace

// Issue 52: a building block is periodic by construction, so its orders
// for m microbatches, extended from fewer, are its orders for m exactly.
TEST(ExtendOrders, ABlockExtendsToItself) {
  for (const char *name : {"1f1b", "zb-h1", "zb-v", "v-half", "v-min"})
    for (int p : {4, 6}) {
      const ScheduleInfo *info = lookupSchedule(name);
      int v = info->chunks == 1 ? 1 : 2;
      auto build = [&](int m) {
        Pipeline pipe = makePipeline(*info, p, m, v, 1);
        auto unit = [&](const Work &w) { return getUnitDuration(pipe, w); };
        std::string error;
        FailureOr<Program> program = buildSchedule(
            *info, pipe, Durations{unit, 0.0}, error, BuildOptions{false});
        EXPECT_TRUE(succeeded(program)) << error;
        return std::pair(pipe, getOrders(pipe, *program));
      };
      auto [shortPipe, shortOrders] = build(3 * p + 4);
      auto [longPipe, longOrders] = build(5 * p + 9);
      std::optional<std::vector<std::vector<Work>>> extended =
          extendOrders(longPipe, shortOrders, 3 * p + 4);
      ASSERT_TRUE(extended) << name << " p=" << p;
      EXPECT_EQ(*extended, longOrders) << name << " p=" << p;
    }
}

// What cannot be extended is refused, not mangled: a device without a
// steady state of three periods, or a result that is not every pass once.
TEST(ExtendOrders, RefusesWhatIsNotPeriodic) {
  const ScheduleInfo *info = lookupSchedule("1f1b");
  Pipeline shortPipe = makePipeline(*info, 2, 12, 1, 1);
  Pipeline longPipe = makePipeline(*info, 2, 20, 1, 1);
  auto unit = [&](const Work &w) { return getUnitDuration(shortPipe, w); };
  std::string error;
  FailureOr<Program> program = buildSchedule(
      *info, shortPipe, Durations{unit, 0.0}, error, BuildOptions{false});
  ASSERT_TRUE(succeeded(program)) << error;
  std::vector<std::vector<Work>> orders = getOrders(shortPipe, *program);
  ASSERT_TRUE(extendOrders(longPipe, orders, 12));
  // Device 1's steady state broken every other microbatch.
  std::vector<std::vector<Work>> broken = orders;
  for (size_t i = 0; i + 3 < broken[1].size(); i += 4)
    std::swap(broken[1][i], broken[1][i + 1]);
  EXPECT_FALSE(extendOrders(longPipe, broken, 12));
  // Fewer periods than asked for.
  EXPECT_FALSE(extendOrders(longPipe, orders, 12, /*minPeriods=*/20));
  // A pass missing from the short orders is missing from the long ones.
  std::vector<std::vector<Work>> missing = orders;
  missing[0].pop_back();
  EXPECT_FALSE(extendOrders(longPipe, missing, 12));
}

// Past 50,000 passes a compile improves 2p + 8 microbatches and extends
// them: on this grid it is never slower than improving every microbatch,
// and keeps the schedule's memory cap.
TEST(ExtendOrders, ExtendingIsNeverSlowerThanImprovingItAll) {
  struct Case {
    const char *name;
    int p, m;
    double b, w, comm;
  };
  for (Case c : {Case{"v-half", 16, 560, 1, 1, 0},
                 Case{"v-min", 16, 560, 1.5, 0.7, 0.3},
                 Case{"zb-v", 16, 560, 1, 1, 0},
                 Case{"zb-h1", 24, 720, 1.2, 0.5, 0.15}}) {
    const ScheduleInfo *info = lookupSchedule(c.name);
    int v = info->chunks == 1 ? 1 : 2;
    Pipeline pipe = makePipeline(*info, c.p, c.m, v, 1);
    auto cost = [&](const Work &w) {
      return (w.kind == PassKind::F ? 1.0 : w.kind == PassKind::B ? c.b : c.w) /
             v;
    };
    auto units = [&](const Work &) { return 1.0 / v; };
    Durations durations{cost, c.comm, units};
    double makespan[2], peak[2];
    for (bool extend : {false, true}) {
      BuildOptions options;
      options.extend = extend;
      bool extended = false;
      options.extended = &extended;
      std::string error;
      FailureOr<Program> program =
          buildSchedule(*info, pipe, durations, error, options);
      ASSERT_TRUE(succeeded(program)) << c.name << ": " << error;
      ASSERT_FALSE(verifyProgram(pipe, *program)) << c.name;
      std::vector<std::vector<Work>> orders = getOrders(pipe, *program);
      auto timing = timeOrders(pipe, orders, durations, error);
      ASSERT_TRUE(timing) << c.name << ": " << error;
      std::vector<double> peaks = getPeakUntilW(pipe, orders, durations);
      EXPECT_EQ(extended, extend) << c.name << " b=" << c.b;
      makespan[extend] = timing->makespan;
      peak[extend] = *std::max_element(peaks.begin(), peaks.end());
    }
    EXPECT_LE(makespan[1], makespan[0] + 1e-9) << c.name;
    EXPECT_LE(peak[1], *getMemoryCap(info->kind, c.p) + 1e-9) << c.name;
  }
}

// Issue 52: the polisher times each move against the last whole timing,
// re-timing only what starts after the moved passes (OrderClock::retime).
// Against timing the moved orders whole, on random moves of every
// capped schedule's orders: the same step time, the same sum of ends
// (to rounding), the same verdict where a move deadlocks -- and the
// reference is left as it was, so the next move is timed against it.
TEST(OrderClock, RetimingAMoveEqualsTimingItWhole) {
  std::mt19937 random(52);
  for (const char *name : {"1f1b", "zb-h1", "zb-h2", "zb-v", "v-half"})
    for (int p : {3, 6})
      for (double comm : {0.0, 0.3, 1.5}) {
        const ScheduleInfo *info = lookupSchedule(name);
        int v = info->chunks == 1 ? 1 : 2;
        Pipeline pipe = makePipeline(*info, p, 2 * p + 3, v, 1);
        auto cost = [&](const Work &w) {
          return (w.kind == PassKind::F ? 1.0
                  : w.kind == PassKind::B ? 1.3
                                          : 0.7) /
                 v * (w.stage == pipe.getLastStage() ? 1.5 : 1.0);
        };
        Durations durations{cost, comm};
        std::string error, where = std::string(name) +
                                   " p=" + std::to_string(p) +
                                   " comm=" + std::to_string(comm);
        FailureOr<Program> program = buildSchedule(
            *info, pipe, durations, error, BuildOptions{false});
        ASSERT_TRUE(succeeded(program)) << where << ": " << error;
        std::vector<std::vector<Work>> orders = getOrders(pipe, *program);
        OrderClock clock(pipe, durations);
        std::optional<OrderTiming> reference = clock.time(orders, error);
        ASSERT_TRUE(reference) << where << ": " << error;
        int deadlocks = 0;
        for (int move = 0; move < 200; ++move) {
          int d = int(random() % p);
          int n = int(orders[d].size());
          int i = 1 + int(random() % (n - 1));
          int k = 1 + int(random() % std::min(i, 6));
          std::vector<std::vector<Work>> moved = orders;
          std::rotate(moved[d].begin() + (i - k), moved[d].begin() + i,
                      moved[d].begin() + i + 1);
          std::string retimeError, wholeError;
          std::optional<OrderTiming> retimed = clock.retime(
              moved, d, size_t(i - k), size_t(i), retimeError);
          std::optional<OrderTiming> whole =
              timeOrders(pipe, moved, durations, wholeError);
          ASSERT_EQ(retimed.has_value(), whole.has_value())
              << where << " move " << move << ": " << retimeError << " / "
              << wholeError;
          if (!whole) {
            ++deadlocks;
            continue;
          }
          EXPECT_EQ(retimed->makespan, whole->makespan)
              << where << " move " << move;
          EXPECT_NEAR(retimed->totalEnd, whole->totalEnd,
                      1e-9 * whole->totalEnd)
              << where << " move " << move;
        }
        // The reference is intact: the unmoved orders time as before.
        std::optional<OrderTiming> again =
            clock.retime(orders, 0, 0, 0, error);
        ASSERT_TRUE(again) << where;
        EXPECT_EQ(again->makespan, reference->makespan) << where;
        EXPECT_EQ(again->totalEnd, reference->totalEnd) << where;
        // Random moves put some pass before its own input.
        EXPECT_GT(deadlocks, 0) << where;
      }
}
