//===- Qwen2.cpp - Qwen2 and Qwen2.5 (Yang et al., 2024) ------------------===//
//
// transformers' Qwen2ForCausalLM: Llama's block with biases on the query,
// key and value projections (and nothing else, whatever the config says),
// 32 key/value heads by default. Its sliding window (`use_sliding_window`,
// on the layers past `max_window_layers`) is not modelled.
//
//===----------------------------------------------------------------------===//

#include "../Common.h"

namespace sluice::families {
namespace {

class Qwen2 final : public LlamaLayoutFamily {
public:
  const char *getName() const override { return "qwen2"; }
  std::vector<std::string> getModelTypes() const override { return {"qwen2"}; }

  bool readConfig(ConfigKeys &config, const std::string &modelType,
                  ImportedModel &out) const override {
    Traits traits = getLlamaTraits("qwen2");
    traits.kvHeadsDefault = 32;
    return readConfigWith(config, modelType, traits, out,
                          [](ConfigKeys &config, ConfigValues &values) {
                            values.block.qkvBias = true;
                            std::optional<bool> window;
                            if (!config.optionalBool("use_sliding_window",
                                                     window))
                              return false;
                            if (window.value_or(false))
                              config.unmodelled(
                                  "use_sliding_window",
                                  "the layers past max_window_layers attend "
                                  "over sliding_window keys only");
                            return true;
                          });
  }

  Claim claim(const ModelConfig &model, const LayerConfig &t,
              std::string &why) const override {
    Shape shape = getShape(model, t);
    if (!shape.llama || !shape.sameRotary || !t.qkvBias)
      return Claim::No;
    if (t.heads * t.headDim != model.hidden) {
      why = "has query, key and value biases (Qwen2's block) but heads x "
            "head_dim differs from the hidden size, which Qwen2's config "
            "cannot say";
      return Claim::Refused;
    }
    return Claim::Yes;
  }
  std::vector<std::string> getFields(const std::string &) const override {
    return {"qkv_bias", "rope_theta"};
  }
  std::vector<std::string>
  getRequiredFields(const std::string &) const override {
    return {"qkv_bias"};
  }

  nlohmann::json describe(const ModelConfig &model,
                          const LayerConfig &t) const override {
    nlohmann::json c = describeRotary(model, t);
    // Qwen2's config has no head_dim (hidden / heads).
    c.erase("head_dim");
    c["architectures"] = {"Qwen2ForCausalLM"};
    c["model_type"] = "qwen2";
    c["hidden_act"] = "silu";
    c["use_sliding_window"] = false;
    return c;
  }
};

} // namespace

const Family &getFamily_qwen2() {
  static const Qwen2 family;
  return family;
}

} // namespace sluice::families
