//===- Tokens.cpp - The tokens a session trains and validates on ----------===//

#include "Tokens.h"

#include "Failure.h"
#include "ProcessGroup.h"

#include <algorithm>
#include <cstdio>

namespace sluice::rt::session {

namespace {

/// Rank 0's line about the dataset.
void printSummary(const std::string &path, const DataSummary &summary) {
  std::printf("data %s: %lld document%s, %lld training tokens", path.c_str(),
              (long long)summary.documents, summary.documents == 1 ? "" : "s",
              (long long)summary.trainTokens);
  if (summary.validationTokens > 0)
    std::printf(", %lld held out for validation",
                (long long)summary.validationTokens);
  if (!summary.tokenizer.empty())
    std::printf(" (%s)", summary.tokenizer.c_str());
  std::printf("\n");
}

} // namespace

RunTokens openRunTokens(HostGroup &world, const SessionOptions &options,
                        const Plan &plan, const TrainingSettings &settings,
                        int replica) {
  RunTokens out;
  std::unique_ptr<TokenSource> train, validation;
  int64_t vocab = plan.model.layers.front().vocab;
  // A step is every replica's microbatches; each replica reads its own.
  int64_t stepMicrobatches = int64_t(plan.microbatches) * plan.dp;
  out.evalSteps = options.evalSteps;
  if (options.dataPath.empty()) {
    train = makeSyntheticTokens(settings.seed, vocab, stepMicrobatches);
  } else {
    DataOptions o;
    o.path = options.dataPath;
    o.rawDtype = options.dataDtype;
    o.vocab = vocab;
    o.seqLen = plan.model.seqLen;
    o.microbatches = stepMicrobatches;
    o.seed = settings.seed;
    o.validationFraction = settings.heldOut;
    DataSummary summary;
    agree(world, openTokenData(o, train, validation, summary));
    out.trainTokens = summary.trainTokens;
    out.tokenizer.file = summary.tokenizerFile;
    out.tokenizer.bos = summary.tokenizerBos;
    out.tokenizer.eos = summary.tokenizerEos;
    if (world.rank() == 0)
      printSummary(options.dataPath, summary);
    if (summary.validationTokens > 0 && out.evalSteps == 0) {
      int64_t sequences = (summary.validationTokens - 1) / plan.model.seqLen;
      int64_t perStep = stepMicrobatches * plan.model.microBatch;
      // Whole steps only, so no sequence counts twice.
      out.evalSteps = std::clamp<int64_t>(sequences / perStep, 1, 32);
    }
  }
  if (!options.reference && plan.dp > 1) {
    train = makeReplicaTokens(std::move(train), replica, plan.microbatches);
    if (validation)
      validation = makeReplicaTokens(std::move(validation), replica,
                                     plan.microbatches);
  }
  out.data = std::make_unique<SwitchedTokens>(std::move(train),
                                              std::move(validation));
  return out;
}

} // namespace sluice::rt::session
