//===- TokenSlicingTest.cpp - TeraPipe's DP, eq. 9, Seq1F1B's cut ---------===//
//
// Li et al., 2021 §3.3-3.4 and Sun et al., 2024 §3.4 against their
// claims: the dynamic programme finds the exact optimum (brute force on
// every small case), within K epsilon of it with epsilon > 0; the joint
// batch split is the best over all splits; equation 9 is recovered by
// least squares; Seq1F1B's segments have equal cost, the first the longest.

#include "sluice/Schedule/TokenSlicing.h"

#include <gtest/gtest.h>

#include <functional>
#include <numeric>
#include <random>

using namespace mlir::sluice::slicing;

namespace {

/// A random latency that grows with the length and the context: a launch
/// overhead, a per-token term, an attention term and random bumps that
/// keep it increasing.
struct RandomLatency {
  explicit RandomLatency(unsigned seed, int64_t tokens) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> u(0.0, 1.0);
    overhead = 0.2 + 2.0 * u(rng);
    perToken = 0.1 + u(rng);
    attention = 0.05 * u(rng);
    bumps.resize(tokens + 1);
    double acc = 0;
    for (double &b : bumps)
      b = acc += 0.3 * u(rng);
  }
  double operator()(int64_t i, int64_t j) const {
    return overhead + perToken * double(i) + attention * double(i * j) +
           bumps[i] + 0.01 * double(j);
  }
  double overhead, perToken, attention;
  std::vector<double> bumps;
};

TEST(TeraPipe, EqualsBruteForceOnEverySmallCase) {
  int cases = 0;
  for (int64_t tokens = 1; tokens <= 14; ++tokens)
    for (int stages = 1; stages <= 6; ++stages)
      for (unsigned seed = 0; seed < 4; ++seed) {
        RandomLatency f(seed * 977 + unsigned(tokens) * 31 + stages, tokens);
        auto t = [&](int64_t i, int64_t j) { return f(i, j); };
        Slicing exact = solveExhaustively(tokens, stages, t);
        TeraPipeOptions options;
        options.stages = stages;
        Slicing dp = solveTeraPipe(tokens, t, options);
        ASSERT_NEAR(dp.latency, exact.latency, 1e-9 * exact.latency)
            << "L=" << tokens << " K=" << stages << " seed=" << seed;
        EXPECT_EQ(checkSlicing(tokens, dp.lengths), "");
        EXPECT_NEAR(getPipelineLatency(dp.lengths, stages, t), dp.latency,
                    1e-9 * dp.latency);
        ++cases;
      }
  EXPECT_EQ(cases, 14 * 6 * 4);
}

// With a granularity the DP works on aligned positions only: still the
// optimum over every slicing whose cuts are aligned (brute force over them).
TEST(TeraPipe, GranularityKeepsTheOptimumOverAlignedSlicings) {
  for (int64_t tokens : {13, 14, 20})
    for (int64_t g : {2, 3, 4})
      for (int stages : {1, 3, 6}) {
        RandomLatency f(unsigned(tokens * 13 + g * 5 + stages), tokens);
        auto t = [&](int64_t i, int64_t j) { return f(i, j); };
        std::vector<int64_t> cuts; // aligned positions strictly inside
        for (int64_t p = g; p < tokens; p += g)
          cuts.push_back(p);
        double best = 1e300;
        for (uint64_t mask = 0; mask < (uint64_t(1) << cuts.size()); ++mask) {
          std::vector<int64_t> lengths;
          int64_t start = 0;
          for (size_t b = 0; b < cuts.size(); ++b)
            if (mask >> b & 1) {
              lengths.push_back(cuts[b] - start);
              start = cuts[b];
            }
          lengths.push_back(tokens - start);
          best = std::min(best, getPipelineLatency(lengths, stages, t));
        }
        TeraPipeOptions options;
        options.stages = stages;
        options.granularity = g;
        Slicing dp = solveTeraPipe(tokens, t, options);
        EXPECT_NEAR(dp.latency, best, 1e-9 * best)
            << "L=" << tokens << " g=" << g << " K=" << stages;
      }
}

TEST(TeraPipe, EpsilonStaysWithinStagesTimesEpsilon) {
  for (int64_t tokens : {8, 12, 14})
    for (int stages : {2, 4, 6})
      for (double epsilon : {0.05, 0.3, 1.0, 5.0}) {
        RandomLatency f(unsigned(tokens * 7 + stages), tokens);
        auto t = [&](int64_t i, int64_t j) { return f(i, j); };
        double exact = solveExhaustively(tokens, stages, t).latency;
        TeraPipeOptions options;
        options.stages = stages;
        options.epsilon = epsilon;
        Slicing dp = solveTeraPipe(tokens, t, options);
        EXPECT_GE(dp.latency, exact - 1e-9);
        EXPECT_LE(dp.latency, exact + stages * epsilon + 1e-9)
            << "L=" << tokens << " K=" << stages << " eps=" << epsilon;
      }
}

TEST(TeraPipe, EpsilonSkipsBounds) {
  RandomLatency f(7, 256);
  auto t = [&](int64_t i, int64_t j) { return f(i, j); };
  TeraPipeOptions exact, coarse;
  exact.stages = coarse.stages = 8;
  coarse.epsilon = 1.0;
  Slicing a = solveTeraPipe(256, t, exact), b = solveTeraPipe(256, t, coarse);
  EXPECT_LT(b.boundsEvaluated, a.boundsEvaluated);
  EXPECT_LE(b.latency, a.latency + 8 * 1.0);
}

TEST(TeraPipe, LongSlicesFirstWhenAttentionGrowsWithContext) {
  // A latency dominated by attention over the context: later slices must
  // be shorter (§3.2, Figure 4).
  auto t = [](int64_t i, int64_t j) {
    return 1.0 + double(i) + 0.02 * double(i) * double(j);
  };
  TeraPipeOptions options;
  options.stages = 8;
  Slicing dp = solveTeraPipe(256, t, options);
  ASSERT_GE(dp.lengths.size(), 3u);
  EXPECT_GT(dp.lengths.front(), dp.lengths.back());
}

TEST(TeraPipe, GranularityAndSliceLimit) {
  RandomLatency f(3, 64);
  auto t = [&](int64_t i, int64_t j) { return f(i, j); };
  TeraPipeOptions options;
  options.stages = 4;
  options.granularity = 8;
  Slicing dp = solveTeraPipe(60, t, options);
  EXPECT_EQ(checkSlicing(60, dp.lengths), "");
  for (size_t i = 0; i + 1 < dp.lengths.size(); ++i)
    EXPECT_EQ(dp.lengths[i] % 8, 0);
  // A given number of slices: the best slicing with exactly that many.
  options.granularity = 1;
  for (int64_t k : {1, 2, 3, 5}) {
    options.slices = k;
    Slicing dp = solveTeraPipe(12, t, options);
    EXPECT_EQ(int64_t(dp.lengths.size()), k);
    // Brute force over slicings of 12 tokens into k slices.
    double best = 1e300;
    for (uint64_t cuts = 0; cuts < (1u << 11); ++cuts) {
      if (__builtin_popcountll(cuts) != k - 1)
        continue;
      std::vector<int64_t> lengths;
      int64_t start = 0;
      for (int64_t b = 0; b < 11; ++b)
        if (cuts >> b & 1) {
          lengths.push_back(b + 1 - start);
          start = b + 1;
        }
      lengths.push_back(12 - start);
      best = std::min(best, getPipelineLatency(lengths, 4, t));
    }
    EXPECT_NEAR(dp.latency, best, 1e-9) << "k=" << k;
  }
}

TEST(TeraPipe, JointBatchSplitIsTheBestSplit) {
  // Latency of b rows: a fixed launch cost plus work proportional to b.
  auto t = [](int64_t rows, int64_t i, int64_t j) {
    return 3.0 + double(rows) * (0.5 * double(i) + 0.01 * double(i * j));
  };
  TeraPipeOptions options;
  options.stages = 4;
  JointSlicing joint = solveTeraPipeJoint(6, 10, t, options);
  EXPECT_EQ(std::accumulate(joint.batchSplit.begin(), joint.batchSplit.end(),
                            int64_t(0)),
            6);
  // Against every composition of 6 into parts.
  std::vector<double> perSize(7);
  for (int64_t b = 1; b <= 6; ++b)
    perSize[b] = solveExhaustively(10, 4, [&](int64_t i, int64_t j) {
                   return t(b, i, j);
                 }).latency;
  std::function<double(int64_t)> best = [&](int64_t n) -> double {
    if (n == 0)
      return 0;
    double m = 1e300;
    for (int64_t b = 1; b <= n; ++b)
      m = std::min(m, perSize[b] + best(n - b));
    return m;
  };
  EXPECT_NEAR(joint.latency, best(6), 1e-9);
  ASSERT_EQ(joint.tokenSlices.size(), joint.batchSplit.size());
  for (const auto &lengths : joint.tokenSlices)
    EXPECT_EQ(checkSlicing(10, lengths), "");
}

TEST(LatencyModel, RecoversEquationNine) {
  // t(i, 0) arbitrary (GPU under-utilisation: flat, then linear); the
  // context term exactly a0 + a1 i + a2 j + a3 ij.
  std::vector<double> base;
  for (int i = 1; i <= 64; ++i)
    base.push_back(std::max(1.0, 0.05 * i));
  std::array<double, 4> truth{0.3, 0.01, 0.002, 0.0004};
  std::vector<std::array<double, 3>> samples;
  for (int i = 1; i <= 64; i += 3)
    for (int j = 0; j <= 256; j += 32)
      samples.push_back({double(i), double(j),
                         base[i - 1] + (j ? truth[0] + truth[1] * i +
                                                truth[2] * j + truth[3] * i * j
                                          : 0.0)});
  // Samples without context have no context term; fit on the others.
  std::vector<std::array<double, 3>> withContext;
  for (const auto &s : samples)
    if (s[1] > 0)
      withContext.push_back(s);
  LatencyModel model = LatencyModel::fit(base, withContext);
  for (int k = 0; k < 4; ++k)
    EXPECT_NEAR(model.getCoefficients()[k], truth[k], 1e-9);
  EXPECT_LT(model.getRelativeError(), 1e-9);
  EXPECT_DOUBLE_EQ(model(10, 0), base[9]);
}

TEST(LatencyModel, ReportsItsError) {
  std::vector<double> base(32, 1.0);
  std::vector<std::array<double, 3>> samples;
  // A context term that is not bilinear: the fit cannot be exact.
  for (int i = 1; i <= 32; i += 2)
    for (int j = 16; j <= 512; j += 16)
      samples.push_back({double(i), double(j), 1.0 + 1e-4 * i * j * j / 64});
  LatencyModel model = LatencyModel::fit(base, samples);
  EXPECT_GT(model.getRelativeError(), 0.01);
}

TEST(Seq1F1B, SegmentsHaveEqualFlopsAndTheFirstIsLongest) {
  // Per-token FLOPs of a GPT layer (6N per token) plus causal attention
  // over the prefix (grows with it), as in equation 8.
  for (int64_t tokens : {16384, 32768, 65536, 131072})
    for (int64_t k : {2, 3, 4, 8}) {
      double hidden = 4096, params = 12 * hidden * hidden;
      auto flops = [&](int64_t l, int64_t prefix) {
        double len = double(l), pre = double(prefix);
        return 6.0 * params * len +
               6.0 * hidden * (len * pre + len * (len + 1) / 2);
      };
      std::vector<int64_t> lengths = solveEqualCost(tokens, k, flops);
      ASSERT_EQ(int64_t(lengths.size()), k);
      EXPECT_EQ(checkSlicing(tokens, lengths), "");
      double lo = 1e300, hi = 0;
      int64_t prefix = 0;
      for (int64_t l : lengths) {
        double f = flops(l, prefix);
        lo = std::min(lo, f);
        hi = std::max(hi, f);
        prefix += l;
      }
      EXPECT_LT((hi - lo) / hi, 0.01) << "L=" << tokens << " k=" << k;
      for (size_t i = 1; i < lengths.size(); ++i)
        EXPECT_GE(lengths[0], lengths[i]);
      EXPECT_GT(lengths.front(), lengths.back());
    }
}

TEST(Slicing, UniformLengthsAndChecks) {
  EXPECT_EQ(getUniformLengths(10, 3), (std::vector<int64_t>{4, 3, 3}));
  EXPECT_EQ(checkSlicing(10, {4, 3, 3}), "");
  EXPECT_EQ(checkSlicing(10, {4, 3}),
            "slice lengths sum to 7, the sequence has 10 tokens");
  EXPECT_EQ(checkSlicing(10, {11, -1}),
            "slice lengths must be positive, got -1");
}

} // namespace
