//===- Qwen2Moe.cpp - Qwen2-MoE (Qwen Team, 2024) -------------------------===//
//
// transformers' Qwen2MoeForCausalLM: Qwen2's attention (biases on the
// query, key and value projections) with the feed-forward block of each
// sparse layer a mixture of `num_experts` SwiGLU experts of
// `moe_intermediate_size`, `num_experts_per_tok` per token (renormalised
// with `norm_topk_prob`), plus a shared expert of
// `shared_expert_intermediate_size` every token passes through, its output
// scaled by sigmoid(x . shared_expert_gate) (the `moe` feature with
// `shared_ffn`). Sparse and dense layers as Qwen3-MoE's
// (`decoder_sparse_step`, `mlp_only_layers`); a dense layer has no shared
// expert. Qwen2's `use_sliding_window` is not modelled.
//
// Its tensors: the router `mlp.gate`, expert e's maps
// `mlp.experts.e.gate_proj`, `up_proj`, `down_proj`, the shared expert's
// `mlp.shared_expert.*_proj` and its gate `mlp.shared_expert_gate`.
//
//===----------------------------------------------------------------------===//

#include "../Common.h"

namespace sluice::families {
namespace {

const ExpertKeys kExperts{"num_experts", 60, 4, "moe_intermediate_size",
                          /*normKey=*/true,
                          /*auxDefault=*/0.001};

class Qwen2Moe final : public LlamaLayoutFamily {
public:
  Qwen2Moe()
      : LlamaLayoutFamily("qwen2_moe", "Qwen2MoeForCausalLM",
                          {{"qkv_bias", "rope_theta", "rope_scaling",
                            "experts", "top_k", "norm_top_k", "shared_ffn",
                            "aux_loss"},
                           {"qkv_bias", "experts", "top_k"}}) {
    traits.kvHeadsDefault = 16;
    traits.experts = true;
  }

  bool readKeys(ConfigKeys &config, const std::string &modelType,
                ConfigValues &values) const override {
    values.block.qkvBias = true;
    int64_t width = 0;
    std::optional<int64_t> shared;
    if (!readUnmodelledSwitch(config, "use_sliding_window",
                              kQwenWindowLayers) ||
        !readExperts(config, modelType, kExperts, values, width) ||
        !config.optionalSize({"shared_expert_intermediate_size"}, shared))
      return false;
    if (!shared)
      config.remarkDefault("shared_expert_intermediate_size", "5632",
                           "Hugging Face's default for " + modelType);
    values.block.sharedFfn = shared.value_or(5632);
    return readSparseLayers(config, width, values);
  }

  Claim claim(const ModelConfig &model, const LayerConfig &t,
              std::string &why) const override {
    Shape shape = getShape(model, t);
    if (!shape.llama || !shape.sameRotary || !t.qkvBias)
      return Claim::No;
    return claimSparseLayers(model) ? Claim::Yes : Claim::No;
  }

  void describeKeys(const ModelConfig &model, const LayerConfig &,
                    nlohmann::json &c) const override {
    // Qwen2's config has no head_dim (hidden / heads).
    c.erase("head_dim");
    c["use_sliding_window"] = false;
    describeSparseLayers(model, kExperts, c);
    for (const LayerConfig &l : model.layers)
      if (l.kind == rt::LayerKind::Transformer && l.experts > 0)
        c["shared_expert_intermediate_size"] = l.sharedFfn;
  }

  const WeightNames &getWeightNames(const std::string &) const override {
    static const WeightNames names = [] {
      WeightNames n = getQwenExpertWeightNames(false);
      addSharedExpertNames(n, "mlp.shared_expert.");
      n.modules["mlp.shared_gate"] = "mlp.shared_expert_gate";
      return n;
    }();
    return names;
  }
};

} // namespace

SLUICE_DEFINE_FAMILY(qwen2_moe, Qwen2Moe)

} // namespace sluice::families
