//===- TensorParallelTest.cpp - Tensor-parallel slices and collectives ----===//
//
// Megatron-LM's split of a transformer layer (Weitkamp,
// 2024): the shards' slices tile every tensor, the replicated
// key/value heads come once per shard of their group, and a layer moves
// exactly the blog's "Communication Overhead" table through its
// all-reduces.

#include "CommLayout.h"
#include "CpuDevice.h"
#include "LocalGroup.h"
#include "Stage.h"

#include <gtest/gtest.h>

#include <cmath>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <thread>

using namespace sluice::rt;
using sluice::rt::test_support::LocalGroup;

namespace {

ModelConfig layerModel(int64_t heads, int64_t kvHeads, const char *mlp,
                       bool bias) {
  ModelConfig m;
  m.name = "tp";
  m.seqLen = 8;
  m.microBatch = 2;
  m.hidden = 16;
  LayerConfig emb;
  emb.kind = LayerKind::Embedding;
  emb.vocab = 13;
  LayerConfig t;
  t.kind = LayerKind::Transformer;
  t.heads = heads;
  t.kvHeads = kvHeads;
  t.headDim = 16 / heads;
  t.ffn = 32;
  t.bias = bias;
  EXPECT_TRUE(parseMlpType(mlp, t.mlp)) << mlp;
  t.norm = bias ? NormType::LayerNorm : NormType::RmsNorm;
  LayerConfig out;
  out.kind = LayerKind::Output;
  out.vocab = 13;
  out.norm = t.norm;
  m.layers = {emb, t, out};
  return m;
}

/// How many shards (of tp, on each of ep expert-group members) hold each
/// element of each tensor of layer 1.
std::map<std::string, std::vector<int>>
coverage(const ModelConfig &model, int tp, int ep = 1) {
  std::map<std::string, std::vector<int>> seen;
  for (int j = 0; j < ep; ++j)
  for (int t = 0; t < tp; ++t)
    for (const ParameterSpec &spec :
         getLayerParameters(model, 1, {t, tp, j, ep})) {
      std::vector<int> &count = seen[spec.name];
      count.resize(getWholeElements(spec), 0);
      int64_t local = 0;
      for (const TensorRun &run : getRuns(spec)) {
        EXPECT_EQ(run.local, local) << spec.name;
        local += run.count;
        for (int64_t i = 0; i < run.count; ++i)
          ++count.at(run.global + i);
      }
      EXPECT_EQ(local, spec.size()) << spec.name;
    }
  return seen;
}

TEST(TensorParallel, SlicesTileEveryTensor) {
  // Heads divide among the shards: every element of a sliced tensor is on
  // exactly one shard; norms and the row-parallel biases on all of them.
  for (int tp : {2, 4}) {
    ModelConfig model = layerModel(4, 4, "gelu", /*bias=*/true);
    ASSERT_EQ(checkTensorParallel(model, tp), "");
    for (const auto &[name, count] : coverage(model, tp)) {
      bool whole = name.find("norm") != std::string::npos ||
                   name == "layers.0.attn.out.bias" ||
                   name == "layers.0.mlp.down.bias";
      for (size_t i = 0; i < count.size(); ++i)
        ASSERT_EQ(count[i], whole ? tp : 1)
            << name << "[" << i << "], tp " << tp;
    }
  }
}

// Expert parallelism (docs/moe.md): member j of an expert group of ep holds
// experts [j E/ep, (j+1) E/ep) of every sparse layer, whole or split over
// the tensor-parallel shards as each expert is without it. Over the
// members and shards every element of an expert map is held exactly once,
// each member's share is marked (its gradient's own sum) and named apart;
// the router and the attention are on every member, unmarked.
TEST(ExpertParallel, ExpertSharesTileEveryExpertMap) {
  ModelConfig model = layerModel(4, 4, "swiglu", /*bias=*/false);
  model.layers[1].experts = 4;
  model.layers[1].topK = 2;
  for (int tp : {1, 2})
    for (int ep : {1, 2, 4}) {
      for (int j = 0; j < ep; ++j)
        for (int t = 0; t < tp; ++t)
          for (const ParameterSpec &spec :
               getLayerParameters(model, 1, {t, tp, j, ep})) {
            bool expert = spec.name.find("mlp.experts.") != std::string::npos;
            EXPECT_EQ(spec.expertShare, expert && ep > 1) << spec.name;
            if (expert && ep > 1)
              EXPECT_NE(spec.sliceName.find("ep" + std::to_string(j) + "of" +
                                            std::to_string(ep)),
                        std::string::npos)
                  << spec.name << ": " << spec.sliceName;
            if (expert)
              EXPECT_EQ(spec.size() * ep * tp,
                        4 * 16 * 32) // experts x hidden x ffn
                  << spec.name << " tp " << tp << " ep " << ep;
          }
      for (const auto &[name, count] : coverage(model, tp, ep)) {
        bool expert = name.find("mlp.experts.") != std::string::npos;
        bool sliced = expert || name.find("attn.") != std::string::npos;
        int want = expert ? 1 : (sliced ? ep : ep * tp);
        for (size_t i = 0; i < count.size(); ++i)
          ASSERT_EQ(count[i], want)
              << name << "[" << i << "], tp " << tp << ", ep " << ep;
      }
    }
}

// The communicators an expert group needs, on every rank alike: one over
// its members (the dispatch's all-to-alls, on the compute stream) and,
// when more than one group holds the same experts, one over the replicas
// holding them (the expert maps' sums, ZeRO-1's parts).
/// Two devices of 4 replicas, `cp` context ranks each, the 4 experts of
/// layer 1 over 2.
Plan expertPlan(int cp) {
  Plan plan;
  plan.model = layerModel(4, 4, "swiglu", false);
  plan.model.layers[1].experts = 4;
  plan.devices = 2;
  plan.dp = 4;
  plan.ep = 2;
  plan.cp = cp;
  plan.stages.resize(1);
  return plan;
}

TEST(ExpertParallel, GroupsAreConsecutiveReplicas) {
  Plan plan = expertPlan(1);
  std::map<int, std::vector<int>> groups; // experts color -> ranks
  std::map<int, std::vector<int>> holders; // expert-replicas -> replicas
  for (int rank = 0; rank < plan.getRanks(); ++rank) {
    MeshPosition at = getMeshPosition(plan, rank);
    int found = 0;
    for (const CommSpec &spec : getCommLayout(plan, at)) {
      if (spec.name == "experts") {
        ++found;
        EXPECT_EQ(spec.key, at.replica % 2) << "rank " << rank;
        groups[spec.color].push_back(rank);
      }
      if (spec.name == "expert-replicas") {
        ++found;
        EXPECT_EQ(spec.key, at.replica / 2) << "rank " << rank;
        holders[spec.color].push_back(at.replica);
      }
    }
    EXPECT_EQ(found, 2) << "rank " << rank;
  }
  // Two devices x two groups of two consecutive replicas.
  ASSERT_EQ(groups.size(), 4u);
  for (const auto &[color, ranks] : groups) {
    ASSERT_EQ(ranks.size(), 2u);
    MeshPosition a = getMeshPosition(plan, ranks[0]),
                 b = getMeshPosition(plan, ranks[1]);
    EXPECT_EQ(a.device, b.device);
    EXPECT_EQ(a.replica / 2, b.replica / 2);
    EXPECT_NE(a.replica, b.replica);
  }
  // The replicas holding the same experts: every other one, per device.
  ASSERT_EQ(holders.size(), 4u);
  for (const auto &[color, replicas] : holders)
    EXPECT_EQ(replicas, (std::vector<int>{replicas.front() % 2,
                                          replicas.front() % 2 + 2}));
}

// With context parallelism (issue 56): an expert group is ep replicas at
// one context rank (each sends its own tokens), and the ranks holding the
// same experts are every ep-th replica's context ranks, dp / ep x cp of
// them, in the order (replica / ep, context).
TEST(ExpertParallel, GroupsSitAtOneContextRank) {
  Plan plan = expertPlan(2);
  ASSERT_EQ(plan.getExpertReplicas(), 4);
  std::map<int, std::vector<MeshPosition>> groups, holders;
  for (int rank = 0; rank < plan.getRanks(); ++rank) {
    MeshPosition at = getMeshPosition(plan, rank);
    for (const CommSpec &spec : getCommLayout(plan, at)) {
      if (spec.name == "experts") {
        EXPECT_EQ(spec.key, at.replica % 2) << "rank " << rank;
        groups[spec.color].push_back(at);
      }
      if (spec.name == "expert-replicas") {
        EXPECT_EQ(spec.key, at.replica / 2 * 2 + at.context) << "rank " << rank;
        holders[spec.color].push_back(at);
      }
    }
  }
  // Two devices x two context ranks x two groups of two replicas.
  ASSERT_EQ(groups.size(), 8u);
  for (const auto &[color, members] : groups) {
    ASSERT_EQ(members.size(), 2u);
    EXPECT_EQ(members[0].device, members[1].device);
    EXPECT_EQ(members[0].context, members[1].context);
    EXPECT_EQ(members[0].replica / 2, members[1].replica / 2);
    EXPECT_NE(members[0].replica, members[1].replica);
  }
  // Two devices x two members: each over replicas {j, j + 2} at both
  // context ranks.
  ASSERT_EQ(holders.size(), 4u);
  for (const auto &[color, ranks] : holders) {
    ASSERT_EQ(ranks.size(), 4u);
    std::set<std::pair<int, int>> seen;
    for (const MeshPosition &at : ranks) {
      EXPECT_EQ(at.device, ranks[0].device);
      EXPECT_EQ(at.replica % 2, ranks[0].replica % 2);
      seen.insert({at.replica, at.context});
    }
    EXPECT_EQ(seen.size(), 4u);
  }
}

// Megatron-LM's vocabulary-parallel embedding and output layer: shard t
// holds rows [t ceil(V/tp), ...) of each table, the last ones fewer when
// tp does not divide V (13 rows over 2, 4 and 8 shards); a tied table
// splits alike at both ends; a vocabulary too small for the shards is
// named.
TEST(TensorParallel, VocabularyRowsTileTheTables) {
  for (bool tied : {false, true})
    for (int tp : {2, 4, 8}) {
      ModelConfig model = layerModel(4, 4, "gelu", /*bias=*/true);
      model.layers[1].heads = model.layers[1].kvHeads = 8;
      model.layers[1].headDim = 2;
      model.layers[2].tied = tied;
      std::map<std::string, std::vector<int>> seen;
      for (int layer : {0, 2})
        for (int t = 0; t < tp; ++t)
          for (const ParameterSpec &spec :
               getLayerParameters(model, layer, {t, tp})) {
            if (spec.name == "final_norm.weight" ||
                spec.name == "final_norm.bias")
              continue;
            ASSERT_EQ(spec.name,
                      layer == 2 && !tied ? "lm_head.weight" : "embed.tokens");
            ASSERT_EQ(spec.rows.size(), 1u);
            auto [first, count] = getShardVocabRows(13, t, tp);
            EXPECT_EQ(spec.rows[0].first, first);
            EXPECT_EQ(spec.shape, (std::vector<int64_t>{count, 16}));
            std::vector<int> &c = seen[spec.name];
            c.resize(getWholeElements(spec), 0);
            for (const TensorRun &run : getRuns(spec))
              for (int64_t i = 0; i < run.count; ++i)
                ++c.at(run.global + i);
          }
      ASSERT_EQ(seen.size(), tied ? 1u : 2u);
      // Each element once per table end.
      for (const auto &[name, count] : seen)
        for (size_t i = 0; i < count.size(); ++i)
          ASSERT_EQ(count[i], tied ? 2 : 1)
              << name << "[" << i << "], tp " << tp;
      ModelConfig shard = getTensorShardModel(model, tp);
      EXPECT_EQ(shard.layers[2].vocabShards, tp);
      EXPECT_EQ(getShardVocabColumns(shard.layers[2]), (13 + tp - 1) / tp);
    }
  ModelConfig small = layerModel(4, 4, "gelu", /*bias=*/true);
  small.layers[0].vocab = 5; // ceil(5/4) = 2 rows: 2, 2, 1, none
  EXPECT_EQ(checkTensorParallel(small, 4),
            "the embedding's 5-row table leaves the last of 4 tensor-parallel "
            "shards no rows");
  small.layers[0].vocab = 13;
  small.layers[2].vocab = 5;
  EXPECT_EQ(checkTensorParallel(small, 4),
            "the output layer's 5-row table leaves the last of 4 "
            "tensor-parallel shards no rows");
}

// Vocabulary Parallelism over pp x tp: a device's padded rows of a table
// split again over its tensor-parallel shards, ceil(rows / tp) each within
// the device's range; every real row of the table is on exactly one
// (device, shard), padding on none (61 rows padded to 64 over 2 devices,
// and to 66 over 3; 2, 3 and 4 shards).
TEST(TensorParallel, VocabularyShardsSplitAgainOverTheShards) {
  for (auto [padded, devices] : {std::pair<int64_t, int>{64, 2}, {66, 3}})
    for (int tp : {1, 2, 3, 4}) {
      std::vector<int> seen(61, 0);
      int64_t rows = padded / devices;
      for (int d = 0; d < devices; ++d)
        for (int t = 0; t < tp; ++t) {
          ParameterSpec spec = getTableShard("lm_head.weight", 61, padded, 8, d,
                                             devices, {t, tp});
          EXPECT_EQ(spec.shape[0], (rows + tp - 1) / tp);
          EXPECT_GE(spec.firstRow, d * rows);
          EXPECT_LE(spec.firstRow + spec.getValidRows(), (d + 1) * rows);
          for (int64_t r = 0; r < spec.getValidRows(); ++r)
            ++seen.at(spec.firstRow + r);
        }
      for (size_t r = 0; r < seen.size(); ++r)
        ASSERT_EQ(seen[r], 1)
            << "row " << r << ", " << devices << " devices, tp " << tp;
    }
}

TEST(TensorParallel, FewerKeyValueHeadsThanShardsAreReplicated) {
  // 2 key/value heads over 4 shards: each held by the two shards whose
  // query heads read it; query columns once.
  ModelConfig model = layerModel(4, 2, "swiglu", /*bias=*/false);
  ASSERT_EQ(checkTensorParallel(model, 4), "");
  std::vector<int> qkv = coverage(model, 4).at("layers.0.attn.qkv.weight");
  int64_t h = 16, width = 16 + 2 * 8;
  for (int64_t row = 0; row < h; ++row)
    for (int64_t col = 0; col < width; ++col)
      ASSERT_EQ(qkv[row * width + col], col < 16 ? 1 : 2) << row << "," << col;
  // Shard 1's query head 1 reads key/value head 0 (groups of two), shard 2's
  // head 2 reads head 1.
  for (auto [shard, kvHead] : {std::pair{1, 0}, std::pair{2, 1}}) {
    ParameterSpec spec = getLayerParameters(model, 1, {shard, 4})[1];
    ASSERT_EQ(spec.name, "layers.0.attn.qkv.weight");
    ASSERT_EQ(spec.columns.size(), 3u);
    EXPECT_EQ(spec.columns[0].first, shard * 4);
    EXPECT_EQ(spec.columns[1].first, 16 + kvHead * 4);
    EXPECT_EQ(spec.columns[2].first, 24 + kvHead * 4);
  }
  ModelConfig shard = getTensorShardModel(model, 4);
  EXPECT_EQ(shard.layers[1].heads, 1);
  EXPECT_EQ(shard.layers[1].kvHeads, 1);
  EXPECT_EQ(shard.layers[1].ffn, 8);
}

TEST(TensorParallel, LayersThatDoNotSplitAreNamed) {
  EXPECT_EQ(checkTensorParallel(layerModel(4, 4, "gelu", true), 3),
            "layer 0: 4 attention heads do not divide among 3 tensor-parallel "
            "shards");
  ModelConfig ffn = layerModel(4, 4, "gelu", true);
  ffn.layers[1].ffn = 30;
  EXPECT_EQ(checkTensorParallel(ffn, 4),
            "layer 0: the feed-forward width 30 does not divide among 4 "
            "tensor-parallel shards");
  ModelConfig kv = layerModel(4, 4, "gelu", true);
  kv.layers[1].heads = 6;
  kv.layers[1].kvHeads = 3;
  EXPECT_EQ(checkTensorParallel(kv, 2),
            "layer 0: 3 key/value heads neither divide among 2 "
            "tensor-parallel shards nor divide 2 (to be replicated)");
}

/// Host memory for `bytes` of state, as floats.
std::vector<float> stateFor(int64_t bytes) {
  return std::vector<float>((bytes + 3) / 4, 0.0f);
}

/// A stage's buffers for one pass over slice `s` of `rows` rows: its input
/// (0.25), output, output gradient (1.0) and input gradient, `part`
/// elements each; its forward, weight and key/value state and workspace.
struct PassBuffers {
  std::vector<float> x, y, dy, dx, f, w, kv, work;
};
PassBuffers buffersFor(const StageRunner &stage, const SliceShape &s,
                       int64_t rows, int64_t part) {
  return {std::vector<float>(part, 0.25f),
          std::vector<float>(part),
          std::vector<float>(part, 1.0f),
          std::vector<float>(part),
          stateFor(stage.getForwardStateBytes(s)),
          stateFor(stage.getWeightStateBytes(s)),
          stateFor(stage.getKeyValueBytes(rows)),
          stateFor(stage.getWorkspaceBytes(s))};
}

/// Shard 1 of `tp` of layer `layer` of `whole`, alone on a stage, its
/// parameters allocated; the counts its group sums go to `sums`.
struct ShardStage {
  ShardStage(const ModelConfig &whole, int layer, int tp)
      : shard(getTensorShardModel(whole, tp)) {
    static CpuDevice cpu;
    for (const ParameterSpec &spec : getLayerParameters(whole, layer, {1, tp}))
      store.add(spec);
    if (!store.allocate(cpu, Precision::fp32(), 7))
      return;
    runner = std::make_unique<StageRunner>(
        shard, std::vector<int>{layer}, store,
        cpu.getKernels(StreamKind::Compute), Precision::fp32());
    runner->setTensorParallel(
        [this](DevicePtr, int64_t count, Reduction reduction) {
          (reduction == Reduction::Sum ? sums : maxima).push_back(count);
        },
        1);
  }
  ModelConfig shard;
  ParameterStore store;
  std::unique_ptr<StageRunner> runner; // null if allocation failed
  std::vector<int64_t> sums, maxima;
};

// The blog's "Communication Overhead" table, per transformer layer: the
// attention block and the MLP each all-reduce one N_batch x N_ctx x
// D_model activation in the forward pass and one in the backward pass;
// the weight-gradient pass (W) moves nothing.
TEST(TensorParallel, CommunicationVolumeMatchesTheBlogTable) {
  for (const char *mlp : {"gelu", "swiglu"}) {
    ModelConfig model = layerModel(4, 2, mlp, std::string(mlp) == "gelu");
    ShardStage shard(model, 1, /*tp=*/2);
    ASSERT_TRUE(shard.runner);
    StageRunner &stage = *shard.runner;
    std::vector<int64_t> &sums = shard.sums;
    int64_t rows = model.microBatch, seq = model.seqLen, h = model.hidden;
    SliceShape s{rows, seq, 0};
    std::mt19937 rng(3);
    std::normal_distribution<float> normal;
    std::vector<float> x(rows * seq * h), y(x.size()), dy(x.size()),
        dx(x.size());
    for (float &v : x)
      v = normal(rng);
    for (float &v : dy)
      v = normal(rng);
    std::vector<int32_t> tokens(rows * (seq + 1), 1);
    TokenRows batch{tokens.data(), seq + 1};
    std::vector<float> f = stateFor(stage.getForwardStateBytes(s)),
                       w = stateFor(stage.getWeightStateBytes(s)),
                       kv = stateFor(stage.getKeyValueBytes(rows)),
                       work = stateFor(stage.getWorkspaceBytes(s));
    int64_t activation = rows * seq * h; // N_batch x N_ctx x D_model
    stage.forward(s, batch, x.data(), y.data(), f.data(), kv.data(),
                  work.data(), nullptr);
    EXPECT_EQ(sums, (std::vector<int64_t>{activation, activation})) << mlp;
    sums.clear();
    stage.backwardInput(s, batch, dy.data(), dx.data(), f.data(), w.data(),
                        kv.data(), work.data(), 1.0f);
    EXPECT_EQ(sums, (std::vector<int64_t>{activation, activation})) << mlp;
    sums.clear();
    stage.backwardWeight(s, batch, f.data(), w.data(), work.data());
    EXPECT_TRUE(sums.empty()) << mlp;
  }
}

// The table's "Input Embedding" row: the vocabulary-parallel lookup sums
// one N_batch x N_ctx x D_model activation over the group in F; B and W
// move nothing.
TEST(TensorParallel, EmbeddingSumsItsLookupsOnce) {
  ModelConfig model = layerModel(4, 4, "gelu", /*bias=*/true);
  ShardStage shard(model, 0, /*tp=*/2);
  ASSERT_TRUE(shard.runner);
  StageRunner &stage = *shard.runner;
  std::vector<int64_t> &sums = shard.sums;
  int64_t rows = model.microBatch, seq = model.seqLen, h = model.hidden;
  SliceShape s{rows, seq, 0};
  std::vector<int32_t> tokens(rows * (seq + 1));
  for (size_t i = 0; i < tokens.size(); ++i)
    tokens[i] = int32_t(i % 13);
  TokenRows batch{tokens.data(), seq + 1};
  std::vector<float> y(rows * seq * h), dy(y.size(), 1.0f);
  std::vector<float> f = stateFor(stage.getForwardStateBytes(s));
  std::vector<float> w = stateFor(stage.getWeightStateBytes(s));
  std::vector<float> work = stateFor(stage.getWorkspaceBytes(s));
  stage.forward(s, batch, nullptr, y.data(), f.data(), nullptr, work.data(),
                nullptr);
  EXPECT_EQ(sums, std::vector<int64_t>(1, rows * seq * h));
  // Shard 1 holds rows 7..12: tokens below 7 look up zeros before the sum.
  for (int64_t c = 0; c < h; ++c)
    EXPECT_EQ(y[c], 0.0f) << "token 0, column " << c;
  sums.clear();
  stage.backwardInput(s, batch, dy.data(), nullptr, f.data(), w.data(), nullptr,
                      work.data(), 1.0f);
  stage.backwardWeight(s, batch, f.data(), w.data(), work.data());
  EXPECT_TRUE(sums.empty());
}

// Sequence parallelism (Korthikanti et al.; the blog's "Sequence
// Parallelism"): each all-reduce of the table becomes a reduce-scatter and
// an all-gather of the same N_batch x N_ctx x D_model activation, each
// moving a shard's 1/tp of it -- so the volume is the all-reduces', with
// the norms between them on 1/tp of the tokens. Per pass, in order:
//  * transformer F: gather (QKV's input), scatter (attention out), gather
//    (the MLP's input), scatter (down); B: their transposes -- gather the
//    down projection's output gradient, scatter the MLP's input gradient,
//    gather the attention output's, scatter QKV's input gradient; W
//    gathers the two norms' outputs again;
//  * embedding: F scatters the lookups, B gathers the gradient, W nothing;
//  * output layer: F gathers the final norm's output and all-reduces the
//    two per-token statistics (rows x tokens, whole); B scatters the norm
//    output's gradient; W gathers the norm's output again.
TEST(TensorParallel,
     SequenceParallelismScattersAndGathersWhatTheAllReducesDid) {
  const int tp = 2;
  ModelConfig whole = layerModel(4, 2, "swiglu", /*bias=*/false);
  ModelConfig shard = getTensorShardModel(whole, tp, /*sequenceParallel=*/true);
  ASSERT_EQ(shard.sequenceShards, tp);
  int64_t rows = whole.microBatch, seq = whole.seqLen, h = whole.hidden;
  int64_t rt = rows * seq, part = rt * h / tp;
  SliceShape s{rows, seq, 0};
  EXPECT_EQ(getMessageElements(shard, s), part);
  std::vector<int32_t> tokens(rows * (seq + 1));
  for (size_t i = 0; i < tokens.size(); ++i)
    tokens[i] = int32_t(i % 13);
  TokenRows batch{tokens.data(), seq + 1};
  static CpuDevice cpu;
  for (int layer : {0, 1, 2}) {
    ParameterStore store;
    for (const ParameterSpec &spec : getLayerParameters(whole, layer, {1, tp}))
      store.add(spec);
    ASSERT_TRUE(store.allocate(cpu, Precision::fp32(), 7));
    StageRunner stage(shard, {layer}, store,
                      cpu.getKernels(StreamKind::Compute), Precision::fp32());
    // What each collective moved, as "gather", "scatter", "sum" or "max"
    // and its count per shard (sums and maxima: the whole count); a
    // gather's wait as "waited" (F and B wait at once; W starts both of
    // its gathers before it waits for either).
    std::vector<std::pair<std::string, int64_t>> moved;
    StageRunner::TensorGroup group;
    group.reduce = [&](DevicePtr, int64_t count, Reduction r) {
      moved.push_back({r == Reduction::Sum ? "sum" : "max", count});
    };
    group.reduceScatter = [&](DevicePtr, DevicePtr out, int64_t count) {
      moved.push_back({"scatter", count});
      std::fill(out.f32(), out.f32() + count, 0.5f);
      return block::PendingCollective();
    };
    group.allGather = [&](DevicePtr, int64_t count) {
      moved.push_back({"gather", count});
      return block::PendingCollective([&moved, count] {
        moved.push_back({"waited", count});
      });
    };
    stage.setTensorParallel(std::move(group), 1);
    auto [x, y, dy, dx, f, w, kv, work] = buffersFor(stage, s, rows, part);
    double loss = 0;
    bool first = layer == 0, last = layer == 2;
    std::vector<std::pair<std::string, int64_t>> gathers = {{"gather", part},
                                                            {"waited", part}},
                                                 scatters = {{"scatter", part}};
    stage.forward(s, batch, first ? nullptr : x.data(),
                  last ? nullptr : y.data(), f.data(), kv.data(), work.data(),
                  &loss);
    auto expectF =
        layer == 0 ? scatters
        : layer == 1
            ? decltype(moved){{"gather", part},  {"waited", part},
                              {"scatter", part}, {"gather", part},
                              {"waited", part},  {"scatter", part}}
            : decltype(moved){
                  {"gather", part}, {"waited", part}, {"max", rt}, {"sum", rt}};
    EXPECT_EQ(moved, expectF) << "F of layer " << layer;
    moved.clear();
    stage.backwardInput(s, batch, last ? nullptr : dy.data(),
                        first ? nullptr : dx.data(), f.data(), w.data(),
                        kv.data(), work.data(), 1.0f);
    auto expectB = layer == 0 ? gathers
                   : layer == 1
                       ? decltype(moved){{"gather", part},  {"waited", part},
                                         {"scatter", part}, {"gather", part},
                                         {"waited", part},  {"scatter", part}}
                       : scatters;
    EXPECT_EQ(moved, expectB) << "B of layer " << layer;
    moved.clear();
    stage.backwardWeight(s, batch, f.data(), w.data(), work.data());
    auto expectW = layer == 0   ? decltype(moved){}
                   : layer == 1 ? decltype(moved){{"gather", part},
                                                  {"gather", part},
                                                  {"waited", part},
                                                  {"waited", part}}
                                : gathers;
    EXPECT_EQ(moved, expectW) << "W of layer " << layer;
  }
}

// A BW pass under tensor parallelism (TransformerBlock::backward with
// rowWeights): B accumulates the row-parallel projections' weight
// gradients while the group sums the input gradients of the
// column-parallel ones -- the down projection's before the feed-forward
// input's sum is waited for, the attention output's before the attention
// input's -- and W skips them. The gradients are bit for bit those of B
// then W, with and without sequence parallelism.
TEST(TensorParallel, BackwardTakesTheRowParallelWeightsWhileTheGroupSums) {
  const int tp = 2;
  ModelConfig whole = layerModel(4, 2, "swiglu", /*bias=*/false);
  static CpuDevice cpu;
  for (bool sequence : {false, true}) {
    ModelConfig shard = getTensorShardModel(whole, tp, sequence);
    int64_t rows = whole.microBatch, seq = whole.seqLen;
    SliceShape s{rows, seq, 0};
    int64_t part = getMessageElements(shard, s);
    const std::string down = getLayerPrefix(whole, 1) + "mlp.down.weight",
                      out = getLayerPrefix(whole, 1) + "attn.out.weight";
    auto magnitude = [](const ParameterStore &store, const std::string &name) {
      const ParameterSpec *found = nullptr;
      for (const ParameterSpec &spec : store.specs())
        if (spec.name == name)
          found = &spec;
      EXPECT_NE(found, nullptr) << name;
      double sum = 0;
      if (found)
        for (int64_t i = 0; i < found->size(); ++i)
          sum += std::fabs(store.grad(name).f32()[i]);
      return sum;
    };
    // Every parameter's gradient after B and W; `events`: the group's
    // started sums and, at each wait, the two gradients' magnitudes then.
    auto run = [&](bool rowWeights, std::vector<std::string> &events) {
      ParameterStore store;
      for (const ParameterSpec &spec :
           getLayerParameters(whole, 1, {1, tp}))
        store.add(spec);
      EXPECT_TRUE(store.allocate(cpu, Precision::fp32(), 7));
      StageRunner stage(shard, {1}, store,
                        cpu.getKernels(StreamKind::Compute), Precision::fp32());
      auto waited = [&events, &store, &magnitude, down, out] {
        events.push_back(std::string("waited: down ") +
                         (magnitude(store, down) > 0 ? "done" : "zero") +
                         ", out " +
                         (magnitude(store, out) > 0 ? "done" : "zero"));
      };
      StageRunner::TensorGroup group;
      group.reduce = [](DevicePtr, int64_t, Reduction) {};
      group.startReduce = [&events, waited](DevicePtr, int64_t) {
        events.push_back("sum");
        return block::PendingCollective(waited);
      };
      group.reduceScatter = [&events, waited](DevicePtr, DevicePtr out,
                                              int64_t count) {
        events.push_back("scatter");
        std::fill(out.f32(), out.f32() + count, 0.5f);
        return block::PendingCollective(waited);
      };
      group.allGather = [](DevicePtr, int64_t) {
        return block::PendingCollective();
      };
      stage.setTensorParallel(std::move(group), 1);
      auto [x, y, dy, dx, f, w, kv, work] = buffersFor(stage, s, rows, part);
      std::vector<int32_t> tokens(rows * (seq + 1), 1);
      TokenRows batch{tokens.data(), seq + 1};
      double loss = 0;
      stage.forward(s, batch, x.data(), y.data(), f.data(), kv.data(),
                    work.data(), &loss);
      events.clear();
      stage.backwardInput(s, batch, dy.data(), dx.data(), f.data(), w.data(),
                          kv.data(), work.data(), 1.0f, nullptr, rowWeights);
      events.push_back("W");
      stage.backwardWeight(s, batch, f.data(), w.data(), work.data(), nullptr,
                           rowWeights);
      std::map<std::string, std::vector<float>> grads;
      for (const ParameterSpec &spec : store.specs())
        grads[spec.name].assign(store.grad(spec.name).f32(),
                                store.grad(spec.name).f32() + spec.size());
      EXPECT_GT(magnitude(store, down), 0.0);
      EXPECT_GT(magnitude(store, out), 0.0);
      return grads;
    };
    std::vector<std::string> plain, overlapped;
    auto expected = run(false, plain);
    auto got = run(true, overlapped);
    std::string sum = sequence ? "scatter" : "sum";
    EXPECT_EQ(plain, (std::vector<std::string>{
                         sum, "waited: down zero, out zero", sum,
                         "waited: down zero, out zero", "W"}))
        << (sequence ? "sequence-parallel" : "tensor-parallel");
    EXPECT_EQ(overlapped, (std::vector<std::string>{
                              sum, "waited: down done, out zero", sum,
                              "waited: down done, out done", "W"}))
        << (sequence ? "sequence-parallel" : "tensor-parallel");
    EXPECT_EQ(got, expected)
        << (sequence ? "sequence-parallel" : "tensor-parallel");
  }
}

// Megatron-LM's vocabulary-parallel cross-entropy (Weitkamp,
// 2024, "Cross-Entropy"): shards that each hold rows of
// the LM head (13 rows over 2, 3 and 4 shards: 7+6, 5+5+3, 4+4+4+1) agree
// on each token's maximum and sum of exponentials, and together give the
// whole layer's loss, its input gradient on every shard, their rows of the
// head's gradient and the whole final norm's. F reduces one fp32 per token
// twice (maximum, then sum), B the norm output's gradient once, W nothing.
TEST(TensorParallel, OutputLayerSplitsTheCrossEntropy) {
  ModelConfig model = layerModel(4, 4, "gelu", /*bias=*/true);
  model.layers[1].heads = model.layers[1].kvHeads = 12;
  model.layers[1].ffn = 36;
  int64_t rows = model.microBatch, seq = model.seqLen, h = model.hidden;
  int64_t rt = rows * seq;
  SliceShape s{rows, seq, 0};
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  std::vector<float> x(rt * h);
  for (float &v : x)
    v = normal(rng);
  std::vector<int32_t> tokens(rows * (seq + 1));
  for (int32_t &t : tokens)
    t = int32_t(rng() % 13);
  TokenRows batch{tokens.data(), seq + 1};
  float scale = 1.0f / float(rt);

  struct Result {
    double loss = 0;
    std::vector<float> dx, head, norm;
    std::vector<std::pair<int64_t, Reduction>> reduced;
  };
  // One stage holding the output layer (layer 2) of `stageModel`, with
  // `specs`; `group` set: shard `index` of it.
  auto run = [&](const ModelConfig &stageModel,
                 const std::vector<ParameterSpec> &specs, LocalGroup *group,
                 int index, Result &out) {
    CpuDevice cpu;
    ParameterStore store;
    for (const ParameterSpec &spec : specs)
      store.add(spec);
    ASSERT_TRUE(store.allocate(cpu, Precision::fp32(), 7));
    StageRunner stage(stageModel, {2}, store,
                      cpu.getKernels(StreamKind::Compute), Precision::fp32());
    if (group)
      stage.setTensorParallel(
          [&](DevicePtr data, int64_t count, Reduction reduction) {
            out.reduced.push_back({count, reduction});
            group->allReduce(index, data.f32(), count, reduction);
          },
          index);
    std::vector<float> f = stateFor(stage.getForwardStateBytes(s)),
                       w = stateFor(stage.getWeightStateBytes(s)),
                       work = stateFor(stage.getWorkspaceBytes(s));
    out.dx.assign(rt * h, 0.0f);
    stage.forward(s, batch, x.data(), nullptr, f.data(), nullptr, work.data(),
                  &out.loss);
    stage.backwardInput(s, batch, nullptr, out.dx.data(), f.data(), w.data(),
                        nullptr, work.data(), scale);
    stage.backwardWeight(s, batch, f.data(), w.data(), work.data());
    const ParameterSpec &head = store.specs().back();
    ASSERT_EQ(head.name, "lm_head.weight");
    float *g = store.grad(head.name).f32();
    out.head.assign(g, g + head.size());
    float *n = store.grad("final_norm.weight").f32();
    out.norm.assign(n, n + h);
  };
  Result whole;
  run(model, getLayerParameters(model, 2), nullptr, 0, whole);
  ASSERT_GT(whole.loss, 0.0);

  for (int tp : {2, 3, 4}) {
    ASSERT_EQ(checkTensorParallel(model, tp), "") << tp;
    ModelConfig shardModel = getTensorShardModel(model, tp);
    LocalGroup group(tp);
    std::vector<Result> shards(tp);
    std::vector<std::thread> threads;
    for (int t = 0; t < tp; ++t)
      threads.emplace_back([&, t] {
        run(shardModel, getLayerParameters(model, 2, {t, tp}), &group, t,
            shards[t]);
      });
    for (std::thread &thread : threads)
      thread.join();
    double loss = 0;
    for (int t = 0; t < tp; ++t) {
      const Result &r = shards[t];
      loss += r.loss;
      EXPECT_EQ(r.reduced, (std::vector<std::pair<int64_t, Reduction>>{
                               {rt, Reduction::Max},
                               {rt, Reduction::Sum},
                               {rt * h, Reduction::Sum}}))
          << "tp " << tp;
      for (int64_t i = 0; i < rt * h; ++i)
        ASSERT_NEAR(r.dx[i], whole.dx[i], 1e-5) << "dx[" << i << "], tp " << tp;
      for (int64_t i = 0; i < h; ++i)
        ASSERT_NEAR(r.norm[i], whole.norm[i], 1e-5) << "norm[" << i << "]";
      auto [first, count] = getShardVocabRows(13, t, tp);
      ASSERT_EQ(int64_t(r.head.size()), count * h);
      for (int64_t i = 0; i < count * h; ++i)
        ASSERT_NEAR(r.head[i], whole.head[first * h + i], 1e-5)
            << "head row " << first + i / h << ", tp " << tp;
    }
    EXPECT_NEAR(loss, whole.loss, 1e-4 * whole.loss) << "tp " << tp;
  }
}

} // namespace

namespace {
// What the runtime keeps and recomputes (Layout.h), per transformer layer
// of a slice of R rows x t tokens: selective recomputation moves the
// attention's log-sum-exp (R H t, fp32), its output (R t H d) and the MLP
// activation (R t ffn) from the forward state into the recomputed state;
// full keeps only the stage's input (R t h), none for a stage that embeds.
TEST(Recompute, LayoutMatchesTheClosedForms) {
  ModelConfig model = layerModel(4, 2, "swiglu", /*bias=*/false);
  Precision fp32 = Precision::fp32();
  SliceShape s{2, 8, 0};
  int64_t rt = 16, h = 16, hd = 16, f = 32, H = 4;
  auto aligned = [](int64_t floats) {
    return (floats * 4 + kRegionAlignment - 1) / kRegionAlignment *
           kRegionAlignment;
  };
  int64_t recomputed = aligned(2 * H * 8) + aligned(rt * hd) + aligned(rt * f);
  int64_t none = getForwardStateBytes(model, {1}, s, fp32);
  EXPECT_EQ(getRecomputedStateBytes(model, {1}, s, fp32, Recompute::Selective),
            recomputed);
  EXPECT_EQ(getForwardStateBytes(model, {1}, s, fp32, Recompute::Selective),
            none - recomputed);
  EXPECT_EQ(getRecomputedStateBytes(model, {1}, s, fp32, Recompute::Full),
            none);
  EXPECT_EQ(getForwardStateBytes(model, {1}, s, fp32, Recompute::Full),
            aligned(rt * h));
  EXPECT_EQ(getForwardStateBytes(model, {0, 1}, s, fp32, Recompute::Full), 0);
  EXPECT_EQ(getRecomputedStateBytes(model, {1}, s, fp32, Recompute::None), 0);
}
} // namespace
