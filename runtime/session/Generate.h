//===- Generate.h - Text from the weights a run ended with ------*- C++ -*-===//
//
// sluice-run --generate: after the steps, rank 0 draws tokens after a
// prompt from the model the run trained (Sampling.h), forward only, on the
// unpartitioned model, and prints them -- as text when the prompt was
// text (--data's tokenizer encodes and decodes it), as ids always.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_SESSION_GENERATE_H
#define SLUICE_RUNTIME_SESSION_GENERATE_H

#include "Checkpoint.h"
#include "HfTokenizer.h"
#include "Plan.h"
#include "ReferenceTrainer.h"
#include "SessionOptions.h"
#include "Trainer.h"

namespace sluice::rt {

class HostGroup;

namespace session {

/// What generation reads: the run's parameters and how they are spread.
struct GenerateFrom {
  Trainer &trainer;
  /// The trainer when it is the unpartitioned reference: it draws itself.
  ReferenceTrainer *reference = nullptr;
  /// With a pipelined run: whether this rank's replica writes the
  /// gathered weights (the first), over `model` (its pipeline and shards).
  bool writes = true;
  Communicator *model = nullptr;
  int64_t step = 0;
  uint64_t seed = 1;
  /// Which of its parameters it writes (null: all).
  WrittenParameters written;
};

/// Draws and prints options.sampling.newTokens tokens after the prompt.
/// Collective over `world`: a problem on rank 0 (a prompt the tokenizer
/// cannot encode, longer than the sequence) ends the session everywhere.
void generateSample(HostGroup &world, const GenerateFrom &from,
                    const Plan &plan, const SessionOptions &options,
                    const TokenizerFiles &tokenizer);

} // namespace session
} // namespace sluice::rt

#endif // SLUICE_RUNTIME_SESSION_GENERATE_H
