//===- RuntimeMathTest.cpp - The CPU passes against calculus --------------===//
//
// The pipeline's correctness rests on these kernels: F, B and W must be the
// exact derivative of the loss, and token slicing must not change a single
// number beyond float rounding.

#include "CpuDevice.h"
#include "CpuKernels.h"
#include "Stage.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

using namespace sluice::rt;

namespace {

/// A model variant: GPT (LayerNorm, GELU, learned positions, biases) to
/// Llama (RMSNorm, SwiGLU, grouped-query attention) and Gemma (GeGLU).
struct Variant {
  const char *name;
  bool positions, bias;
  const char *norm, *mlp;
  int64_t heads, kvHeads;
  double ropeTheta = 0; // rotary positions' base (Llama, Gemma); 0: none
  bool exactGelu = false; // transformers' "gelu": x * Phi(x)
  double normEps = 1e-5;
  // Gemma's embedding scale and padding token; Gemma-2's attention scale
  // and soft cap.
  double embeddingScale = 1.0;
  int64_t paddingToken = -1;
  double attentionScale = 0, attentionSoftcap = 0, finalSoftcap = 0;
  bool postNorms = false; // Gemma-2's sandwich norms
};

ModelConfig tinyModel(bool positions, bool bias, const char *norm,
                      const char *mlp = "gelu", int64_t heads = 2,
                      int64_t kvHeads = 2, double ropeTheta = 0) {
  ModelConfig m;
  m.name = "tiny";
  m.seqLen = 6;
  m.microBatch = 2;
  m.hidden = 8;
  LayerConfig emb;
  emb.kind = LayerKind::Embedding;
  emb.vocab = 11;
  emb.positions = positions ? 8 : 0;
  LayerConfig t;
  t.kind = LayerKind::Transformer;
  t.heads = heads;
  t.kvHeads = kvHeads;
  t.headDim = 8 / heads;
  t.ffn = 16;
  t.bias = bias;
  EXPECT_TRUE(parseNormType(norm, t.norm)) << norm;
  EXPECT_TRUE(parseMlpType(mlp, t.mlp)) << mlp;
  t.rotary.theta = ropeTheta;
  LayerConfig out;
  out.kind = LayerKind::Output;
  out.vocab = 11;
  out.norm = t.norm;
  m.layers = {emb, t, t, out};
  return m;
}

/// The device every test runs on: host memory.
CpuDevice &cpu() {
  static CpuDevice device;
  return device;
}

/// Host memory for `bytes` of state, as floats.
std::vector<float> stateFor(int64_t bytes) {
  return std::vector<float>((bytes + 3) / 4, 0.0f);
}

/// Runs F, B and W of the whole model as one stage over `slices` equal
/// token slices; returns the mean loss and leaves gradients in `store`.
double runStep(const ModelConfig &model, ParameterStore &store,
               const std::vector<int32_t> &tokens, int slices) {
  StageRunner stage(model, {0, 1, 2, 3}, store,
                    cpu().getKernels(StreamKind::Compute), Precision::fp32());
  int64_t rows = model.microBatch, seq = model.seqLen, len = seq / slices;
  TokenRows batch{tokens.data(), seq + 1};
  std::vector<std::vector<float>> fstate(slices), wstate(slices);
  std::vector<float> kv = stateFor(stage.getKeyValueBytes(rows));
  std::vector<float> work = stateFor(stage.getWorkspaceBytes({rows, seq, 0}));
  double loss = 0;
  float scale = 1.0f / float(rows * seq);
  for (int k = 0; k < slices; ++k) {
    SliceShape s{rows, len, k * len};
    fstate[k] = stateFor(stage.getForwardStateBytes(s));
    stage.forward(s, batch, nullptr, nullptr, fstate[k].data(), kv.data(),
                  work.data(), &loss);
  }
  for (int k = slices - 1; k >= 0; --k) {
    SliceShape s{rows, len, k * len};
    wstate[k] = stateFor(stage.getWeightStateBytes(s));
    stage.backwardInput(s, batch, nullptr, nullptr, fstate[k].data(),
                        wstate[k].data(), kv.data(), work.data(), scale);
    stage.backwardWeight(s, batch, fstate[k].data(), wstate[k].data(),
                         work.data());
  }
  return loss * scale;
}

/// The store's flat weights and gradients, in host memory on the CPU.
float *weightsOf(ParameterStore &store) { return store.getMasters().f32(); }
std::vector<float> gradsOf(ParameterStore &store) {
  const float *g = store.getGrads().f32();
  return std::vector<float>(g, g + store.getTotalElements());
}

std::vector<int32_t> tokensFor(const ModelConfig &model) {
  std::vector<int32_t> tokens;
  for (int64_t i = 0; i < model.microBatch * (model.seqLen + 1); ++i)
    tokens.push_back(int32_t((i * 7 + 3) % model.layers.front().vocab));
  return tokens;
}

void PrintTo(const Variant &v, std::ostream *os) { *os << v.name; }

ModelConfig tinyModel(const Variant &v) {
  ModelConfig m = tinyModel(v.positions, v.bias, v.norm, v.mlp, v.heads,
                            v.kvHeads, v.ropeTheta);
  m.exactGelu = v.exactGelu;
  m.normEps = v.normEps;
  m.embeddingScale = v.embeddingScale;
  m.paddingToken = v.paddingToken;
  m.attentionScale = v.attentionScale;
  m.attentionSoftcap = v.attentionSoftcap;
  m.finalSoftcap = v.finalSoftcap;
  for (LayerConfig &l : m.layers)
    if (l.kind == LayerKind::Transformer)
      l.postNorms = v.postNorms;
  return m;
}

/// Every parameter of `model`, initialised from `seed`.
ParameterStore makeStore(const ModelConfig &model, uint64_t seed) {
  ParameterStore store;
  for (const ParameterSpec &p : getModelParameters(model))
    store.add(p);
  EXPECT_TRUE(store.allocate(cpu(), Precision::fp32(), seed));
  return store;
}

class GradientCheck : public ::testing::TestWithParam<Variant> {};

// Every parameter's gradient against central finite differences.
TEST_P(GradientCheck, MatchesFiniteDifferences) {
  ModelConfig model = tinyModel(GetParam());
  ParameterStore store = makeStore(model, 42);
  std::vector<int32_t> tokens = tokensFor(model);
  runStep(model, store, tokens, 1);
  std::vector<float> analytic = gradsOf(store);
  float *weights = weightsOf(store);

  // Small enough for the residual stream (activations around 0.02), large
  // enough for fp32 losses.
  const float eps = 2e-3f;
  int checked = 0;
  for (int64_t i = 0; i < store.getTotalElements(); i += 7) {
    float saved = weights[i];
    weights[i] = saved + eps;
    store.zeroGrads();
    double up = runStep(model, store, tokens, 1);
    weights[i] = saved - eps;
    store.zeroGrads();
    double down = runStep(model, store, tokens, 1);
    weights[i] = saved;
    double numeric = (up - down) / (2 * eps);
    EXPECT_NEAR(analytic[i], numeric, 2e-3 + 2e-2 * std::fabs(numeric))
        << "parameter element " << i;
    ++checked;
  }
  EXPECT_GT(checked, 50);
}

INSTANTIATE_TEST_SUITE_P(
    Models, GradientCheck,
    ::testing::Values(
        Variant{"gpt2", true, true, "layernorm", "gelu", 2, 2},
        Variant{"plain", false, false, "layernorm", "gelu", 2, 2},
        Variant{"rms_bias", false, true, "rmsnorm", "gelu", 2, 2},
        // A small rotary base turns even these 6 positions far.
        Variant{"llama", false, false, "rmsnorm", "swiglu", 4, 2, 100.0},
        Variant{"multi_query", false, false, "rmsnorm", "swiglu", 4, 1, 100.0},
        Variant{"gemma", false, false, "rmsnorm", "geglu", 2, 1, 100.0},
        Variant{"gated_bias", true, true, "layernorm", "swiglu", 4, 2},
        // The exact GELU, and an epsilon large enough to matter here.
        Variant{"gpt2_erf", true, true, "layernorm", "gelu", 2, 2, 0, true,
                1e-2},
        Variant{"geglu_erf", false, false, "rmsnorm", "geglu", 2, 1, 100.0,
                true, 1e-2},
        // Gemma's scaled embeddings; Gemma-2's attention scale and a cap
        // low enough to bend the scores. (A padding token's row has no
        // gradient by definition, not the derivative: hf-equivalence.test
        // checks it against transformers.)
        Variant{"gemma_embedding", false, false, "rmsnorm", "geglu", 2, 1,
                100.0, false, 1e-6, 2.83},
        Variant{"gemma2_attention", false, false, "rmsnorm", "geglu", 2, 1,
                100.0, false, 1e-6, 2.83, -1, 20.0, 0.05},
        // Gemma-2's final cap, low enough to bend the logits.
        Variant{"gemma2_logits", false, false, "rmsnorm", "geglu", 2, 1,
                100.0, false, 1e-6, 2.83, -1, 0, 0, 0.02},
        // Sandwich norms, RMS (Gemma-2's) and LayerNorm (with biases). They
        // normalise the blocks' outputs, tiny here (weights of 0.02): an
        // epsilon of their size keeps finite differences of this step
        // accurate.
        Variant{"gemma2", false, false, "rmsnorm", "geglu", 2, 1, 100.0, false,
                1e-2, 2.83, -1, 20.0, 0.05, 0.02, true},
        Variant{"sandwich_layernorm", true, true, "layernorm", "gelu", 2, 2, 0,
                false, 1e-2, 1.0, -1, 0, 0, 0, true}),
    [](const ::testing::TestParamInfo<Variant> &info) {
      return std::string(info.param.name);
    });

// The two GELUs are transformers' "gelu" (x * Phi(x), erf) and "gelu_new"
// (the tanh form), which differ by up to about 5e-4 near |x| = 2: each
// kernel computes its own, and its slope is the derivative of its value.
TEST(RuntimeMath, GeluFormsAreTransformers) {
  Kernels &k = cpu().getKernels(StreamKind::Compute);
  std::vector<float> u = {-3.0f, -1.5f, -0.3f, 0.0f, 0.7f, 2.0f, 4.0f};
  int64_t n = int64_t(u.size());
  std::vector<float> g(n), ones(n, 1.0f), du(n), up(n), down(n);
  for (GateActivation act : {GateActivation::Gelu, GateActivation::GeluErf}) {
    k.geluForward(act, u.data(), g.data(), n);
    k.geluBackward(act, u.data(), ones.data(), du.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      double x = u[i];
      double expected =
          act == GateActivation::GeluErf
              ? 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)))
              : 0.5 * x *
                    (1 + std::tanh(std::sqrt(2 / M_PI) *
                                   (x + 0.044715 * x * x * x)));
      EXPECT_NEAR(g[i], expected, 1e-6) << "x = " << x;
      float h = 1e-2f, xu = u[i] + h, xd = u[i] - h;
      k.geluForward(act, &xu, &up[i], 1);
      k.geluForward(act, &xd, &down[i], 1);
      EXPECT_NEAR(du[i], (up[i] - down[i]) / (2 * h), 1e-3) << "x = " << x;
    }
  }
  // The forms differ where they should: the test above cannot pass with
  // one kernel standing in for the other.
  float erf2, tanh2, x2 = 2.0f;
  k.geluForward(GateActivation::GeluErf, &x2, &erf2, 1);
  k.geluForward(GateActivation::Gelu, &x2, &tanh2, 1);
  EXPECT_GT(std::fabs(erf2 - tanh2), 5e-5);
}

// The epsilon is the plan's, added to the variance (LayerNorm) or the mean
// square (RMSNorm) as torch's LayerNorm and transformers' RMSNorm add it.
TEST(RuntimeMath, NormUsesTheModelsEpsilon) {
  Kernels &k = cpu().getKernels(StreamKind::Compute);
  std::vector<float> x = {0.01f, -0.02f, 0.03f, 0.005f}, gamma(4, 1.0f),
                     y(4), xhat(4);
  float rstd = 0;
  for (bool rms : {false, true})
    for (float eps : {1e-6f, 1e-2f}) {
      k.normForward(x.data(), gamma.data(), nullptr, 1, 4, rms, eps, y.data(),
                    xhat.data(), &rstd);
      double mean = rms ? 0 : (0.01 - 0.02 + 0.03 + 0.005) / 4, var = 0;
      for (float v : x)
        var += (v - mean) * (v - mean) / 4;
      EXPECT_NEAR(rstd, 1 / std::sqrt(var + eps), 1e-3 / std::sqrt(var + eps))
          << (rms ? "rms" : "layer") << " eps " << eps;
    }
}

// Per parameter tensor, the directional derivative along a random +-1
// direction against central differences. Summing over a whole tensor gives
// a signal well above fp32 rounding, where single small elements (the gate
// of a gated block, around 1e-4) drown in it; the weights are scaled up so
// that every block's nonlinearity works outside its linear region.
TEST_P(GradientCheck, DirectionalDerivativePerTensor) {
  ModelConfig model = tinyModel(GetParam());
  ParameterStore store = makeStore(model, 11);
  float *weights = weightsOf(store);
  for (int64_t i = 0; i < store.getTotalElements(); ++i)
    weights[i] *= 2.0f;
  std::vector<int32_t> tokens = tokensFor(model);
  store.zeroGrads();
  runStep(model, store, tokens, 1);
  std::vector<float> analytic = gradsOf(store);

  const double eps = 5e-4;
  std::mt19937 random(5);
  for (const ParameterSpec &spec : store.specs()) {
    int64_t at = store.offset(spec.name), n = spec.size();
    std::vector<float> direction(n), saved(weights + at, weights + at + n);
    double expected = 0;
    for (int64_t i = 0; i < n; ++i) {
      direction[i] = (random() & 1) ? 1.0f : -1.0f;
      expected += double(analytic[at + i]) * direction[i];
    }
    auto lossAt = [&](double t) {
      for (int64_t i = 0; i < n; ++i)
        weights[at + i] = float(saved[i] + t * direction[i]);
      store.zeroGrads();
      return runStep(model, store, tokens, 1);
    };
    // The five-point stencil: error O(eps^4), against the curvature of the
    // gated blocks.
    double numeric = (8 * (lossAt(eps) - lossAt(-eps)) -
                      (lossAt(2 * eps) - lossAt(-2 * eps))) /
                     (12 * eps);
    lossAt(0);
    EXPECT_NEAR(expected, numeric, 1e-3 + 1e-2 * std::fabs(numeric))
        << spec.name;
  }
}

class SlicedVariant : public ::testing::TestWithParam<Variant> {};

// TeraPipe/Seq1F1B slicing computes the same loss and gradients.
TEST_P(SlicedVariant, TokenSlicesChangeNothing) {
  ModelConfig model = tinyModel(GetParam());
  std::vector<int32_t> tokens = tokensFor(model);
  ParameterStore whole = makeStore(model, 7), sliced = makeStore(model, 7);
  double a = runStep(model, whole, tokens, 1);
  double b = runStep(model, sliced, tokens, 3);
  EXPECT_NEAR(a, b, 1e-6 * std::fabs(a));
  double maxDiff = 0, maxGrad = 0;
  std::vector<float> wholeGrads = gradsOf(whole), slicedGrads = gradsOf(sliced);
  for (size_t i = 0; i < wholeGrads.size(); ++i) {
    maxDiff =
        std::max(maxDiff, double(std::fabs(wholeGrads[i] - slicedGrads[i])));
    maxGrad = std::max(maxGrad, double(std::fabs(wholeGrads[i])));
  }
  EXPECT_LT(maxDiff, 1e-5 * maxGrad);
}

INSTANTIATE_TEST_SUITE_P(
    Models, SlicedVariant,
    ::testing::Values(Variant{"gpt2", true, true, "layernorm", "gelu", 2, 2},
                      Variant{"llama", false, false, "rmsnorm", "swiglu", 4, 2,
                              100.0}),
    [](const ::testing::TestParamInfo<Variant> &info) {
      return std::string(info.param.name);
    });

// Rotary positions make attention scores depend on relative positions
// only: <rot(q, m), rot(k, n)> is the same for (m, n) and (m + d, n + d);
// the inverse rotation undoes the forward one.
TEST(RuntimeMath, RotaryScoresDependOnRelativePositions) {
  Kernels &kernels = cpu().getKernels(StreamKind::Compute);
  const int64_t heads = 2, headDim = 8, width = heads * headDim;
  std::mt19937 random(3);
  std::normal_distribution<float> normal;
  std::vector<float> q(width), k(width);
  for (float &x : q)
    x = normal(random);
  for (float &x : k)
    x = normal(random);
  auto score = [&](int64_t m, int64_t n) {
    std::vector<float> qm = q, kn = k;
    kernels.rotate(qm.data(), 1, 1, m, heads, headDim, width, Rotary{10000.0}, false);
    kernels.rotate(kn.data(), 1, 1, n, heads, headDim, width, Rotary{10000.0}, false);
    double dot = 0;
    for (int64_t e = 0; e < headDim; ++e) // the first head
      dot += double(qm[e]) * kn[e];
    return dot;
  };
  EXPECT_NEAR(score(5, 2), score(105, 102), 1e-4);
  EXPECT_NEAR(score(7, 7), score(0, 0), 1e-4);
  // Position matters: the same vectors three apart score differently.
  EXPECT_GT(std::fabs(score(5, 2) - score(2, 2)), 1e-2);

  std::vector<float> x = q;
  kernels.rotate(x.data(), 1, 1, 4097, heads, headDim, width, Rotary{500000.0}, false);
  kernels.rotate(x.data(), 1, 1, 4097, heads, headDim, width, Rotary{500000.0}, true);
  for (int64_t e = 0; e < width; ++e)
    EXPECT_NEAR(x[e], q[e], 1e-5);
}

// Llama 3.1's frequency scaling (rope_type "llama3") against transformers'
// own inverse frequencies for Llama-3.2-1B's settings (rope_theta 500000,
// factor 32, low 1, high 4, original context 8192, head_dim 64), as
// _compute_llama3_parameters gives them in float32: the high frequencies
// kept (pair 0, 10), the medium ones blended (16, 20), the low ones
// divided by the factor (24, 31).
TEST(RuntimeMath, Llama3RotaryScalingMatchesTransformers) {
  Rotary llama{500000.0, 32.0, 1.0, 4.0, 8192};
  ASSERT_EQ(llama.checkScaling(), "");
  std::pair<int, double> expected[] = {
      {0, 1.0},
      {10, 0.016560440883040428},
      {16, 0.000429556705057621},
      {20, 8.570255886297673e-06},
      {24, 1.6619674170215148e-06},
      {31, 9.418306490260875e-08}};
  for (auto [i, want] : expected)
    EXPECT_NEAR(llama.getFrequency(i, 64) / want, 1.0, 1e-6) << "pair " << i;
  // Unscaled, the same base: the low frequencies are 32 times faster.
  Rotary plain{500000.0};
  EXPECT_NEAR(plain.getFrequency(31, 64) / llama.getFrequency(31, 64), 32.0,
              1e-9);
  EXPECT_EQ(plain.getFrequency(0, 64), llama.getFrequency(0, 64));
  Rotary bad{500000.0, 32.0, 4.0, 1.0, 8192};
  EXPECT_NE(bad.checkScaling(), "");
}

TEST(RuntimeMath, InitialisationDependsOnNamesNotOrder) {
  ModelConfig model = tinyModel(false, false, "layernorm");
  ParameterStore all, lastOnly;
  for (const ParameterSpec &p : getModelParameters(model))
    all.add(p);
  for (const ParameterSpec &p : getLayerParameters(model, 2))
    lastOnly.add(p);
  ASSERT_TRUE(all.allocate(cpu(), Precision::fp32(), 3));
  ASSERT_TRUE(lastOnly.allocate(cpu(), Precision::fp32(), 3));
  const std::string name = "layers.1.mlp.up.weight";
  EXPECT_EQ(0, std::memcmp(all.weight(name).get(), lastOnly.weight(name).get(),
                           sizeof(float) * 8 * 16));
}

} // namespace

namespace {
// Warmup, then each decay's shape at its landmarks (Megatron-LM's
// formulas: a linear warmup whose first step moves, half the way down at
// the decay's midpoint for both shapes).
TEST(Optimizer, LearningRateSchedules) {
  LearningRateSchedule s;
  s.peak = 1e-3f;
  s.warmup = 2;
  s.minimum = 1e-4f;
  s.decaySteps = 6;
  EXPECT_FLOAT_EQ(s.at(1), 5e-4f);
  EXPECT_FLOAT_EQ(s.at(5), 1e-3f) << "no decay: constant after warmup";
  for (auto decay : {LearningRateSchedule::Decay::Linear,
                     LearningRateSchedule::Decay::Cosine}) {
    s.decay = decay;
    EXPECT_FLOAT_EQ(s.at(2), 1e-3f);
    EXPECT_FLOAT_EQ(s.at(4), 5.5e-4f);
    EXPECT_FLOAT_EQ(s.at(6), 1e-4f);
    EXPECT_FLOAT_EQ(s.at(60), 1e-4f) << "held at the floor";
  }
  s.decay = LearningRateSchedule::Decay::Linear;
  EXPECT_FLOAT_EQ(s.at(5), 3.25e-4f);
  s.decay = LearningRateSchedule::Decay::Cosine;
  EXPECT_NEAR(s.at(5), 1e-4 + 9e-4 * 0.5 * (1 + std::cos(M_PI * 0.75)), 1e-9);
}

// AdamW decays matrices and tables, never norms' gains or biases: with no
// gradient, one step scales a matrix by 1 - lr * decay and leaves a
// vector alone -- also when ZeRO-1 packs moments across both.
TEST(Optimizer, WeightDecaySparesVectors) {
  for (bool sharded : {false, true}) {
    ParameterStore store;
    store.add({"a.weight", {2, 3}, InitKind::Ones});
    store.add({"n.weight", {3}, InitKind::Ones});
    store.add({"b.weight", {3, 1}, InitKind::Ones});
    ASSERT_TRUE(store.allocate(cpu(), Precision::fp32(), 1));
    store.zeroGrads();
    AdamConfig c;
    c.learningRate = 0.1f;
    c.weightDecay = 0.5f;
    if (sharded) {
      // One owned range straddling the matrix, the vector and the next
      // matrix.
      ASSERT_TRUE(store.shardMoments({{4, 8}}));
      std::vector<float> packed(8, 0.0f);
      store.adamStep(c, 1, DevicePtr(packed.data(), DType::F32));
    } else {
      store.adamStep(c, 1);
    }
    const float *w = store.getMasters().f32();
    for (int i = 0; i < 12; ++i) {
      bool owned = !sharded || (i >= 4 && i < 12);
      float expected = (i < 6 || i >= 9) && owned ? 0.95f : 1.0f;
      EXPECT_FLOAT_EQ(w[i], expected) << "element " << i
                                      << (sharded ? " (sharded)" : "");
    }
  }
}

// Clipping's factor is torch.nn.utils.clip_grad_norm_'s, and the Adam
// update of a clipped gradient is that of the scaled gradient.
TEST(Optimizer, ClippingScalesTheGradient) {
  EXPECT_FLOAT_EQ(getClipScale(4.0, 0.0), 1.0f) << "0: off";
  EXPECT_FLOAT_EQ(getClipScale(0.5, 1.0), 1.0f) << "within the bound";
  EXPECT_FLOAT_EQ(getClipScale(4.0, 1.0), float(1.0 / (4.0 + 1e-6)));
  CpuKernels k;
  std::vector<float> w1 = {1, 2, 3}, w2 = w1, g = {0.4f, -0.8f, 1.2f};
  std::vector<float> scaled = {0.1f, -0.2f, 0.3f};
  std::vector<float> m1(3, 0.1f), v1(3, 0.2f), m2 = m1, v2 = v1;
  AdamConfig c;
  c.learningRate = 0.1f;
  c.gradientScale = 0.25f;
  k.adamUpdate(DevicePtr(w1.data(), DType::F32), DevicePtr(g.data(), DType::F32),
               DevicePtr(m1.data(), DType::F32), DevicePtr(v1.data(), DType::F32),
               3, c, 2, DevicePtr());
  c.gradientScale = 1.0f;
  k.adamUpdate(DevicePtr(w2.data(), DType::F32),
               DevicePtr(scaled.data(), DType::F32),
               DevicePtr(m2.data(), DType::F32), DevicePtr(v2.data(), DType::F32),
               3, c, 2, DevicePtr());
  for (int i = 0; i < 3; ++i) {
    EXPECT_FLOAT_EQ(w1[i], w2[i]);
    EXPECT_FLOAT_EQ(v1[i], v2[i]);
  }
}

// The norm's pieces: a strided block's squares, weighted, accumulated.
TEST(Optimizer, SumSquaresOfAStridedBlock) {
  CpuKernels k;
  std::vector<float> x = {1, 2, 100, 3, 4, 100};
  double out = 1.0;
  k.sumSquares(DevicePtr(x.data(), DType::F32), 2, 2, 3, 1.0,
               DevicePtr(&out, DType::F64));
  EXPECT_DOUBLE_EQ(out, 1.0 + 1 + 4 + 9 + 16);
  k.sumSquares(DevicePtr(x.data(), DType::F32), 1, 2, 2, -1.0,
               DevicePtr(&out, DType::F64));
  EXPECT_DOUBLE_EQ(out, 1.0 + 9 + 16);
}

// A padding token's rows of an embedding gradient are zeroed, the others
// kept; scale multiplies.
TEST(RuntimeMath, PaddingRowsAndScale) {
  CpuKernels k;
  std::vector<int32_t> tokens = {5, 0, 7, 99, 0, 3, 99}; // stride 4, 2 rows of 3
  std::vector<float> x(2 * 3 * 2, 1.0f);
  k.zeroTokenRows(DevicePtr(tokens.data()), 4, 2, 3, 0, 2,
                  DevicePtr(x.data(), DType::F32));
  std::vector<float> expected = {1, 1, 0, 0, 1, 1, 0, 0, 1, 1, 1, 1};
  EXPECT_EQ(x, expected);
  k.scale(DevicePtr(x.data(), DType::F32), 2.0f, 4);
  EXPECT_EQ(x[0], 2.0f);
  EXPECT_EQ(x[4], 1.0f);
}
} // namespace
