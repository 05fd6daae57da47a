//===- BackendTest.cpp - The device seam on the CPU backend ---------------===//
//
// What the executor relies on from any backend, checked on the CPU one:
// owned, zero-filled typed buffers; conversions between element types
// (bf16 rounds to nearest even, as CUDA's __float2bfloat16_rn); strided
// copies; the loss accumulated on the device; attention state that keeps
// a log-sum-exp per query instead of its probabilities; and the typed
// layout that plan buffers are sized by.

#include "CpuDevice.h"
#include "sluice/Blocks/Layout.h"
#include "Parameters.h"
#include "StepTokens.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

using namespace sluice::rt;

namespace {

TEST(Backend, BuffersAreOwnedTypedAndZeroFilled) {
  CpuDevice device;
  DeviceBuffer a;
  ASSERT_TRUE(device.allocate(DType::BF16, 1000, a));
  EXPECT_EQ(a.getType(), DType::BF16);
  EXPECT_EQ(a.getBytes(), 2000);
  for (int i = 0; i < 1000; ++i)
    ASSERT_EQ(a.get().as<uint16_t>()[i], 0);
  void *memory = a.get().get();
  DeviceBuffer b = std::move(a);
  EXPECT_TRUE(a.empty());
  EXPECT_EQ(b.get().get(), memory);
  b.reset();
  EXPECT_TRUE(b.empty());
  DeviceBuffer bad;
  EXPECT_FALSE(device.allocate(DType::F32, -1, bad));
}

TEST(Backend, DevicePointersCountElementsOfTheirType) {
  float data[8];
  DevicePtr p(data);
  EXPECT_EQ((p + 3).get(), data + 3);
  DevicePtr half(data, DType::BF16);
  EXPECT_EQ((half + 4).get(), data + 2);
  EXPECT_FALSE(DevicePtr() + 5);
  EXPECT_EQ(p.atByte(8, DType::F64).getType(), DType::F64);
}

float bf16Round(float x) {
  CpuDevice device;
  Kernels &k = device.getKernels(StreamKind::Compute);
  uint16_t half = 0;
  float back = 0;
  k.copy(DevicePtr(&half, DType::BF16), DevicePtr(&x), 1);
  k.copy(DevicePtr(&back), DevicePtr(&half, DType::BF16), 1);
  return back;
}

TEST(Backend, Bf16RoundsToNearestEven) {
  // bf16 keeps 8 significant bits: around 1 its step is 2^-7.
  EXPECT_EQ(bf16Round(1.0f), 1.0f);
  EXPECT_EQ(bf16Round(1.0f + 0x1p-8f), 1.0f); // halfway: to even (1.0)
  EXPECT_EQ(bf16Round(1.0f + 3 * 0x1p-8f), 1.0f + 0x1p-6f); // halfway: up
  EXPECT_EQ(bf16Round(1.0f + 0x1p-7f + 1e-4f), 1.0f + 0x1p-7f);
  EXPECT_EQ(bf16Round(-2.5f), -2.5f);
  EXPECT_TRUE(std::isinf(bf16Round(INFINITY)));
}

TEST(Backend, StridedCopyMovesRowBlocksInOneCall) {
  CpuDevice device;
  Kernels &k = device.getKernels(StreamKind::Compute);
  // Two batches of 3 rows of 2 from a [2][3][4] block into a [2][5][2]
  // cache at row 1.
  std::vector<float> src(24), dst(20, -1.0f);
  for (int i = 0; i < 24; ++i)
    src[i] = float(i);
  k.copyStrided(dst.data() + 2, src.data() + 1, {2, 3, 2, 12, 4, 10, 2});
  for (int b = 0; b < 2; ++b)
    for (int r = 0; r < 5; ++r)
      for (int c = 0; c < 2; ++c) {
        float want =
            r >= 1 && r <= 3 ? src[b * 12 + (r - 1) * 4 + 1 + c] : -1.0f;
        EXPECT_EQ(dst[b * 10 + r * 2 + c], want) << b << " " << r << " " << c;
      }
}

/// Token i of row r is r * 1000 + i: what a rank gets shows where from.
class PositionTokens : public TokenSource {
public:
  void getBatch(int64_t, int64_t, int64_t rows, int64_t seqLen,
                std::vector<int32_t> &tokens) override {
    tokens.resize(rows * (seqLen + 1));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i <= seqLen; ++i)
        tokens[r * (seqLen + 1) + i] = int32_t(r * 1000 + i);
  }
};

// Context parallelism: rank 1 of 2 holds chunks 1 and 2 of each slice's 4
// (Megatron-LM's causal balance), each token's label the next token of
// the sequence -- also a chunk's last, which the rank does not hold.
TEST(StepTokens, AContextRankHoldsItsChunksOfEverySlice) {
  CpuDevice device;
  ModelConfig model;
  model.seqLen = 16;
  model.microBatch = 2;
  PositionTokens data;
  StepTokens tokens;
  ASSERT_TRUE(tokens.allocate(device, model, 1, {2, 1, {8, 8}}));
  Stream &stream = device.getStream(StreamKind::Compute);
  tokens.upload(data, 0, device, stream);
  const TokenRows &rows = tokens.getBatches()[0];
  std::vector<int32_t> got(8), labels(8);
  for (int slice = 0; slice < 2; ++slice) {
    SliceShape s{2, 4, 8 * slice, 2};
    for (int64_t r = 0; r < 2; ++r) {
      device.download(got.data() + r * 4, rows.tokensAt(s) + r * rows.stride,
                      4 * sizeof(int32_t), stream);
      device.download(labels.data() + r * 4,
                      rows.labelsAt(s) + r * rows.stride, 4 * sizeof(int32_t),
                      stream);
    }
    for (int64_t r = 0; r < 2; ++r)
      for (int part = 0; part < 2; ++part)
        for (int64_t t = 0; t < 2; ++t) {
          int32_t position = int32_t(s.getChunkOffset(1, part) + t);
          EXPECT_EQ(got[r * 4 + part * 2 + t], r * 1000 + position);
          EXPECT_EQ(labels[r * 4 + part * 2 + t], r * 1000 + position + 1);
        }
  }
  // Slice 0's chunks are positions 2-3 and 4-5, slice 1's 10-11, 12-13.
  EXPECT_EQ(got[0], 10);
  EXPECT_EQ(got[2], 12);
}

TEST(Backend, LossAccumulatesOnTheDevice) {
  CpuDevice device;
  Kernels &k = device.getKernels(StreamKind::Compute);
  DeviceBuffer loss;
  ASSERT_TRUE(device.allocate(DType::F64, 1, loss));
  k.fill(loss.get(), 0.0, 1);
  // Uniform logits over 4 classes: each token costs ln 4.
  std::vector<float> logits(2 * 4, 0.5f), lse(2);
  int32_t labels[3] = {0, 1, 2};
  k.crossEntropyForward(logits.data(), labels, 3, 1, 2, 4, lse.data(),
                        loss.get());
  k.crossEntropyForward(logits.data(), labels, 3, 1, 2, 4, lse.data(),
                        loss.get());
  // The logits stay; each token's log-sum-exp is 0.5 + ln 4.
  EXPECT_EQ(logits[5], 0.5f);
  EXPECT_NEAR(lse[1], 0.5 + std::log(4.0), 1e-6);
  double host = 0;
  device.download(&host, loss.get(), sizeof(host),
                  device.getStream(StreamKind::Compute));
  EXPECT_NEAR(host, 4 * std::log(4.0), 1e-6);
}

TEST(Backend, AttentionKeepsTheLogSumExpOfEachQuery) {
  CpuDevice device;
  Kernels &k = device.getKernels(StreamKind::Compute);
  // One row, 3 queries after 2 tokens of context, 2 heads of 4 sharing
  // one key/value head (grouped-query attention).
  AttentionShape s{1, 3, 2, 5, 2, 4, 1};
  std::mt19937 random(9);
  std::normal_distribution<float> normal;
  std::vector<float> q(3 * 8), keys(5 * 4), values(5 * 4), lse(2 * 3),
      ctx(3 * 8);
  for (auto *v : {&q, &keys, &values})
    for (float &x : *v)
      x = normal(random);
  k.attentionForward(s, q.data(), keys.data(), values.data(), lse.data(),
                     ctx.data());
  for (int h = 0; h < 2; ++h)
    for (int i = 0; i < 3; ++i) {
      double sum = 0;
      for (int j = 0; j <= 2 + i; ++j) {
        double dot = 0;
        for (int e = 0; e < 4; ++e)
          dot += double(q[i * 8 + h * 4 + e]) * keys[j * 4 + e];
        sum += std::exp(dot / 2.0);
      }
      EXPECT_NEAR(lse[h * 3 + i], std::log(sum), 1e-5);
    }
}

ModelConfig layoutModel(int64_t seqLen) {
  ModelConfig m;
  m.seqLen = seqLen;
  m.microBatch = 1;
  m.hidden = 64;
  LayerConfig t;
  t.kind = LayerKind::Transformer;
  t.heads = 4;
  t.kvHeads = 2;
  t.headDim = 16;
  t.ffn = 128;
  t.mlp = MlpType::SwiGlu;
  m.layers = {t};
  return m;
}

TEST(Layout, AttentionStateDoesNotGrowWithContext) {
  // The forward state of a slice keeps a log-sum-exp per query: the same
  // bytes whatever context the slice attends to (FlashAttention), where
  // probabilities would grow with it.
  ModelConfig m = layoutModel(4096);
  Precision fp32 = Precision::fp32();
  int64_t first = getForwardStateBytes(m, {0}, {1, 128, 0}, fp32);
  int64_t last = getForwardStateBytes(m, {0}, {1, 128, 3968}, fp32);
  EXPECT_EQ(first, last);
  // And linear in the slice's length.
  EXPECT_EQ(getForwardStateBytes(m, {0}, {1, 256, 0}, fp32), 2 * first);
}

TEST(Layout, Bf16HalvesActivationsAndKeepsStatisticsInFp32) {
  ModelConfig m = layoutModel(64);
  SliceShape s{1, 64, 0};
  Precision fp32 = Precision::fp32(), bf16 = Precision::bf16();
  int64_t statistics = 0;
  walkForwardState(m, m.layers[0], s, [&](Field, int64_t count, Storage st) {
    if (st == Storage::Fp32)
      statistics += count;
  });
  EXPECT_GT(statistics, 0); // 1/std of both norms, the log-sum-exp
  // Every region aligned: the totals are sums of rounded-up regions.
  auto aligned = [](int64_t bytes) {
    return (bytes + kRegionAlignment - 1) / kRegionAlignment * kRegionAlignment;
  };
  int64_t want32 = 0, want16 = 0;
  walkForwardState(m, m.layers[0], s, [&](Field, int64_t count, Storage st) {
    want32 += aligned(count * 4);
    want16 += aligned(count * (st == Storage::Fp32 ? 4 : 2));
  });
  EXPECT_EQ(getForwardStateBytes(m, {0}, s, fp32), want32);
  EXPECT_EQ(getForwardStateBytes(m, {0}, s, bf16), want16);
  EXPECT_LT(want16, want32);
  // Keys and values in bf16, their gradient accumulators in fp32.
  int64_t cache = 64 * 2 * 16;
  EXPECT_EQ(getKeyValueBytes(m, {0}, 1, bf16),
            aligned(cache * 2) * 2 + aligned(cache * 4) * 2);
  EXPECT_EQ(getMessageBytes(m, s, bf16), 64 * 64 * 2);
}

} // namespace

namespace {
// ZeRO-1's optimizer shard (ParameterStore::shardMoments): Adam over the
// owned ranges with their gradients packed gives those ranges exactly what
// the whole update gives them and leaves the rest alone; sharding keeps the
// owned moments and gathering back puts them in place, zeros elsewhere.
TEST(ParameterStore, ShardedMomentsUpdateTheirRangesAsTheWholeDoes) {
  using namespace sluice::rt;
  CpuDevice cpu;
  auto make = [&](ParameterStore &store) {
    store.add({"a", {7, 3}, InitKind::Normal});
    store.add({"b", {5}, InitKind::Normal});
    ASSERT_TRUE(store.allocate(cpu, Precision::fp32(), 3));
    float *g = store.getGrads().f32();
    for (int64_t i = 0; i < store.getTotalElements(); ++i)
      g[i] = 0.01f * float(i % 7) - 0.02f;
  };
  ParameterStore whole, sharded;
  make(whole);
  make(sharded);
  AdamConfig adam;
  whole.adamStep(adam, 1);
  // Two ranges of the 26 elements, packed in this order.
  std::vector<IndexRange> owned = {{10, 6}, {2, 3}};
  ASSERT_TRUE(sharded.shardMoments(owned));
  std::vector<float> before(sharded.getMasters().f32(),
                            sharded.getMasters().f32() + 26);
  std::vector<float> packed;
  for (const IndexRange &r : owned)
    for (int64_t i = 0; i < r.count; ++i)
      packed.push_back(sharded.getGrads().f32()[r.first + i]);
  sharded.adamStep(adam, 1, packed.data());
  std::vector<bool> mine(26, false);
  for (const IndexRange &r : owned)
    for (int64_t i = 0; i < r.count; ++i)
      mine[r.first + i] = true;
  for (int i = 0; i < 26; ++i)
    EXPECT_EQ(sharded.getMasters().f32()[i],
              mine[i] ? whole.getMasters().f32()[i] : before[i])
        << i;
  std::vector<float> m;
  EXPECT_FALSE(sharded.read(ParameterStore::Tensor::Moment1, m));
  ASSERT_TRUE(sharded.shardMoments({}));
  ASSERT_TRUE(sharded.read(ParameterStore::Tensor::Moment1, m));
  std::vector<float> full;
  ASSERT_TRUE(whole.read(ParameterStore::Tensor::Moment1, full));
  for (int i = 0; i < 26; ++i)
    EXPECT_EQ(m[i], mine[i] ? full[i] : 0.0f) << i;
}
} // namespace

namespace {
// ZeRO-3's weight shards (ParameterStore::setWeightShards): a replica
// draws only its ranges' initial values, packed, equal to those elements
// of the whole draw (so every partitioning still starts from the same
// weights); Adam updates the packed weights as the whole update does;
// the kernels read a group's slot, which holds nothing current until
// gathered, and an update makes every slot stale.
TEST(ParameterStore, ShardedWeightsDrawAndUpdateTheirRangesAsTheWholeDoes) {
  using namespace sluice::rt;
  CpuDevice cpu;
  auto add = [](ParameterStore &store) {
    store.add({"a", {7, 3}, InitKind::Normal});
    store.add({"b", {5}, InitKind::Ones});
    store.add({"c", {4, 2}, InitKind::Normal});
  };
  ParameterStore whole, sharded;
  add(whole);
  add(sharded);
  ASSERT_TRUE(whole.allocate(cpu, Precision::fp32(), 3));
  // Two groups: {a, b} and {c}; b (a vector) keeps whole gradients.
  ASSERT_TRUE(sharded.setGradientGroups({{"a", "b"}, {"c"}}));
  EXPECT_TRUE(sharded.isVectorGradient("b"));
  EXPECT_FALSE(sharded.isVectorGradient("a"));
  sharded.layout();
  // Parts of a (elements 2-7, 20 ...), of b (21-25) and of c (28-33).
  std::vector<IndexRange> owned = {{2, 6}, {21, 4}, {28, 6}};
  ASSERT_TRUE(sharded.setWeightShards(owned, Reshard::EveryPass));
  ASSERT_TRUE(sharded.allocate(cpu, Precision::fp32(), 3));
  int64_t at = 0;
  for (const IndexRange &r : owned)
    for (int64_t i = 0; i < r.count; ++i, ++at)
      EXPECT_EQ(sharded.getMasters().f32()[at],
                whole.getMasters().f32()[r.first + i])
          << r.first + i;
  // The weights are packed: whole reads are refused until gathered.
  std::vector<float> w;
  EXPECT_FALSE(sharded.read(ParameterStore::Tensor::Weights, w));
  // The slots: groups 0 and 1 in slots 0 and 1 of the largest group's
  // size (a and b, 26 elements); nothing gathered yet.
  EXPECT_EQ(sharded.weight("c").f32(), sharded.getWeightSlot(1).f32());
  EXPECT_EQ(sharded.weight("b").f32() - sharded.weight("a").f32(), 21);
  EXPECT_FALSE(sharded.isGathered(0));
  sharded.setGathered(0);
  sharded.setGathered(1);
  EXPECT_TRUE(sharded.isGathered(0) && sharded.isGathered(1));
  EXPECT_FALSE(sharded.shareSlot(0, 1));
  std::vector<float> packed(size_t(at), 0.01f);
  std::vector<float> grads(size_t(whole.getTotalElements()), 0.01f);
  std::copy(grads.begin(), grads.end(), whole.getGrads().f32());
  AdamConfig adam;
  whole.adamStep(adam, 1);
  sharded.adamStep(adam, 1, packed.data());
  EXPECT_FALSE(sharded.isGathered(0) || sharded.isGathered(1));
  at = 0;
  for (const IndexRange &r : owned)
    for (int64_t i = 0; i < r.count; ++i, ++at)
      EXPECT_EQ(sharded.getMasters().f32()[at],
                whole.getMasters().f32()[r.first + i])
          << r.first + i;
}
} // namespace
