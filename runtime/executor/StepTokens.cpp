//===- StepTokens.cpp - A step's tokens on the device ---------------------===//

#include "StepTokens.h"

#include <algorithm>

namespace sluice::rt {

Status StepTokens::allocate(Device &device, const ModelConfig &model,
                            int microbatches, const ContextSplit &context) {
  rows = model.microBatch;
  seqLen = model.seqLen;
  split = context;
  // A row's sequence and its next token; under context parallelism the
  // rank's tokens of the row and, apart, their labels.
  int64_t local = seqLen / split.ranks;
  int64_t row = split.ranks > 1 ? rows * 2 * local : rows * (seqLen + 1);
  if (Status st = device.allocate(DType::I32, microbatches * row, tokens); !st)
    return st;
  host.assign(microbatches * row, 0);
  batches.clear();
  for (int mb = 0; mb < microbatches; ++mb) {
    DevicePtr at = tokens.get() + mb * row;
    if (split.ranks > 1)
      batches.push_back({at, local, at + rows * local});
    else
      batches.push_back({at, seqLen + 1});
  }
  return Status::ok();
}

void StepTokens::upload(TokenSource &data, int64_t step, Device &device,
                        Stream &stream) {
  int64_t local = seqLen / split.ranks;
  int64_t row = split.ranks > 1 ? rows * 2 * local : rows * (seqLen + 1);
  for (size_t mb = 0; mb < batches.size(); ++mb) {
    data.getBatch(step, int(mb), rows, seqLen, batch);
    auto out = host.begin() + int64_t(mb) * row;
    if (split.ranks == 1) {
      std::copy(batch.begin(), batch.end(), out);
      continue;
    }
    // This rank's two chunks of every slice, in slice order (the order
    // its passes read them, SliceShape::getLocalOffset), each token's
    // label beside it in the labels' rows.
    for (int64_t r = 0; r < rows; ++r) {
      const int32_t *sequence = batch.data() + r * (seqLen + 1);
      int64_t at = 0, offset = 0;
      for (int64_t length : split.slices) {
        SliceShape s{rows, length / split.ranks, offset, split.ranks};
        for (int part = 0; part < 2; ++part) {
          int64_t first = s.getChunkOffset(split.rank, part),
                  count = s.getChunkTokens();
          std::copy(sequence + first, sequence + first + count,
                    out + r * local + at);
          std::copy(sequence + first + 1, sequence + first + 1 + count,
                    out + (rows + r) * local + at);
          at += count;
        }
        offset += length;
      }
    }
  }
  device.upload(tokens.get(), host.data(),
                int64_t(host.size() * sizeof(int32_t)), stream);
}

} // namespace sluice::rt
