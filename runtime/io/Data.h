//===- Data.h - Token streams for training ----------------------*- C++ -*-===//
//
// Where each microbatch's tokens come from. A batch for (step, microbatch)
// is rows x (seq_len + 1) tokens: the inputs and, shifted by one, the
// labels. Both sources are deterministic, so the reference run and any
// pipelined run see the same data.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_DATA_H
#define SLUICE_RUNTIME_DATA_H

#include "Status.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace sluice::rt {

class TokenSource {
public:
  virtual ~TokenSource() = default;
  /// Fills `tokens` with rows x (seqLen + 1) tokens of the batch.
  virtual void getBatch(int64_t step, int64_t microbatch, int64_t rows,
                        int64_t seqLen, std::vector<int32_t> &tokens) = 0;
};

/// Uniform pseudo-random tokens from (seed, step, microbatch, row, position).
std::unique_ptr<TokenSource> makeSyntheticTokens(uint64_t seed, int64_t vocab,
                                                 int64_t microbatches);

/// What sluice-run --data reads.
struct DataOptions {
  std::string path;
  /// A raw file of little-endian tokens, "uint16" or "uint32"; empty: the
  /// file must be a token dataset (sluice-tokenize), whose header says.
  std::string rawDtype;
  /// The model's vocabulary: every token must be below it.
  int64_t vocab = 0;
  int64_t seqLen = 0;
  /// Microbatches per step, every replica's.
  int64_t microbatches = 1;
  /// Orders the training documents anew each epoch.
  uint64_t seed = 1;
  /// The share of the tokens held out for validation (the file's last
  /// ones); 0: none.
  double validationFraction = 0;
};

/// Opens a token dataset (or a raw token file: one document). Training
/// samples are consecutive windows of seqLen + 1 tokens over the training
/// documents concatenated -- each document ending in its end-of-text
/// token, so the model learns where one ends (Megatron-LM's packing) --
/// in an order shuffled by (seed, epoch); the validation source reads the
/// held-out part in file order (null when none is held out). Fails,
/// naming the file, when it is missing, malformed, from a larger
/// vocabulary, or too short for a sequence.
struct DataSummary {
  int64_t documents = 0, trainTokens = 0, validationTokens = 0;
  /// The tokenizer the header names ("" for a raw file).
  std::string tokenizer;
  /// Its file (absolute; "" for the byte tokenizer or a raw file) and its
  /// own begin- and end-of-text ids (-1: none), which sluice-run --save-hf
  /// puts into the Hugging Face directory.
  std::string tokenizerFile;
  int64_t tokenizerBos = -1, tokenizerEos = -1;
};
Status openTokenData(const DataOptions &options,
                     std::unique_ptr<TokenSource> &train,
                     std::unique_ptr<TokenSource> &validation,
                     DataSummary &summary);

/// Reads `step`'s batches from one of two sources, switched between
/// steps: training and validation (sluice-run --eval-every).
class SwitchedTokens final : public TokenSource {
public:
  SwitchedTokens(std::unique_ptr<TokenSource> train,
                 std::unique_ptr<TokenSource> validation)
      : train(std::move(train)), validation(std::move(validation)) {}
  void getBatch(int64_t step, int64_t microbatch, int64_t rows, int64_t seqLen,
                std::vector<int32_t> &tokens) override {
    (validating ? validation : train)
        ->getBatch(step, microbatch, rows, seqLen, tokens);
  }
  bool hasValidation() const { return validation != nullptr; }
  void setValidating(bool on) { validating = on && validation; }

private:
  std::unique_ptr<TokenSource> train, validation;
  bool validating = false;
};

/// Data parallelism: replica r of `replicas`, each running `microbatches`
/// per step, reads microbatches [r * microbatches, (r + 1) * microbatches)
/// of `all`'s steps of replicas * microbatches, so the replicas together
/// see what one device running them all would.
std::unique_ptr<TokenSource> makeReplicaTokens(std::unique_ptr<TokenSource> all,
                                               int64_t replica,
                                               int64_t microbatches);

} // namespace sluice::rt

#endif // SLUICE_RUNTIME_DATA_H
