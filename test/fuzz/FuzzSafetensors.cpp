//===- FuzzSafetensors.cpp - libFuzzer target: safetensors files ----------===//
//
// Any bytes as a Hugging Face directory's model.safetensors (beside a
// fixed Llama config.json): its header's shapes and data offsets are
// checked against its bytes -- the whole buffer, no holes, no overlaps --
// and it loads or is refused with a message, never crashes.
//
//===----------------------------------------------------------------------===//

#include "FuzzFiles.h"
#include "HuggingFace.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace sluice;
  static const bool config = [] {
    std::string text = R"({"model_type": "llama", "hidden_size": 16,
      "num_hidden_layers": 2, "num_attention_heads": 2,
      "num_key_value_heads": 1, "intermediate_size": 32, "vocab_size": 20,
      "tie_word_embeddings": true})";
    fuzz::writeInput("config.json",
                     reinterpret_cast<const uint8_t *>(text.data()),
                     text.size());
    return true;
  }();
  (void)config;
  fuzz::writeInput("model.safetensors", data, size);
  (void)rt::loadHuggingFace(fuzz::getWorkDir(), fuzz::getTinyLlama(),
                            fuzz::getTinyParameters());
  return 0;
}
