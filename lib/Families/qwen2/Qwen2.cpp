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
  Qwen2()
      : LlamaLayoutFamily("qwen2", "Qwen2ForCausalLM",
                          {{"qkv_bias", "rope_theta"}, {"qkv_bias"}}) {
    traits.kvHeadsDefault = 32;
  }

  bool readKeys(ConfigKeys &config, const std::string &,
                ConfigValues &values) const override {
    values.block.qkvBias = true;
    return readUnmodelledSwitch(config, "use_sliding_window",
                                kQwenWindowLayers);
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

  void describeKeys(const ModelConfig &model, const LayerConfig &t,
                    nlohmann::json &c) const override {
    // Qwen2's config has no head_dim (hidden / heads).
    c.erase("head_dim");
    c["use_sliding_window"] = false;
  }
};

} // namespace

SLUICE_DEFINE_FAMILY(qwen2, Qwen2)

} // namespace sluice::families
