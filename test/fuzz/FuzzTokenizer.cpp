//===- FuzzTokenizer.cpp - libFuzzer target: tokenizer.json files ---------===//
//
// Any bytes as a tokenizer.json: it opens or is refused with a message,
// and one that opens encodes a text with added tokens, spaces, digits,
// accents and an emoji into ids inside its vocabulary, never crashing.
//
//===----------------------------------------------------------------------===//

#include "FuzzFiles.h"
#include "sluice/Tokenizer/Tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace sluice;
  std::string path = fuzz::writeInput("tokenizer.json", data, size);
  std::string error;
  std::unique_ptr<tok::Tokenizer> tokenizer =
      tok::openTokenizer(path, error);
  if (!tokenizer)
    return 0;
  std::vector<uint32_t> ids;
  if (!tokenizer->encode("Hello,  world<|endoftext|> 42 caf\xc3\xa9 "
                         "\xf0\x9f\x99\x82\tend",
                         ids, error))
    return 0;
  int64_t vocab = tokenizer->getVocabSize();
  for (uint32_t id : ids)
    if (int64_t(id) >= vocab)
      __builtin_trap(); // an id past the vocabulary it reports
  return 0;
}
