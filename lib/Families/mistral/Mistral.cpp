//===- Mistral.cpp - Mistral (Jiang et al., 2023) -------------------------===//
//
// transformers' MistralForCausalLM: Llama's block with every layer's
// attention over a sliding window of `sliding_window` keys, 8 key/value
// heads by default, and no biases whatever the config says (its maps are
// built with bias=False).
//
//===----------------------------------------------------------------------===//

#include "../Common.h"

namespace sluice::families {

namespace {

class Mistral final : public LlamaLayoutFamily {
public:
  Mistral()
      : LlamaLayoutFamily("mistral", "MistralForCausalLM",
                          {{"rope_theta", "window"}, {}}) {
    // The family's remarks say Llama's defaults, as transformers'
    // MistralConfig takes them from Llama's.
    traits = getLlamaTraits("llama");
    traits.kvHeadsDefault = 8;
  }

  bool readKeys(ConfigKeys &config, const std::string &modelType,
                ConfigValues &values) const override {
    std::optional<bool> attention, mlp;
    if (!config.optionalBool("attention_bias", attention) ||
        !config.optionalBool("mlp_bias", mlp))
      return false;
    for (auto [key, value] :
         {std::pair{"attention_bias", attention}, std::pair{"mlp_bias", mlp}})
      if (value.value_or(false))
        config.remark(key, "key '" + std::string(key) +
                               "' is ignored, as transformers' Mistral "
                               "ignores it: its maps have no biases");
    int64_t window = 0;
    if (!readSlidingWindow(config, modelType, 4096, window))
      return false;
    values.block.window = window;
    return true;
  }

  Claim claim(const ModelConfig &model, const LayerConfig &t,
              std::string &why) const override {
    Shape shape = getShape(model, t);
    if (!shape.llama || !shape.sameRotary || shape.window == 0 || t.qkvBias)
      return Claim::No;
    if (!shape.everyLayer) {
      why = "has attention windows (layer 0's " + std::to_string(t.window) +
            ") that no Hugging Face family's config says: Mistral's are on "
            "every layer, Gemma-2's on its even layers, each the same size";
      return Claim::Refused;
    }
    return Claim::Yes;
  }

  void describeKeys(const ModelConfig &model, const LayerConfig &t,
                    nlohmann::json &c) const override {
    c["sliding_window"] = t.window;
  }
};

} // namespace

SLUICE_DEFINE_FAMILY(mistral, Mistral)

} // namespace sluice::families
