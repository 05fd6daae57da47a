//===- Sampling.cpp - Drawing tokens from a model's logits ----------------===//

#include "Sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace sluice::rt {

std::string SamplingOptions::check() const {
  if (newTokens < 0)
    return "--generate must not be negative, got " + std::to_string(newTokens);
  if (!(temperature >= 0) || !std::isfinite(temperature))
    return "--temperature must be at least 0, got " +
           std::to_string(temperature);
  if (topK < 0)
    return "--top-k must not be negative, got " + std::to_string(topK);
  if (!(topP > 0 && topP <= 1))
    return "--top-p must be in (0, 1], got " + std::to_string(topP);
  return "";
}

int32_t drawToken(const std::vector<float> &logits,
                  const SamplingOptions &options, std::mt19937_64 &rng) {
  if (options.temperature == 0)
    return int32_t(std::max_element(logits.begin(), logits.end()) -
                   logits.begin());
  // Candidates by logit, largest first (ties by id, so that a draw is the
  // same on every machine).
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  auto larger = [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  size_t keep = order.size();
  if (options.topK > 0 && size_t(options.topK) < keep) {
    keep = size_t(options.topK);
    std::partial_sort(order.begin(), order.begin() + keep, order.end(),
                      larger);
  } else {
    std::sort(order.begin(), order.end(), larger);
  }
  // Softmax over the kept candidates at the temperature, in double.
  std::vector<double> p(keep);
  double top = logits[order[0]] / options.temperature, sum = 0;
  for (size_t i = 0; i < keep; ++i)
    sum += p[i] = std::exp(logits[order[i]] / options.temperature - top);
  // Nucleus: the fewest candidates whose probability reaches top_p (the
  // first always kept).
  if (options.topP < 1) {
    double mass = 0;
    size_t nucleus = 0;
    while (nucleus < keep && (nucleus == 0 || mass < options.topP * sum))
      mass += p[nucleus++];
    keep = nucleus;
    sum = mass;
  }
  double u = std::uniform_real_distribution<double>(0.0, sum)(rng);
  for (size_t i = 0; i < keep; ++i) {
    if (u < p[i])
      return order[i];
    u -= p[i];
  }
  return order[keep - 1];
}

Status generate(const NextLogits &next, const SamplingOptions &options,
                uint64_t seed, int32_t stop, std::vector<int32_t> &ids) {
  std::mt19937_64 rng(seed);
  std::vector<float> logits;
  for (int64_t n = 0; n < options.newTokens; ++n) {
    if (Status st = next(ids, logits); !st)
      return st;
    int32_t token = drawToken(logits, options, rng);
    ids.push_back(token);
    if (token == stop)
      break;
  }
  return Status::ok();
}

} // namespace sluice::rt
