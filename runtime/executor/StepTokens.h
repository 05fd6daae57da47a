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

class StepTokens {
public:
  /// Room for `microbatches` microbatches of `model`'s rows, each row its
  /// sequence and the next token (the last label).
  Status allocate(Device &device, const ModelConfig &model, int microbatches);
  /// Step `step`'s microbatches from `data`, uploaded on `stream`.
  void upload(TokenSource &data, int64_t step, Device &device, Stream &stream);
  const std::vector<TokenRows> &getBatches() const { return batches; }

private:
  int64_t rows = 0, seqLen = 0;
  DeviceBuffer tokens;
  std::vector<int32_t> host, batch;
  std::vector<TokenRows> batches;
};

} // namespace sluice::rt

#endif // SLUICE_RUNTIME_EXECUTOR_STEPTOKENS_H
