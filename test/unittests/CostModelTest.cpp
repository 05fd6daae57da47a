//===- CostModelTest.cpp - Cost models and stage partitioning -------------===//

#include "sluice/Analysis/CostModel.h"
#include "sluice/Schedule/StagePartition.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <functional>
#include <random>

using namespace mlir;
using namespace mlir::sluice;

namespace {

TEST(CostModel, UnitCostsAreDividedOverChunksAndSlices) {
  std::string error;
  std::optional<CostModel> unit = CostModel::parse("unit", error);
  ASSERT_TRUE(unit) << error;
  StageProfile stage;
  EXPECT_DOUBLE_EQ(unit->getComputeTime(stage, PassKind::F, 1, 0, 1, 1), 1.0);
  EXPECT_DOUBLE_EQ(unit->getComputeTime(stage, PassKind::BW, 1, 0, 1, 1), 2.0);
  EXPECT_DOUBLE_EQ(unit->getComputeTime(stage, PassKind::W, 1, 0, 2, 4), 0.125);
  EXPECT_DOUBLE_EQ(unit->getComputeTime(stage, PassKind::S, 1, 0, 1, 1), 0.0);
  EXPECT_DOUBLE_EQ(unit->getTransferTime(1 << 20), 0.0);
}

TEST(CostModel, ExplicitCosts) {
  std::string error;
  std::optional<CostModel> costs =
      CostModel::parse("F=1,B=1.5,W=0.5,S=0.2,T=0.2,comm=0.1", error);
  ASSERT_TRUE(costs) << error;
  StageProfile stage;
  EXPECT_DOUBLE_EQ(costs->getComputeTime(stage, PassKind::B, 1, 0, 1, 1), 1.5);
  EXPECT_DOUBLE_EQ(costs->getComputeTime(stage, PassKind::BW, 1, 0, 1, 1), 2.0)
      << "BW defaults to B + W";
  EXPECT_DOUBLE_EQ(costs->getComputeTime(stage, PassKind::T, 1, 0, 2, 1), 0.1);
  EXPECT_DOUBLE_EQ(costs->getTransferTime(123), 0.1);
}

struct BadSpec {
  const char *spec;
  const char *error;
};
void PrintTo(const BadSpec &bad, std::ostream *os) { *os << bad.spec; }
class CostModelErrorTest : public ::testing::TestWithParam<BadSpec> {};
TEST_P(CostModelErrorTest, NamesTheEntry) {
  std::string error;
  EXPECT_FALSE(CostModel::parse(GetParam().spec, error));
  EXPECT_EQ(error, GetParam().error);
}
INSTANTIATE_TEST_SUITE_P(
    Specs, CostModelErrorTest,
    ::testing::Values(
        BadSpec{"tpu", "unknown cost model 'tpu' (expected unit, a100, h100, "
                       "h200, v100, or costs such as F=1,B=1,W=1,S=0.2,T=0.2,"
                       "comm=0.1)"},
        BadSpec{"h100:memory=0", "'memory' of --costs h100 must be a positive "
                                 "number, got '0'"},
        BadSpec{"a100:network-bandwidth=fast",
                "'network-bandwidth' of --costs a100 must be a positive "
                "number, got 'fast'"},
        BadSpec{"F=1,B=-1", "cost 'B' must be non-negative, got -1"},
        BadSpec{"F=fast", "cost 'F' must be a number, got 'fast'"},
        BadSpec{"F=1,X=2", "unknown cost 'X' (expected F, B, W, BW, S, T, IF, "
                           "IB, comm or a2a)"}),
    [](const ::testing::TestParamInfo<BadSpec> &info) {
      // The spec, letters and digits only: "F=1,B=-1" -> "F1B1".
      std::string name;
      for (char c : std::string(info.param.spec))
        if (std::isalnum(static_cast<unsigned char>(c)))
          name += c;
      return name + "_" + std::to_string(info.index);
    });

TEST(CostModel, AnalyticTimeIsFlopsOverAchievableThroughput) {
  std::string error;
  std::optional<CostModel> h100 = CostModel::parse("h100", error);
  ASSERT_TRUE(h100) << error;
  StageProfile stage;
  stage.hidden = 1024;
  stage.seqLen = 2048;
  TransformerShape layer;
  layer.hidden = 1024;
  layer.heads = 16;
  layer.kvHeads = 16;
  layer.headDim = 64;
  layer.ffn = 4096;
  stage.layers = {layer, layer};
  const HardwareProfile &hw = *h100->getHardware();
  // 2048 tokens: compute-bound; each layer adds its fixed overhead.
  double flops = stage.getPassFlops(PassKind::F, 2048, 0);
  EXPECT_DOUBLE_EQ(h100->getComputeTime(stage, PassKind::F, 2048, 0, 1, 1),
                   flops / (hw.peakFlops * hw.efficiency) +
                       2 * hw.layerOverhead);
  // Short slices do not fill the GPU: below the saturation point a pass
  // takes about as long as at it -- TeraPipe's Figure 3, flat for short
  // slices (only attention, which grows with the tokens, differs).
  double saturated = h100->getComputeTime(
      stage, PassKind::F, int64_t(hw.saturationTokens), 0, 1, 1);
  double one = h100->getComputeTime(stage, PassKind::F, 1, 0, 1, 1);
  EXPECT_NEAR(h100->getComputeTime(stage, PassKind::F, 8, 0, 1, 1), one,
              0.001 * one);
  EXPECT_LE(one, saturated);
  EXPECT_GE(one, 0.95 * saturated);
  // And a pass never streams its weights faster than memory bandwidth: a
  // wide layer with a short slice is bound by its weights (bf16 here).
  StageProfile wide = stage;
  TransformerShape big = layer;
  big.hidden = 8192;
  big.headDim = 512;
  big.ffn = 32768;
  wide.hidden = 8192;
  wide.layers = {big};
  wide.microBatch = 1;
  double bytes = double(getParameterCount(big) * 2);
  EXPECT_GE(h100->getComputeTime(wide, PassKind::F, 1, 0, 1, 1),
            bytes / hw.memoryBandwidth + hw.layerOverhead);
  // F + B + W is three forwards; BW is B + W.
  EXPECT_DOUBLE_EQ(stage.getPassFlops(PassKind::F, 512, 256) +
                       stage.getPassFlops(PassKind::B, 512, 256) +
                       stage.getPassFlops(PassKind::W, 512, 256),
                   3 * stage.getPassFlops(PassKind::F, 512, 256));
  EXPECT_DOUBLE_EQ(stage.getPassFlops(PassKind::BW, 512, 256),
                   stage.getPassFlops(PassKind::B, 512, 256) +
                       stage.getPassFlops(PassKind::W, 512, 256));
  EXPECT_DOUBLE_EQ(h100->getTransferTime(50'000'000),
                   hw.linkLatency + 50e6 / hw.linkBandwidth);
}

TEST(CostModel, UniformSlicesCoverTheSequence) {
  EXPECT_EQ(getUniformSlices(16, 4), (std::vector<int64_t>{4, 4, 4, 4}));
  EXPECT_EQ(getUniformSlices(10, 4), (std::vector<int64_t>{3, 3, 2, 2}));
}

// Redis: the DP's bottleneck equals the best over every contiguous cut.
TEST(StagePartition, ComputeBalanceIsOptimalAgainstBruteForce) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> cost(0.5, 2.0);
  for (int trial = 0; trial < 200; ++trial) {
    sched::PartitionProblem problem;
    int layers = 2 + trial % 9;
    for (int i = 0; i < layers; ++i)
      problem.layerCosts.push_back(cost(rng));
    problem.firstExtra = cost(rng) * (trial % 3);
    problem.lastExtra = cost(rng) * (trial % 4);
    problem.stages = 1 + trial % std::min(layers + 1, 5);
    std::string error;
    auto counts =
        sched::partitionLayers(problem, sched::Balance::Compute, error);
    ASSERT_TRUE(succeeded(counts)) << error;
    auto bottleneck = [&](const std::vector<int> &c) {
      double worst = 0;
      int at = 0;
      for (int s = 0; s < problem.stages; ++s) {
        double sum = 0;
        for (int i = 0; i < c[s]; ++i)
          sum += problem.layerCosts[at++];
        if (s == 0)
          sum += problem.firstExtra;
        if (s == problem.stages - 1)
          sum += problem.lastExtra;
        worst = std::max(worst, sum);
      }
      return worst;
    };
    // Enumerate every admissible cut.
    double best = 1e300;
    std::vector<int> c(problem.stages);
    std::function<void(int, int)> enumerate = [&](int s, int left) {
      if (s == problem.stages - 1) {
        if (problem.stages > 1 || left >= 0) {
          c[s] = left;
          best = std::min(best, bottleneck(c));
        }
        return;
      }
      int minLayers = s == 0 ? 0 : 1;
      for (int n = minLayers; n <= left; ++n) {
        c[s] = n;
        enumerate(s + 1, left - n);
      }
    };
    enumerate(0, layers);
    int total = 0;
    for (int n : *counts)
      total += n;
    EXPECT_EQ(total, layers);
    EXPECT_DOUBLE_EQ(bottleneck(*counts), best) << "trial " << trial;
  }
}

TEST(StagePartition, UniformGivesSpareLayersAfterTheEmbeddingStage) {
  sched::PartitionProblem problem;
  problem.layerCosts.assign(10, 1.0);
  problem.stages = 4;
  std::string error;
  auto counts = sched::partitionLayers(problem, sched::Balance::Uniform, error);
  ASSERT_TRUE(succeeded(counts));
  EXPECT_EQ(*counts, (std::vector<int>{2, 3, 3, 2}));
  problem.stages = 11;
  EXPECT_TRUE(
      failed(sched::partitionLayers(problem, sched::Balance::Uniform, error)));
  EXPECT_EQ(error,
            "11 stages need at least 11 transformer layers, the model has 10");
}

} // namespace

TEST(CostModel, TensorParallelCellsScaleTheHardware) {
  std::string error;
  std::optional<CostModel> one = CostModel::parse("v100", error);
  std::optional<CostModel> eight = CostModel::parse("v100x8", error);
  ASSERT_TRUE(one && eight) << error;
  EXPECT_DOUBLE_EQ(eight->getHardware()->peakFlops,
                   8 * one->getHardware()->peakFlops);
  EXPECT_DOUBLE_EQ(eight->getHardware()->memoryBandwidth,
                   8 * one->getHardware()->memoryBandwidth);
  EXPECT_DOUBLE_EQ(eight->getHardware()->linkLatency,
                   one->getHardware()->linkLatency);
  EXPECT_FALSE(CostModel::parse("v100x0", error));
  EXPECT_FALSE(CostModel::parse("v100y8", error));
}

namespace {
/// A stage of two Llama-shaped layers (h 64, 8 heads of 8, 2 key/value
/// heads, SwiGLU 160) in bf16.
StageProfile recomputeStage(RecomputeKind recompute) {
  StageProfile stage;
  TransformerShape layer;
  layer.hidden = 64;
  layer.heads = 8;
  layer.kvHeads = 2;
  layer.headDim = 8;
  layer.ffn = 160;
  layer.mlp = ::sluice::rt::MlpType::SwiGlu;
  stage.layers = {layer, layer};
  stage.hidden = 64;
  stage.seqLen = 128;
  stage.microBatch = 2;
  stage.dtypeBytes = 2;
  stage.recompute = recompute;
  return stage;
}
// Issue 38: the default split moves layers off a costly head, and only
// then. GPT-2-like: six layers of 1, a head of 4.9 on the last stage of 2.
TEST(StagePartition, AutoBalancesACostlyHeadAndOnlyThen) {
  sched::PartitionProblem problem;
  problem.layerCosts.assign(6, 1.0);
  problem.firstExtra = 0.01;
  problem.lastExtra = 4.9;
  problem.stages = 2;
  std::string error;
  auto counts = sched::partitionLayers(problem, sched::Balance::Auto, error);
  ASSERT_TRUE(succeeded(counts)) << error;
  // Uniform's {3, 3} costs 3 and 7.9; {5, 1} costs 5 and 5.9.
  EXPECT_EQ(*counts, (std::vector<int>{5, 1}));
  // Compute may leave the last stage without a layer; auto never does.
  problem.lastExtra = 9;
  counts = sched::partitionLayers(problem, sched::Balance::Auto, error);
  ASSERT_TRUE(succeeded(counts));
  EXPECT_EQ(*counts, (std::vector<int>{5, 1}));
  counts = sched::partitionLayers(problem, sched::Balance::Compute, error);
  ASSERT_TRUE(succeeded(counts));
  EXPECT_EQ(*counts, (std::vector<int>{6, 0}));
  // A head of a fraction of a layer: the uniform split stays, its spare
  // layer after the embedding's stage as Uniform places it ({2, 3, 2}:
  // no cut makes the costliest stage, 3, cheaper).
  problem.layerCosts.assign(7, 1.0);
  problem.lastExtra = 0.3;
  problem.stages = 3;
  counts = sched::partitionLayers(problem, sched::Balance::Auto, error);
  ASSERT_TRUE(succeeded(counts));
  EXPECT_EQ(*counts, (std::vector<int>{2, 3, 2}));
  // But a head of 0.3 on 5 layers over 2 stages: {2, 3} costs 3.3 and
  // {3, 2} 3.01, 9% less: moved.
  problem.layerCosts.assign(5, 1.0);
  problem.stages = 2;
  counts = sched::partitionLayers(problem, sched::Balance::Auto, error);
  ASSERT_TRUE(succeeded(counts));
  EXPECT_EQ(*counts, (std::vector<int>{3, 2}));
  // Less than kAutoGain to win: uniform. With a head of 1.2, {3, 3} costs
  // 4.2 and {4, 2} 4.01 (4.5% cheaper): still uniform.
  problem.layerCosts.assign(6, 1.0);
  problem.lastExtra = 1.2;
  counts = sched::partitionLayers(problem, sched::Balance::Auto, error);
  ASSERT_TRUE(succeeded(counts));
  EXPECT_EQ(*counts, (std::vector<int>{3, 3}));
  // Every stage keeps a layer: as many stages as layers is the least.
  problem.stages = 7;
  EXPECT_TRUE(
      failed(sched::partitionLayers(problem, sched::Balance::Auto, error)));
}

} // namespace

// Activation recomputation (Li, LLM Systems): per
// token and layer, a stage without recomputation keeps
//   (4h + (H + 2KV) d + H d + 3 ffn) bytes-per-element + 4 H (fp32 stats);
// selective drops the attention output (H d), its statistics (4 H) and
// the MLP activation (ffn); full keeps only the stage's input, h.
TEST(CostModel, RecomputedActivationsMatchTheirClosedForms) {
  int64_t tokens = 128, rows = 2, h = 64, H = 8, KV = 2, d = 8, f = 160;
  double none = double((4 * h + (H + 2 * KV) * d + H * d + 3 * f) * 2 + 4 * H);
  double selective = double((4 * h + (H + 2 * KV) * d + 2 * f) * 2);
  double full = double(h * 2);
  double perTokenLayers = 2.0 * double(tokens * rows);
  EXPECT_DOUBLE_EQ(
      recomputeStage(RecomputeKind::none).getActivationBytes(tokens),
      none * perTokenLayers);
  EXPECT_DOUBLE_EQ(
      recomputeStage(RecomputeKind::selective).getActivationBytes(tokens),
      selective * perTokenLayers);
  EXPECT_DOUBLE_EQ(
      recomputeStage(RecomputeKind::full).getActivationBytes(tokens),
      full * double(tokens * rows));
  StageProfile embeds = recomputeStage(RecomputeKind::full);
  embeds.hasEmbedding = true;
  EXPECT_DOUBLE_EQ(embeds.getActivationBytes(tokens), 0.0)
      << "a stage that embeds looks its tokens up again";
}

// And the time: B (and BW) add the forward once more (full), or the
// attention core, 4 H d (t p + t (t + 1) / 2) FLOPs per row and layer
// (selective); F and W are unchanged.
TEST(CostModel, RecomputedFlopsMatchTheirClosedForms) {
  StageProfile none = recomputeStage(RecomputeKind::none);
  StageProfile selective = recomputeStage(RecomputeKind::selective);
  StageProfile full = recomputeStage(RecomputeKind::full);
  int64_t t = 64, p = 32;
  double forward = none.getPassFlops(PassKind::F, t, p);
  double attention = 2.0 * 2.0 * 4.0 * 64.0 *
                     (double(t * p) + double(t) * double(t + 1) / 2.0);
  for (PassKind kind : {PassKind::F, PassKind::W}) {
    EXPECT_DOUBLE_EQ(full.getPassFlops(kind, t, p),
                     none.getPassFlops(kind, t, p));
    EXPECT_DOUBLE_EQ(selective.getPassFlops(kind, t, p),
                     none.getPassFlops(kind, t, p));
  }
  for (PassKind kind : {PassKind::B, PassKind::BW}) {
    EXPECT_DOUBLE_EQ(full.getPassFlops(kind, t, p),
                     none.getPassFlops(kind, t, p) + forward);
    EXPECT_DOUBLE_EQ(selective.getPassFlops(kind, t, p),
                     none.getPassFlops(kind, t, p) + attention);
  }
}

TEST(CostModel, OverridesReplaceThePresetsNode) {
  std::string error;
  std::optional<CostModel> model = CostModel::parse(
      "h200:gpus-per-node=4,node-bandwidth=300,network-bandwidth=25,"
      "node-latency=2,network-latency=12,efficiency=0.4,memory=96",
      error);
  ASSERT_TRUE(model) << error;
  const HardwareProfile *hw = model->getHardware();
  ASSERT_TRUE(hw);
  EXPECT_EQ(hw->nodeGpus, 4);
  EXPECT_DOUBLE_EQ(hw->nodeBandwidth, 300e9);
  EXPECT_DOUBLE_EQ(hw->linkBandwidth, 25e9);
  EXPECT_DOUBLE_EQ(hw->nodeLatency, 2e-6);
  EXPECT_DOUBLE_EQ(hw->linkLatency, 12e-6);
  EXPECT_DOUBLE_EQ(hw->efficiency, 0.4);
  EXPECT_DOUBLE_EQ(hw->memoryGiB, 96);
  // The rest is the preset's: the H200's HBM3e.
  EXPECT_DOUBLE_EQ(hw->memoryBandwidth, 4.8e12);
  EXPECT_EQ(model->getNodeDevices(), 4);
  // A transfer between nodes now takes the network's latency and rate.
  EXPECT_DOUBLE_EQ(model->getTransferTime(25'000'000, LinkKind::network),
                   12e-6 + 1e-3);
}
