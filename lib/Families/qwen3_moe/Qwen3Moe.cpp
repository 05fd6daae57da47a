//===- Qwen3Moe.cpp - Qwen3-MoE (Yang et al., 2025) -----------------------===//
//
// transformers' Qwen3MoeForCausalLM: Qwen3's attention (every query and key
// head RMS-normalised before the rotary positions) with the feed-forward
// block of each sparse layer a mixture of `num_experts` SwiGLU experts of
// `moe_intermediate_size`, `num_experts_per_tok` per token, their weights
// renormalised when `norm_topk_prob` says so (the block's `moe` feature).
// A layer is sparse unless `mlp_only_layers` lists it or (its index + 1)
// is not a multiple of `decoder_sparse_step`; the others keep a dense
// SwiGLU block of `intermediate_size`. Unlike Qwen3's config, its head_dim
// defaults to hidden_size / num_attention_heads (Qwen3MoeAttention reads
// the key when present). Qwen3-MoE has no shared expert (Qwen2-MoE has).
//
// Its tensors: the router `mlp.gate`, expert e's maps
// `mlp.experts.e.gate_proj`, `up_proj` and `down_proj`; a dense layer's
// Llama's.
//
//===----------------------------------------------------------------------===//

#include "../Common.h"

namespace sluice::families {
namespace {

const ExpertKeys kExperts{"num_experts", 128, 8, "moe_intermediate_size",
                          /*normKey=*/true,
                          /*auxDefault=*/0.001};

class Qwen3Moe final : public LlamaLayoutFamily {
public:
  Qwen3Moe()
      : LlamaLayoutFamily("qwen3_moe", "Qwen3MoeForCausalLM",
                          {{"qk_norm = heads", "rope_theta", "rope_scaling",
                            "experts", "top_k", "norm_top_k", "aux_loss"},
                           {"qk_norm = heads", "experts", "top_k"}}) {
    traits.kvHeadsDefault = 4;
    traits.experts = true;
  }

  bool readKeys(ConfigKeys &config, const std::string &modelType,
                ConfigValues &values) const override {
    values.block.qkNorm = "heads";
    int64_t width = 0;
    return readUnmodelledSwitch(config, "attention_bias", kAttentionBiases) &&
           readUnmodelledSwitch(config, "use_sliding_window",
                                kQwenWindowLayers) &&
           readExperts(config, modelType, kExperts, values, width) &&
           readSparseLayers(config, width, values);
  }

  Claim claim(const ModelConfig &model, const LayerConfig &t,
              std::string &) const override {
    Shape shape = getShape(model, t);
    if (!shape.llama || !shape.sameRotary || t.qkNorm != "heads" || t.qkvBias)
      return Claim::No;
    return claimSparseLayers(model) ? Claim::Yes : Claim::No;
  }

  void describeKeys(const ModelConfig &model, const LayerConfig &,
                    nlohmann::json &c) const override {
    c["attention_bias"] = false;
    c["use_sliding_window"] = false;
    describeSparseLayers(model, kExperts, c);
  }

  const WeightNames &getWeightNames(const std::string &) const override {
    static const WeightNames names = getQwenExpertWeightNames(true);
    return names;
  }
};

} // namespace

SLUICE_DEFINE_FAMILY(qwen3_moe, Qwen3Moe)

} // namespace sluice::families
