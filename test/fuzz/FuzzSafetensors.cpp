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

#include <cstdio>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace sluice;
  static const bool config = [] {
    std::string text = R"({"model_type": "llama", "hidden_size": 16,
      "num_hidden_layers": 2, "num_attention_heads": 2,
      "num_key_value_heads": 1, "intermediate_size": 32, "vocab_size": 20,
      "tie_word_embeddings": true, "max_position_embeddings": 64,
      "rms_norm_eps": 1e-5, "rope_theta": 10000.0})";
    fuzz::writeInput("config.json",
                     reinterpret_cast<const uint8_t *>(text.data()),
                     text.size());
    return true;
  }();
  (void)config;
  fuzz::writeInput("model.safetensors", data, size);
  rt::Status loaded = rt::loadHuggingFace(
      fuzz::getWorkDir(), fuzz::getTinyLlama(), fuzz::getTinyParameters());
  // The fixed config.json is always accepted: a refusal of it means every
  // input stops there and the target tests nothing (as it once did, when
  // max_position_embeddings became required).
  static const std::string refusal = "'" + fuzz::getWorkDir() + "/config.json'";
  if (!loaded && loaded.message().rfind(refusal, 0) == 0) {
    fprintf(stderr, "the fuzz target's own config.json was refused: %s\n",
            loaded.message().c_str());
    abort();
  }
  return 0;
}
