//===- Common.h - What the family adapters share ----------------*- C++ -*-===//
//
// Private to lib/Families: the config reading every family shares (sizes,
// heads, activation, rotary positions, numerics), parameterised by a
// family's Traits and finished by the family's own keys; the Llama layout
// of weight names four families use; and the shape tests the families'
// claims are made of.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_LIB_FAMILIES_COMMON_H
#define SLUICE_LIB_FAMILIES_COMMON_H

#include "sluice/Families/Family.h"

#include <nlohmann/json.hpp>

#include <array>
#include <functional>
#include <optional>

namespace sluice::families {

/// What a family's config implies about its block, and how its keys are
/// spelled and defaulted (transformers' config class for it).
struct Traits {
  /// Used in remarks: "Hugging Face's default for <name>".
  std::string name;
  rt::NormType norm = rt::NormType::RmsNorm;
  rt::MlpType mlp = rt::MlpType::SwiGlu;
  bool learnedPositions = false;
  bool tieDefault = false;
  /// Keys that may name the activation, in lookup order; the values this
  /// family's MLP kind implements; Hugging Face's default ("": required).
  std::vector<std::string> activationKeys, activations;
  std::string activationDefault;
  /// rope_theta when the key is absent.
  double ropeThetaDefault = 10000.0;
  /// head_dim when the key is absent (0: hidden_size / heads).
  int64_t headDimDefault = 0;
  /// num_key_value_heads when absent (0: num_attention_heads).
  int64_t kvHeadsDefault = 0;
  /// GPT-2 spells the sizes its own way (n_embd, ...); both are accepted.
  bool gpt2Aliases = false;
  /// The norms' epsilon key and its default.
  std::string epsKey = "rms_norm_eps";
  double epsDefault = 1e-6;
  std::string epsDefaultText = "1e-06";
  /// nn.Embedding's padding_idx: whether the family reads pad_token_id,
  /// and the index when the key is absent (-1: none).
  bool readsPadding = true;
  int64_t paddingDefault = -1;
  /// Whether the family's layers may be mixtures of experts (its readKeys
  /// reads them, readExperts); otherwise an expert count is refused.
  bool experts = false;
};

/// Llama's keys and defaults (SwiGLU, silu, RMSNorm, rotary), which
/// Mistral and Qwen2 start from; `name` in the remarks.
Traits getLlamaTraits(const std::string &name);
/// Gemma's traits (Gemma, Gemma-2, Gemma-3): GeGLU from
/// `hidden_activation` only (GemmaMLP reads no other key), the tanh GELU
/// by default, tied tables, head_dim 256, padding token 0.
Traits getGemmaTraits(const std::string &name);

/// Everything the shared and the family's own reading produce, validated;
/// buildSpec turns it into the block spec.
struct ConfigValues {
  int64_t hidden = 0, layers = 0, heads = 0, kvHeads = 0, ffn = 0, vocab = 0,
          positions = 0;
  std::optional<int64_t> headDim;
  /// The rotary families' base and its scaling.
  std::optional<double> ropeTheta;
  std::optional<rt::Rotary> ropeScaling;
  bool tied = false;
  std::string dtype;
  double normEps = 1e-5;
  bool exactGelu = false;
  std::optional<double> embeddingScale;
  std::optional<int64_t> paddingToken;
  std::optional<double> attentionScale, attentionSoftcap, finalSoftcap;
  /// The block's fields beyond its shape, which every layer starts from: a
  /// family sets its features here (blocks::getStatedKeys names them).
  LayerConfig block;
  /// Then each layer's own, by its index among the transformer layers
  /// (Mistral's window on every layer, Gemma-2's on the even ones,
  /// Gemma-3's local and global rotary bases); null: none.
  std::function<void(int64_t, LayerConfig &)> perLayer;
};

/// The reading of one family's config: the shared keys under `traits`,
/// then `own` for the family's keys. False once a problem is reported.
using OwnKeys = std::function<bool(ConfigKeys &, ConfigValues &)>;
bool readConfigWith(ConfigKeys &config, const std::string &modelType,
                    const Traits &traits, ImportedModel &out,
                    const OwnKeys &own = nullptr);

/// The attention window of `sliding_window` (Mistral, Gemma-2, Gemma-3):
/// absent, `fallback` (Hugging Face's default, said in a remark); null,
/// none (0).
/// The boolean `key` (absent: false) where true turns on what `what`
/// says, which Sluice does not model: said as unmodelled. False only when
/// the key is not a boolean (said too).
bool readUnmodelledSwitch(ConfigKeys &config, const char *key,
                          const char *what);
/// What Qwen's `use_sliding_window` would switch on.
inline constexpr const char *kQwenWindowLayers =
    "the layers past max_window_layers attend over sliding_window keys only";
/// What `attention_bias` switches on in the families whose maps have none.
inline constexpr const char *kAttentionBiases =
    "biases on the query, key, value and output maps";

bool readSlidingWindow(ConfigKeys &config, const std::string &modelType,
                       int64_t fallback, int64_t &window);

/// A mixture-of-experts family's routing keys, into `block`: the expert
/// count under `countKey` (absent: `countDefault`, said in a remark),
/// num_experts_per_tok (absent: `topKDefault`), norm_topk_prob when the
/// family has it (absent: false), the load-balancing loss when
/// output_router_logits is true (its coefficient router_aux_loss_coef,
/// absent: `auxDefault`; docs/moe.md), and what Sluice does not model said
/// as such: router_jitter_noise above 0. The experts' width, `ffnKey`'s,
/// into `width` (intermediate_size: the dense width, values.ffn).
struct ExpertKeys {
  const char *countKey;
  int64_t countDefault, topKDefault;
  const char *ffnKey;
  bool normKey;
  double auxDefault;
};
/// A dense layer of a mixture-of-experts model: no expert field set.
inline void clearExperts(LayerConfig &l) {
  l.experts = l.topK = l.sharedFfn = 0;
  l.normTopK = false;
  l.auxLoss = 0;
  l.router = "softmax";
  l.expertGroups = l.topGroups = 0;
  l.routedScale = 1.0;
  l.sharedGate = true;
  l.biasUpdate = 0;
}
bool readExperts(ConfigKeys &config, const std::string &modelType,
                 const ExpertKeys &keys, ConfigValues &values,
                 int64_t &width);
/// Qwen-MoE's sparse and dense layers (Qwen2MoeDecoderLayer,
/// Qwen3MoeDecoderLayer): a layer is a mixture of experts of `width` unless
/// `mlp_only_layers` lists it or (its index + 1) is not a multiple of
/// `decoder_sparse_step`; the others are dense blocks of intermediate_size
/// (values.ffn). Sets values.perLayer.
bool readSparseLayers(ConfigKeys &config, int64_t width, ConfigValues &values);
/// Whether every sparse layer of `model` has one mixture and every dense
/// one one width, and some layer is sparse.
bool claimSparseLayers(const ModelConfig &model);
/// The keys of both, as describe() writes them (decoder_sparse_step 1 and
/// the dense layers as mlp_only_layers).
void describeSparseLayers(const ModelConfig &model, const ExpertKeys &keys,
                          nlohmann::json &config);
/// The keys readExperts reads, as describe() writes them for `block`.
void describeExperts(const ExpertKeys &keys, const LayerConfig &block,
                     nlohmann::json &config);

/// A printf-formatted number, as the importer's messages spell them.
std::string formatNumber(const char *format, double value);

/// The Llama layout of tensor names (Llama, Mistral, Qwen2; Gemma's with
/// its norm offset).
WeightNames getLlamaWeightNames();
/// Adds the query and key norms' names (Qwen3, OLMo-2, Gemma-3 and their
/// mixtures of experts): self_attn.q_norm, self_attn.k_norm.
void addQkNormNames(WeightNames &names);
/// A mixture of experts' maps, in the order addExpertNames takes their
/// names.
inline constexpr const char *kExpertMaps[3] = {"gate", "up", "down"};
/// Adds a mixture of experts' tensor names: its router `router`
/// ("mlp.gate") and each expert's gate, up and down maps, `experts` (with
/// "{}" for the expert's index: "mlp.experts.{}.") then `maps`' names.
void addExpertNames(WeightNames &names, const std::string &router,
                    const std::string &experts,
                    const std::array<const char *, 3> &maps);
/// The Llama layout with Qwen-MoE's and OLMoE's experts: the router
/// `mlp.gate`, expert e's maps `mlp.experts.e.gate_proj`, `up_proj`,
/// `down_proj`; with `qkNorms`, the query and key norms (addQkNormNames).
WeightNames getQwenExpertWeightNames(bool qkNorms);
/// The moe feature's shared expert (`mlp.shared.*`) under `module`
/// ("mlp.shared_expert." for Qwen2-MoE), Llama's map names after it.
void addSharedExpertNames(WeightNames &names, const std::string &module);
/// Whether every transformer layer of `model` has `block`'s mixture of
/// experts (count, top-k, renormalisation, width).
bool hasUniformExperts(const ModelConfig &model, const LayerConfig &block);

/// Adds the sandwich norms' names (Gemma-2's and OLMo-2's
/// post_attention_layernorm and post_feedforward_layernorm).
void addPostNormNames(WeightNames &names);

/// The shapes families claim a block spec by.
struct Shape {
  bool rotary = false;     // rotary positions, RMSNorm, no biases
  bool scaled = false;     // embeddings scaled (Gemma)
  bool llama = false;      // rotary, SwiGLU, unscaled embeddings
  int64_t window = 0;      // the largest attention window (0: none)
  bool everyLayer = false; // every layer that window
  bool evenLayers = false; // the even layers that window, the odd none
  bool sameRotary = false; // every layer layer 0's rotary positions
};
Shape getShape(const ModelConfig &model, const LayerConfig &block);

/// The keys every rotary family's config writes.
nlohmann::json describeRotary(const ModelConfig &model,
                              const LayerConfig &block);

/// Gemma-2's and Gemma-3's attention scaling and soft-capping keys:
/// query_pre_attn_scalar (an integer where it is one), the attention's and
/// the final logits' soft caps (null: none).
void describeGemmaScaling(const ModelConfig &model, int64_t headDim,
                          nlohmann::json &config);

/// The spec fields a family's config can say and those its checkpoints
/// always have (Family::getFields, getRequiredFields), the same for each
/// of its model types.
struct FamilyFields {
  std::vector<std::string> fields, required;
};

/// A family whose name, model types and fields are set when it is made.
class NamedFamily : public Family {
public:
  NamedFamily(const char *name, std::vector<std::string> modelTypes,
              FamilyFields fields = {})
      : name(name), modelTypes(std::move(modelTypes)),
        fields(std::move(fields)) {}
  const char *getName() const override { return name; }
  std::vector<std::string> getModelTypes() const override { return modelTypes; }
  std::vector<std::string> getFields(const std::string &) const override {
    return fields.fields;
  }
  std::vector<std::string>
  getRequiredFields(const std::string &) const override {
    return fields.required;
  }

private:
  const char *name;
  std::vector<std::string> modelTypes;
  FamilyFields fields;
};

/// A family whose checkpoints use Llama's tensor names and plain norm
/// gains (Llama, Mistral, Qwen2, Qwen3, OLMo-2 with their own additions);
/// its model type is its name. Its config is read with Llama's traits,
/// which a family's constructor adjusts, then its readKeys.
class LlamaLayoutFamily : public NamedFamily {
public:
  LlamaLayoutFamily(const char *name, const char *architecture,
                    FamilyFields fields)
      : NamedFamily(name, {name}, std::move(fields)),
        traits(getLlamaTraits(name)), architecture(architecture) {}

  /// By default, Llama's block with one rotary base: the fields the
  /// family's config can say tell it from the others that claim it.
  Claim claim(const ModelConfig &model, const LayerConfig &block,
              std::string &) const override {
    Shape shape = getShape(model, block);
    return shape.llama && shape.sameRotary ? Claim::Yes : Claim::No;
  }

  bool readConfig(ConfigKeys &config, const std::string &modelType,
                  ImportedModel &out) const final {
    return readConfigWith(config, modelType, traits, out,
                          [&](ConfigKeys &config, ConfigValues &values) {
                            return readKeys(config, modelType, values);
                          });
  }

  const WeightNames &getWeightNames(const std::string &) const override {
    static const WeightNames names = getLlamaWeightNames();
    return names;
  }

  /// describeRotary's keys, the family's architecture and model type
  /// (its name) and SiLU, then describeKeys' additions.
  nlohmann::json describe(const ModelConfig &model,
                          const LayerConfig &block) const override {
    nlohmann::json c = describeRotary(model, block);
    c["architectures"] = {architecture};
    c["model_type"] = getName();
    c["hidden_act"] = "silu";
    describeKeys(model, block, c);
    return c;
  }

protected:
  /// The keys only this family's config has: read (after the shared ones;
  /// false once a problem is reported) and written.
  virtual bool readKeys(ConfigKeys &config, const std::string &modelType,
                        ConfigValues &values) const {
    return true;
  }
  virtual void describeKeys(const ModelConfig &model, const LayerConfig &block,
                            nlohmann::json &config) const {}

  Traits traits;

private:
  /// transformers' class name ("LlamaForCausalLM").
  const char *architecture;
};

} // namespace sluice::families

/// Defines getFamily_NAME(), which the build's family list calls (one per
/// folder under lib/Families), returning the one CLASS.
#define SLUICE_DEFINE_FAMILY(NAME, CLASS)                                      \
  const ::sluice::families::Family &getFamily_##NAME() {                       \
    static const CLASS family;                                                 \
    return family;                                                             \
  }

#endif // SLUICE_LIB_FAMILIES_COMMON_H
