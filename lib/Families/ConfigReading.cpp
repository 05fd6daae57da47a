//===- ConfigReading.cpp - The config keys every family shares ------------===//
//
// Sizes, heads, feed-forward width, activation, rotary positions, tying,
// element type, norm epsilon and padding, as transformers' config classes
// define and default them; a family's Traits say where they differ and
// its own reader adds the rest. Each step reports the first problem and
// stops (one line to act on); each default applied to an absent key is
// said in a remark (docs/import.md).
//
//===----------------------------------------------------------------------===//

#include "Common.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace sluice::families {

std::string formatNumber(const char *format, double value) {
  char text[64];
  std::snprintf(text, sizeof(text), format, value);
  return text;
}

Traits getLlamaTraits(const std::string &name) {
  Traits traits;
  traits.name = name;
  traits.activationKeys = {"hidden_act"};
  traits.activations = {"silu", "swish"};
  traits.activationDefault = "silu";
  return traits;
}

Traits getGemmaTraits(const std::string &name) {
  Traits traits;
  traits.name = name;
  traits.mlp = rt::MlpType::GeGlu;
  traits.tieDefault = true;
  traits.activationKeys = {"hidden_activation"};
  traits.activations = {"gelu_pytorch_tanh", "gelu", "gelu_new", "gelu_fast"};
  traits.activationDefault = "gelu_pytorch_tanh";
  traits.headDimDefault = 256;
  traits.paddingDefault = 0;
  return traits;
}

namespace {

/// Reads ConfigValues in steps, one per group of keys.
class SharedReader {
public:
  SharedReader(ConfigKeys &config, const std::string &modelType,
               const Traits &traits)
      : config(config), modelType(modelType), traits(traits) {}

  bool run(ConfigValues &out) {
    if (!refuseExperts() || !readSizes() || !readHeads() ||
        !readFeedForward() || !checkActivation() || !readRotary() ||
        !readTied() || !readDType() || !readNumerics() || !readPadding())
      return false;
    out = std::move(values);
    return true;
  }

private:
  /// `key`, and GPT-2's name for it in a GPT-2 config.
  ConfigKeys::Names names(const std::string &key,
                          const std::string &gpt2Alias) const {
    if (traits.gpt2Aliases)
      return {key, gpt2Alias};
    return {key};
  }

  /// Mixture-of-experts layers are a different layer kind; refuse them
  /// rather than counting one expert.
  bool refuseExperts() {
    if (traits.experts)
      return true;
    for (const char *key : {"num_local_experts", "num_experts"}) {
      std::optional<int64_t> experts;
      if (!config.optionalSize({key}, experts))
        return false;
      if (experts && *experts > 1) {
        config.error(key, "key '" + std::string(key) + "' = " +
                              std::to_string(*experts) + ": model_type \"" +
                              modelType +
                              "\" has no mixture of experts (the families "
                              "with one: mixtral, olmoe, qwen2_moe, qwen3_moe)");
        return false;
      }
    }
    return true;
  }

  bool readSizes() {
    std::string layersKey;
    if (!config.requireSize(names("hidden_size", "n_embd"), values.hidden,
                            &hiddenKey) ||
        !config.requireSize(names("num_hidden_layers", "n_layer"),
                            values.layers, &layersKey))
      return false;
    // Every layer is an op: a count no model has would only exhaust memory
    // (sluice-fuzz-config built 64 million of them). The deepest models
    // trained today have about 130.
    constexpr int64_t kMaxLayers = 1 << 16;
    if (values.layers > kMaxLayers) {
      config.error(layersKey, "key '" + layersKey +
                                  "' = " + std::to_string(values.layers) +
                                  " is more layers than Sluice compiles (" +
                                  std::to_string(kMaxLayers) + ")");
      return false;
    }
    return config.requireSize(names("num_attention_heads", "n_head"),
                              values.heads, &headsKey) &&
           config.requireSize({"vocab_size"}, values.vocab) &&
           config.requireSize(names("max_position_embeddings", "n_positions"),
                              values.positions);
  }

  bool readHeads() {
    std::optional<int64_t> kvHeads;
    if (!config.optionalSize({"num_key_value_heads"}, kvHeads))
      return false;
    // Each config class has its own default (MistralConfig 8, GemmaConfig
    // 16, Gemma2Config 4); Llama's is multi-head attention.
    int64_t kvDefault =
        traits.kvHeadsDefault ? traits.kvHeadsDefault : values.heads;
    values.kvHeads = kvHeads.value_or(kvDefault);
    if (!kvHeads && !traits.gpt2Aliases) {
      bool multiHead = kvDefault == values.heads;
      config.remarkDefault(
          "num_key_value_heads",
          multiHead ? "num_attention_heads = " + std::to_string(values.heads)
                    : std::to_string(kvDefault),
          multiHead ? "Hugging Face's default: multi-head attention"
                    : "Hugging Face's default for " + modelType);
    }

    std::optional<int64_t> headDim;
    if (!config.optionalSize({"head_dim"}, headDim))
      return false;
    values.headDim = headDim;
    if (!values.headDim && traits.headDimDefault) {
      values.headDim = traits.headDimDefault;
      config.remarkDefault("head_dim", std::to_string(traits.headDimDefault),
                           "Hugging Face's default for " + traits.name);
    }
    if (!values.headDim && values.hidden % values.heads != 0) {
      config.error(hiddenKey, "key '" + hiddenKey +
                                  "' = " + std::to_string(values.hidden) +
                                  " is not divisible by key '" + headsKey +
                                  "' = " + std::to_string(values.heads));
      return false;
    }
    if (values.heads % values.kvHeads != 0) {
      config.error("num_key_value_heads",
                   "key '" + headsKey + "' = " + std::to_string(values.heads) +
                       " is not divisible by key 'num_key_value_heads' = " +
                       std::to_string(values.kvHeads));
      return false;
    }
    return true;
  }

  bool readFeedForward() {
    if (!traits.gpt2Aliases)
      return config.requireSize({"intermediate_size"}, values.ffn);
    std::optional<int64_t> ffn;
    if (!config.optionalSize(names("intermediate_size", "n_inner"), ffn))
      return false;
    values.ffn = ffn.value_or(4 * values.hidden);
    if (!ffn)
      config.remarkDefault("n_inner",
                           "4 * n_embd = " + std::to_string(values.ffn),
                           "GPT-2's definition of a null n_inner");
    return true;
  }

  /// The activation must be one the family's MLP kind computes.
  bool checkActivation() {
    std::string key;
    std::optional<std::string> activation;
    if (!config.optionalString(traits.activationKeys, activation, &key))
      return false;
    if (!activation) {
      if (traits.activationDefault.empty()) {
        config.error(key, "missing required key '" + key + "'");
        return false;
      }
      config.remarkDefault(key, "\"" + traits.activationDefault + "\"",
                           "Hugging Face's default for " + traits.name);
      activation = traits.activationDefault;
    } else if (std::find(traits.activations.begin(), traits.activations.end(),
                         *activation) == traits.activations.end()) {
      std::string supported;
      for (const std::string &a : traits.activations)
        supported += (supported.empty() ? "" : ", ") + a;
      config.error(key, "key '" + key + "' = \"" + *activation +
                            "\" is not supported for model_type \"" +
                            modelType + "\" (supported: " + supported + ")");
      return false;
    }
    // transformers' "gelu" is the exact x * Phi(x); the others are the
    // tanh approximation.
    values.exactGelu = *activation == "gelu";
    return true;
  }

  /// Rotary positions: the frequency base; GPT-2 learns a position table
  /// instead.
  bool readRotary() {
    if (traits.learnedPositions)
      return true;
    std::optional<double> theta, nested;
    // transformers 5 saves the base and the scaling inside
    // `rope_parameters`.
    if (!config.optionalPositive("rope_theta", theta) ||
        !config.optionalPositive("rope_theta", nested, "rope_parameters"))
      return false;
    values.ropeTheta =
        theta ? *theta : nested.value_or(traits.ropeThetaDefault);
    if (!theta && !nested)
      config.remarkDefault("rope_theta",
                           formatNumber("%.1f", traits.ropeThetaDefault),
                           "Hugging Face's default for " + traits.name);
    return readRopeScaling();
  }

  /// The rotary frequencies' scaling: transformers 4's `rope_scaling`, or
  /// 5's `rope_parameters` (which holds rope_theta too). "default" is
  /// none; "llama3" (Llama 3.1 and 3.2) and "linear" are computed; another
  /// kind is recorded as unmodelled, which the runtime refuses to train.
  bool readRopeScaling() {
    std::string key =
        config.has("rope_scaling") ? "rope_scaling" : "rope_parameters";
    if (!config.has(key))
      return true;
    if (!config.isObject(key)) {
      config.error(key, "key '" + key + "' must be an object, got " +
                            config.format(key));
      return false;
    }
    std::optional<std::string> type = config.getNestedString(key, "rope_type");
    if (!type) // transformers before 4.43 named it `type`
      type = config.getNestedString(key, "type");
    if (!type || *type == "default")
      return true;
    if (*type == "yarn")
      return readYarn(key);
    if (*type != "llama3" && *type != "linear") {
      config.unmodelled(key, "rotary positions use the unscaled frequencies "
                             "of rope_theta = " +
                                 formatNumber("%.1f", *values.ropeTheta) +
                                 ", not rope_type '" + *type + "'");
      return true;
    }
    auto number = [&](const char *name) {
      std::optional<double> value = config.getNestedNumber(key, name);
      if (!value)
        config.error(key, "key '" + key + "." + name +
                              "' must be a number for rope_type '" + *type +
                              "'");
      return value;
    };
    rt::Rotary rotary;
    rotary.theta = *values.ropeTheta;
    std::optional<double> factor = number("factor");
    if (!factor)
      return false;
    rotary.factor = *factor;
    if (*type == "linear") {
      // Every frequency divided by the factor (Gemma-3's global layers).
      rotary.linear = true;
    } else {
      std::optional<double> low = number("low_freq_factor"),
                            high = number("high_freq_factor");
      std::optional<int64_t> original =
          config.getNestedInteger(key, "original_max_position_embeddings");
      if (!original)
        config.error(key, "key '" + key +
                              ".original_max_position_embeddings' must be an "
                              "integer for rope_type 'llama3'");
      if (!low || !high || !original)
        return false;
      rotary.lowFreqFactor = *low;
      rotary.highFreqFactor = *high;
      rotary.originalPositions = *original;
    }
    // The one check of the scaling, the runtime's and the dialect's.
    if (std::string why = rotary.checkScaling(); !why.empty()) {
      config.error(key, "key '" + key + "': " + why);
      return false;
    }
    values.ropeScaling = rotary;
    return true;
  }

  /// YaRN (transformers' _compute_yarn_parameters): `factor`, or
  /// max_position_embeddings over `original_max_position_embeddings` when
  /// that is given (DeepSeek-V3's configs); `beta_fast` and `beta_slow`
  /// (32 and 1 when absent or 0); the rotation's magnitude
  /// `attention_factor`, else from `mscale` and `mscale_all_dim` when both
  /// are non-zero, else 0.1 ln(factor) + 1.
  bool readYarn(const std::string &key) {
    rt::Rotary rotary;
    rotary.theta = *values.ropeTheta;
    rotary.yarn = true;
    std::optional<double> factor = config.getNestedNumber(key, "factor");
    if (!factor) {
      config.error(key, "key '" + key +
                            ".factor' must be a number for rope_type 'yarn'");
      return false;
    }
    std::optional<int64_t> original =
        config.getNestedInteger(key, "original_max_position_embeddings");
    rotary.originalPositions = original.value_or(values.positions);
    rotary.factor =
        original ? double(values.positions) / double(*original) : *factor;
    auto nested = [&](const char *name, double fallback) {
      std::optional<double> v = config.getNestedNumber(key, name);
      return v && *v != 0 ? *v : fallback;
    };
    rotary.betaFast = nested("beta_fast", 32);
    rotary.betaSlow = nested("beta_slow", 1);
    auto mscale = [](double scale, double m) {
      return scale <= 1 ? 1.0 : 0.1 * m * std::log(scale) + 1.0;
    };
    double m = nested("mscale", 0), all = nested("mscale_all_dim", 0);
    rotary.magnitude =
        config.getNestedNumber(key, "attention_factor")
            .value_or(m != 0 && all != 0
                          ? mscale(rotary.factor, m) / mscale(rotary.factor, all)
                          : mscale(rotary.factor, 1));
    if (std::string why = rotary.checkScaling(); !why.empty()) {
      config.error(key, "key '" + key + "': " + why);
      return false;
    }
    values.ropeScaling = rotary;
    return true;
  }

  bool readTied() {
    std::optional<bool> tied;
    if (!config.optionalBool("tie_word_embeddings", tied))
      return false;
    values.tied = tied.value_or(traits.tieDefault);
    if (!tied)
      config.remarkDefault("tie_word_embeddings",
                           traits.tieDefault ? "true" : "false",
                           "Hugging Face's default for " + traits.name);
    return true;
  }

  bool readDType() {
    std::optional<std::string> dtype;
    if (!config.optionalString({"torch_dtype", "dtype"}, dtype))
      return false;
    if (!dtype) {
      // What transformers loads such a model in (torch's default dtype;
      // GPT-2's own config names none). bf16 is a choice: --precision.
      values.dtype = "float32";
      config.remarkDefault("torch_dtype", "\"float32\"",
                           "transformers' default; --precision bf16 trains "
                           "in mixed precision");
      return true;
    }
    if (*dtype != "bfloat16" && *dtype != "float16" && *dtype != "float32") {
      config.error("torch_dtype", "key 'torch_dtype' = \"" + *dtype +
                                      "\" is not supported (supported: "
                                      "bfloat16, float16, float32)");
      return false;
    }
    values.dtype = *dtype;
    return true;
  }

  /// Every norm's epsilon: `rms_norm_eps` (default 1e-6 in every rotary
  /// family's config class) or GPT-2's `layer_norm_epsilon` (1e-5).
  bool readNumerics() {
    const std::string &key = traits.epsKey;
    std::optional<double> eps;
    if (!config.optionalPositive(key, eps))
      return false;
    values.normEps = eps.value_or(traits.epsDefault);
    if (!eps)
      config.remarkDefault(key, traits.epsDefaultText,
                           "Hugging Face's default for " + modelType);
    if (values.normEps >= 1) {
      config.error(key, "key '" + key + "' must be below 1, got " +
                            formatNumber("%e", values.normEps));
      return false;
    }
    return true;
  }

  /// transformers' Llama, Mistral and Gemma models look tokens up with
  /// nn.Embedding(padding_idx=pad_token_id): that row gets no gradient
  /// from the lookup. Their configs default it to none (Llama, Mistral)
  /// or 0 (Gemma, Gemma-2); GPT-2 has no padding index.
  bool readPadding() {
    if (!traits.readsPadding || config.isNull("pad_token_id"))
      return true;
    if (!config.has("pad_token_id")) {
      if (traits.paddingDefault >= 0)
        values.paddingToken = traits.paddingDefault;
      return true;
    }
    std::optional<int64_t> pad = config.getInteger("pad_token_id");
    if (!pad || *pad < 0 || *pad >= values.vocab) {
      config.error("pad_token_id",
                   "key 'pad_token_id' must be a token below vocab_size = " +
                       std::to_string(values.vocab) + ", got " +
                       config.format("pad_token_id"));
      return false;
    }
    values.paddingToken = pad;
    return true;
  }

  ConfigKeys &config;
  const std::string &modelType;
  const Traits &traits;
  ConfigValues values;
  /// The keys the sizes came from (GPT-2 spells them its own way).
  std::string hiddenKey, headsKey;
};

/// The block spec `values` describe: the embedding, the transformer
/// layers, the output layer.
ModelConfig buildSpec(const Traits &traits, const ConfigValues &values) {
  ModelConfig model;
  model.seqLen = values.positions;
  model.maxPositions = values.positions;
  model.microBatch = 1;
  model.hidden = values.hidden;
  model.normEps = values.normEps;
  model.exactGelu = values.exactGelu;
  model.embeddingScale = values.embeddingScale.value_or(1.0);
  model.paddingToken = values.paddingToken.value_or(-1);
  model.attentionScale = values.attentionScale.value_or(0.0);
  model.attentionSoftcap = values.attentionSoftcap.value_or(0.0);
  model.finalSoftcap = values.finalSoftcap.value_or(0.0);

  LayerConfig embedding;
  embedding.kind = rt::LayerKind::Embedding;
  embedding.vocab = values.vocab;
  embedding.positions = traits.learnedPositions ? values.positions : 0;
  model.layers.push_back(embedding);
  for (int64_t i = 0; i < values.layers; ++i) {
    // The family's block (its features), then the shape every family's
    // keys give, then the layer's own (windows, rotary bases).
    LayerConfig t = values.block;
    t.kind = rt::LayerKind::Transformer;
    t.heads = values.heads;
    t.kvHeads = values.kvHeads;
    t.headDim = values.headDim.value_or(values.hidden / values.heads);
    t.ffn = values.ffn;
    if (values.ropeScaling)
      t.rotary = *values.ropeScaling;
    else
      t.rotary.theta = values.ropeTheta.value_or(0.0);
    t.norm = traits.norm;
    t.mlp = traits.mlp;
    if (values.perLayer)
      values.perLayer(i, t);
    model.layers.push_back(t);
  }
  LayerConfig output;
  output.kind = rt::LayerKind::Output;
  output.vocab = values.vocab;
  output.norm = traits.norm;
  output.tied = values.tied;
  model.layers.push_back(output);
  return model;
}

} // namespace

bool readConfigWith(ConfigKeys &config, const std::string &modelType,
                    const Traits &traits, ImportedModel &out,
                    const OwnKeys &own) {
  ConfigValues values;
  if (!SharedReader(config, modelType, traits).run(values))
    return false;
  if (own && !own(config, values))
    return false;
  out.model = buildSpec(traits, values);
  out.dtype = values.dtype;
  return true;
}

bool readUnmodelledSwitch(ConfigKeys &config, const char *key,
                          const char *what) {
  std::optional<bool> value;
  if (!config.optionalBool(key, value))
    return false;
  if (value.value_or(false))
    config.unmodelled(key, what);
  return true;
}

bool readSlidingWindow(ConfigKeys &config, const std::string &modelType,
                       int64_t fallback, int64_t &window) {
  window = 0;
  if (config.isNull("sliding_window"))
    return true; // no window
  std::optional<int64_t> size;
  if (!config.optionalSize({"sliding_window"}, size))
    return false;
  window = size.value_or(fallback);
  if (!size)
    config.remarkDefault("sliding_window", std::to_string(fallback),
                         "Hugging Face's default for " + modelType);
  return true;
}

bool readExperts(ConfigKeys &config, const std::string &modelType,
                 const ExpertKeys &keys, ConfigValues &values,
                 int64_t &width) {
  std::optional<int64_t> count, topK, ffn;
  if (!config.optionalSize({keys.countKey}, count) ||
      !config.optionalSize({"num_experts_per_tok"}, topK))
    return false;
  if (!count)
    config.remarkDefault(keys.countKey, std::to_string(keys.countDefault),
                         "Hugging Face's default for " + modelType);
  if (!topK)
    config.remarkDefault("num_experts_per_tok",
                         std::to_string(keys.topKDefault),
                         "Hugging Face's default for " + modelType);
  values.block.experts = count.value_or(keys.countDefault);
  values.block.topK = topK.value_or(keys.topKDefault);
  if (values.block.topK > values.block.experts) {
    config.error("num_experts_per_tok",
                 "key 'num_experts_per_tok' = " +
                     std::to_string(values.block.topK) + " routes each token "
                     "to more experts than the " +
                     std::to_string(values.block.experts) + " of '" +
                     keys.countKey + "'");
    return false;
  }
  width = values.ffn;
  if (std::string(keys.ffnKey) != "intermediate_size" &&
      !config.requireSize({keys.ffnKey}, width))
    return false;
  if (keys.normKey) {
    std::optional<bool> normalize;
    if (!config.optionalBool("norm_topk_prob", normalize))
      return false;
    if (!normalize)
      config.remarkDefault("norm_topk_prob", "false",
                           "Hugging Face's default for " + modelType);
    values.block.normTopK = normalize.value_or(false);
  }
  // Jitter multiplies the router's input by noise in training only.
  if (std::optional<double> jitter = config.getNumber("router_jitter_noise");
      jitter && *jitter != 0.0)
    config.unmodelled("router_jitter_noise",
                      "noise on the router's input in training");
  // The load-balancing loss: transformers' forward adds it when
  // output_router_logits is true.
  std::optional<bool> routerLogits;
  if (!config.optionalBool("output_router_logits", routerLogits))
    return false;
  if (!routerLogits.value_or(false))
    return true;
  std::optional<double> coefficient =
      config.getNumber("router_aux_loss_coef");
  if (config.has("router_aux_loss_coef") &&
      (!coefficient || !(*coefficient >= 0) || !std::isfinite(*coefficient))) {
    config.error("router_aux_loss_coef",
                 "key 'router_aux_loss_coef' = " +
                     config.format("router_aux_loss_coef") +
                     " must be a non-negative number");
    return false;
  }
  if (!coefficient)
    config.remarkDefault("router_aux_loss_coef",
                         std::to_string(keys.auxDefault),
                         "Hugging Face's default for " + modelType);
  values.block.auxLoss = coefficient.value_or(keys.auxDefault);
  return true;
}

void describeExperts(const ExpertKeys &keys, const LayerConfig &block,
                     nlohmann::json &config) {
  config[keys.countKey] = block.experts;
  config["num_experts_per_tok"] = block.topK;
  config[keys.ffnKey] = block.ffn;
  if (keys.normKey)
    config["norm_topk_prob"] = block.normTopK;
  config["output_router_logits"] = block.auxLoss > 0;
  if (block.auxLoss > 0)
    config["router_aux_loss_coef"] = block.auxLoss;
}

bool readSparseLayers(ConfigKeys &config, int64_t width,
                      ConfigValues &values) {
  std::optional<int64_t> step;
  if (!config.optionalSize({"decoder_sparse_step"}, step))
    return false;
  std::vector<int64_t> dense;
  if (config.has("mlp_only_layers")) {
    std::optional<std::vector<int64_t>> listed =
        config.getIntegers("mlp_only_layers");
    if (!listed) {
      config.error("mlp_only_layers", "key 'mlp_only_layers' = " +
                                          config.format("mlp_only_layers") +
                                          " must be a list of layer indices");
      return false;
    }
    dense = *listed;
  }
  int64_t every = step.value_or(1), denseWidth = values.ffn;
  values.perLayer = [dense, every, width, denseWidth](int64_t i,
                                                      LayerConfig &l) {
    bool listed = std::find(dense.begin(), dense.end(), i) != dense.end();
    if (!listed && (i + 1) % every == 0) {
      l.ffn = width;
      return;
    }
    clearExperts(l);
    l.ffn = denseWidth;
  };
  return true;
}

bool claimSparseLayers(const ModelConfig &model) {
  const LayerConfig *sparse = nullptr, *dense = nullptr;
  for (const LayerConfig &l : model.layers) {
    if (l.kind != rt::LayerKind::Transformer)
      continue;
    const LayerConfig *&first = l.experts > 0 ? sparse : dense;
    if (!first)
      first = &l;
    else if (l.experts != first->experts || l.topK != first->topK ||
             l.normTopK != first->normTopK || l.ffn != first->ffn ||
             l.sharedFfn != first->sharedFfn || l.auxLoss != first->auxLoss)
      return false;
  }
  return sparse != nullptr;
}

void describeSparseLayers(const ModelConfig &model, const ExpertKeys &keys,
                          nlohmann::json &c) {
  c["decoder_sparse_step"] = 1;
  std::vector<int64_t> dense;
  int64_t index = 0;
  for (const LayerConfig &l : model.layers) {
    if (l.kind != rt::LayerKind::Transformer)
      continue;
    if (l.experts > 0)
      describeExperts(keys, l, c);
    else {
      dense.push_back(index);
      c["intermediate_size"] = l.ffn;
    }
    ++index;
  }
  c["mlp_only_layers"] = dense;
}

bool hasUniformExperts(const ModelConfig &model, const LayerConfig &block) {
  for (const LayerConfig &l : model.layers)
    if (l.kind == rt::LayerKind::Transformer &&
        (l.experts != block.experts || l.topK != block.topK ||
         l.normTopK != block.normTopK || l.ffn != block.ffn ||
         l.sharedFfn != block.sharedFfn || l.auxLoss != block.auxLoss))
      return false;
  return true;
}

} // namespace sluice::families
