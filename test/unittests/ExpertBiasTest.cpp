//===- ExpertBiasTest.cpp - Auxiliary-loss-free load balancing -------------===//
//
// DeepSeek-V3's bias rule (runtime/executor/ExpertBias.h; Liu et al.,
// 2024, section 2.1.2) on hand-counted loads, and its application to the
// routers a rank holds: the right layer's bias, by name, moved from that
// layer's part of the model-wide load, the working copy with it.
//
//===----------------------------------------------------------------------===//

#include "CpuDevice.h"
#include "ExpertBias.h"

#include <gtest/gtest.h>

using namespace sluice::rt;

namespace {

TEST(ExpertBias, OverloadedFallUnderloadedRiseTheMeanStays) {
  // Eight copies over four experts: a mean of 2.
  const double copies[] = {5, 2, 0, 1};
  std::vector<float> bias = {0.25f, -0.5f, 0.0f, 1.0f};
  updateExpertBias(copies, 4, 0.125, bias);
  EXPECT_EQ(bias, (std::vector<float>{0.125f, -0.5f, 0.125f, 1.125f}));
  // Perfectly even: nothing moves.
  const double even[] = {3, 3, 3, 3};
  updateExpertBias(even, 4, 0.125, bias);
  EXPECT_EQ(bias, (std::vector<float>{0.125f, -0.5f, 0.125f, 1.125f}));
}

/// A dense layer, then a sparse layer with the rule, then one without it.
ModelConfig threeLayers() {
  ModelConfig m;
  m.seqLen = 4;
  m.hidden = 8;
  LayerConfig emb, dense, out;
  emb.kind = LayerKind::Embedding;
  emb.vocab = 11;
  dense.kind = LayerKind::Transformer;
  dense.heads = dense.kvHeads = 2;
  dense.ffn = 8;
  dense.norm = NormType::RmsNorm;
  dense.mlp = MlpType::SwiGlu;
  LayerConfig sparse = dense;
  sparse.experts = 4;
  sparse.topK = 2;
  sparse.router = "sigmoid";
  sparse.biasUpdate = 0.5;
  LayerConfig still = sparse;
  still.biasUpdate = 0;
  out.kind = LayerKind::Output;
  out.vocab = 11;
  m.layers = {emb, dense, sparse, still, out};
  return m;
}

TEST(ExpertBias, EachRouterMovesByItsOwnLayersLoad) {
  ModelConfig model = threeLayers();
  CpuDevice device;
  for (Precision precision : {Precision::fp32(), Precision::bf16()}) {
    ParameterStore store;
    for (const ParameterSpec &p : getModelParameters(model))
      store.add(p);
    ASSERT_TRUE(store.allocate(device, precision, 3));
    // Model order: layer 2's four experts, then layer 3's.
    std::vector<double> copies = {1, 4, 2, 1, 9, 0, 0, 0};
    ASSERT_TRUE(applyExpertBias(model, copies, store));
    std::vector<float> moved, still;
    ASSERT_TRUE(store.readMaster("layers.1.mlp.router.bias", moved));
    ASSERT_TRUE(store.readMaster("layers.2.mlp.router.bias", still));
    EXPECT_EQ(moved, (std::vector<float>{0.5f, -0.5f, 0.0f, 0.5f}));
    EXPECT_EQ(still, (std::vector<float>(4, 0.0f)));
    // The kernels read the master (the router's bias is read in fp32);
    // the working copy follows it.
    std::vector<float> working(4);
    device.download(working.data(), store.weight("layers.1.mlp.router.bias"),
                    int64_t(working.size() * sizeof(float)),
                    device.getStream(StreamKind::Compute));
    if (precision.activations == DType::F32)
      EXPECT_EQ(working, moved);
    // A load too short for the model's sparse layers is refused.
    EXPECT_FALSE(applyExpertBias(model, {1, 2}, store));
  }
}

} // namespace
