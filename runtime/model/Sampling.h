//===- Sampling.h - Drawing tokens from a model's logits --------*- C++ -*-===//
//
// Text generation from a trained model (sluice-run --generate): the next
// token drawn from the last position's logits, as Hugging Face's
// `generate` draws it -- the logits divided by the temperature, then kept
// to the top k, then to the smallest set whose probability reaches top_p
// (nucleus sampling; Holtzman et al., 2020), then one drawn; temperature
// 0 is greedy (the largest logit, the first of ties).
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_SAMPLING_H
#define SLUICE_RUNTIME_SAMPLING_H

#include "Status.h"

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace sluice::rt {

struct SamplingOptions {
  /// New tokens to draw (0: no generation).
  int64_t newTokens = 0;
  /// 0: greedy.
  double temperature = 1.0;
  /// 0: every token.
  int64_t topK = 0;
  /// 1: every token.
  double topP = 1.0;

  /// Why the settings cannot sample, or "".
  std::string check() const;
};

/// The token drawn from `logits` (one per vocabulary entry).
int32_t drawToken(const std::vector<float> &logits,
                  const SamplingOptions &options, std::mt19937_64 &rng);

/// The next token's logits after `ids` (a model's forward over them).
using NextLogits =
    std::function<Status(const std::vector<int32_t> &ids,
                         std::vector<float> &logits)>;

/// Appends options.newTokens tokens to `ids`, each drawn from `next`'s
/// logits after all before it; stops early after `stop` (>= 0) is drawn.
Status generate(const NextLogits &next, const SamplingOptions &options,
                uint64_t seed, int32_t stop, std::vector<int32_t> &ids);

} // namespace sluice::rt

#endif // SLUICE_RUNTIME_SAMPLING_H
