//===- SamplingTest.cpp - Drawing tokens from logits ----------------------===//
//
// sluice-run --generate's draw (runtime/model/Sampling.h) against what Hugging
// Face's generate computes: greedy is the first largest logit; the draws
// at a temperature follow softmax(logits / T); top-k and top-p keep the
// candidates they name and no other.
//
//===----------------------------------------------------------------------===//

#include "Sampling.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

using namespace sluice::rt;

namespace {

std::map<int32_t, int> countDraws(const std::vector<float> &logits,
                                  const SamplingOptions &options, int n) {
  std::mt19937_64 rng(42);
  std::map<int32_t, int> counts;
  for (int i = 0; i < n; ++i)
    ++counts[drawToken(logits, options, rng)];
  return counts;
}

TEST(Sampling, GreedyIsTheFirstLargestLogit) {
  SamplingOptions greedy;
  greedy.temperature = 0;
  std::mt19937_64 rng(1);
  EXPECT_EQ(drawToken({0.5f, 2.0f, -1.0f, 2.0f}, greedy, rng), 1);
  // Top-k 1 is greedy at any temperature; so is a top-p below the
  // largest probability.
  SamplingOptions one;
  one.temperature = 3.0;
  one.topK = 1;
  EXPECT_EQ(countDraws({0.5f, 2.0f, -1.0f, 1.9f}, one, 200).size(), 1u);
  SamplingOptions nucleus;
  nucleus.topP = 0.01;
  auto counts = countDraws({0.5f, 2.0f, -1.0f, 1.9f}, nucleus, 200);
  ASSERT_EQ(counts.size(), 1u);
  EXPECT_EQ(counts.begin()->first, 1);
}

TEST(Sampling, DrawsFollowTheSoftmaxAtTheTemperature) {
  std::vector<float> logits = {1.0f, 0.0f, -0.5f, 2.0f};
  SamplingOptions o;
  o.temperature = 0.7;
  const int n = 200000;
  auto counts = countDraws(logits, o, n);
  double sum = 0;
  for (float l : logits)
    sum += std::exp(l / o.temperature);
  for (size_t i = 0; i < logits.size(); ++i) {
    double want = std::exp(logits[i] / o.temperature) / sum;
    // Five standard deviations of a binomial share.
    double spread = 5 * std::sqrt(want * (1 - want) / n);
    EXPECT_NEAR(double(counts[int32_t(i)]) / n, want, spread) << i;
  }
}

TEST(Sampling, TopKAndTopPKeepTheirCandidatesOnly) {
  // Probabilities 0.4, 0.3, 0.2, 0.1 at temperature 1.
  std::vector<float> logits = {std::log(0.3f), std::log(0.1f), std::log(0.4f),
                               std::log(0.2f)};
  SamplingOptions k;
  k.topK = 2;
  auto counts = countDraws(logits, k, 20000);
  EXPECT_EQ(counts.size(), 2u);
  EXPECT_TRUE(counts.count(2) && counts.count(0));
  // Renormalised over the two: 4/7 and 3/7.
  EXPECT_NEAR(double(counts[2]) / 20000, 4.0 / 7.0, 0.02);
  // The fewest whose probability reaches 0.5 are the top two (0.7); 0.75
  // needs the third.
  SamplingOptions p;
  p.topP = 0.5;
  EXPECT_EQ(countDraws(logits, p, 20000).size(), 2u);
  p.topP = 0.75;
  counts = countDraws(logits, p, 20000);
  EXPECT_EQ(counts.size(), 3u);
  EXPECT_FALSE(counts.count(1)) << "the least likely is outside 0.75";
}

TEST(Sampling, GenerationStopsAtTheStopTokenAndRepeatsWithItsSeed) {
  SamplingOptions o;
  o.newTokens = 6;
  // A model whose next token is the last one plus one.
  NextLogits next = [](const std::vector<int32_t> &ids,
                       std::vector<float> &logits) {
    logits.assign(8, 0.0f);
    logits[(ids.back() + 1) % 8] = 20.0f;
    return Status::ok();
  };
  std::vector<int32_t> ids = {2};
  ASSERT_TRUE(bool(generate(next, o, 3, /*stop=*/5, ids)));
  EXPECT_EQ(ids, (std::vector<int32_t>{2, 3, 4, 5}));
  SamplingOptions wide;
  wide.newTokens = 10;
  wide.temperature = 5.0;
  std::vector<int32_t> a = {0}, b = {0};
  ASSERT_TRUE(bool(generate(next, wide, 9, -1, a)));
  ASSERT_TRUE(bool(generate(next, wide, 9, -1, b)));
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.size(), 11u);
  SamplingOptions none;
  none.topP = 0;
  EXPECT_EQ(none.check(), "--top-p must be in (0, 1], got 0.000000");
}

} // namespace
