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

/// A binary file of little-endian tokens (`dtype` "uint32" or "uint16"),
/// read in consecutive windows of seqLen + 1, wrapping around. Fails,
/// naming the file and offset, if it is missing, too short, or holds a
/// token >= vocab.
Status loadTokenFile(const std::string &path, const std::string &dtype,
                     int64_t vocab, int64_t seqLen, int64_t microbatches,
                     std::unique_ptr<TokenSource> &source);

/// Data parallelism: replica r of `replicas`, each running `microbatches`
/// per step, reads microbatches [r * microbatches, (r + 1) * microbatches)
/// of `all`'s steps of replicas * microbatches, so the replicas together
/// see what one device running them all would.
std::unique_ptr<TokenSource> makeReplicaTokens(std::unique_ptr<TokenSource> all,
                                               int64_t replica,
                                               int64_t microbatches);

} // namespace sluice::rt

#endif // SLUICE_RUNTIME_DATA_H
