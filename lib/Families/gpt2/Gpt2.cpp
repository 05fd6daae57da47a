//===- Gpt2.cpp - GPT-2 (Radford et al., 2019) ----------------------------===//
//
// transformers' GPT2LMHeadModel: learned positions, LayerNorm, GELU, biases
// on every map, the output tied to the embedding by default. Its configs
// may spell the sizes the GPT-2 way (n_embd, n_layer, n_head, n_positions,
// n_inner); both spellings are accepted and must agree. Its Conv1D maps
// store [in, out], and checkpoints come with and without the
// `transformer.` prefix.
//
//===----------------------------------------------------------------------===//

#include "../Common.h"

namespace sluice::families {
namespace {

class Gpt2 final : public NamedFamily {
public:
  Gpt2() : NamedFamily("gpt2", {"gpt2"}, {{"bias"}, {"bias"}}) {}

  bool readConfig(ConfigKeys &config, const std::string &modelType,
                  ImportedModel &out) const override {
    Traits traits;
    traits.name = "gpt2";
    traits.norm = rt::NormType::LayerNorm;
    traits.mlp = rt::MlpType::Gelu;
    traits.learnedPositions = traits.tieDefault = true;
    traits.activationKeys = {"activation_function", "hidden_act"};
    traits.activations = {"gelu_pytorch_tanh", "gelu", "gelu_new", "gelu_fast"};
    traits.activationDefault = "gelu_new";
    traits.gpt2Aliases = true;
    traits.epsKey = "layer_norm_epsilon";
    traits.epsDefault = 1e-5;
    traits.epsDefaultText = "1e-05";
    traits.readsPadding = false;
    // GPT-2's attention scaling switches change the scores.
    return readConfigWith(
        config, modelType, traits, out,
        [](ConfigKeys &config, ConfigValues &values) {
          values.block.bias = true;
          std::optional<bool> scaled, byLayer;
          if (!config.optionalBool("scale_attn_weights", scaled) ||
              !config.optionalBool("scale_attn_by_inverse_layer_idx", byLayer))
            return false;
          if (scaled && !*scaled)
            config.unmodelled("scale_attn_weights",
                              "attention scores are divided "
                              "by sqrt(head_dim)");
          if (byLayer && *byLayer)
            config.unmodelled("scale_attn_by_inverse_layer_idx",
                              "attention scores are not divided by the "
                              "layer number");
          return true;
        });
  }

  Claim claim(const ModelConfig &model, const LayerConfig &t,
              std::string &why) const override {
    bool gpt2 = model.layers.front().positions > 0 && !t.isRms() &&
                t.mlp == rt::MlpType::Gelu && t.bias && t.rotary.theta == 0 &&
                t.kvHeads == t.heads && t.heads * t.headDim == model.hidden &&
                model.embeddingScale == 1.0;
    return gpt2 ? Claim::Yes : Claim::No;
  }

  nlohmann::json describe(const ModelConfig &model,
                          const LayerConfig &t) const override {
    const LayerConfig &embedding = model.layers.front();
    return {{"architectures", {"GPT2LMHeadModel"}},
            {"model_type", "gpt2"},
            {"n_embd", model.hidden},
            {"n_layer", countTransformerLayers(model)},
            {"n_head", t.heads},
            {"n_inner", t.ffn},
            {"n_positions", embedding.positions},
            {"n_ctx", embedding.positions},
            {"vocab_size", embedding.vocab},
            {"activation_function", model.exactGelu ? "gelu" : "gelu_new"},
            {"layer_norm_epsilon", model.normEps},
            {"tie_word_embeddings", model.layers.back().tied}};
  }

  const WeightNames &getWeightNames(const std::string &) const override {
    static const WeightNames names = [] {
      WeightNames n;
      n.prefix = "transformer.";
      n.prefixOptional = true;
      n.tokens = "wte";
      n.positions = "wpe";
      n.finalNorm = "ln_f";
      n.layers = "h.";
      n.modules = {{"norm1", "ln_1"},           {"norm2", "ln_2"},
                   {"attn.qkv", "attn.c_attn"}, {"attn.out", "attn.c_proj"},
                   {"mlp.up", "mlp.c_fc"},      {"mlp.down", "mlp.c_proj"}};
      n.linearTransposed = false;
      return n;
    }();
    return names;
  }
};

} // namespace

SLUICE_DEFINE_FAMILY(gpt2, Gpt2)

} // namespace sluice::families
