//===- DeepseekV3.cpp - DeepSeek-V3 (Liu et al., 2024) --------------------===//
//
// transformers' DeepseekV3ForCausalLM: Llama's layout with multi-head
// latent attention (the `mla` feature: `kv_lora_rank`, `q_lora_rank`,
// `qk_rope_head_dim` rotated parts after `qk_nope_head_dim` parts, values
// of `v_head_dim`, adjacent rotated pairs with `rope_interleave`), and
// from layer `first_k_dense_replace` on, a mixture of `n_routed_experts`
// SwiGLU experts of `moe_intermediate_size` (the `moe` feature): sigmoid
// scores chosen with the router's bias among the `topk_group` best of
// `n_group` groups, `num_experts_per_tok` per token, renormalised with
// `norm_topk_prob` and scaled by `routed_scaling_factor`, beside
// `n_shared_experts` ungated shared experts (one block of their summed
// width). The first layers are dense blocks of `intermediate_size`.
//
// Its config's `head_dim` is the rotated part's size (transformers sets
// it to qk_rope_head_dim, and its rotary frequencies read it); a Sluice
// head is nope + rope. Its tensors: self_attn.q_a_proj, q_a_layernorm,
// q_b_proj (or q_proj), kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj,
// o_proj; mlp.gate (the router) with its e_score_correction_bias,
// mlp.experts.e.*_proj, mlp.shared_experts.*_proj.
//
//===----------------------------------------------------------------------===//

#include "../Common.h"

#include <cmath>

namespace sluice::families {
namespace {

class DeepseekV3 final : public LlamaLayoutFamily {
public:
  DeepseekV3()
      : LlamaLayoutFamily(
            "deepseek_v3", "DeepseekV3ForCausalLM",
            {{"rope_theta", "rope_scaling", "v_head_dim", "kv_lora_rank",
              "q_lora_rank", "rope_head_dim", "rope_interleave", "experts",
              "top_k", "norm_top_k", "shared_ffn", "router = sigmoid",
              "expert_groups", "top_groups", "routed_scale", "shared_gate",
              "bias_update"},
             {"kv_lora_rank", "rope_head_dim"}}) {
    traits.experts = true;
  }

  bool readKeys(ConfigKeys &config, const std::string &modelType,
                ConfigValues &values) const override {
    LayerConfig &b = values.block;
    std::optional<bool> bias;
    if (!config.optionalBool("attention_bias", bias))
      return false;
    if (bias.value_or(false)) {
      config.error("attention_bias",
                   "key 'attention_bias' = true: multi-head latent attention "
                   "with biases on its maps is not built");
      return false;
    }
    // The attention.
    int64_t kvr = 0, rope = 0, nope = 0, dv = 0;
    std::optional<int64_t> qr;
    if (!config.requireSize({"kv_lora_rank"}, kvr) ||
        !config.requireSize({"qk_rope_head_dim"}, rope) ||
        !config.requireSize({"qk_nope_head_dim"}, nope) ||
        !config.requireSize({"v_head_dim"}, dv))
      return false;
    if (!config.isNull("q_lora_rank") &&
        !config.optionalSize({"q_lora_rank"}, qr))
      return false;
    std::optional<bool> interleave;
    if (!config.optionalBool("rope_interleave", interleave))
      return false;
    if (!interleave)
      config.remarkDefault("rope_interleave", "true",
                           "Hugging Face's default for " + modelType);
    // DeepseekV3Attention's softmax scale: (nope + rope)^-0.5, times
    // YaRN's mscale(factor, mscale_all_dim)^2 when rope_scaling gives a
    // non-zero mscale_all_dim (whatever its rope_type).
    if (config.isObject("rope_scaling")) {
      std::optional<double> all =
          config.getNestedNumber("rope_scaling", "mscale_all_dim");
      std::optional<double> factor =
          config.getNestedNumber("rope_scaling", "factor");
      if (all && *all != 0 && factor && *factor > 1) {
        double m = 0.1 * *all * std::log(*factor) + 1.0;
        values.attentionScale = m * m / std::sqrt(double(nope + rope));
      }
    }
    b.kvLoraRank = kvr;
    b.qLoraRank = qr.value_or(0);
    b.ropeHeadDim = rope;
    b.ropeInterleave = interleave.value_or(true);
    values.headDim = nope + rope;
    b.vHeadDim = dv == nope + rope ? 0 : dv;
    // Every head its own key and value (the config's key/value heads are
    // the query heads').
    values.kvHeads = values.heads;
    // The experts.
    std::optional<int64_t> experts, topK, width, shared, groups, topGroups,
        firstDense;
    std::optional<double> scale;
    std::optional<bool> normalize;
    if (!config.optionalSize({"n_routed_experts"}, experts) ||
        !config.optionalSize({"num_experts_per_tok"}, topK) ||
        !config.optionalSize({"moe_intermediate_size"}, width) ||
        !config.optionalSize({"n_group"}, groups) ||
        !config.optionalSize({"topk_group"}, topGroups) ||
        !config.optionalPositive("routed_scaling_factor", scale) ||
        !config.optionalBool("norm_topk_prob", normalize))
      return false;
    // Counts that may be 0: the shared experts, the dense layers.
    for (auto [key, out] : {std::pair{"n_shared_experts", &shared},
                            std::pair{"first_k_dense_replace", &firstDense}}) {
      if (!config.has(key))
        continue;
      std::optional<int64_t> v = config.getInteger(key);
      if (!v || *v < 0) {
        config.error(key, std::string("key '") + key + "' = " +
                              config.format(key) +
                              " must be a non-negative integer");
        return false;
      }
      *out = v;
    }
    auto fallback = [&](const char *key, const std::optional<int64_t> &v,
                        int64_t value) {
      if (!v)
        config.remarkDefault(key, std::to_string(value),
                             "Hugging Face's default for " + modelType);
      return v.value_or(value);
    };
    b.experts = fallback("n_routed_experts", experts, 256);
    b.topK = fallback("num_experts_per_tok", topK, 8);
    int64_t moeWidth = fallback("moe_intermediate_size", width, 2048);
    b.sharedFfn = moeWidth * fallback("n_shared_experts", shared, 1);
    int64_t g = fallback("n_group", groups, 8);
    b.expertGroups = g > 1 ? g : 0;
    b.topGroups = g > 1 ? fallback("topk_group", topGroups, 4) : 0;
    if (!scale)
      config.remarkDefault("routed_scaling_factor", "2.5",
                           "Hugging Face's default for " + modelType);
    b.routedScale = scale.value_or(2.5);
    if (!normalize)
      config.remarkDefault("norm_topk_prob", "true",
                           "Hugging Face's default for " + modelType);
    b.normTopK = normalize.value_or(true);
    b.router = "sigmoid";
    b.sharedGate = false;
    if (b.topK > b.experts) {
      config.error("num_experts_per_tok",
                   "key 'num_experts_per_tok' = " + std::to_string(b.topK) +
                       " routes each token to more experts than the " +
                       std::to_string(b.experts) + " of 'n_routed_experts'");
      return false;
    }
    // What DeepSeek's own configs state that transformers' model leaves
    // out, and so does Sluice: said, not computed.
    if (std::optional<int64_t> mtp =
            config.getInteger("num_nextn_predict_layers");
        mtp && *mtp > 0)
      config.remark("num_nextn_predict_layers",
                    "multi-token prediction (num_nextn_predict_layers = " +
                        std::to_string(*mtp) +
                        ") is not built, as transformers' DeepseekV3ForCausalLM "
                        "leaves it out: a checkpoint's module for it is not "
                        "read");
    std::optional<bool> sequenceLoss;
    if (!config.optionalBool("seq_aux", sequenceLoss))
      return false;
    if (sequenceLoss.value_or(false))
      config.remark("seq_aux",
                    "the sequence-wise balance loss (seq_aux) is not built, as "
                    "transformers leaves it out; --expert-bias-update "
                    "balances the experts");
    // DeepSeek's reference configs name the rule transformers computes.
    for (auto [key, want] : {std::pair{"scoring_func", "sigmoid"},
                             std::pair{"topk_method", "noaux_tc"}}) {
      std::optional<std::string> said;
      if (!config.optionalString({key}, said))
        return false;
      if (said && *said != want)
        config.unmodelled(key, std::string("routing by ") + *said +
                                   " (transformers' DeepseekV3 computes " +
                                   want + ")");
    }
    int64_t dense = fallback("first_k_dense_replace", firstDense, 3),
            denseWidth = values.ffn;
    values.perLayer = [dense, moeWidth, denseWidth](int64_t i,
                                                    LayerConfig &l) {
      if (i >= dense) {
        l.ffn = moeWidth;
        return;
      }
      clearExperts(l);
      l.ffn = denseWidth;
    };
    return true;
  }

  Claim claim(const ModelConfig &model, const LayerConfig &t,
              std::string &) const override {
    if (t.kvLoraRank == 0)
      return Claim::No;
    // A softmax scale of its own is YaRN's mscale_all_dim here.
    if (model.attentionScale > 0 &&
        !(t.rotary.isScaled() && t.rotary.factor > 1))
      return Claim::No;
    // Dense layers first, then sparse ones alike.
    const LayerConfig *sparse = nullptr;
    bool seenSparse = false;
    for (const LayerConfig &l : model.layers) {
      if (l.kind != rt::LayerKind::Transformer)
        continue;
      if (l.experts == 0) {
        if (seenSparse)
          return Claim::No;
        continue;
      }
      seenSparse = true;
      if (!sparse)
        sparse = &l;
      else if (l.experts != sparse->experts || l.topK != sparse->topK ||
               l.ffn != sparse->ffn || l.sharedFfn != sparse->sharedFfn ||
               l.expertGroups != sparse->expertGroups ||
               l.topGroups != sparse->topGroups ||
               l.routedScale != sparse->routedScale ||
               l.normTopK != sparse->normTopK)
        return Claim::No;
    }
    if (!sparse || sparse->router != "sigmoid" || sparse->sharedGate ||
        (sparse->sharedFfn > 0 && sparse->sharedFfn % sparse->ffn != 0))
      return Claim::No;
    return Claim::Yes;
  }

  void describeKeys(const ModelConfig &model, const LayerConfig &t,
                    nlohmann::json &c) const override {
    int64_t dense = 0;
    const LayerConfig *sparse = nullptr;
    for (const LayerConfig &l : model.layers) {
      if (l.kind != rt::LayerKind::Transformer)
        continue;
      if (l.experts == 0) {
        ++dense;
        c["intermediate_size"] = l.ffn;
      } else if (!sparse) {
        sparse = &l;
      }
    }
    c["attention_bias"] = false;
    c["kv_lora_rank"] = t.kvLoraRank;
    c["q_lora_rank"] =
        t.qLoraRank > 0 ? nlohmann::json(t.qLoraRank) : nlohmann::json(nullptr);
    c["qk_rope_head_dim"] = t.ropeHeadDim;
    c["qk_nope_head_dim"] = t.headDim - t.ropeHeadDim;
    c["v_head_dim"] = t.getValueDim();
    c["rope_interleave"] = t.ropeInterleave;
    // transformers' head_dim is the rotated part's (its rotary reads it).
    c["head_dim"] = t.ropeHeadDim;
    c["first_k_dense_replace"] = dense;
    // The softmax scale back as YaRN's mscale_all_dim (claim holds that a
    // scale comes with a scaling factor above 1).
    if (model.attentionScale > 0 && c.contains("rope_scaling")) {
      double m = std::sqrt(model.attentionScale * std::sqrt(double(t.headDim)));
      c["rope_scaling"]["mscale_all_dim"] =
          (m - 1.0) / (0.1 * std::log(t.rotary.factor));
    }
    if (!sparse)
      return;
    c["n_routed_experts"] = sparse->experts;
    c["num_experts_per_tok"] = sparse->topK;
    c["moe_intermediate_size"] = sparse->ffn;
    c["n_shared_experts"] = sparse->sharedFfn / sparse->ffn;
    c["n_group"] = std::max<int64_t>(1, sparse->expertGroups);
    c["topk_group"] = std::max<int64_t>(1, sparse->topGroups);
    c["routed_scaling_factor"] = sparse->routedScale;
    c["norm_topk_prob"] = sparse->normTopK;
  }

  const WeightNames &getWeightNames(const std::string &) const override {
    static const WeightNames names = [] {
      WeightNames n = getLlamaWeightNames();
      n.q = n.k = n.v = "";
      n.laterLayersUnread = true;
      n.modules["attn.q_a"] = "self_attn.q_a_proj";
      n.modules["attn.q_a_norm"] = "self_attn.q_a_layernorm";
      n.modules["attn.q_b"] = "self_attn.q_b_proj";
      n.modules["attn.q"] = "self_attn.q_proj";
      n.modules["attn.kv_a"] = "self_attn.kv_a_proj_with_mqa";
      n.modules["attn.kv_a_norm"] = "self_attn.kv_a_layernorm";
      n.modules["attn.kv_b"] = "self_attn.kv_b_proj";
      addExpertNames(n, "mlp.gate", "mlp.experts.{}.",
                     {"gate_proj", "up_proj", "down_proj"});
      n.tensors["mlp.router.bias"] = "mlp.gate.e_score_correction_bias";
      addSharedExpertNames(n, "mlp.shared_experts.");
      return n;
    }();
    return names;
  }
};

} // namespace

SLUICE_DEFINE_FAMILY(deepseek_v3, DeepseekV3)

} // namespace sluice::families
