//===- Gemma.cpp - Gemma and Gemma-2 (Gemma Team, 2024) -------------------===//
//
// transformers' GemmaForCausalLM: Llama's block with GeGLU, embeddings
// scaled by sqrt(hidden_size) (GemmaModel's `normalizer`), norm gains of
// 1 + w (stored as w: the weights' offset), a 256-wide head and tied
// output by default. Gemma-2 adds sandwich norms, soft-capping of scores
// and logits, its own attention scale and a sliding window on the even
// layers (docs/import.md).
//
//===----------------------------------------------------------------------===//

#include "../Common.h"

#include <cmath>
#include <tuple>

namespace sluice::families {
namespace {

/// Gemma-2's keys: its attention scale, caps and window.
bool readGemma2(ConfigKeys &config, ConfigValues &values) {
  values.block.postNorms = true;
  // Gemma2Attention: scores * query_pre_attn_scalar^-0.5 (whatever
  // head_dim is), then capped by attn_logit_softcapping (its eager
  // attention: transformers' SDPA path leaves the cap out).
  std::optional<double> scalar;
  if (!config.optionalPositive("query_pre_attn_scalar", scalar))
    return false;
  values.attentionScale = std::pow(scalar.value_or(224.0), -0.5);
  if (!scalar)
    config.remarkDefault("query_pre_attn_scalar", "224",
                         "Hugging Face's default for gemma2");
  // Each cap: the config's, Gemma2Config's default when absent, none
  // when null.
  for (auto [key, fallback, into] :
       {std::tuple{"attn_logit_softcapping", 50.0, &values.attentionSoftcap},
        std::tuple{"final_logit_softcapping", 30.0, &values.finalSoftcap}}) {
    if (config.isNull(key))
      continue;
    std::optional<double> softcap;
    if (!config.optionalPositive(key, softcap))
      return false;
    *into = softcap.value_or(fallback);
    if (!softcap)
      config.remarkDefault(key, formatNumber("%.1f", fallback),
                           "Hugging Face's default for gemma2");
  }
  // The even layers attend over the window, the odd ones globally, as
  // transformers builds them.
  int64_t window = 0;
  if (!readSlidingWindow(config, "gemma2", 4096, window))
    return false;
  values.perLayer = [window](int64_t index, LayerConfig &layer) {
    layer.window = index % 2 == 0 ? window : 0;
  };
  return true;
}

class Gemma final : public NamedFamily {
public:
  Gemma() : NamedFamily("gemma", {"gemma", "gemma2"}) {}

  bool readConfig(ConfigKeys &config, const std::string &modelType,
                  ImportedModel &out) const override {
    // GemmaMLP and Gemma2MLP read `hidden_activation` only (defaulting it
    // to the tanh GELU); `hidden_act` does not change what they compute.
    Traits traits = getGemmaTraits("gemma");
    traits.kvHeadsDefault = modelType == "gemma2" ? 4 : 16;
    return readConfigWith(
        config, modelType, traits, out,
        [&](ConfigKeys &config, ConfigValues &values) {
          values.embeddingScale = std::sqrt(double(values.hidden));
          return modelType != "gemma2" || readGemma2(config, values);
        });
  }

  Claim claim(const ModelConfig &model, const LayerConfig &t,
              std::string &why) const override {
    Shape shape = getShape(model, t);
    bool gemma = shape.rotary && shape.sameRotary &&
                 t.mlp == rt::MlpType::GeGlu && isScaled(model);
    if (!gemma)
      return Claim::No;
    if (shape.window > 0 && !(t.postNorms && shape.evenLayers)) {
      why = "has attention windows (layer 0's " + std::to_string(t.window) +
            ") that no Hugging Face family's config says: Mistral's are on "
            "every layer, Gemma-2's on its even layers, each the same size";
      return Claim::Refused;
    }
    return Claim::Yes;
  }
  std::vector<std::string>
  getFields(const std::string &modelType) const override {
    if (modelType == "gemma2")
      return {"rope_theta", "post_norms", "window"};
    return {"rope_theta"};
  }
  std::vector<std::string>
  getRequiredFields(const std::string &modelType) const override {
    if (modelType == "gemma2")
      return {"post_norms"};
    return {};
  }

  nlohmann::json describe(const ModelConfig &model,
                          const LayerConfig &t) const override {
    nlohmann::json c = describeRotary(model, t);
    c["architectures"] = {t.postNorms ? "Gemma2ForCausalLM"
                                      : "GemmaForCausalLM"};
    c["model_type"] = t.postNorms ? "gemma2" : "gemma";
    c["hidden_activation"] = model.exactGelu ? "gelu" : "gelu_pytorch_tanh";
    if (t.postNorms)
      addGemma2Settings(model, t, getShape(model, t).window, c);
    return c;
  }

  const WeightNames &
  getWeightNames(const std::string &modelType) const override {
    // Llama's names; the norms store w where the model computes 1 + w.
    // Gemma-2 has four norms per layer: its post_attention_layernorm is
    // the attention's sandwich norm, pre_feedforward_layernorm the second
    // input norm.
    static const WeightNames gemma = [] {
      WeightNames n = getLlamaWeightNames();
      n.normOffset = true;
      return n;
    }();
    static const WeightNames gemma2 = [] {
      WeightNames n = gemma;
      n.modules["norm2"] = "pre_feedforward_layernorm";
      addPostNormNames(n);
      return n;
    }();
    return modelType == "gemma2" ? gemma2 : gemma;
  }

  bool scalesEmbeddings(const std::string &) const override { return true; }

private:
  static bool isScaled(const ModelConfig &model) {
    return float(model.embeddingScale) ==
           float(std::sqrt(double(model.hidden)));
  }

  /// Gemma-2's settings, each as Gemma2Config would default it otherwise;
  /// without a window, one as long as the sequence (full attention is the
  /// same).
  static void addGemma2Settings(const ModelConfig &model, const LayerConfig &t,
                                int64_t window, nlohmann::json &c) {
    describeGemmaScaling(model, t.headDim, c);
    c["sliding_window"] = window > 0 ? window : model.seqLen;
  }
};

} // namespace

SLUICE_DEFINE_FAMILY(gemma, Gemma)

} // namespace sluice::families
