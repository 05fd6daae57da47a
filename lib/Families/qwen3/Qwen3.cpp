//===- Qwen3.cpp - Qwen3 (Yang et al., 2025) ------------------------------===//
//
// transformers' Qwen3ForCausalLM: Llama's block without Qwen2's biases,
// every query and key head RMS-normalised over its head_dim before the
// rotary positions (`q_norm`, `k_norm`: one gain of head_dim each, shared
// by the heads), head_dim 128 by default whatever hidden / heads is.
// `attention_bias` puts biases on all four attention maps, which the block
// spec does not model (Qwen3's released configs leave it false), nor its
// sliding window (`use_sliding_window`, as Qwen2's).
//
//===----------------------------------------------------------------------===//

#include "../Common.h"

namespace sluice::families {
namespace {

class Qwen3 final : public LlamaLayoutFamily {
public:
  Qwen3()
      : LlamaLayoutFamily(
            "qwen3", "Qwen3ForCausalLM",
            {{"qk_norm = heads", "rope_theta"}, {"qk_norm = heads"}}) {
    traits.kvHeadsDefault = 32;
    traits.headDimDefault = 128;
  }

  bool readKeys(ConfigKeys &config, const std::string &,
                ConfigValues &values) const override {
    values.block.qkNorm = "heads";
    return readUnmodelledSwitch(config, "attention_bias", kAttentionBiases) &&
           readUnmodelledSwitch(config, "use_sliding_window",
                                kQwenWindowLayers);
  }


  void describeKeys(const ModelConfig &model, const LayerConfig &t,
                    nlohmann::json &c) const override {
    c["attention_bias"] = false;
    c["use_sliding_window"] = false;
  }

  const WeightNames &getWeightNames(const std::string &) const override {
    static const WeightNames names = [] {
      WeightNames n = getLlamaWeightNames();
      addQkNormNames(n);
      return n;
    }();
    return names;
  }
};

} // namespace

SLUICE_DEFINE_FAMILY(qwen3, Qwen3)

} // namespace sluice::families
