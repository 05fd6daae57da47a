//===- SessionTest.cpp - The training session as a library ----------------===//
//
// Session (runtime/session/Session.h) in-process, as a benchmark or a
// tuner uses it: steps reported through the hook, failures returned as
// Outcomes naming the problem (never an exit), and a run resumed from the
// session's own checkpoint continuing the uninterrupted one exactly.
//
//===----------------------------------------------------------------------===//

#include "Session.h"
#include "HostMemory.h"
#include "Progress.h"
#include "MpiCommunicator.h"
#include "RankBackend.h"
#include "TinyPlans.h"

#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <unistd.h>

using namespace sluice::rt;
namespace fs = std::filesystem;

namespace {

class SessionTest : public ::testing::Test {
protected:
  void SetUp() override {
    dir = fs::temp_directory_path() /
          ("sluice-session-test-" + std::to_string(getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    std::ofstream(dir / "plan.json") << planReusingASentSlot();
  }
  void TearDown() override { fs::remove_all(dir); }

  /// The unpartitioned run of the tiny plan, in this one process.
  SessionOptions options(int64_t steps) const {
    SessionOptions o;
    o.planPath = (dir / "plan.json").string();
    o.reference = true;
    o.steps = steps;
    o.logEvery = 1000;
    return o;
  }

  /// The losses `o` trains to, through the hook.
  std::vector<double> train(const SessionOptions &o,
                            int64_t *stepsDone = nullptr) {
    std::unique_ptr<Session> session;
    Outcome opened = Session::open(o, world, session);
    EXPECT_TRUE(bool(opened)) << opened.getReport();
    if (!opened)
      return {};
    std::vector<double> losses;
    session->setStepHook([&](const StepRecord &r) {
      EXPECT_EQ(r.step, session->getStepsDone() + 1);
      losses.push_back(r.loss);
    });
    Outcome trained = session->train();
    EXPECT_TRUE(bool(trained)) << trained.getReport();
    EXPECT_EQ(losses, session->getResult().losses);
    if (stepsDone)
      *stepsDone = session->getStepsDone();
    return losses;
  }

  MpiCommunicator world;
  fs::path dir;
};

TEST_F(SessionTest, TrainsAndReportsEveryStep) {
  int64_t done = 0;
  std::vector<double> losses = train(options(3), &done);
  ASSERT_EQ(losses.size(), 3u);
  EXPECT_EQ(done, 3);
  for (double loss : losses)
    EXPECT_TRUE(std::isfinite(loss) && loss > 0) << loss;
  // The updates change the model: the same batch order, other losses.
  EXPECT_NE(losses[0], losses[2]);
}

TEST_F(SessionTest, TheSeedDecidesTheRun) {
  SessionOptions a = options(2), b = options(2);
  b.seed = 7;
  EXPECT_EQ(train(a), train(a));
  EXPECT_NE(train(a), train(b));
}

TEST_F(SessionTest, ResumesItsOwnCheckpointExactly) {
  std::vector<double> whole = train(options(3));
  SessionOptions first = options(2);
  first.saveDir = (dir / "checkpoint").string();
  train(first);
  // --steps is the whole run's: the checkpoint's 2 and 1 more.
  SessionOptions rest = options(3);
  rest.loadDir = first.saveDir;
  int64_t done = 0;
  std::vector<double> resumed = train(rest, &done);
  EXPECT_EQ(done, 3);
  ASSERT_EQ(resumed.size(), 1u);
  ASSERT_EQ(whole.size(), 3u);
  EXPECT_EQ(resumed[0], whole[2]);
}

TEST_F(SessionTest, BadOptionsComeBackAsOneReport) {
  SessionOptions o = options(-1);
  std::unique_ptr<Session> session;
  Outcome opened = Session::open(o, world, session);
  ASSERT_FALSE(bool(opened));
  EXPECT_FALSE(opened.isThisRankOnly());
  EXPECT_EQ(opened.getReport(), "--steps must not be negative, got -1");
}

TEST_F(SessionTest, AMissingPlanIsNamed) {
  SessionOptions o = options(1);
  o.planPath = (dir / "nothing.json").string();
  std::unique_ptr<Session> session;
  Outcome opened = Session::open(o, world, session);
  ASSERT_FALSE(bool(opened));
  EXPECT_NE(opened.getReport().find("nothing.json"), std::string::npos)
      << opened.getReport();
}

/// Kernels that run nothing and lack FP8 GEMMs: a backend without a
/// kernel, as a new one may be.
class NoFp8Kernels final : public Kernels {
public:
#define SLUICE_KERNEL(NAME, PARAMS, ARGS, STAGING)                             \
  void NAME PARAMS override {}
#include "Kernels.def"
  bool supports(Id id, const Precision &) const override {
    return id != Id::gemmFp8;
  }
};

// The MFU's peak is the run's precision's: fp8's for fp8 (fp32's was used,
// and fp8 runs printed an MFU of 384-519%), none on an unknown device.
TEST(Progress, PeakFlopsFollowThePrecision) {
  const std::string h100 = "NVIDIA H100 80GB HBM3";
  EXPECT_EQ(getKnownPeakFlops(h100, "fp8"), 1978.9e12);
  EXPECT_EQ(getKnownPeakFlops(h100, "bf16"), 989.4e12);
  EXPECT_EQ(getKnownPeakFlops(h100, "fp32"), 66.9e12);
  EXPECT_EQ(getKnownPeakFlops("NVIDIA A100-SXM4-80GB", "fp8"), 312e12);
  EXPECT_EQ(getKnownPeakFlops("cpu", "fp8"), 0.0);
}

// The fp8 precision on a GPU keeps each projection weight's FP8 copies for
// a step (Fp8Operand::steady): one byte an element per layout, and a
// 256-byte scale slot and alignment per copy, counted by the GPU memory
// check. The model's one layer: QKV 16 x 48, out 16 x 16, gate, up and
// down 16 x 32 each -- 2560 elements in 5 tensors.
TEST(DeviceMemory, Fp8KeepsTwoBytesAProjectionWeightElement) {
  Plan plan;
  plan.model.hidden = 16;
  plan.model.seqLen = 8;
  plan.model.microBatch = 1;
  LayerConfig embedding, layer, output;
  embedding.kind = LayerKind::Embedding;
  embedding.vocab = 11;
  layer.kind = LayerKind::Transformer;
  layer.heads = layer.kvHeads = 2;
  layer.headDim = 8;
  layer.ffn = 32;
  ASSERT_TRUE(parseMlpType("swiglu", layer.mlp));
  output.kind = LayerKind::Output;
  output.vocab = 11;
  plan.model.layers = {embedding, layer, output};
  plan.precision = Precision::bf16();
  EXPECT_EQ(getFp8WeightCopyBytes(plan, -1), 0);
  plan.precision = Precision::fp8();
  EXPECT_EQ(getFp8WeightCopyBytes(plan, -1), 2 * (2560 + 5 * 512));
}

TEST(KernelSupport, APlanIsRefusedByTheKernelItNeeds) {
  NoFp8Kernels kernels;
  Plan plan;
  plan.precision = Precision::bf16();
  EXPECT_EQ(session::findUnsupportedKernel(plan, kernels), "");
  plan.precision = Precision::fp8();
  EXPECT_EQ(session::findUnsupportedKernel(plan, kernels), "gemmFp8 (fp8)");
}

TEST(KernelSupport, APlanNeedsOnlyTheKernelsOfWhatItHas) {
  auto needs = [](const Plan &plan, Kernels::Id id) {
    std::vector<Kernels::Id> needed = session::getKernelsNeeded(plan);
    return std::find(needed.begin(), needed.end(), id) != needed.end();
  };
  Plan plan;
  EXPECT_TRUE(needs(plan, Kernels::Id::gemm));
  EXPECT_TRUE(needs(plan, Kernels::Id::crossEntropyForward));
  EXPECT_FALSE(needs(plan, Kernels::Id::gemmFp8));
  EXPECT_FALSE(needs(plan, Kernels::Id::softcap));
  EXPECT_FALSE(needs(plan, Kernels::Id::shardLoss));
  plan.model.finalSoftcap = 30;
  plan.vocabulary.output.present = true;
  EXPECT_TRUE(needs(plan, Kernels::Id::softcap));
  EXPECT_TRUE(needs(plan, Kernels::Id::shardLoss));
  EXPECT_FALSE(needs(plan, Kernels::Id::crossEntropyForward));
  EXPECT_EQ(std::string(Kernels::getName(Kernels::Id::adamUpdate)),
            "adamUpdate");
}

} // namespace

/// An MPI program: under the sanitizer build, LeakSanitizer would report
/// at exit what Open MPI keeps for the process's life, from plugins
/// MPI_Finalize unloads (stacks no suppression can name); sluice-run's
/// tests turn it off the same way (test/runtime/lit.local.cfg,
/// docs/testing.md). Every other ASan and UBSan check stays on.
extern "C" int __lsan_is_turned_off() { return 1; }

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  int result = RUN_ALL_TESTS();
  MPI_Finalize();
  return result;
}
