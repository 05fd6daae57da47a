//===- Olmoe.cpp - OLMoE (Muennighoff et al., 2024) -----------------------===//
//
// transformers' OlmoeForCausalLM: Llama's pre-norm block and rotary
// positions, the whole query and key projections RMS-normalised before the
// rotation (a gain per column, as OLMo-2's: `qk_norm = projection`), and
// every feed-forward block a mixture of `num_experts` SwiGLU experts of
// `intermediate_size`, `num_experts_per_tok` per token, their weights
// renormalised when `norm_topk_prob` says so (the block's `moe` feature).
// Its head size is hidden_size / num_attention_heads whatever the config
// says. `clip_qkv` (clamping the projections) is not modelled.
//
// Its tensors: the router `mlp.gate`, expert e's maps
// `mlp.experts.e.gate_proj`, `up_proj` and `down_proj`.
//
//===----------------------------------------------------------------------===//

#include "../Common.h"

namespace sluice::families {
namespace {

const ExpertKeys kExperts{"num_experts", 64, 8, "intermediate_size",
                          /*normKey=*/true,
                          /*auxDefault=*/0.01};

class Olmoe final : public LlamaLayoutFamily {
public:
  Olmoe()
      : LlamaLayoutFamily("olmoe", "OlmoeForCausalLM",
                          {{"qk_norm = projection", "rope_theta",
                            "rope_scaling", "experts", "top_k", "norm_top_k",
                            "aux_loss"},
                           {"qk_norm = projection", "experts", "top_k"}}) {
    traits.epsDefault = 1e-5;
    traits.epsDefaultText = "1e-05";
    traits.paddingDefault = 1;
    traits.experts = true;
  }

  bool readKeys(ConfigKeys &config, const std::string &modelType,
                ConfigValues &values) const override {
    values.block.qkNorm = "projection";
    if (config.has("clip_qkv"))
      config.unmodelled("clip_qkv", "the projections clamped to clip_qkv");
    int64_t width = 0;
    return readUnmodelledSwitch(config, "attention_bias", kAttentionBiases) &&
           readExperts(config, modelType, kExperts, values, width);
  }

  Claim claim(const ModelConfig &model, const LayerConfig &t,
              std::string &) const override {
    Shape shape = getShape(model, t);
    if (!shape.llama || !shape.sameRotary || t.qkNorm != "projection" ||
        !t.preNorms || t.experts == 0)
      return Claim::No;
    return hasUniformExperts(model, t) ? Claim::Yes : Claim::No;
  }

  void describeKeys(const ModelConfig &model, const LayerConfig &t,
                    nlohmann::json &c) const override {
    c["attention_bias"] = false;
    c["clip_qkv"] = nullptr;
    c.erase("head_dim");
    describeExperts(kExperts, t, c);
  }

  const WeightNames &getWeightNames(const std::string &) const override {
    static const WeightNames names = getQwenExpertWeightNames(true);
    return names;
  }
};

} // namespace

SLUICE_DEFINE_FAMILY(olmoe, Olmoe)

} // namespace sluice::families
