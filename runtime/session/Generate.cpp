//===- Generate.cpp - Text from the weights a run ended with --------------===//
//
// A pipelined run's weights are spread over its ranks: they are gathered
// as a checkpoint (every rank's file, in a directory beside the run's
// outputs) and loaded whole into a reference model on rank 0's host,
// which runs the forward once per drawn token over the whole prefix (no
// key/value cache: generation here is for seeing what a model learned,
// not for serving).
//
//===----------------------------------------------------------------------===//

#include "Generate.h"

#include "Checkpoint.h"
#include "CpuDevice.h"
#include "Failure.h"
#include "ProcessGroup.h"
#include "Parameters.h"

#ifdef SLUICE_HAVE_TOKENIZER
#include "sluice/Tokenizer/Tokenizer.h"
#endif

#include <algorithm>
#include <cstdio>
#include <filesystem>

namespace sluice::rt::session {

namespace fs = std::filesystem;

namespace {

/// The prompt's ids (with the tokenizer's begin-of-text first, as the
/// dataset's documents start) and the tokenizer that made them, if text.
#ifdef SLUICE_HAVE_TOKENIZER
using TextTokenizer = std::unique_ptr<tok::Tokenizer>;
#else
using TextTokenizer = std::nullptr_t;
#endif

Status encodePrompt(const SessionOptions &options,
                    const TokenizerFiles &files, TextTokenizer &tokenizer,
                    std::vector<int32_t> &ids) {
  if (options.prompt.empty()) {
    ids = options.promptIds;
    return Status::ok();
  }
#ifdef SLUICE_HAVE_TOKENIZER
  if (files.file.empty())
    return Status::error("--prompt is encoded with the tokenizer of the "
                         "--data dataset, and this run has none (give the "
                         "ids with --prompt-ids)");
  std::string error;
  tokenizer = tok::openTokenizer(files.file, error);
  std::vector<uint32_t> encoded;
  if (!tokenizer || !tokenizer->encode(options.prompt, encoded, error))
    return Status::error("--prompt: " + error);
  if (files.bos >= 0)
    ids.push_back(int32_t(files.bos));
  ids.insert(ids.end(), encoded.begin(), encoded.end());
  return Status::ok();
#else
  return Status::error("--prompt needs a sluice-run built with the "
                       "tokenizers (this build has none): give the ids "
                       "with --prompt-ids");
#endif
}

/// Draws after `ids` with `model`, then prints the prompt and the
/// continuation.
Status drawAndPrint(ReferenceTrainer &model, const Plan &plan,
                    const SessionOptions &options,
                    const TokenizerFiles &files, TextTokenizer &tokenizer,
                    uint64_t seed, std::vector<int32_t> ids) {
  int64_t vocab = plan.model.layers.back().vocab;
  for (int32_t id : ids)
    if (id >= vocab)
      return Status::error("prompt token " + std::to_string(id) +
                           " is not below the model's vocabulary of " +
                           std::to_string(vocab));
  if (ids.empty())
    return Status::error("the prompt encodes to no tokens");
  int64_t total = int64_t(ids.size()) + options.sampling.newTokens;
  if (total > plan.model.seqLen)
    return Status::error(
        "the prompt's " + std::to_string(ids.size()) + " tokens and " +
        std::to_string(options.sampling.newTokens) +
        " to generate exceed the model's sequence length of " +
        std::to_string(plan.model.seqLen));
  size_t promptLength = ids.size();
  // A model's vocabulary may be larger than its tokenizer's (padded): the
  // ids no text decodes to are never drawn.
  int64_t drawable = vocab;
#ifdef SLUICE_HAVE_TOKENIZER
  if (tokenizer)
    drawable = std::min(drawable, tokenizer->getVocabSize());
#endif
  auto next = [&](const std::vector<int32_t> &prefix,
                  std::vector<float> &logits) {
    Status st = model.getNextLogits(prefix, logits);
    logits.resize(drawable);
    return st;
  };
  int32_t stop = tokenizer ? int32_t(files.eos) : -1;
  if (Status st = generate(next, options.sampling, seed, stop, ids); !st)
    return st;
  std::string drawn;
  for (size_t i = promptLength; i < ids.size(); ++i)
    drawn += (i > promptLength ? " " : "") + std::to_string(ids[i]);
  std::printf("generated %zu tokens: %s\n", ids.size() - promptLength,
              drawn.c_str());
#ifdef SLUICE_HAVE_TOKENIZER
  if (tokenizer) {
    std::vector<uint32_t> added(ids.begin() + promptLength, ids.end());
    std::string prompt, continuation, error;
    std::vector<uint32_t> head(ids.begin(), ids.begin() + promptLength);
    if (!tokenizer->decode(head, prompt, error) ||
        !tokenizer->decode(added, continuation, error))
      return Status::error("cannot decode the sample: " + error);
    std::printf("sample: %s[%s]\n", prompt.c_str(), continuation.c_str());
  }
#endif
  std::fflush(stdout);
  return Status::ok();
}

/// A reference model on the host holding the weights of checkpoint `dir`.
Status loadWhole(const Plan &plan, const std::string &dir, CpuDevice &device,
                 std::unique_ptr<TokenSource> &unused,
                 std::unique_ptr<ReferenceTrainer> &out) {
  ModelConfig whole = getWholeModel(plan.model);
  unused = makeSyntheticTokens(1, whole.layers.front().vocab, 1);
  out = std::make_unique<ReferenceTrainer>(whole, 1, Precision::fp32(), device,
                                           *unused, TrainerOptions());
  if (Status st = out->prepare(); !st)
    return st;
  int64_t step = 0;
  return loadCheckpoint(dir, -1, out->getParameters(), step);
}

/// Where the gathered weights go: beside the run's outputs (a directory
/// every rank reaches), removed after.
std::string getGatherDir(const SessionOptions &options) {
  for (const std::string &dir : {options.saveDir, options.saveHF})
    if (!dir.empty())
      return dir + "/.sluice-generate";
  return ".sluice-generate";
}

} // namespace

void generateSample(HostGroup &world, const GenerateFrom &from,
                    const Plan &plan, const SessionOptions &options,
                    const TokenizerFiles &files) {
  bool root = world.rank() == 0;
  std::string gather = getGatherDir(options);
  if (!from.reference) {
    agree(world, from.trainer.gatherOptimizerState());
    Status st = Status::ok();
    if (from.writes)
      st = saveCheckpoint(gather, from.step, from.trainer.getParameters(),
                          *from.model, TrainingSettings(), /*keep=*/1,
                          from.written);
    agree(world, st);
  }
  Status st = Status::ok();
  if (root) {
    TextTokenizer tokenizer{};
    std::vector<int32_t> ids;
    CpuDevice device;
    std::unique_ptr<TokenSource> unused;
    std::unique_ptr<ReferenceTrainer> whole;
    st = encodePrompt(options, files, tokenizer, ids);
    ReferenceTrainer *model = from.reference;
    if (st && !model) {
      st = loadWhole(plan, gather, device, unused, whole);
      model = whole.get();
    }
    if (st)
      st = drawAndPrint(*model, plan, options, files, tokenizer, from.seed,
                        ids);
    std::error_code ec;
    if (!from.reference)
      fs::remove_all(gather, ec);
  }
  agree(world, st);
}

} // namespace sluice::rt::session
