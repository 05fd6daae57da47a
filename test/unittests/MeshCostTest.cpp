//===- MeshCostTest.cpp - Costs of a pp x tp x dp mesh --------------------===//
//
// The analytic cost model on a device mesh (CostModel.h, MeshShape): which
// link each kind of traffic crosses given Megatron-LM's rank order, what a
// tensor-parallel shard holds and computes, the all-reduces of the blog's
// "Communication Overhead" table on the passes' critical path, and the
// data-parallel gradient all-reduces beside the passes (Simulator.h).
//
//===----------------------------------------------------------------------===//

#include "Require.h"
#include "sluice/Analysis/CostModel.h"
#include "sluice/Analysis/Simulator.h"
#include "sluice/PipelineIR/PipelineIR.h"
#include "sluice/Transforms/Passes.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace mlir::sluice;

namespace {

/// Four Llama-shaped layers (h 64, 8 heads of 8, 2 key/value heads, SwiGLU
/// 160) between an embedding and an output layer, bf16.
constexpr const char *kModel = R"mlir(
sluice.model @m {seq_len = 32, micro_batch = 2, dtype = bf16} {
  %e = sluice.embedding {vocab = 96} : tensor<2x32x64xbf16>
  %x0 = sluice.transformer_layer %e {heads = 8, kv_heads = 2, ffn = 160, norm = rmsnorm, mlp = swiglu} : tensor<2x32x64xbf16>
  %x1 = sluice.transformer_layer %x0 {heads = 8, kv_heads = 2, ffn = 160, norm = rmsnorm, mlp = swiglu} : tensor<2x32x64xbf16>
  %x2 = sluice.transformer_layer %x1 {heads = 8, kv_heads = 2, ffn = 160, norm = rmsnorm, mlp = swiglu} : tensor<2x32x64xbf16>
  %x3 = sluice.transformer_layer %x2 {heads = 8, kv_heads = 2, ffn = 160, norm = rmsnorm, mlp = swiglu} : tensor<2x32x64xbf16>
  %l = sluice.output_layer %x3 {vocab = 96, norm = rmsnorm} : tensor<2x32x64xbf16> -> tensor<f32>
  sluice.return %l : tensor<f32>
}
)mlir";

class MeshCostTest : public ::testing::Test {
protected:
  MeshCostTest() { context.loadDialect<SluiceDialect>(); }

  /// The model over `pp` devices (1F1B placement), split backward;
  /// `sparse`: every layer a mixture of 8 experts, 2 per token.
  ModelOp partition(int pp, RecomputeKind recompute = RecomputeKind::none,
                    bool sparse = false) {
    std::string text = kModel;
    if (sparse)
      for (size_t at = text.find("mlp = swiglu}"); at != std::string::npos;
           at = text.find("mlp = swiglu}", at + 1))
        text.replace(at, 13, "mlp = swiglu, experts = 8, top_k = 2}");
    module = parseSourceString<ModuleOp>(text, &context);
    ::sluice::test::require(module, "the test model parses");
    ModelOp model = *module->getOps<ModelOp>().begin();
    StagePartitionOptions opts;
    opts.pp = pp;
    EXPECT_TRUE(succeeded(partitionStages(model, opts)));
    EXPECT_TRUE(succeeded(splitPasses(model, /*split=*/true, recompute)));
    return model;
  }

  CostModel h100() {
    std::string error;
    std::optional<CostModel> costs = CostModel::parse("h100", error);
    return *::sluice::test::require(std::move(costs), "h100 costs");
  }

  MLIRContext context;
  OwningOpRef<ModuleOp> module;
};

std::map<std::string, LinkKind> linksOf(const PipelineCosts &costs) {
  std::map<std::string, LinkKind> links;
  for (const LinkUse &use : costs.getLinks())
    links[use.traffic] = use.link;
  return links;
}

} // namespace

// Rank d*tp*dp + r*tp + t on nodes of 8 GPUs: a tensor-parallel group of
// up to 8 fills part of a node (the blog's "TP inside a node"), a
// device's replicas share a node while tp*dp <= 8, and a pipeline
// crosses nodes once pp*tp*dp > 8.
TEST_F(MeshCostTest, LinksFollowTheRankPlacement) {
  ModelOp model = partition(4);
  sched::Pipeline pipeline = *::sluice::test::require(getPipeline(model, 8, 1),
                                                      "the model's pipeline");
  CostModel costs = h100();
  EXPECT_EQ(costs.getNodeDevices(), 8);
  using L = LinkKind;
  std::map<std::string, L> big = linksOf(
      PipelineCosts(model, pipeline, costs, MeshShape{/*tp=*/8, /*dp=*/2}));
  EXPECT_EQ(big, (std::map<std::string, L>{{"pipeline", L::network},
                                           {"tensor-parallel", L::node},
                                           {"data-parallel", L::network}}));
  std::map<std::string, L> mid =
      linksOf(PipelineCosts(model, pipeline, costs, MeshShape{4, 2}));
  EXPECT_EQ(mid, (std::map<std::string, L>{{"pipeline", L::network},
                                           {"tensor-parallel", L::node},
                                           {"data-parallel", L::node}}));
  // 4 x 2 x 1 = 8 ranks: one node holds everything.
  std::map<std::string, L> one =
      linksOf(PipelineCosts(model, pipeline, costs, MeshShape{2, 1}));
  EXPECT_EQ(one, (std::map<std::string, L>{{"pipeline", L::node},
                                           {"tensor-parallel", L::node}}));
  // Sixteen shards span two nodes.
  EXPECT_EQ(costs.getGroupLink(0, 1, 16, 16, 1), L::network);
  // The group {6, 7, 8, 9} straddles a node boundary.
  EXPECT_EQ(costs.getGroupLink(6, 1, 4, 4, 1), L::network);
  EXPECT_EQ(costs.getGroupLink(4, 1, 4, 4, 1), L::node);
  // `v100x8`: a device is a whole node.
  std::string error;
  EXPECT_EQ(CostModel::parse("v100x8", error)->getNodeDevices(), 1);
}

// A shard holds 1/tp of the query heads, projections and feed-forward
// width; with fewer key/value heads than shards, one replicated head; its
// rows of the embedding table; the norms and the output layer whole (as
// the runtime does).
TEST_F(MeshCostTest, ShardsHoldTheirSliceOfEachLayer) {
  ModelOp model = partition(2);
  sched::Pipeline pipeline = *::sluice::test::require(getPipeline(model, 4, 1),
                                                      "the model's pipeline");
  CostModel costs = h100();
  int64_t h = 64, d = 8, vocab = 96;
  auto layer = [&](int64_t heads, int64_t kv, int64_t ffn) {
    return h * heads * d + 2 * h * kv * d + heads * d * h + 3 * h * ffn + 2 * h;
  };
  // Stage 0: the embedding and two layers; stage 1: two layers and the
  // output layer (its norm too).
  for (auto [tp, heads, kv, ffn] :
       {std::tuple<int64_t, int64_t, int64_t, int64_t>{1, 8, 2, 160},
        {2, 4, 1, 80},
        {4, 2, 1, 40}}) {
    PipelineCosts table(model, pipeline, costs, MeshShape{tp, 1});
    // The vocabulary-parallel embedding: 96 / tp rows a shard.
    EXPECT_EQ(table.getStage(0).params,
              vocab / tp * h + 2 * layer(heads, kv, ffn))
        << "tp " << tp;
    // The vocabulary-parallel output layer: as many rows a shard, and its
    // final norm whole.
    EXPECT_EQ(table.getStage(1).params,
              2 * layer(heads, kv, ffn) + vocab / tp * h + h)
        << "tp " << tp;
    // The runtime's training state for the model's type (TrainingState.h):
    // a bf16 model's 18 bytes, 8 of them the moments.
    const rt::ParameterStateBytes &state = table.getStateBytes();
    EXPECT_EQ(state.replicated,
              model.getDtype().isF32() ? int64_t(16) : int64_t(18));
    EXPECT_EQ(table.getParameterBytes(0),
              table.getStage(0).params * state.replicated);
    EXPECT_EQ(table.getOptimizerBytes(0), table.getStage(0).params * 8);
  }
  // MFU counts the model's FLOPs once, however many shards compute them.
  EXPECT_DOUBLE_EQ(
      PipelineCosts(model, pipeline, costs, MeshShape{4, 1}).getStepFlops(),
      PipelineCosts(model, pipeline, costs).getStepFlops());
}

// Per layer, one N_batch x N_ctx x D_model all-reduce after attention and
// one after the MLP in F, one each in B (Weitkamp,
// 2024, "Communication Overhead"), none in W; full recomputation runs
// F's two again in B (the blog's "Activation Checkpointing").
TEST_F(MeshCostTest, TensorParallelPassesWaitForTheBlogsAllReduces) {
  CostModel costs = h100();
  const HardwareProfile &hw = *costs.getHardware();
  double bytes = 2.0 * 32 * 64 * 2; // micro-batch x tokens x hidden x bf16
  int64_t tp = 4;
  // A ring all-reduce over 4 shards of a node: 2 (tp - 1) steps of
  // bytes / tp on NVLink.
  double allReduce = 6 * hw.nodeLatency + 6 * bytes / 4 / hw.nodeBandwidth;
  // The split output layer's statistics: one fp32 per token.
  double statistic =
      6 * hw.nodeLatency + 6 * (2.0 * 32 * 4) / 4 / hw.nodeBandwidth;
  for (RecomputeKind recompute :
       {RecomputeKind::none, RecomputeKind::selective, RecomputeKind::full}) {
    ModelOp model = partition(2, recompute);
    sched::Pipeline pipeline = *::sluice::test::require(
        getPipeline(model, 4, 1), "the model's pipeline");
    PipelineCosts sharded(model, pipeline, costs, MeshShape{tp, 1});
    PipelineCosts whole(model, pipeline, costs);
    auto tpTime = [&](PassKind kind) {
      return sharded.getTensorParallelTime({kind, 1, 0, 0});
    };
    // Stage 1 ends with the vocabulary-parallel output layer: in F the
    // group's maximum and sum per token, in B its input gradient's sum
    // (and the statistics again when B recomputes the forward).
    bool full = recompute == RecomputeKind::full;
    EXPECT_NEAR(tpTime(PassKind::F), 4 * allReduce + 2 * statistic, 1e-15);
    // Stage 0 also sums its embedding lookups (the table's "Input
    // Embedding" row), once more when B recomputes the forward.
    EXPECT_NEAR(sharded.getTensorParallelTime({PassKind::F, 0, 0, 0}),
                5 * allReduce, 1e-15);
    EXPECT_NEAR(sharded.getTensorParallelTime({PassKind::B, 0, 0, 0}),
                (full ? 9 : 4) * allReduce, 1e-15);
    double backward = (full ? 9 : 5) * allReduce + (full ? 2 * statistic : 0.0);
    EXPECT_NEAR(tpTime(PassKind::B), backward, 1e-15);
    EXPECT_EQ(tpTime(PassKind::W), 0.0);
    EXPECT_EQ(whole.getTensorParallelTime({PassKind::F, 1, 0, 0}), 0.0);
    // The pass waits for them: they are part of its time.
    sched::Work f{PassKind::F, 1, 0, 0};
    EXPECT_GT(sharded.getComputeTime(f), tpTime(PassKind::F));
    EXPECT_LT(sharded.getComputeTime(f) - tpTime(PassKind::F),
              whole.getComputeTime(f));
  }
}

// The shard bodies sluice-shard-tensors writes spell the blog's table
// ("Communication Overhead") layer by layer: a transformer layer
// all-reduces N_batch x N_ctx x D_model twice in F (after attention, after
// the MLP) and twice in B (before each norm's backward); the embedding
// once in F (its masked lookups); the output layer two fp32 statistics per
// token in F and its input gradient in B. With sequence parallelism
// (the blog's "Sequence Parallelism") each all-reduce is an all-gather and
// a reduce-scatter of the same tensor, and W gathers the sliced inputs of
// the column-parallel projections again. The cost model charges exactly
// these, read from the bodies, as its closed form does without them.
TEST_F(MeshCostTest, ShardBodiesSpellTheBlogsAllReduces) {
  CostModel costs = h100();
  const int64_t tp = 4, activation = 2 * 32 * 64, tokens = 2 * 32;
  for (bool sequence : {false, true})
    for (RecomputeKind recompute :
         {RecomputeKind::none, RecomputeKind::selective, RecomputeKind::full}) {
      ModelOp closed = partition(2, recompute);
      sched::Pipeline pipeline = *::sluice::test::require(
          getPipeline(closed, 4, 1), "the model's pipeline");
      MeshShape mesh{tp, 1, 0, sequence};
      PipelineCosts closedForm(closed, pipeline, costs, mesh);
      std::vector<double> expected;
      for (int stage = 0; stage < 2; ++stage)
        for (PassKind kind : {PassKind::F, PassKind::B, PassKind::W})
          expected.push_back(
              closedForm.getTensorParallelTime({kind, stage, 0, 0}));

      OwningOpRef<ModuleOp> closedModule = std::move(module);
      ModelOp model = partition(2, recompute);
      SchedulingOptions schedule;
      schedule.schedule = ScheduleKind::ZBH1;
      schedule.microbatches = 4;
      ProgramOp program = *::sluice::test::require(
          schedulePipeline(model, schedule), "the ZB-H1 program");
      ASSERT_TRUE(succeeded(shardTensors(program, tp, sequence)));
      ASSERT_TRUE(succeeded(mlir::verify(*module)));

      // Of `list`, how many move `elements` of `bytes` each with `kind`;
      // and whether that is all of them.
      auto count = [](llvm::ArrayRef<ShardCollective> list, CollectiveKind kind,
                      int64_t elements, int64_t bytes) {
        return llvm::count_if(list, [&](const ShardCollective &c) {
          return c.kind == kind && c.elements == elements &&
                 c.elementBytes == bytes;
        });
      };
      using K = CollectiveKind;
      int transformers = 0;
      model.walk([&](Operation *layer) {
        ShardTraffic t = getShardTraffic(layer);
        bool isLayer =
            isa<TransformerLayerOp, EmbeddingOp, OutputLayerOp>(layer);
        EXPECT_EQ(isSequenceParallel(layer), sequence && isLayer);
        if (isa<TransformerLayerOp>(layer)) {
          ++transformers;
          if (!sequence) {
            EXPECT_EQ(count(t.forward, K::all_reduce, activation, 2), 2);
            EXPECT_EQ(count(t.backward, K::all_reduce, activation, 2), 2);
            EXPECT_TRUE(t.weight.empty());
          } else {
            EXPECT_EQ(count(t.forward, K::all_gather, activation, 2), 2);
            EXPECT_EQ(count(t.forward, K::reduce_scatter, activation, 2), 2);
            EXPECT_EQ(count(t.backward, K::all_gather, activation, 2), 2);
            EXPECT_EQ(count(t.backward, K::reduce_scatter, activation, 2), 2);
            EXPECT_EQ(count(t.weight, K::all_gather, activation, 2), 2);
          }
          EXPECT_EQ(t.forward.size(), sequence ? 4u : 2u);
          EXPECT_EQ(t.backward.size(), sequence ? 4u : 2u);
          EXPECT_EQ(t.weight.size(), sequence ? 2u : 0u);
        } else if (isa<EmbeddingOp>(layer)) {
          EXPECT_EQ(t.forward.size(), 1u);
          EXPECT_EQ(count(t.forward,
                          sequence ? K::reduce_scatter : K::all_reduce,
                          activation, 2),
                    1);
          EXPECT_EQ(t.backward.size(), sequence ? 1u : 0u);
          EXPECT_EQ(count(t.backward, K::all_gather, activation, 2),
                    sequence ? 1 : 0);
        } else if (isa<OutputLayerOp>(layer)) {
          EXPECT_EQ(t.forward.size(), sequence ? 3u : 2u);
          EXPECT_EQ(count(t.forward, K::all_reduce, tokens, 4), 2);
          EXPECT_EQ(count(t.forward, K::all_gather, activation, 2),
                    sequence ? 1 : 0);
          EXPECT_EQ(t.backward.size(), 1u);
          EXPECT_EQ(count(t.backward,
                          sequence ? K::reduce_scatter : K::all_reduce,
                          activation, 2),
                    1);
          EXPECT_EQ(t.weight.size(), sequence ? 1u : 0u);
        }
      });
      EXPECT_EQ(transformers, 4);

      PipelineCosts fromBodies(model, pipeline, costs, mesh);
      size_t at = 0;
      for (int stage = 0; stage < 2; ++stage)
        for (PassKind kind : {PassKind::F, PassKind::B, PassKind::W}) {
          double time = fromBodies.getTensorParallelTime({kind, stage, 0, 0});
          EXPECT_NEAR(time, expected[at], 1e-15)
              << "stage " << stage << " pass " << stringifyPassKind(kind).str()
              << " recompute " << stringifyRecomputeKind(recompute).str()
              << (sequence ? " sequence-parallel" : "");
          ++at;
        }
      EXPECT_GT(expected[0], 0.0);
    }
}

// Sequence parallelism keeps what lies between the tensor-parallel
// regions as the shard's 1/tp of the tokens: per layer the norms' and
// the projections' inputs (4 h per token of the kept tensors), the output
// layer's normed input, and under full recomputation the stage's input;
// the pipeline's messages are the shard's slice too. A ring all-gather
// plus a reduce-scatter cost what the all-reduce did, so a layer's F
// collectives take as long.
TEST_F(MeshCostTest, SequenceParallelismSlicesTheKeptActivations) {
  CostModel costs = h100();
  const int64_t tp = 4;
  const double tokens = 2 * 32, h = 64, bf16 = 2;
  for (RecomputeKind recompute :
       {RecomputeKind::none, RecomputeKind::selective, RecomputeKind::full}) {
    ModelOp model = partition(2, recompute);
    sched::Pipeline pipeline = *::sluice::test::require(
        getPipeline(model, 4, 1), "the model's pipeline");
    PipelineCosts whole(model, pipeline, costs, MeshShape{tp, 1});
    PipelineCosts sliced(model, pipeline, costs, MeshShape{tp, 1, 0, true});
    double shrink = 1.0 - 1.0 / double(tp);
    for (int stage = 0; stage < 2; ++stage) {
      sched::Work f{PassKind::F, stage, 0, 0};
      double saved = whole.getActivationBytes(f) - sliced.getActivationBytes(f);
      double expected;
      if (recompute == RecomputeKind::full)
        // Stage 0 looks its tokens up again; stage 1 keeps its input.
        expected = stage == 0 ? 0.0 : tokens * h * bf16 * shrink;
      else
        expected =
            (2 * 4 * h + (stage == 1 ? h : 0.0)) * bf16 * tokens * shrink;
      EXPECT_NEAR(saved, expected, 1e-6)
          << "stage " << stage << " recompute "
          << stringifyRecomputeKind(recompute).str();
      // The layers' collectives as long; the embedding's lookups only
      // reduce-scattered (no all-gather: the next layer norms the slice),
      // the output layer's input gathered once more.
      double half =
          costs.getCollectiveTime(tokens * h * bf16,
                                  /*allReduce=*/false, tp, LinkKind::node);
      EXPECT_NEAR(sliced.getTensorParallelTime(f),
                  whole.getTensorParallelTime(f) + (stage == 0 ? -half : half),
                  1e-15);
    }
    // pp 2 x tp 4: the pipeline's ranks share a node.
    sched::Work f{PassKind::F, 0, 0, 0};
    double latency = costs.getHardware()->nodeLatency;
    EXPECT_NEAR(sliced.getTransferTime(f) - latency,
                (whole.getTransferTime(f) - latency) / double(tp), 1e-15);
  }
}

// Adam reads the fp32 weights, gradients and moments and writes the
// weights and moments (28 bytes a parameter) and, in this bf16 model, the
// working copy (2 more), at the memory bandwidth; a shard updates only
// its parameters. Unit costs have no optimizer time.
TEST_F(MeshCostTest, OptimizerStepIsMemoryBound) {
  ModelOp model = partition(2);
  sched::Pipeline pipeline = *::sluice::test::require(getPipeline(model, 4, 1),
                                                      "the model's pipeline");
  CostModel costs = h100();
  const HardwareProfile &hw = *costs.getHardware();
  for (int64_t tp : {1, 4}) {
    PipelineCosts table(model, pipeline, costs, MeshShape{tp, 1});
    for (int d = 0; d < 2; ++d)
      EXPECT_DOUBLE_EQ(
          table.getOptimizerTime(d),
          double(table.getParameterBytes(d) /
                 table.getStateBytes().replicated) *
              30.0 / hw.memoryBandwidth);
  }
  std::string error;
  PipelineCosts unit(
      model, pipeline,
      *::sluice::test::require(CostModel::parse("unit", error), "unit costs"));
  EXPECT_EQ(unit.getOptimizerTime(0), 0.0);
}

// A stage's gradient all-reduce moves its shard's parameters in the
// model's type over the replicas.
TEST_F(MeshCostTest, GradientSyncMovesTheShardsGradients) {
  ModelOp model = partition(2);
  sched::Pipeline pipeline = *::sluice::test::require(getPipeline(model, 4, 1),
                                                      "the model's pipeline");
  CostModel costs = h100();
  const HardwareProfile &hw = *costs.getHardware();
  PipelineCosts table(model, pipeline, costs, MeshShape{2, 4});
  StringRef stage = table.getStage(1).name;
  double bytes = double(table.getStage(1).params * 2);
  // pp 2 x tp 2 x dp 4 = 16 ranks: a device's replicas {t, t+2, t+4,
  // t+6} share a node.
  EXPECT_DOUBLE_EQ(table.getGradientSyncTime(stage),
                   6 * hw.nodeLatency + 6 * bytes / 4 / hw.nodeBandwidth);
  EXPECT_EQ(PipelineCosts(model, pipeline, costs).getGradientSyncTime(stage),
            0.0);
  EXPECT_EQ(table.getGradientSyncTime("nonesuch"), 0.0);
}

// Gradient all-reduces run beside the passes after them: one issued
// before the pipeline drains is hidden, the last device's queue runs them
// in order, and only what outlasts every pass lengthens the step.
TEST(Simulator, GradientSyncsOverlapTheRemainingPasses) {
  sched::Pipeline pipeline;
  pipeline.devices = 2;
  pipeline.microbatches = 1;
  pipeline.stages = {{0, 0}, {1, 0}};
  Simulation sim;
  sim.devices.resize(2);
  using sched::InstrKind;
  auto exec = [&](int device, sched::Work work, double start, double end) {
    sim.events.push_back({device, StreamKind::compute, InstrKind::Exec, work,
                          -1, sched::CollectiveId{}, start, end});
    sim.devices[device].busy += end - start;
    sim.stepTime = std::max(sim.stepTime, end);
  };
  sched::Work f0{PassKind::F, 0, 0, 0}, f1{PassKind::F, 1, 0, 0},
      b1{PassKind::BW, 1, 0, 0}, b0{PassKind::BW, 0, 0, 0};
  exec(0, f0, 0, 1);
  exec(1, f1, 1, 2);
  exec(1, b1, 2, 4);
  exec(0, b0, 4, 6);
  std::string error;
  // Device 1's all-reduce (3 long) starts at 4 and ends at 7; device 0's
  // two (1 each) run one after the other from 6.
  ASSERT_TRUE(succeeded(addGradientSyncs(
      pipeline, {{1, b1, 3.0}, {0, b0, 1.0}, {0, b0, 1.0}}, sim, error)))
      << error;
  EXPECT_DOUBLE_EQ(sim.stepTime, 8.0);
  EXPECT_DOUBLE_EQ(sim.devices[0].gradientSync, 2.0);
  EXPECT_DOUBLE_EQ(sim.devices[0].exposedGradientSync, 2.0);
  EXPECT_DOUBLE_EQ(sim.devices[1].exposedGradientSync, 1.0);
  EXPECT_DOUBLE_EQ(sim.devices[1].idle, 8.0 - 3.0);
  EXPECT_DOUBLE_EQ(sim.bubbleRatio, 1.0 - 6.0 / 16.0);
  // The optimizer steps: device 0's (0.5) after its last all-reduce ends
  // at 8, device 1's (2) after its own at 7 -- the step ends at 9, and the
  // updates count as busy time.
  addOptimizerSteps({0.5, 2.0}, sim);
  EXPECT_DOUBLE_EQ(sim.stepTime, 9.0);
  EXPECT_DOUBLE_EQ(sim.devices[1].optimizerTime, 2.0);
  EXPECT_DOUBLE_EQ(sim.devices[1].idle, 9.0 - 5.0);
  EXPECT_DOUBLE_EQ(sim.bubbleRatio, 1.0 - 8.5 / 18.0);
  // After a pass that never ran: an error, not a guess.
  sched::Work missing{PassKind::F, 0, 0, 0};
  Simulation empty;
  empty.devices.resize(2);
  EXPECT_TRUE(
      failed(addGradientSyncs(pipeline, {{0, missing, 1.0}}, empty, error)));
  EXPECT_EQ(error, "the gradient all-reduce after F of stage 0, microbatch "
                   "0, slice 0 on device 0 follows a pass that never ran");
}

// Vocabulary Parallelism over pp x tp (runtime/model/Vocab.cpp): a device's rows
// of the tables split again over its shards, so a shard holds and computes
// 1/tp of them; each collective's pipeline part is as without shards, and
// what it reduced is then all-reduced over the shards (the statistics and
// the gradients; not the broadcasts).
TEST_F(MeshCostTest, VocabularyShardsSplitOverPipelineAndShards) {
  // Two devices with Vocab-1's shards.
  module = parseSourceString<ModuleOp>(kModel, &context);
  ASSERT_TRUE(module);
  ModelOp model = *module->getOps<ModelOp>().begin();
  StagePartitionOptions opts;
  opts.pp = 2;
  ASSERT_TRUE(succeeded(partitionStages(model, opts)));
  ASSERT_TRUE(succeeded(partitionVocab(model, VocabPartition::Vocab)));
  for (auto shard : model.getBody().getOps<VocabOutputOp>())
    ASSERT_TRUE(succeeded(reorderSoftmaxBarriers(shard, 1)));
  ASSERT_TRUE(succeeded(splitPasses(model, /*split=*/true)));
  sched::Pipeline pipeline = *::sluice::test::require(getPipeline(model, 4, 1),
                                                      "the model's pipeline");
  CostModel costs = h100();
  const HardwareProfile &hw = *costs.getHardware();
  PipelineCosts whole(model, pipeline, costs);
  PipelineCosts sharded(model, pipeline, costs, MeshShape{4, 1});
  const VocabProfile &one = whole.getVocab(), &four = sharded.getVocab();
  ASSERT_TRUE(one.output && one.input);
  EXPECT_EQ(one.getShardRows(), one.paddedVocab / 2);
  EXPECT_EQ(four.getShardRows(), (one.paddedVocab / 2 + 3) / 4);
  EXPECT_EQ(four.getShardParams() * 4, one.getShardParams());
  EXPECT_NEAR(four.getPassFlops(PassKind::T, 32) * 4,
              one.getPassFlops(PassKind::T, 32), 1e-6);
  // 2 devices x 4 shards = 8 ranks, one node. Algorithm 1's group 1
  // all-reduces the maximum and the sum (two fp32 per token), group 2
  // reduces the input gradient onto the root (bf16 activations).
  double tokens = 2 * 32, stats = 2 * 4 * tokens, dx = tokens * 64 * 2;
  auto ring = [&](double bytes, int n, bool allReduce) {
    double steps = (n - 1) * (allReduce ? 2.0 : 1.0);
    return steps * hw.nodeLatency + steps * bytes / n / hw.nodeBandwidth;
  };
  using sched::ShardKind;
  auto time = [&](const PipelineCosts &c, ShardKind shard, int group) {
    return c.getCollectiveTime({shard, group, 0, 0});
  };
  EXPECT_NEAR(time(sharded, ShardKind::Output, 1),
              ring(stats, 2, true) + ring(stats, 4, true), 1e-15);
  EXPECT_NEAR(time(sharded, ShardKind::Output, 2),
              ring(dx, 2, false) + ring(dx, 4, true), 1e-15);
  // The broadcasts of X and of the embedding's gradient: the pipeline's
  // only; the lookups' reduce is summed over the root's shards.
  EXPECT_NEAR(time(sharded, ShardKind::Output, 0), ring(dx, 2, false), 1e-15);
  EXPECT_NEAR(time(sharded, ShardKind::Input, 1), ring(dx, 2, false), 1e-15);
  EXPECT_NEAR(time(sharded, ShardKind::Input, 0),
              ring(dx, 2, false) + ring(dx, 4, true), 1e-15);
  EXPECT_NEAR(time(whole, ShardKind::Output, 2), ring(dx, 2, false), 1e-15);
}

// ZeRO-1 (Megatron-LM's distributed optimizer): a replica keeps the
// weights (fp32 and their 16-bit working copy) and gradients whole and
// 1/dp of the moments and of the summed gradients (12 bytes a parameter,
// as the runtime's ZeroOne holds them); its gradient sync is the ring
// all-reduce's reduce-scatter half, and its optimizer step updates its
// part, then all-gathers the 16-bit weights (the other half).
TEST_F(MeshCostTest, ZeroOneShardsTheOptimizerState) {
  ModelOp model = partition(2);
  sched::Pipeline pipeline = *::sluice::test::require(getPipeline(model, 4, 1),
                                                      "the model's pipeline");
  CostModel costs = h100();
  const HardwareProfile &hw = *costs.getHardware();
  PipelineCosts plain(model, pipeline, costs, MeshShape{1, 4, 0});
  PipelineCosts zero(model, pipeline, costs, MeshShape{1, 4, 1});
  int64_t params = zero.getDeviceParameters(1);
  int64_t part = (params + 3) / 4;
  int64_t working = model.getDtype().isF32() ? 0 : 2;
  EXPECT_EQ(plain.getParameterBytes(1), params * (16 + working));
  EXPECT_EQ(zero.getParameterBytes(1), params * (8 + working) + part * 12);
  EXPECT_EQ(zero.getOptimizerBytes(1), part * 12);
  StringRef stage = zero.getStage(1).name;
  // 4 replicas in a node: 3 ring steps of bytes / 4 for the reduce-scatter,
  // 6 for the all-reduce.
  double bytes = double(zero.getStage(1).params * 2);
  double half = 3 * hw.nodeLatency + 3 * bytes / 4 / hw.nodeBandwidth;
  EXPECT_NEAR(zero.getGradientSyncTime(stage), half, 1e-15);
  EXPECT_NEAR(plain.getGradientSyncTime(stage), 2 * half, 1e-15);
  double gather =
      3 * hw.nodeLatency + 3 * double(params * 2) / 4 / hw.nodeBandwidth;
  EXPECT_NEAR(zero.getOptimizerTime(1),
              double(part) * 30.0 / hw.memoryBandwidth + gather, 1e-12);
}

// Expert parallelism (docs/moe.md): a member holds 1/ep of each sparse
// layer's experts (the rest of the layer whole), sums its experts'
// gradients over the dp/ep replicas holding them after the rest over all,
// and its F and B wait for two all-to-alls of the tokens' top_k copies per
// sparse layer (the counts' exchange is latency): eight replicas on one
// node of 8, experts over 4.
TEST_F(MeshCostTest, ExpertParallelismSplitsTheExpertsAndAddsAllToAlls) {
  ModelOp model = partition(1, RecomputeKind::none, /*sparse=*/true);
  sched::Pipeline pipeline = *::sluice::test::require(getPipeline(model, 2, 1),
                                                      "the model's pipeline");
  CostModel costs = h100();
  const HardwareProfile &hw = *costs.getHardware();
  MeshShape dense{1, 8}, split{1, 8};
  split.ep = 4;
  PipelineCosts whole(model, pipeline, costs, dense),
      parts(model, pipeline, costs, split);
  // 4 layers of 8 experts, each 3 x 64 x 160.
  int64_t experts = 4 * 8 * 3 * 64 * 160;
  EXPECT_EQ(whole.getDeviceParameters(0) - parts.getDeviceParameters(0),
            experts - experts / 4);
  EXPECT_EQ(linksOf(parts).at("expert-parallel"), LinkKind::node);
  StringRef stage = parts.getStage(0).name;
  double dense_ = double(parts.getStage(0).params - experts) * 2,
         mine = double(experts / 4) * 2;
  EXPECT_NEAR(parts.getGradientSyncTime(stage),
              14 * hw.nodeLatency + 14 * dense_ / 8 / hw.nodeBandwidth +
                  2 * hw.nodeLatency + 2 * mine / 2 / hw.nodeBandwidth,
              1e-12);
  // Per sparse layer and pass: the copies' rows (64 tokens x 2 copies x
  // 64 wide, bf16) out and back, and the counts.
  double bytes = 2.0 * 32 * 2 * 64 * 2;
  double layer = 2 * (3 * hw.nodeLatency + 3 * bytes / 4 / hw.nodeBandwidth) +
                 3 * hw.nodeLatency;
  for (PassKind kind : {PassKind::F, PassKind::B, PassKind::W}) {
    sched::Work work{kind, 0, 0, 0};
    double want = kind == PassKind::W ? 0.0 : 4 * layer;
    EXPECT_NEAR(parts.getExpertParallelTime(work), want, 1e-15)
        << stringifyPassKind(kind).str();
    EXPECT_NEAR(parts.getComputeTime(work) - whole.getComputeTime(work), want,
                1e-12);
    EXPECT_EQ(whole.getExpertParallelTime(work), 0.0);
  }
}

// Issue 56: expert parallelism with context parallelism. An expert group
// is ep replicas at one context rank (ranks tp x cp apart), a member's
// tokens are its 1/cp of each sequence, and the expert maps' gradients
// are summed over the dp / ep x cp ranks holding them. On nodes of 4,
// dp 4 x cp 2 with ep 4: the context pairs {0,1}, {2,3}... fit in a node,
// the expert groups {0,2,4,6} and {1,3,5,7} do not.
TEST_F(MeshCostTest, ExpertGroupsSitAtOneContextRank) {
  ModelOp model = partition(1, RecomputeKind::none, /*sparse=*/true);
  sched::Pipeline pipeline = *::sluice::test::require(getPipeline(model, 2, 1),
                                                      "the model's pipeline");
  std::string error;
  CostModel costs = *::sluice::test::require(
      CostModel::parse("h100:gpus-per-node=4", error), "nodes of 4");
  const HardwareProfile &hw = *costs.getHardware();
  // mesh.dp counts the dp x cp ranks.
  MeshShape plain{1, 4}, folded{1, 8};
  plain.ep = 4;
  folded.ep = 4, folded.cp = 2;
  PipelineCosts whole(model, pipeline, costs, plain),
      parts(model, pipeline, costs, folded);
  std::map<std::string, LinkKind> links = linksOf(parts);
  EXPECT_EQ(links.at("expert-parallel"), LinkKind::network);
  EXPECT_EQ(links.at("context-parallel"), LinkKind::node);
  EXPECT_EQ(linksOf(whole).at("expert-parallel"), LinkKind::node);
  // The experts' sums: over 8 / 4 = 2 ranks (a context pair), the rest
  // over all 8, both across nodes.
  int64_t experts = 4 * 8 * 3 * 64 * 160;
  StringRef stage = parts.getStage(0).name;
  double dense = double(parts.getStage(0).params - experts) * 2,
         mine = double(experts / 4) * 2;
  double net = hw.linkLatency, bw = hw.linkBandwidth;
  EXPECT_NEAR(parts.getGradientSyncTime(stage),
              14 * net + 14 * dense / 8 / bw + 2 * net + 2 * mine / 2 / bw,
              1e-12);
  // Per sparse layer and F or B: half the copies' rows of the whole
  // sequence's (32 tokens x 2 copies x 64 wide, bf16, per cp rank) out
  // and back over the 4 members, and the counts.
  double bytes = 2.0 * 32 * 2 * 64 * 2 / 2;
  double layer = 2 * (3 * net + 3 * bytes / 4 / bw) + 3 * net;
  for (PassKind kind : {PassKind::F, PassKind::B, PassKind::W}) {
    sched::Work work{kind, 0, 0, 0};
    EXPECT_NEAR(parts.getExpertParallelTime(work),
                kind == PassKind::W ? 0.0 : 4 * layer, 1e-15)
        << stringifyPassKind(kind).str();
  }
}

// Issue 37: `GPU:calibrate=PROFILE.json` sets the analytic model's
// efficiency to the one at which it predicts the profile's whole-model
// pass time, and then prices every mesh: a profile the model wrote at an
// efficiency of 0.3 on 2 stages calibrates back to 0.3, and the
// calibrated model prices a 4-stage pipeline as `h100:efficiency=0.3`
// does. A profile faster than the GPU's peak, or timing no pass, is
// refused by name.
TEST_F(MeshCostTest, CalibrationRecoversTheProfilesEfficiency) {
  std::string error;
  CostModel slow = *::sluice::test::require(
      CostModel::parse("h100:efficiency=0.3", error), "h100 at 0.3");
  auto writeProfile = [&](double scale) {
    ModelOp model = partition(2);
    sched::Pipeline pipeline = *::sluice::test::require(
        getPipeline(model, 4, 1), "the model's pipeline");
    PipelineCosts table(model, pipeline, slow);
    llvm::json::Object stages;
    for (int s = 0; s < pipeline.getNumStages(); ++s) {
      const StageProfile &stage = table.getStage(s);
      double tokens = double(stage.seqLen * stage.microBatch);
      llvm::json::Object passes;
      for (PassKind kind : {PassKind::F, PassKind::B, PassKind::W})
        passes[stringifyPassKind(kind)] = llvm::json::Object{
            {"seconds_per_token",
             scale * table.getComputeTime(sched::Work{kind, s, 0, 0}) /
                 tokens}};
      stages[stage.name] = std::move(passes);
    }
    llvm::SmallString<128> path;
    EXPECT_FALSE(
        llvm::sys::fs::createTemporaryFile("calibration", "json", path));
    std::error_code ec;
    llvm::raw_fd_ostream out(path, ec);
    out << llvm::json::Value(llvm::json::Object{{"format", "sluice-profile"},
                                                {"stages", std::move(stages)}});
    return path.str().str();
  };

  std::string path = writeProfile(1.0);
  CostModel calibrated = *::sluice::test::require(
      CostModel::parse("h100:calibrate=" + path, error), "calibrated h100");
  EXPECT_EQ(calibrated.getCalibrationPath(), path);
  ModelOp deeper = partition(4);
  std::optional<double> efficiency =
      calibrated.calibrateEfficiency(deeper, error);
  ASSERT_TRUE(efficiency) << error;
  EXPECT_NEAR(*efficiency, 0.3, 1e-9);
  sched::Pipeline pipeline = *::sluice::test::require(getPipeline(deeper, 8, 1),
                                                      "the deeper pipeline");
  PipelineCosts ours(deeper, pipeline, calibrated);
  PipelineCosts theirs(deeper, pipeline, slow);
  EXPECT_EQ(ours.getCalibrationError(), "");
  for (int s = 0; s < pipeline.getNumStages(); ++s)
    for (PassKind kind : {PassKind::F, PassKind::B, PassKind::W}) {
      sched::Work work{kind, s, 0, 0};
      EXPECT_NEAR(ours.getComputeTime(work), theirs.getComputeTime(work),
                  1e-9 * theirs.getComputeTime(work))
          << "stage " << s << " " << stringifyPassKind(kind).str();
    }

  // A hundredth of the time: the H100 at 30x its peak.
  std::string fast = writeProfile(0.01);
  CostModel impossible = *::sluice::test::require(
      CostModel::parse("h100:calibrate=" + fast, error), "fast profile");
  ModelOp shallow = partition(2);
  EXPECT_FALSE(impossible.calibrateEfficiency(shallow, error));
  EXPECT_NE(error.find("faster than h100 can at its peak"), std::string::npos)
      << error;
  sched::Pipeline two = *::sluice::test::require(getPipeline(shallow, 4, 1),
                                                 "the shallow pipeline");
  PipelineCosts refused(shallow, two, impossible);
  EXPECT_NE(refused.getCalibrationError().find(fast), std::string::npos);

  error.clear();
  EXPECT_FALSE(CostModel::parse("h100:calibrate=/nonexistent.json", error));
  EXPECT_NE(error.find("cannot read cost profile '/nonexistent.json'"),
            std::string::npos)
      << error;
  llvm::sys::fs::remove(path);
  llvm::sys::fs::remove(fast);
}
