//===- ZeroMemoryTest.cpp - ZeRO 0-3 and cp at Llama-3-8B, closed form ---===//
//
// The planner's per-device bytes of training state (PipelineCosts over
// TrainingState.h) for every ZeRO stage, and of activations for context
// parallelism 1, 2 and 4, at Llama-3-8B's size, against a
// count written here from the model's published shape alone: 32 layers of
// hidden 4096, 32 query and 8 key/value heads of 128, a SwiGLU of 14336, a
// 128256-token vocabulary, untied, bf16 (fp32 master weights, Adam).
// Rajbhandari et al., 2020, section 5: Pos (1), Pos+g (2), Pos+g+p (3);
// docs/design/zero-and-context-parallelism.md for what a pipeline adds --
// the transient state of the device's largest layer.
//
//===----------------------------------------------------------------------===//

#include "sluice/Analysis/CostModel.h"
#include "sluice/Analysis/LayerCost.h"
#include "sluice/Import/HFConfig.h"
#include "sluice/PipelineIR/PipelineIR.h"
#include "sluice/SluiceOps.h"
#include "sluice/Transforms/Passes.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/MemoryBuffer.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace mlir::sluice;
namespace rt = ::sluice::rt;

namespace {

// Llama-3-8B, counted by hand.
constexpr int64_t kHidden = 4096, kLayers = 32, kVocab = 128256;
constexpr int64_t kKeyValue = 8 * 128, kFfn = 14336;
constexpr int64_t kLayer = 2 * kHidden * kHidden         // q, o
                           + 2 * kHidden * kKeyValue     // k, v
                           + 3 * kHidden * kFfn          // gate, up, down
                           + 2 * kHidden;                // two RMSNorms
constexpr int64_t kEmbedding = kVocab * kHidden;
constexpr int64_t kOutput = kVocab * kHidden + kHidden; // and the final norm
constexpr int64_t kModel = kLayers * kLayer + kEmbedding + kOutput;
static_assert(kModel == 8030261248, "Meta's published count");

/// Bytes per parameter, by hand: fp32 weights (4), gradients (4), two
/// moments (8), the bf16 working copy (2).
struct Expected {
  int64_t params, largest, dp;
  int64_t part() const { return (params + dp - 1) / dp; }
  /// The scratch for a layer's reduce-scattered part (fp32).
  int64_t scratch() const { return (largest + dp - 1) / dp * 4; }
  int64_t at(int zero, rt::Reshard reshard) const {
    switch (zero) {
    case 0:
      return params * (4 + 4 + 8 + 2);
    case 1:
      return params * (4 + 4 + 2) + part() * (8 + 4);
    case 2:
      // The gradient accumulator sharded; one layer's fp32 gradient
      // before its reduce-scatter.
      return params * (4 + 2) + part() * (8 + 4) + largest * 4 + scratch();
    default:
      // Everything sharded; two bf16 layers gathered and one layer's
      // gradient, or the whole bf16 copy kept for the step.
      if (reshard == rt::Reshard::EveryPass)
        return part() * 16 + largest * (2 * 2 + 4) + scratch();
      return params * 2 + part() * 16 + largest * 4 + scratch();
    }
  }
};

class ZeroMemoryTest : public ::testing::Test {
protected:
  ZeroMemoryTest() {
    std::string path =
        std::string(SLUICE_SOURCE_DIR) + "/examples/llama-3-8b/config.json";
    auto buffer = llvm::MemoryBuffer::getFile(path);
    EXPECT_TRUE(bool(buffer)) << "cannot read " << path;
    if (buffer)
      module = importHFConfig((*buffer)->getBuffer(), path, &context);
  }

  /// The model over `pp` devices, split backward, `m` microbatches.
  std::optional<sched::Pipeline> partition(int64_t pp, int64_t m) {
    if (!module)
      return std::nullopt;
    model = *module->getOps<ModelOp>().begin();
    EXPECT_EQ(getModelParameterCount(model), kModel) << "the import";
    StagePartitionOptions opts;
    opts.pp = pp;
    if (failed(partitionStages(model, opts)) ||
        failed(splitPasses(model, /*split=*/true, RecomputeKind::none)))
      return std::nullopt;
    FailureOr<sched::Pipeline> pipeline = getPipeline(model, m, 1);
    if (failed(pipeline))
      return std::nullopt;
    return *pipeline;
  }

  CostModel h100() {
    std::string error;
    std::optional<CostModel> costs = CostModel::parse("h100", error);
    EXPECT_TRUE(costs) << error;
    return *costs;
  }

  MLIRContext context;
  OwningOpRef<ModuleOp> module;
  ModelOp model;
};

const rt::Reshard kReshards[] = {rt::Reshard::EveryPass, rt::Reshard::Step};

} // namespace

// The FSDP baseline's mesh: the whole model on every device (pp 1), 8
// replicas.
TEST_F(ZeroMemoryTest, EveryStageAtLlama3_8BOnOneStage) {
  std::optional<sched::Pipeline> pipeline = partition(1, 8);
  ASSERT_TRUE(pipeline);
  CostModel costs = h100();
  Expected expected{kModel, kOutput, 8};
  std::map<std::pair<int, rt::Reshard>, int64_t> bytes;
  for (int zero = 0; zero <= 3; ++zero)
    for (rt::Reshard reshard : kReshards) {
      MeshShape mesh{/*tp=*/1, /*dp=*/8, zero};
      mesh.reshard = reshard;
      PipelineCosts table(model, *pipeline, costs, mesh);
      EXPECT_EQ(table.getDeviceParameters(0), kModel);
      EXPECT_EQ(table.getLargestLayerParameters(0), kOutput)
          << "the output table and its norm";
      bytes[std::make_pair(zero, reshard)] = table.getParameterBytes(0);
      EXPECT_EQ(table.getParameterBytes(0), expected.at(zero, reshard))
          << "zero " << zero;
    }
  auto at = [&](int zero, rt::Reshard reshard) {
    return bytes[std::make_pair(zero, reshard)];
  };
  // In GB: 144.5, 92.3, 62.6, then 20.5 re-sharding every pass and 34.5
  // per step.
  EXPECT_EQ(at(0, rt::Reshard::EveryPass), 144544702464);
  EXPECT_EQ(at(3, rt::Reshard::EveryPass), 20525918208);
  EXPECT_GT(at(0, rt::Reshard::EveryPass),
            at(1, rt::Reshard::EveryPass));
  EXPECT_GT(at(1, rt::Reshard::EveryPass),
            at(2, rt::Reshard::EveryPass));
  EXPECT_GT(at(2, rt::Reshard::EveryPass), at(3, rt::Reshard::Step));
  EXPECT_GT(at(3, rt::Reshard::Step), at(3, rt::Reshard::EveryPass));
}

// Two stages: the embedding's device and the output layer's, each with 16
// layers; each holds its own largest layer's transient.
TEST_F(ZeroMemoryTest, EveryStageAtLlama3_8BOverTwoStages) {
  std::optional<sched::Pipeline> pipeline = partition(2, 8);
  ASSERT_TRUE(pipeline);
  CostModel costs = h100();
  const Expected devices[] = {
      {kEmbedding + kLayers / 2 * kLayer, kEmbedding, 4},
      {kLayers / 2 * kLayer + kOutput, kOutput, 4}};
  for (int zero = 0; zero <= 3; ++zero)
    for (rt::Reshard reshard : kReshards) {
      MeshShape mesh{/*tp=*/1, /*dp=*/4, zero};
      mesh.reshard = reshard;
      PipelineCosts table(model, *pipeline, costs, mesh);
      for (int d = 0; d < 2; ++d) {
        EXPECT_EQ(table.getDeviceParameters(d), devices[d].params);
        EXPECT_EQ(table.getParameterBytes(d), devices[d].at(zero, reshard))
            << "zero " << zero << ", device " << d;
      }
    }
}

// ZeRO-2 and 3 reduce-scatter each microbatch's gradients (m times
// ZeRO-1's one per step); ZeRO-3 gathers a stage's weights before each of
// its passes (F, B and W of each microbatch) or once per step, each
// gather the reduce-scatter's mirror; the update of the replica's part
// is followed by ZeRO-1 and 2's all-gather only.
TEST_F(ZeroMemoryTest, TrafficOfEachStage) {
  std::optional<sched::Pipeline> pipeline = partition(2, 8);
  ASSERT_TRUE(pipeline);
  CostModel costs = h100();
  auto with = [&](int zero, rt::Reshard reshard = rt::Reshard::EveryPass) {
    MeshShape mesh{/*tp=*/1, /*dp=*/4, zero};
    mesh.reshard = reshard;
    return PipelineCosts(model, *pipeline, costs, mesh);
  };
  PipelineCosts one = with(1), two = with(2), three = with(3),
                step = with(3, rt::Reshard::Step);
  StringRef stage = one.getStage(1).name;
  double scatter = one.getGradientSyncTime(stage);
  EXPECT_GT(scatter, 0.0);
  EXPECT_DOUBLE_EQ(two.getGradientSyncTime(stage), 8 * scatter);
  EXPECT_DOUBLE_EQ(three.getGradientSyncTime(stage), 8 * scatter);
  EXPECT_EQ(one.getParameterGatherTime(stage), 0.0);
  EXPECT_EQ(two.getParameterGatherTime(stage), 0.0);
  EXPECT_DOUBLE_EQ(three.getParameterGatherTime(stage), scatter);
  EXPECT_EQ(three.getParameterGathersPerStep(), 8 * 3);
  EXPECT_EQ(step.getParameterGathersPerStep(), 1);
  EXPECT_EQ(two.getParameterGathersPerStep(), 0);
  // The update: the same part at ZeRO 1 to 3; ZeRO-3 writes no working
  // copy and gathers nothing after it.
  const HardwareProfile &hw = *costs.getHardware();
  int64_t part = (one.getDeviceParameters(1) + 3) / 4;
  double update = double(part) * 30.0 / hw.memoryBandwidth;
  EXPECT_DOUBLE_EQ(two.getOptimizerTime(1), one.getOptimizerTime(1));
  EXPECT_GT(one.getOptimizerTime(1), update);
  EXPECT_DOUBLE_EQ(three.getOptimizerTime(1),
                   double(part) * 28.0 / hw.memoryBandwidth);
  EXPECT_EQ(three.getOptimizerBytes(1), part * 12);
}

// Context parallelism, as the runtime runs it (ring attention): each of
// cp ranks holds 1/cp of a microbatch's tokens -- of every activation kept,
// its keys and values included -- plus the ring's buffers, two blocks of
// one layer's local keys and values and two fp32 accumulators of their
// gradients; a pass computes 1/cp, and its key/value transfers (cp - 1 a
// layer) run beside that compute, B's gradient transfers (cp a layer, in
// fp32) after it. The training state does not move: it is sharded over
// the dp replicas, which count the cp ranks. Llama-3-8B at 8192 tokens, pp
// 4 (8 layers a stage), dp 8, bf16: per token and layer 139,392 bytes kept
// -- the four norm and projection inputs (4 x 4096), queries, keys and
// values (40 heads of 128), the values again for attention (8 x 128), its
// output (32 x 128), the SwiGLU's three (3 x 14336), in bf16, and the
// softmax statistics (32 fp32) -- 4096 of them keys and values.
TEST_F(ZeroMemoryTest, ContextParallelismAtLlama3_8B) {
  std::optional<sched::Pipeline> pipeline = partition(4, 8);
  ASSERT_TRUE(pipeline);
  CostModel costs = h100();
  constexpr int64_t kTokens = 8192, kKept = 139392, kKeyValue = 4096;
  static_assert(kKept == (4 * kHidden + 40 * 128 + 8 * 128 + 32 * 128 +
                          3 * kFfn) * 2 + 4 * 32,
                "the kept bytes, by hand");
  sched::Work forward{PassKind::F, /*stage=*/1, 0, 0},
      backward{PassKind::B, /*stage=*/1, 0, 0};
  std::optional<int64_t> state;
  double plainForward = 0, plainBackward = 0;
  for (int64_t cp : {1, 2, 4}) {
    MeshShape mesh{/*tp=*/1, /*dp=*/8, /*zero=*/1};
    mesh.cp = cp;
    PipelineCosts table(model, *pipeline, costs, mesh);
    ASSERT_EQ(table.getStage(1).layers.size(), 8u);
    EXPECT_EQ(table.getActivationBytes(forward),
              double(8 * kKept * kTokens / cp))
        << "cp " << cp;
    // One layer's keys and values (8 heads of 128 each) of the rank's
    // tokens: two blocks in bf16, two accumulators in fp32.
    EXPECT_EQ(table.getContextExchangeBytes(1),
              cp > 1 ? double(2 * (2 + 4) * 2048 * kTokens / cp) : 0.0);
    if (!state)
      state = table.getParameterBytes(1);
    EXPECT_EQ(table.getParameterBytes(1), *state) << "cp " << cp;
    if (cp == 1) {
      plainForward = table.getComputeTime(forward);
      plainBackward = table.getComputeTime(backward);
      EXPECT_EQ(table.getContextExchangeTime(forward), 0.0);
      continue;
    }
    // Eight layers, cp - 1 blocks each beside the pass, on a node's link
    // (cp consecutive replicas of a device); B's gradients cp times after.
    double block = costs.getTransferTime(kKeyValue * kTokens / cp,
                                         LinkKind::node);
    double gradients = costs.getTransferTime(2 * kKeyValue * kTokens / cp,
                                             LinkKind::node);
    double forwardRing = 8 * (cp - 1) * block;
    EXPECT_DOUBLE_EQ(table.getContextExchangeTime(forward),
                     std::max(0.0, forwardRing - plainForward / double(cp)));
    EXPECT_DOUBLE_EQ(table.getContextExchangeTime(backward),
                     std::max(0.0, forwardRing - plainBackward / double(cp)) +
                         8 * cp * gradients);
    // At 8192 tokens the ring hides behind the compute (a layer's F is
    // milliseconds, a block's transfer tens of microseconds).
    EXPECT_LT(forwardRing, plainForward / double(cp));
    EXPECT_DOUBLE_EQ(table.getComputeTime(forward), plainForward / double(cp));
  }
}
