//===- FeatureConformanceTest.cpp - Every block feature, held alike -------===//
//
// Every registered block feature (sluice/Blocks/Feature.h), in each of its
// forms, on one transformer layer run through the stage runner on CPUs in
// fp32 (and bf16, the last check), is held to:
//
//  * finite differences: the loss sum(y * r) of the layer's output y,
//    against its gradient from B and W, for elements of each of the
//    feature's parameters, of the core's projections and of the input;
//  * the feature off: a feature whose initial parameters make it the
//    identity (zero biases, unit scales) computes, with them, what the
//    block without it computes -- output, input gradient, the core's
//    weight gradients;
//  * tensor parallelism: 2 shards on threads of one process, with and
//    without sequence parallelism, give the one-shard run's output and
//    gradients (each slice its part; a parameter its group sums, summed);
//  * recomputation: selective and full give what keeping everything does;
//  * bf16 storage: the layer in bf16 follows its fp32 run.
//
// A feature registered from here (ChannelScale below, which no folder
// under lib/Blocks declares) runs through the same checks: the registry,
// the plan's spec, the layout, the parameter store and the block's slots
// take it with no edit under lib/ or runtime/.
//
//===----------------------------------------------------------------------===//

#include "CpuDevice.h"
#include "LocalGroup.h"
#include "Slots.h"
#include "Stage.h"

#include "sluice/Blocks/Spec.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>

#include <cmath>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <thread>

using namespace sluice::rt;
using sluice::blocks::Feature;
using sluice::blocks::LayerShape;
using sluice::blocks::RegionFn;
using sluice::blocks::Slot;
using sluice::blocks::State;
using sluice::rt::test_support::LocalGroup;

namespace {

//===----------------------------------------------------------------------===//
// A feature from outside lib/Blocks: a learned scale per channel of the
// attention's output, y * s, the identity at s = 1.
//===----------------------------------------------------------------------===//

class ChannelScale final : public Feature {
public:
  ChannelScale()
      : Feature({"test_channel_scale",
                 sluice::blocks::getSlotBit(Slot::AttentionOutput),
                 /*order=*/100, /*field=*/nullptr, /*variants=*/1,
                 /*identityAtInit=*/true}) {}
  void addParameters(Slot, const LayerShape &shape,
                     std::vector<ParameterSpec> &out) const override {
    out.push_back(
        {shape.prefix + "attn.scale", {shape.hidden()}, InitKind::Ones});
    // Each shard scales its own tokens under sequence parallelism.
    out.back().reduce = Reduce::Tokens;
  }
  /// The output before the scale, on this shard's tokens.
  void walkState(State state, Slot, const LayerShape &shape,
                 const SliceShape &s, const RegionFn &fn) const override {
    if (state == State::Forward)
      fn(0, getLocalTokens(shape.model, s) * shape.hidden(),
         Storage::Activation);
  }
};

class ChannelScaleCompute final : public block::FeatureCompute {
public:
  void forward(Slot, const block::SlotContext &c,
               const block::SlotTensors &t) const override {
    int64_t n = c.size.n, h = c.size.h;
    c.kernels.copy(c.region(0), t.x, n * h);
    c.kernels.normAffine(c.region(0), c.weight("attn.scale"), DevicePtr(), n, h,
                         t.x);
  }
  bool backward(Slot, const block::SlotContext &c,
                const block::SlotTensors &t) const override {
    int64_t n = c.size.n, h = c.size.h;
    c.kernels.normAffine(t.grad, c.weight("attn.scale"), DevicePtr(), n, h,
                         t.out);
    c.kernels.normParamGrads(t.grad, c.region(0), n, h, c.grad("attn.scale"),
                             DevicePtr());
    return true;
  }
};

const ChannelScale kChannelScale;
const ChannelScaleCompute kChannelScaleCompute;

void registerTestFeature() {
  sluice::blocks::registerFeature(kChannelScale);
  block::registerCompute("test_channel_scale", kChannelScaleCompute);
}

//===----------------------------------------------------------------------===//
// The harness
//===----------------------------------------------------------------------===//

constexpr int64_t kRows = 2, kSeq = 8, kHidden = 16, kVocab = 13;

/// An embedding, one transformer layer (RMSNorm, SwiGLU, 4 query heads of
/// 4, 2 key/value heads, rotary positions) and an output layer.
ModelConfig getModel() {
  ModelConfig m;
  m.name = "conformance";
  m.seqLen = kSeq;
  m.microBatch = kRows;
  m.hidden = kHidden;
  LayerConfig emb;
  emb.kind = LayerKind::Embedding;
  emb.vocab = kVocab;
  LayerConfig t;
  t.heads = 4;
  t.kvHeads = 2;
  t.headDim = 4;
  t.ffn = 32;
  t.norm = NormType::RmsNorm;
  t.mlp = MlpType::SwiGlu;
  t.rotary.theta = 10000.0;
  LayerConfig out;
  out.kind = LayerKind::Output;
  out.vocab = kVocab;
  out.norm = NormType::RmsNorm;
  m.layers = {emb, t, out};
  return m;
}

/// A deterministic value for element `index` of the whole tensor `name`,
/// so that a shard's slice starts as the whole tensor's part.
float valueAt(const std::string &name, int64_t index, InitKind init) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : name)
    h = (h ^ c) * 1099511628211ULL;
  double u = std::sin(double(h % 1000003) + 0.7 * double(index));
  return float(init == InitKind::Ones ? 1.0 + 0.3 * u : 0.3 * u);
}

/// What a run of the layer gives: its output, the input's gradient and
/// every parameter's gradient (by name, as the store holds it).
struct Result {
  std::vector<float> y, dx;
  std::map<std::string, std::vector<float>> grads;
  std::map<std::string, ParameterSpec> specs;
};

/// One tensor-parallel shard's (or the whole) layer on a stage of its own.
class LayerRun {
public:
  LayerRun(const ModelConfig &whole, bool sequenceParallel, TensorShard shard,
           Recompute recompute, Precision precision = Precision::fp32())
      : model(shard.count > 1
                  ? getTensorShardModel(whole, shard.count, sequenceParallel)
                  : whole),
        shard(shard), precision(precision) {
    for (const ParameterSpec &spec : getLayerParameters(whole, 1, shard))
      store.add(spec);
    ok = bool(store.allocate(cpu, precision, 7));
    if (!ok)
      return;
    // Gains near 1, biases near 0 and random matrices, by whole index.
    for (const ParameterSpec &spec : store.specs()) {
      float *w = store.master(spec.name).f32();
      if (spec.init != InitKind::Normal)
        for (const TensorRun &run : getRuns(spec))
          for (int64_t i = 0; i < run.count; ++i)
            w[run.local + i] = valueAt(spec.name, run.global + i, spec.init);
    }
    refresh();
    runner = std::make_unique<StageRunner>(model, std::vector<int>{1}, store,
                                           cpu.getKernels(StreamKind::Compute),
                                           precision, recompute);
  }

  /// Parameters at their initial values (the feature's identity).
  void resetToInit() {
    for (const ParameterSpec &spec : store.specs())
      if (spec.init != InitKind::Normal) {
        float *w = store.master(spec.name).f32();
        std::fill(w, w + spec.size(), spec.init == InitKind::Ones ? 1.f : 0.f);
      }
    refresh();
  }

  void joinGroup(LocalGroup &group) {
    int rank = shard.index;
    block::TensorGroup calls;
    calls.reduce = [&group, rank](DevicePtr data, int64_t count, Reduction r) {
      group.allReduce(rank, data.f32(), count, r);
    };
    calls.reduceScatter = [&group, rank](DevicePtr data, DevicePtr out,
                                         int64_t count) {
      group.reduceScatter(rank, data.f32(), out.f32(), count);
      return block::PendingCollective();
    };
    calls.allGather = [&group, rank](DevicePtr data, int64_t count) {
      group.allGather(rank, data.f32(), count);
      return block::PendingCollective();
    };
    runner->setTensorParallel(std::move(calls), rank);
  }

  /// F only: the output for input `x` (this shard's tokens).
  std::vector<float> forward(const std::vector<float> &x) {
    SliceShape s{kRows, kSeq, 0};
    StageRunner &stage = *runner;
    f = state(stage.getForwardStateBytes(s));
    kv = state(stage.getKeyValueBytes(kRows));
    work = state(stage.getWorkspaceBytes(s));
    r = state(stage.getRecomputedStateBytes(s));
    std::vector<float> y(x.size());
    std::vector<float> input = encode(x);
    stage.forward(s, batch(), activation(input), activation(y), f.data(),
                  kv.data(), work.data(), nullptr);
    return decode(y, x.size());
  }

  /// F, B and W for output gradient `dy`.
  Result run(const std::vector<float> &x, const std::vector<float> &dy) {
    SliceShape s{kRows, kSeq, 0};
    StageRunner &stage = *runner;
    store.zeroGrads();
    Result out;
    out.y = forward(x);
    std::vector<float> w = state(stage.getWeightStateBytes(s));
    std::vector<float> grad = encode(dy);
    out.dx.assign(x.size(), 0.0f);
    stage.backwardInput(s, batch(), activation(grad), activation(out.dx),
                        f.data(), w.data(), kv.data(), work.data(), 1.0f,
                        r.data());
    out.dx = decode(out.dx, x.size());
    stage.backwardWeight(s, batch(), f.data(), w.data(), work.data(), r.data());
    for (const ParameterSpec &spec : store.specs()) {
      float *g = store.grad(spec.name).f32();
      out.grads[spec.name].assign(g, g + spec.size());
      out.specs[spec.name] = spec;
    }
    return out;
  }

  /// The fp32 weight the test sets (the master; refresh() after a change
  /// for a bf16 run's working copy).
  float *weight(const std::string &name) { return store.master(name).f32(); }
  void refresh() {
    // Writing the masters back rewrites their working copy.
    std::vector<float> masters;
    if (precision.isMixed() &&
        store.read(ParameterStore::Tensor::Weights, masters))
      ok = ok && bool(store.write(ParameterStore::Tensor::Weights, masters));
  }
  bool ok = false;

private:
  /// An activation array, typed as the plan's precision stores it.
  DevicePtr activation(std::vector<float> &v) const {
    return DevicePtr(v.data(), precision.activations);
  }
  /// Activations as the plan's precision stores them: fp32 as they are,
  /// bf16 rounded and packed two to a float's bytes.
  std::vector<float> encode(const std::vector<float> &v) const {
    if (!precision.isMixed())
      return v;
    std::vector<float> out((v.size() + 1) / 2, 0.0f);
    uint16_t *half = reinterpret_cast<uint16_t *>(out.data());
    for (size_t i = 0; i < v.size(); ++i)
      half[i] = floatToBf16(v[i]);
    return out;
  }
  std::vector<float> decode(const std::vector<float> &v, size_t n) const {
    if (!precision.isMixed())
      return std::vector<float>(v.begin(), v.begin() + n);
    std::vector<float> out(n);
    const uint16_t *half = reinterpret_cast<const uint16_t *>(v.data());
    for (size_t i = 0; i < n; ++i)
      out[i] = bf16ToFloat(half[i]);
    return out;
  }
  static std::vector<float> state(int64_t bytes) {
    return std::vector<float>((bytes + 3) / 4 + 1, 0.0f);
  }
  TokenRows batch() {
    tokens.assign(kRows * (kSeq + 1), 1);
    return {tokens.data(), kSeq + 1};
  }

  CpuDevice cpu;
  ModelConfig model;
  TensorShard shard;
  Precision precision;
  ParameterStore store;
  std::unique_ptr<StageRunner> runner;
  std::vector<float> f, kv, work, r;
  std::vector<int32_t> tokens;
};

std::vector<float> randomVector(int64_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> v(n);
  for (float &x : v)
    x = normal(rng);
  return v;
}

double dot(const std::vector<float> &a, const std::vector<float> &b) {
  double sum = 0;
  for (size_t i = 0; i < a.size(); ++i)
    sum += double(a[i]) * double(b[i]);
  return sum;
}

/// The central difference (loss(value + h) - loss(value - h)) / 2h, the
/// value put back after.
template <class Loss>
double centralDifference(float &value, double h, Loss &&loss) {
  const float kept = value;
  value = kept + float(h);
  double up = loss();
  value = kept - float(h);
  double down = loss();
  value = kept;
  return (up - down) / (2 * h);
}

/// Every registered feature in each of its forms, as a test parameter.
struct Case {
  const Feature *feature;
  int variant;
};
std::vector<Case> getCases() {
  registerTestFeature();
  std::vector<Case> cases;
  for (const Feature *f : sluice::blocks::getFeatures())
    for (int v = 0; v < f->getVariants(); ++v)
      cases.push_back({f, v});
  return cases;
}
void PrintTo(const Case &c, std::ostream *os) {
  *os << c.feature->getName() << " (form " << c.variant << ")";
}
std::string getCaseName(const testing::TestParamInfo<Case> &info) {
  return std::string(info.param.feature->getName()) + "_" +
         std::to_string(info.param.variant);
}

class FeatureConformance : public testing::TestWithParam<Case> {
protected:
  /// The model with the feature on (or off) and the rest of the block as
  /// plain as it goes: pre-norms on, unless the feature is one of them.
  ModelConfig getModelWith(bool on) const {
    ModelConfig m = getModel();
    GetParam().feature->setEnabled(m.layers[1], on, GetParam().variant);
    return m;
  }
  std::vector<float> x = randomVector(kRows * kSeq * kHidden, 11);
  std::vector<float> dy = randomVector(kRows * kSeq * kHidden, 12);
};

// B and W against finite differences of the loss sum(y * dy).
TEST_P(FeatureConformance, GradientsMatchFiniteDifferences) {
  ModelConfig model = getModelWith(true);
  ASSERT_EQ(sluice::blocks::checkLayer(model.layers[1], kHidden), "");
  LayerRun run(model, false, {}, Recompute::None);
  ASSERT_TRUE(run.ok);
  Result result = run.run(x, dy);
  auto loss = [&] { return dot(run.forward(x), dy); };
  // A central difference of `value`'s effect on the loss, Richardson-
  // extrapolated from steps h and h / 2 (error O(h^4): the norms over four
  // elements of a head curve sharply).
  auto difference = [&](float &value) {
    const double h = GetParam().feature->getDifferenceStep();
    return (4 * centralDifference(value, h / 2, loss) -
            centralDifference(value, h, loss)) /
           3;
  };
  auto expectClose = [&](double analytic, double numeric,
                         const std::string &what) {
    EXPECT_NEAR(analytic, numeric, 2e-3 + 1e-2 * std::fabs(numeric)) << what;
  };
  // The feature's parameters, the core's projections: first, middle and
  // last elements.
  std::vector<std::string> core = {
      "layers.0.attn.qkv.weight", "layers.0.attn.out.weight",
      "layers.0.mlp.gate.weight", "layers.0.mlp.up.weight",
      "layers.0.mlp.down.weight"};
  // (A feature that replaces the QKV projection or the feed-forward block
  // leaves no attn.qkv or mlp.down.)
  std::vector<std::string> names;
  for (const std::string &name : {core[0], core[4]})
    if (result.specs.count(name))
      names.push_back(name);
  for (const auto &[name, spec] : result.specs)
    if (std::find(core.begin(), core.end(), name) == core.end())
      names.push_back(name);
  for (const std::string &name : names) {
    float *w = run.weight(name);
    int64_t size = result.specs[name].size();
    for (int64_t i : {int64_t(0), size / 2, size - 1})
      expectClose(result.grads[name][i], difference(w[i]),
                  name + "[" + std::to_string(i) + "]");
  }
  // The input's gradient (B).
  for (int64_t i : {int64_t(3), int64_t(x.size() / 2), int64_t(x.size() - 5)})
    expectClose(result.dx[i], difference(x[i]),
                "dx[" + std::to_string(i) + "]");
}

// At its initial parameters a feature that is then the identity computes
// the block without it.
TEST_P(FeatureConformance, IdentityParametersComputeTheBlockWithoutIt) {
  if (!GetParam().feature->isIdentityAtInit())
    GTEST_SKIP() << GetParam().feature->getName()
                 << " is the identity at no parameters";
  LayerRun with(getModelWith(true), false, {}, Recompute::None);
  LayerRun without(getModelWith(false), false, {}, Recompute::None);
  ASSERT_TRUE(with.ok && without.ok);
  with.resetToInit();
  without.resetToInit();
  Result a = with.run(x, dy), b = without.run(x, dy);
  for (size_t i = 0; i < a.y.size(); ++i) {
    ASSERT_NEAR(a.y[i], b.y[i], 1e-6) << "y[" << i << "]";
    ASSERT_NEAR(a.dx[i], b.dx[i], 1e-6) << "dx[" << i << "]";
  }
  for (const auto &[name, grad] : b.grads) {
    ASSERT_EQ(a.grads.count(name), 1u) << name;
    for (size_t i = 0; i < grad.size(); ++i)
      ASSERT_NEAR(a.grads[name][i], grad[i], 1e-5) << name << "[" << i << "]";
  }
}

// Two tensor-parallel shards, with and without sequence parallelism, give
// the whole layer's output and gradients.
TEST_P(FeatureConformance, TensorParallelShardsGiveTheWholeLayer) {
  ModelConfig model = getModelWith(true);
  const int tp = 2;
  ASSERT_EQ(sluice::blocks::checkTensorParallel(model, tp), "");
  LayerRun whole(model, false, {}, Recompute::None);
  ASSERT_TRUE(whole.ok);
  Result expected = whole.run(x, dy);
  for (bool sequence : {false, true}) {
    LocalGroup group(tp);
    std::vector<Result> shards(tp);
    int64_t part = int64_t(x.size()) / (sequence ? tp : 1);
    std::vector<std::thread> threads;
    for (int t = 0; t < tp; ++t)
      threads.emplace_back([&, t] {
        LayerRun run(model, sequence, {t, tp}, Recompute::None);
        if (!run.ok)
          return;
        run.joinGroup(group);
        int64_t first = sequence ? t * part : 0;
        std::vector<float> mine(x.begin() + first, x.begin() + first + part);
        std::vector<float> grad(dy.begin() + first, dy.begin() + first + part);
        shards[t] = run.run(mine, grad);
      });
    for (std::thread &thread : threads)
      thread.join();
    std::string how = sequence ? "with sequence parallelism" : "plain";
    for (int t = 0; t < tp; ++t) {
      const Result &r = shards[t];
      ASSERT_EQ(int64_t(r.y.size()), part) << how;
      int64_t first = sequence ? t * part : 0;
      for (int64_t i = 0; i < part; ++i) {
        ASSERT_NEAR(r.y[i], expected.y[first + i], 1e-5) << how << " y";
        ASSERT_NEAR(r.dx[i], expected.dx[first + i], 1e-5) << how << " dx";
      }
      for (const auto &[name, grad] : r.grads) {
        const ParameterSpec &spec = r.specs.at(name);
        std::vector<float> mine = grad;
        // What the group sums before the update (TensorGroupSums).
        if (spec.reduce == Reduce::Shards ||
            (sequence && spec.reduce == Reduce::Tokens))
          for (int o = 0; o < tp; ++o)
            if (o != t)
              for (size_t i = 0; i < mine.size(); ++i)
                mine[i] += shards[o].grads.at(name)[i];
        const std::vector<float> &want = expected.grads.at(name);
        for (const TensorRun &run : getRuns(spec))
          for (int64_t i = 0; i < run.count; ++i)
            ASSERT_NEAR(mine[run.local + i], want[run.global + i],
                        1e-4 * (1.0 + std::fabs(want[run.global + i])))
                << how << ", shard " << t << ", " << name << "["
                << run.global + i << "]";
      }
    }
  }
}

// Recomputing (selective: the attention core and the activation; full:
// the whole F from the stage's input) gives what keeping everything does.
TEST_P(FeatureConformance, RecomputationChangesNothing) {
  ModelConfig model = getModelWith(true);
  LayerRun kept(model, false, {}, Recompute::None);
  ASSERT_TRUE(kept.ok);
  Result expected = kept.run(x, dy);
  for (Recompute r : {Recompute::Selective, Recompute::Full}) {
    LayerRun again(model, false, {}, r);
    ASSERT_TRUE(again.ok);
    Result got = again.run(x, dy);
    for (size_t i = 0; i < got.y.size(); ++i) {
      ASSERT_EQ(got.y[i], expected.y[i]) << recomputeName(r) << " y";
      ASSERT_EQ(got.dx[i], expected.dx[i]) << recomputeName(r) << " dx";
    }
    for (const auto &[name, grad] : expected.grads)
      for (size_t i = 0; i < grad.size(); ++i)
        ASSERT_EQ(got.grads.at(name)[i], grad[i])
            << recomputeName(r) << " " << name << "[" << i << "]";
  }
}

// In bf16 (activations, messages and working weights stored in bf16, the
// kernels' arithmetic in fp32: the CPU backend's StagedKernels, as a bf16
// plan runs) the layer follows its fp32 run to bf16's precision: the
// feature's compute takes its arrays in the plan's type, not as fp32.
TEST_P(FeatureConformance, BFloat16FollowsFloat32) {
  ModelConfig model = getModelWith(true);
  LayerRun exact(model, false, {}, Recompute::None);
  LayerRun rounded(model, false, {}, Recompute::None, Precision::bf16());
  ASSERT_TRUE(exact.ok && rounded.ok);
  Result a = exact.run(x, dy), b = rounded.run(x, dy);
  // Relative to the whole vector: bf16 keeps 8 significant bits (2^-8,
  // 0.4%) at each kernel's output; a layer rounds a few dozen times (the
  // largest seen: 1.1%, a query norm's gain gradient).
  auto expectFollows = [](const std::vector<float> &want,
                          const std::vector<float> &got,
                          const std::string &what) {
    ASSERT_EQ(want.size(), got.size()) << what;
    double error = 0, norm = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_TRUE(std::isfinite(got[i])) << what << "[" << i << "]";
      error += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
      norm += double(want[i]) * want[i];
    }
    EXPECT_LT(std::sqrt(error), 0.03 * std::sqrt(norm) + 1e-6) << what;
  };
  expectFollows(a.y, b.y, "y");
  expectFollows(a.dx, b.dx, "dx");
  for (const auto &[name, grad] : a.grads)
    expectFollows(grad, b.grads.at(name), name);
}

INSTANTIATE_TEST_SUITE_P(Every, FeatureConformance,
                         testing::ValuesIn(getCases()), getCaseName);

// A mixture of experts whose router decides (weights large enough that
// the probabilities are far from uniform, as a trained router's are): the
// router's gradient, which the suite's initial router leaves too small to
// tell from zero, against central differences at every element, and the
// input's at every element. An element whose difference crosses a change
// of routing (the steps h and h / 2 disagree) is left out; few may be.
TEST(MixtureOfExperts, DecisiveRouterGradientsMatchFiniteDifferences) {
  const Feature *moe = sluice::blocks::lookupFeature("moe");
  ASSERT_NE(moe, nullptr);
  for (int variant : {0, 1, 2}) {
    ModelConfig model = getModel();
    moe->setEnabled(model.layers[1], true, variant);
    LayerRun run(model, false, {}, Recompute::None);
    ASSERT_TRUE(run.ok);
    const std::string router = "layers.0.mlp.router.weight";
    float *w = run.weight(router);
    for (int64_t i = 0; i < kHidden * 4; ++i)
      w[i] = 2.0f * valueAt(router, i, InitKind::Normal);
    // Experts whose outputs differ enough for their weights to matter.
    for (const char *name : {"gate", "up", "down"}) {
      std::string expert = "layers.0.mlp.experts." + std::string(name) +
                           ".weight";
      float *e = run.weight(expert);
      for (int64_t i = 0; i < 4 * kHidden * 32; ++i)
        e[i] = valueAt(expert, i, InitKind::Normal);
    }
    std::vector<float> x = randomVector(kRows * kSeq * kHidden, 21);
    std::vector<float> dy = randomVector(kRows * kSeq * kHidden, 22);
    Result result = run.run(x, dy);
    auto loss = [&] { return dot(run.forward(x), dy); };
    int checked = 0, kinks = 0;
    auto check = [&](float &value, double analytic, const std::string &what) {
      double wide = centralDifference(value, 4e-3, loss),
             narrow = centralDifference(value, 2e-3, loss);
      if (std::fabs(wide - narrow) > 1e-3 + 0.05 * std::fabs(narrow)) {
        ++kinks;
        return;
      }
      ++checked;
      EXPECT_NEAR(analytic, narrow, 5e-4 + 1e-2 * std::fabs(narrow))
          << what << " (form " << variant << ")";
    };
    for (int64_t i = 0; i < kHidden * 4; ++i)
      check(w[i], result.grads[router][i], router + "[" + std::to_string(i) +
                                               "]");
    for (size_t i = 0; i < x.size(); i += 7)
      check(x[i], result.dx[i], "dx[" + std::to_string(i) + "]");
    EXPECT_LE(kinks, checked / 10) << "too many routing changes to check";
    // The router's gradient is large enough here to be told from zero.
    double largest = 0;
    for (float g : result.grads[router])
      largest = std::max(largest, double(std::fabs(g)));
    EXPECT_GT(largest, 2e-2);
  }
}

// The suite's premise: the feature registered here is one the plan's spec,
// the layout and the registry take like a built-in one.
TEST(FeatureRegistry, ATestFeatureIsAFeatureLikeAnother) {
  registerTestFeature();
  LayerConfig layer = getModel().layers[1];
  kChannelScale.setEnabled(layer, true);
  EXPECT_EQ(sluice::blocks::checkLayer(layer, kHidden), "");
  LayerConfig back;
  back.kind = LayerKind::Transformer;
  nlohmann::json written =
      nlohmann::json::parse(sluice::blocks::writeLayer(layer).dump());
  EXPECT_EQ(sluice::blocks::readLayer(written, back), "");
  EXPECT_EQ(back, layer);
  ModelConfig model = getModel();
  model.layers[1] = layer;
  bool found = false;
  for (const ParameterSpec &spec : getLayerParameters(model, 1))
    found |= spec.name == "layers.0.attn.scale";
  EXPECT_TRUE(found);
  SliceShape s{kRows, kSeq, 0};
  EXPECT_GT(getForwardStateBytes(model, {1}, s, Precision::fp32()),
            getForwardStateBytes(getModel(), {1}, s, Precision::fp32()));
}

// A compute part is found by its folder's name, a shape part says its
// own: each built feature's must agree, or its layers would not run.
TEST(FeatureRegistry, EveryFeatureHasItsComputePart) {
  registerTestFeature();
  for (const sluice::blocks::Feature *f : sluice::blocks::getFeatures())
    EXPECT_NE(block::lookupCompute(f->getName()), nullptr) << f->getName();
  EXPECT_EQ(block::lookupCompute("no_such_feature"), nullptr);
}

} // namespace
