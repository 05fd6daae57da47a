//===- StepTokens.h - A step's tokens on the device -------------*- C++ -*-===//
//
// Every microbatch of a step, fetched from the token source and uploaded
// once per step into one device buffer, and each microbatch's rows of it:
// what the passes and the vocabulary shards read their tokens and labels
// from.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_EXECUTOR_STEPTOKENS_H
#define SLUICE_RUNTIME_EXECUTOR_STEPTOKENS_H

#include "Backend.h"
#include "Block.h"
#include "Data.h"

#include <vector>

namespace sluice::rt {

/// Which tokens of each sequence a rank trains on: all, or under context
/// parallelism (SliceShape::contextShards) rank `rank` of `ranks`'s chunks
/// of each slice (`slices`, token lengths).
struct ContextSplit {
  int64_t ranks = 1, rank = 0;
  std::vector<int64_t> slices;
};

class StepTokens {
public:
  /// Room for `microbatches` microbatches of `model`'s rows, each row its
  /// sequence and the next token (the last label); under context
  /// parallelism the rank's chunks and their labels (TokenRows::labels).
  Status allocate(Device &device, const ModelConfig &model, int microbatches,
                  const ContextSplit &context = {});
  /// Step `step`'s microbatches from `data`, uploaded on `stream`.
  void upload(TokenSource &data, int64_t step, Device &device, Stream &stream);
  const std::vector<TokenRows> &getBatches() const { return batches; }

private:
  int64_t rows = 0, seqLen = 0;
  ContextSplit split;
  DeviceBuffer tokens;
  std::vector<int32_t> host, batch;
  std::vector<TokenRows> batches;
};

} // namespace sluice::rt

#endif // SLUICE_RUNTIME_EXECUTOR_STEPTOKENS_H
