//===- Tokens.h - The tokens a session trains and validates on --*- C++ -*-===//
//
// A session's token streams -- the dataset of --data, or synthetic tokens
// -- each data-parallel replica reading its own microbatches of a step,
// and what the run header and the Hugging Face export say of them.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_SESSION_TOKENS_H
#define SLUICE_RUNTIME_SESSION_TOKENS_H

#include "Checkpoint.h"
#include "Data.h"
#include "HfTokenizer.h"
#include "Plan.h"
#include "SessionOptions.h"

#include <memory>

namespace sluice::rt {

class HostGroup;

namespace session {

struct RunTokens {
  std::unique_ptr<SwitchedTokens> data;
  /// --data's training tokens (0: synthetic tokens).
  int64_t trainTokens = 0;
  /// Validation steps per evaluation: the option's, or what the held-out
  /// part fills (whole steps, at most 32).
  int64_t evalSteps = 0;
  /// --data's tokenizer, for --save-hf.
  TokenizerFiles tokenizer;

  /// The tokens one evaluation reads.
  int64_t getEvaluationTokens(const Plan &plan) const {
    return evalSteps * plan.getTokensPerStep();
  }
};

/// Opens the tokens this rank trains on as `replica` of the plan's
/// data-parallel replicas (the reference trainer reads every replica's);
/// world rank 0 says what the dataset holds. Collective over `world`: a
/// dataset one rank cannot read ends the session everywhere (Failure.h).
RunTokens openRunTokens(HostGroup &world, const SessionOptions &options,
                        const Plan &plan, const TrainingSettings &settings,
                        int replica);

} // namespace session
} // namespace sluice::rt

#endif // SLUICE_RUNTIME_SESSION_TOKENS_H
