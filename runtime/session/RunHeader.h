//===- RunHeader.h - What a run says before its first step -----*- C++ -*-===//
//
// Two lines rank 0 prints before the first step, so that a log says what
// it is a log of (Megatron-LM prints its arguments, torchtitan its model
// and job config): the model and its size, the mesh, schedule and batch,
// the steps with the tokens and epochs they cover, and the optimizer. A
// resumed run adds where it starts, and a warning where it trains past
// the decay its checkpoint recorded.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_SESSION_RUNHEADER_H
#define SLUICE_RUNTIME_SESSION_RUNHEADER_H

#include "Checkpoint.h"
#include "Plan.h"
#include "SessionOptions.h"

#include <cstdint>
#include <string>

namespace sluice::rt::session {

/// What the header describes besides the plan and options.
struct RunFacts {
  const Plan *plan = nullptr;
  const SessionOptions *options = nullptr;
  const TrainingSettings *settings = nullptr;
  /// Steps the weights have taken (a resumed run's checkpoint step).
  int64_t done = 0;
  /// The training tokens of --data; 0 for synthetic tokens.
  int64_t trainTokens = 0;
  /// The CPU backend's threads a rank (0: another backend).
  int threads = 0;
};

/// The parameters of the whole model (each once; shards and tied tables
/// counted as the unsharded model holds them).
int64_t countModelParameters(const ModelConfig &model);

/// "12.3M", "1.24B", "65.5k", "512".
std::string formatCount(double count);

/// The header's lines, each ending in a newline.
std::string describeRun(const RunFacts &facts);

/// Where a resumed run starts ("" for a fresh run), and on `warning` a
/// warning line when it trains past the recorded decay ("" if none).
std::string describeResume(const RunFacts &facts, std::string &warning);

} // namespace sluice::rt::session

#endif // SLUICE_RUNTIME_SESSION_RUNHEADER_H
