//===- Llama.cpp - Llama (Touvron et al., 2023) ---------------------------===//
//
// transformers' LlamaForCausalLM: rotary positions (with Llama 3.1's
// `rope_scaling`), RMSNorm, SwiGLU, grouped-query attention, untied by
// default. `attention_bias` and `mlp_bias` add biases to the attention's
// and the feed-forward block's maps: both is a block with biases, one
// alone is not modelled.
//
//===----------------------------------------------------------------------===//

#include "../Common.h"

namespace sluice::families {

namespace {

bool readBiases(ConfigKeys &config, ConfigValues &values) {
  std::optional<bool> attention, mlp;
  if (!config.optionalBool("attention_bias", attention) ||
      !config.optionalBool("mlp_bias", mlp))
    return false;
  bool onAttention = attention.value_or(false), onMlp = mlp.value_or(false);
  if (onAttention && onMlp)
    values.block.bias = true;
  else if (onAttention)
    config.unmodelled("attention_bias", "biases only on the attention's maps");
  else if (onMlp)
    config.unmodelled("mlp_bias", "biases only on the feed-forward maps");
  return true;
}

class Llama final : public LlamaLayoutFamily {
public:
  Llama()
      : LlamaLayoutFamily("llama", "LlamaForCausalLM",
                          {{"rope_theta", "rope_scaling"}, {}}) {}

  bool readKeys(ConfigKeys &config, const std::string &,
                ConfigValues &values) const override {
    return readBiases(config, values);
  }


  void describeKeys(const ModelConfig &model, const LayerConfig &t,
                    nlohmann::json &c) const override {
    c["attention_bias"] = t.bias;
    c["mlp_bias"] = t.bias;
  }
};

} // namespace

SLUICE_DEFINE_FAMILY(llama, Llama)

} // namespace sluice::families
