//===- OverlapTest.cpp - Overlapped pairs and DualPipeV -------------------===//
//
// The pair rule of the simulator (getPairTime) at its corners, DualPipeV's
// order against the phases DeepSeek's repository and PyTorch's
// ScheduleDualPipeV write down, its memory (p + 1/2 microbatches of a
// device's stages, DeepSeek-AI 2024's "PP + 1" chunks), the verifier's
// rules for overlapped groups, and the simulated gain of the overlap.

#include "sluice/Analysis/Simulator.h"
#include "sluice/Schedule/Schedules.h"
#include "sluice/Schedule/VShapeOrders.h"
#include "sluice/Schedule/Verifier.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace mlir::sluice;
using namespace mlir::sluice::sched;

namespace {

constexpr double kEps = 1e-12;

TEST(PairTime, AllComputeIsTheSerialSum) {
  EXPECT_NEAR(getPairTime({3, 0}, {5, 0}, 4), 8.0, kEps);
}

TEST(PairTime, AllCommunicationIsTheSerialSum) {
  // One communication stream: nothing to overlap with.
  EXPECT_NEAR(getPairTime({0, 2}, {0, 7}, 3), 9.0, kEps);
}

// Figure 4's point: with equal compute and all-to-all, the two chains'
// parts interleave and most of the communication hides (the counts'
// exchange right before the copies leave is the forward's one stretch of
// communication with no compute of its own between).
TEST(PairTime, EqualHalvesOverlapMost) {
  for (int layers : {1, 4, 16}) {
    double t = getPairTime({1, 1}, {1, 1}, layers);
    EXPECT_GE(t, 2.0 - kEps);
    EXPECT_LE(t, 0.75 * 4.0) << layers << " layers";
  }
  // A full backward's W is compute after its B on the same lane: more
  // to hide the forward's all-to-alls under.
  PassSplit withWeight{1, 1, 1};
  EXPECT_LE(getPairTime({1, 1}, withWeight, 4),
            getPairTime({1, 1}, {1, 1}, 4) + 1.0 + kEps);
  EXPECT_GE(getPairTime({1, 1}, withWeight, 4), 3.0 - kEps);
}

// A pass's own parts stay in order: a short backward cannot shorten a
// long forward, whose compute and all-to-alls alternate.
TEST(PairTime, APasssOwnChainStaysSerial) {
  for (int layers : {1, 16}) {
    double t = getPairTime({1, 1}, {0.2, 0.2}, layers);
    EXPECT_GE(t, 2.0 - kEps);
    EXPECT_LE(t, 2.4 + kEps);
  }
}

TEST(PairTime, NeverBelowEitherStreamNorAboveTheSerialSum) {
  for (double cf : {0.0, 0.5, 2.0})
    for (double af : {0.0, 0.3, 1.5})
      for (double cb : {0.0, 1.0, 4.0})
        for (double ab : {0.0, 0.7, 3.0})
          for (int layers : {1, 2, 7})
            for (double w : {0.0, 0.5}) {
              double t = getPairTime({cf, af}, {cb, ab, w}, layers);
              EXPECT_GE(t + kEps, std::max(cf + cb + w, af + ab));
              EXPECT_LE(t, cf + af + cb + ab + w + kEps);
            }
}

Pipeline dualPipeline(int p, int m) {
  const ScheduleInfo *info = lookupSchedule("dualpipev");
  EXPECT_TRUE(info);
  return makeSchedulePipeline(*info, p, m, 2, 1);
}

std::string spell(const std::vector<Work> &order,
                  const std::vector<char> &pairs) {
  std::string text;
  bool open = false;
  for (size_t i = 0; i < order.size(); ++i) {
    const Work &w = order[i];
    if (!text.empty())
      text += ' ';
    if (pairs[i] && !open) {
      text += '[';
      open = true;
    }
    text += std::string(stringifyPassKind(w.kind)) +
            std::to_string(w.stage) + "." + std::to_string(w.microbatch);
    if (open && !pairs[i]) {
      text += ']';
      open = false;
    }
  }
  return text;
}

// p = 2, m = 4 worked by hand from the eight phases (DualPipeV.cpp):
// device 0 holds stages 0 and 3, device 1 stages 1 and 2. A bracket is
// an overlapped group: F beside a full backward (B then its W).
TEST(DualPipeV, OrderFollowsThePhases) {
  Pipeline pipe = dualPipeline(2, 4);
  std::optional<OverlappedOrders> dual = getDualPipeVOrders(pipe);
  ASSERT_TRUE(dual);
  EXPECT_EQ(spell(dual->orders[0], dual->pairs[0]),
            "F0.0 F0.1 F0.2 F3.0 B3.0 W3.0 F3.1 [F0.3 B3.1 W3.1] "
            "[F3.2 B0.0 W0.0] B3.2 W3.2 [F3.3 B0.1 W0.1] B3.3 W3.3 B0.2 "
            "W0.2 B0.3 W0.3");
  EXPECT_EQ(spell(dual->orders[1], dual->pairs[1]),
            "F1.0 F2.0 F1.1 F2.1 F1.2 B2.0 W2.0 [F2.2 B1.0 W1.0] "
            "[F1.3 B2.1 W2.1] [F2.3 B1.1 W1.1] B2.2 W2.2 B1.2 W1.2 B2.3 "
            "B1.3 W2.3 W1.3");
}

/// Builds, verifies and simulates dualpipev (or zb-v) on p devices, with
/// F = B = W = 1 per stage of compute and `a2a` of each F's and B's time
/// expert all-to-all on top.
Simulation simulateSchedule(llvm::StringRef name, int p, int m, double a2a) {
  const ScheduleInfo *info = lookupSchedule(name);
  Pipeline pipe = makeSchedulePipeline(*info, p, m, 2, 1);
  auto compute = [&](const Work &w) {
    return 1.0 + (w.kind == PassKind::W ? 0.0 : a2a);
  };
  auto comm = [&](const Work &w) {
    return w.kind == PassKind::W ? 0.0 : a2a;
  };
  auto zero = [](const Work &) { return 0.0; };
  auto one = [](const Work &) { return 1.0; };
  auto layers = [](int) { return 8; };
  std::string error;
  FailureOr<Program> program =
      buildSchedule(*info, pipe, Durations{compute, 0.0}, error);
  EXPECT_TRUE(succeeded(program)) << error;
  std::optional<Violation> violation = verifyProgram(pipe, *program);
  EXPECT_FALSE(violation) << violation->message;
  SimulationCosts costs{compute, zero, one, one};
  costs.communication = comm;
  costs.sparseLayers = layers;
  FailureOr<Simulation> sim = simulate(pipe, *program, costs, error);
  EXPECT_TRUE(succeeded(sim)) << error;
  return *sim;
}

// DeepSeek's table: DualPipeV holds PP + 1 chunks' activations, PP being
// its 2p stages: p + 1/2 of Sluice's units (a device's two stages), half
// a microbatch more than ZB-V's p.
TEST(DualPipeV, HoldsPPlusAHalfMicrobatches) {
  for (int p : {2, 4, 8})
    for (int m : {2 * p, 3 * p, 4 * p}) {
      Simulation sim = simulateSchedule("dualpipev", p, m, 0.0);
      double peak = 0;
      for (const DeviceStatistics &d : sim.devices)
        peak = std::max(peak, d.peakActivationUnitsUntilW);
      // Each F holds 1 unit of its stage (one of the device's two).
      EXPECT_NEAR(peak / 2, p + 0.5, kEps) << "p=" << p << " m=" << m;
    }
}

// With no all-to-all the pairs buy nothing: DualPipeV is not faster than
// ZB-V (the measurement: 0.3-4.7% slower on dense models); with
// all-to-all as long as the compute it overlaps, it is.
TEST(DualPipeV, TheOverlapIsTheGain) {
  for (int p : {4, 8}) {
    int m = 4 * p;
    double dense = simulateSchedule("dualpipev", p, m, 0.0).stepTime;
    double zbvDense = simulateSchedule("zb-v", p, m, 0.0).stepTime;
    EXPECT_GE(dense, zbvDense - kEps) << "p=" << p;
    double moe = simulateSchedule("dualpipev", p, m, 1.0).stepTime;
    double zbvMoe = simulateSchedule("zb-v", p, m, 1.0).stepTime;
    EXPECT_LT(moe, 0.95 * zbvMoe) << "p=" << p;
  }
}

TEST(DualPipeV, RefusesTooFewMicrobatches) {
  const ScheduleInfo *info = lookupSchedule("dualpipev");
  Pipeline pipe = dualPipeline(4, 7);
  EXPECT_EQ(checkPipeline(*info, pipe),
            "schedule 'dualpipev' needs at least 2 * pp = 8 microbatches, "
            "got 7");
}

// The verifier's rules for groups.
TEST(OverlappedGroups, VerifierChecksTheirShape) {
  Pipeline pipe = dualPipeline(2, 4);
  auto unit = [&](const Work &w) { return getUnitDuration(pipe, w); };
  std::string error;
  FailureOr<Program> program = buildSchedule(
      *lookupSchedule("dualpipev"), pipe, Durations{unit, 0.0}, error);
  ASSERT_TRUE(succeeded(program)) << error;
  ASSERT_FALSE(verifyProgram(pipe, *program));
  // Device 0's first group: [F0.3 B3.1 W3.1].
  std::vector<Instr> &instrs = program->devices[0];
  auto at = std::find_if(instrs.begin(), instrs.end(),
                         [](const Instr &i) { return i.paired; });
  ASSERT_NE(at, instrs.end());
  {
    // A pass paired with nothing: the last instruction.
    Program broken = *program;
    broken.devices[0].back().paired = true;
    std::optional<Violation> v = verifyProgram(pipe, broken);
    ASSERT_TRUE(v);
    EXPECT_NE(v->message.find("with nothing"), std::string::npos)
        << v->message;
  }
  // Marks `first` paired on `device` (`second` right after it) and
  // returns the verifier's message.
  auto pairAndVerify = [&](int device, const Work &first,
                           const Work &second) -> std::string {
    Program broken = *program;
    std::vector<Instr> &list = broken.devices[device];
    auto f = std::find_if(list.begin(), list.end(), [&](const Instr &i) {
      return i.kind == InstrKind::Exec && i.work == first;
    });
    if (f == list.end() || f + 1 == list.end() || (f + 1)->work != second)
      return "the test's passes are not adjacent";
    f->paired = true;
    std::optional<Violation> v = verifyProgram(pipe, broken);
    return v ? v->message : "no violation";
  };
  // Two forwards are not a group.
  std::string twoForwards =
      pairAndVerify(1, {PassKind::F, 1, 0, 0}, {PassKind::F, 2, 0, 0});
  EXPECT_NE(twoForwards.find("one F beside one backward"), std::string::npos)
      << twoForwards;
  // The last stage's F3.0 and B3.0 are adjacent, but B needs F's result.
  std::string own =
      pairAndVerify(0, {PassKind::F, 3, 0, 0}, {PassKind::B, 3, 0, 0});
  EXPECT_NE(own.find("with its own backward"), std::string::npos) << own;
}

} // namespace
