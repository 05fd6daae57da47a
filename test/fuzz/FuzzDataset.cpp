//===- FuzzDataset.cpp - libFuzzer target: token dataset files ------------===//
//
// Any bytes as --data: a token dataset (its header, offsets and tokens) or
// a raw file of tokens is read, or refused with a message, never crashed
// on (docs/data.md); what is read serves every microbatch of a step.
//
//===----------------------------------------------------------------------===//

#include "Data.h"
#include "FuzzFiles.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace sluice;
  rt::DataOptions options;
  options.path = fuzz::writeInput("data.tokens", data, size);
  // A raw file too, half the time: the first byte decides.
  options.rawDtype = size > 0 && data[0] % 2 ? "uint16" : "";
  options.vocab = 300;
  options.seqLen = 4;
  options.microbatches = 2;
  options.seed = 1;
  options.validationFraction = 0.25;
  std::unique_ptr<rt::TokenSource> train, validation;
  rt::DataSummary summary;
  if (!rt::openTokenData(options, train, validation, summary))
    return 0;
  std::vector<int32_t> batch;
  for (int mb = 0; mb < 2; ++mb) {
    train->getBatch(0, mb, 1, 4, batch);
    for (int32_t token : batch)
      if (token < 0 || token >= 300)
        __builtin_trap(); // a token the model has no row for
  }
  return 0;
}
