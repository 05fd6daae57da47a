//===- Gemma3.cpp - Gemma-3's text model (Gemma Team, 2025) ---------------===//
//
// transformers' Gemma3ForCausalLM (model_type gemma3_text: Gemma-3 1B,
// and the text_config of the larger, multimodal ones): Gemma-2's block --
// GeGLU, embeddings scaled by sqrt(hidden_size), norm gains of 1 + w,
// sandwich norms, its own attention scale query_pre_attn_scalar^-0.5 --
// with every query and key head RMS-normalised before the rotation (gains
// of 1 + w too), no soft-capping by default, and local and global layers:
// of every sliding_window_pattern layers (6) the last is global, the
// others attend over sliding_window keys with rotary base
// rope_local_base_freq (10000, unscaled), the global ones with rope_theta
// (1,000,000) and rope_scaling (linear, factor 8, in the 4B and larger).
// transformers 4.53 and later list the kinds in `layer_types` instead.
//
//===----------------------------------------------------------------------===//

#include "../Common.h"

#include <cmath>
#include <tuple>

namespace sluice::families {
namespace {

class Gemma3 final : public NamedFamily {
public:
  Gemma3()
      : NamedFamily("gemma3", {"gemma3_text"},
                    {{"qk_norm = heads", "post_norms", "window", "rope_theta",
                      "rope_scaling"},
                     {"qk_norm = heads", "post_norms"}}) {}

  bool readConfig(ConfigKeys &config, const std::string &modelType,
                  ImportedModel &out) const override {
    Traits traits = getGemmaTraits("gemma3_text");
    traits.kvHeadsDefault = 4;
    traits.ropeThetaDefault = 1000000.0;
    return readConfigWith(config, modelType, traits, out,
                          [](ConfigKeys &config, ConfigValues &values) {
                            return readOwn(config, values);
                          });
  }

  Claim claim(const ModelConfig &model, const LayerConfig &t,
              std::string &why) const override {
    Shape shape = getShape(model, t);
    if (!shape.rotary || t.mlp != rt::MlpType::GeGlu || !isScaled(model) ||
        t.qkNorm != "heads")
      return Claim::No;
    if (getPattern(model) == 0) {
      why = "has local and global layers (attention windows, rotary bases) "
            "that Gemma-3's config cannot say: every sliding_window_pattern-"
            "th layer global, the others one window and one local base";
      return Claim::Refused;
    }
    return Claim::Yes;
  }
  bool scalesEmbeddings(const std::string &) const override { return true; }

  nlohmann::json describe(const ModelConfig &model,
                          const LayerConfig &) const override {
    int64_t pattern = getPattern(model);
    const LayerConfig &global = *getTransformerLayer(model, pattern - 1);
    const LayerConfig &local = *getTransformerLayer(model, 0);
    nlohmann::json c = describeRotary(model, global);
    c["architectures"] = {"Gemma3ForCausalLM"};
    c["model_type"] = "gemma3_text";
    c["hidden_activation"] = model.exactGelu ? "gelu" : "gelu_pytorch_tanh";
    c["sliding_window_pattern"] = pattern;
    c["sliding_window"] = pattern > 1 ? local.window : model.seqLen;
    c["rope_local_base_freq"] =
        pattern > 1 ? local.rotary.theta : global.rotary.theta;
    describeGemmaScaling(model, global.headDim, c);
    return c;
  }

  /// Gemma-2's names, and the query/key norms; every gain stored as w.
  const WeightNames &getWeightNames(const std::string &) const override {
    static const WeightNames names = [] {
      WeightNames n = getLlamaWeightNames();
      n.normOffset = true;
      n.modules["norm2"] = "pre_feedforward_layernorm";
      addPostNormNames(n);
      addQkNormNames(n);
      return n;
    }();
    return names;
  }

private:
  static bool isScaled(const ModelConfig &model) {
    return float(model.embeddingScale) ==
           float(std::sqrt(double(model.hidden)));
  }

  /// Gemma-3's keys beyond the shared ones.
  static bool readOwn(ConfigKeys &config, ConfigValues &values) {
    values.embeddingScale = std::sqrt(double(values.hidden));
    values.block.postNorms = true;
    values.block.qkNorm = "heads";
    std::optional<double> scalar, localBase;
    if (!config.optionalPositive("query_pre_attn_scalar", scalar) ||
        !config.optionalPositive("rope_local_base_freq", localBase))
      return false;
    values.attentionScale = std::pow(scalar.value_or(256.0), -0.5);
    if (!scalar)
      config.remarkDefault("query_pre_attn_scalar", "256",
                           "Hugging Face's default for gemma3_text");
    for (auto [key, into] :
         {std::pair{"attn_logit_softcapping", &values.attentionSoftcap},
          std::pair{"final_logit_softcapping", &values.finalSoftcap}}) {
      if (config.isNull(key))
        continue;
      if (!config.optionalPositive(key, *into))
        return false;
    }
    int64_t window = 0;
    if (!readSlidingWindow(config, "gemma3_text", 4096, window))
      return false;
    std::vector<bool> global;
    if (!readLayerKinds(config, values.layers, global))
      return false;
    rt::Rotary local;
    local.theta = localBase.value_or(10000.0);
    values.perLayer = [window, global, local](int64_t index,
                                              LayerConfig &layer) {
      if (global[index])
        return;
      layer.window = window;
      layer.rotary = local;
    };
    return true;
  }

  /// Which of `layers` layers are global: `layer_types`
  /// ("full_attention" or "sliding_attention" each), or of every
  /// `sliding_window_pattern` (6) the last.
  static bool readLayerKinds(ConfigKeys &config, int64_t layers,
                             std::vector<bool> &global) {
    std::optional<int64_t> pattern;
    if (!config.optionalSize({"sliding_window_pattern"}, pattern))
      return false;
    int64_t every = pattern.value_or(6);
    global.assign(layers, false);
    for (int64_t i = 0; i < layers; ++i)
      global[i] = (i + 1) % every == 0;
    if (!config.has("layer_types"))
      return true;
    std::optional<std::vector<std::string>> kinds =
        config.getStrings("layer_types");
    bool valid = kinds && int64_t(kinds->size()) == layers;
    for (int64_t i = 0; valid && i < layers; ++i) {
      const std::string &kind = (*kinds)[i];
      valid = kind == "full_attention" || kind == "sliding_attention";
      global[i] = kind == "full_attention";
    }
    if (!valid)
      config.error("layer_types",
                   "key 'layer_types' must list 'full_attention' or "
                   "'sliding_attention' for each of the " +
                       std::to_string(layers) + " layers, got " +
                       config.format("layer_types"));
    return valid;
  }

  /// The pattern N that says `model`'s layers: of every N, the last global
  /// (no window, one rotary base and scaling), the others local (one
  /// window and one base each); 0 when none does.
  static int64_t getPattern(const ModelConfig &model) {
    std::vector<const LayerConfig *> layers;
    for (const LayerConfig &l : model.layers)
      if (l.kind == rt::LayerKind::Transformer)
        layers.push_back(&l);
    int64_t n = int64_t(layers.size());
    for (int64_t every = 1; every <= n; ++every) {
      const LayerConfig &global = *layers[every - 1], &local = *layers[0];
      bool holds = global.window == 0;
      for (int64_t i = 0; i < n && holds; ++i) {
        bool isGlobal = (i + 1) % every == 0;
        const LayerConfig &l = *layers[i];
        holds = isGlobal ? l.window == 0 && l.rotary == global.rotary
                         : l.window > 0 && l.window == local.window &&
                               l.rotary == local.rotary && !l.rotary.isScaled();
      }
      if (holds)
        return every;
    }
    return 0;
  }
};

} // namespace

SLUICE_DEFINE_FAMILY(gemma3, Gemma3)

} // namespace sluice::families
