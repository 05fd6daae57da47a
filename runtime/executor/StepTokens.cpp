//===- StepTokens.cpp - A step's tokens on the device ---------------------===//

#include "StepTokens.h"

#include <algorithm>

namespace sluice::rt {

Status StepTokens::allocate(Device &device, const ModelConfig &model,
                            int microbatches) {
  rows = model.microBatch;
  seqLen = model.seqLen;
  int64_t row = rows * (seqLen + 1);
  if (Status st = device.allocate(DType::I32, microbatches * row, tokens); !st)
    return st;
  host.assign(microbatches * row, 0);
  batches.clear();
  for (int mb = 0; mb < microbatches; ++mb)
    batches.push_back({tokens.get() + mb * row, seqLen + 1});
  return Status::ok();
}

void StepTokens::upload(TokenSource &data, int64_t step, Device &device,
                        Stream &stream) {
  int64_t row = rows * (seqLen + 1);
  for (size_t mb = 0; mb < batches.size(); ++mb) {
    data.getBatch(step, int(mb), rows, seqLen, batch);
    std::copy(batch.begin(), batch.end(), host.begin() + int64_t(mb) * row);
  }
  device.upload(tokens.get(), host.data(),
                int64_t(host.size() * sizeof(int32_t)), stream);
}

} // namespace sluice::rt
