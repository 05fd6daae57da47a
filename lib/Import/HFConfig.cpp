//===- HFConfig.cpp - Import a Hugging Face config.json -------------------===//
//
// Three families are understood, each with the architecture Hugging Face's
// modelling code gives it:
//
//   family  model_type        norm     mlp      bias  positions  tied default
//   llama   llama, mistral    rmsnorm  swiglu   no    rotary     false
//   gemma   gemma, gemma2     rmsnorm  geglu    no    rotary     true
//   gpt2    gpt2              layernorm gelu    yes   learned    true
//
// GPT-2 configs may spell the sizes the GPT-2 way (n_embd, n_layer, n_head,
// n_positions, n_inner); both spellings are accepted and must agree.
//
//===----------------------------------------------------------------------===//

#include "sluice/Import/HFConfig.h"
#include "sluice/PlanFormat/JsonDepth.h"
#include "sluice/PlanFormat/ModelConfig.h"
#include "sluice/SluiceOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"

#include <cmath>
#include <tuple>

using namespace mlir;
using namespace mlir::sluice;

namespace {

/// What a model_type implies about the architecture.
struct Family {
  StringRef name;
  NormKind norm;
  MlpKind mlp;
  bool bias;
  bool learnedPositions;
  bool tieDefault;
  /// Keys that may name the activation, in the order they are looked up.
  ArrayRef<StringRef> activationKeys;
  /// Activation values this family's MLP kind implements.
  ArrayRef<StringRef> activations;
  /// Hugging Face's default activation when no key gives one, or "".
  StringRef activationDefault;
  /// Hugging Face's default head_dim when the key is absent, or 0 for
  /// hidden_size / num_attention_heads.
  int64_t headDimDefault;
};

const StringRef kLlamaActKeys[] = {"hidden_act"};
const StringRef kLlamaActs[] = {"silu", "swish"};
// GemmaMLP and Gemma2MLP read `hidden_activation` only (defaulting it to
// the tanh GELU); `hidden_act` does not change what they compute.
const StringRef kGemmaActKeys[] = {"hidden_activation"};
const StringRef kGeluActs[] = {"gelu_pytorch_tanh", "gelu", "gelu_new",
                               "gelu_fast"};
const StringRef kGpt2ActKeys[] = {"activation_function", "hidden_act"};

const Family kLlama{"llama", NormKind::rmsnorm, MlpKind::swiglu, false, false,
                    false,   kLlamaActKeys,     kLlamaActs,      "",    0};
// Qwen2 and Qwen2.5: Llama's block with biases on the query, key and value
// projections (readBiases).
const Family kQwen2{"qwen2", NormKind::rmsnorm, MlpKind::swiglu, false, false,
                    false,   kLlamaActKeys,     kLlamaActs,      "",    0};
const Family kGemma{
    "gemma",       NormKind::rmsnorm, MlpKind::geglu,      false, false, true,
    kGemmaActKeys, kGeluActs,         "gelu_pytorch_tanh", 256};
const Family kGpt2{"gpt2", NormKind::layernorm, MlpKind::gelu, true,       true,
                   true,   kGpt2ActKeys,        kGeluActs,     "gelu_new", 0};

const Family *lookupFamily(StringRef modelType) {
  return llvm::StringSwitch<const Family *>(modelType)
      .Cases({"llama", "mistral"}, &kLlama)
      .Cases({"gemma", "gemma2"}, &kGemma)
      .Case("gpt2", &kGpt2)
      .Case("qwen2", &kQwen2)
      .Default(nullptr);
}
constexpr StringLiteral kSupportedModelTypes =
    "gemma, gemma2, gpt2, llama, mistral, qwen2";

/// Reads typed values out of the top-level JSON object, reporting each
/// problem at the key's position in the file.
class ConfigReader {
public:
  ConfigReader(const llvm::json::Object &object, StringRef text,
               StringRef filename, MLIRContext *context)
      : object(object), text(text), filename(filename), context(context) {}

  /// Where `"key"` is written in the file; the file's start if absent.
  Location loc(StringRef key) const {
    size_t offset = text.find(("\"" + key + "\"").str());
    if (offset == StringRef::npos)
      offset = std::min(text.find('{'), text.size());
    StringRef before = text.take_front(offset);
    unsigned line = 1 + before.count('\n');
    size_t lineStart = before.rfind('\n');
    unsigned column =
        offset - (lineStart == StringRef::npos ? 0 : lineStart + 1) + 1;
    return FileLineColLoc::get(context, filename, line, column);
  }

  InFlightDiagnostic error(StringRef key) const { return emitError(loc(key)); }

  /// The first of `names` present with a non-null value (aliases must
  /// agree). Sets `found` to the key it came from.
  FailureOr<const llvm::json::Value *> find(ArrayRef<StringRef> names,
                                            StringRef &found) const {
    const llvm::json::Value *result = nullptr;
    for (StringRef name : names) {
      const llvm::json::Value *value = object.get(name);
      if (!value || value->kind() == llvm::json::Value::Null)
        continue;
      if (result && *result != *value) {
        error(name) << "keys '" << found << "' = " << formatJSON(*result)
                    << " and '" << name << "' = " << formatJSON(*value)
                    << " disagree";
        return failure();
      }
      if (!result) {
        result = value;
        found = name;
      }
    }
    return result;
  }

  /// find() from the first of `names`; `key` (and `foundKey`, when given)
  /// receives the key the value came from.
  FailureOr<const llvm::json::Value *>
  lookup(ArrayRef<StringRef> names, StringRef &key, StringRef *foundKey) const {
    key = names.front();
    FailureOr<const llvm::json::Value *> value = find(names, key);
    if (foundKey)
      *foundKey = key;
    return value;
  }

  /// A positive integer under one of `names`, or nullopt if absent.
  /// `foundKey`, when given, receives the key the value came from.
  FailureOr<std::optional<int64_t>>
  optionalSize(ArrayRef<StringRef> names, StringRef *foundKey = nullptr) const {
    StringRef key;
    FailureOr<const llvm::json::Value *> value = lookup(names, key, foundKey);
    if (failed(value))
      return failure();
    if (!*value)
      return std::optional<int64_t>();
    std::optional<int64_t> size = (*value)->getAsInteger();
    if (!size || *size < 1) {
      error(key) << "key '" << key << "' must be a positive integer, got "
                 << formatJSON(**value);
      return failure();
    }
    return size;
  }

  FailureOr<int64_t> requireSize(ArrayRef<StringRef> names,
                                 StringRef *foundKey = nullptr) const {
    FailureOr<std::optional<int64_t>> size = optionalSize(names, foundKey);
    if (failed(size))
      return failure();
    if (!*size) {
      InFlightDiagnostic diag = error(names.front());
      diag << "missing required key '" << names.front() << "'";
      for (StringRef alias : names.drop_front())
        diag << " (or '" << alias << "')";
      return failure();
    }
    return **size;
  }

  FailureOr<std::optional<std::string>>
  optionalString(ArrayRef<StringRef> names,
                 StringRef *foundKey = nullptr) const {
    StringRef key;
    FailureOr<const llvm::json::Value *> value = lookup(names, key, foundKey);
    if (failed(value))
      return failure();
    if (!*value)
      return std::optional<std::string>();
    std::optional<StringRef> string = (*value)->getAsString();
    if (!string) {
      error(key) << "key '" << key << "' must be a string, got "
                 << formatJSON(**value);
      return failure();
    }
    return std::optional<std::string>(string->str());
  }

  /// A positive number under `key`, or nullopt if absent.
  FailureOr<std::optional<double>> optionalPositive(StringRef key) const {
    StringRef found;
    FailureOr<const llvm::json::Value *> value = find({key}, found);
    if (failed(value))
      return failure();
    if (!*value)
      return std::optional<double>();
    std::optional<double> number = (*value)->getAsNumber();
    if (!number || !(*number > 0)) {
      error(key) << "key '" << key << "' must be a positive number, got "
                 << formatJSON(**value);
      return failure();
    }
    return number;
  }

  /// A positive number under `key` of the object `parent`, or nullopt if
  /// either is absent.
  FailureOr<std::optional<double>> optionalPositive(StringRef key,
                                                    StringRef parent) const {
    const llvm::json::Object *inner = getObject(parent);
    const llvm::json::Value *value = inner ? inner->get(key) : nullptr;
    if (!value || value->kind() == llvm::json::Value::Null)
      return std::optional<double>();
    std::optional<double> number = value->getAsNumber();
    if (!number || !(*number > 0)) {
      error(parent) << "key '" << parent << "." << key
                    << "' must be a positive number, got "
                    << formatJSON(*value);
      return failure();
    }
    return number;
  }

  /// The string under `key` of the object `parent`, if both exist.
  std::optional<std::string> nestedString(StringRef parent,
                                          StringRef key) const {
    const llvm::json::Object *inner = getObject(parent);
    if (!inner)
      return std::nullopt;
    if (std::optional<StringRef> s = inner->getString(key))
      return s->str();
    return std::nullopt;
  }

  const llvm::json::Object *getObject(StringRef key) const {
    const llvm::json::Value *value = object.get(key);
    return value ? value->getAsObject() : nullptr;
  }

  const llvm::json::Value *get(StringRef key) const { return object.get(key); }

  /// Whether `key` is present with a non-null value.
  bool has(StringRef key) const {
    const llvm::json::Value *value = object.get(key);
    return value && value->kind() != llvm::json::Value::Null;
  }

  FailureOr<std::optional<bool>> optionalBool(StringRef key) const {
    StringRef found;
    FailureOr<const llvm::json::Value *> value = find({key}, found);
    if (failed(value))
      return failure();
    // One return of one local: GCC 12 warns (-Wmaybe-uninitialized) on
    // an empty optional built in the return.
    std::optional<bool> flag;
    if (!*value)
      return flag;
    flag = (*value)->getAsBoolean();
    if (!flag) {
      error(key) << "key '" << key << "' must be true or false, got "
                 << formatJSON(**value);
      return failure();
    }
    return flag;
  }

  /// A remark at `key`.
  InFlightDiagnostic remark(StringRef key) const {
    return emitRemark(loc(key));
  }

  /// Says which default replaced an absent key: nothing is guessed silently.
  void remarkDefault(StringRef key, const Twine &value,
                     const Twine &why) const {
    emitRemark(loc(key)) << "key '" << key << "' is absent; using " << value
                         << " (" << why << ")";
  }

  static std::string formatJSON(const llvm::json::Value &value) {
    return llvm::formatv("{0}", value).str();
  }

private:
  const llvm::json::Object &object;
  StringRef text;
  StringRef filename;
  MLIRContext *context;
};

/// The model's symbol: `_name_or_path`'s last component, else the file's
/// stem (its directory's name for the usual `config.json`), reduced to
/// characters a bare MLIR symbol may hold.
std::string getModelName(std::optional<std::string> nameOrPath,
                         StringRef filename) {
  std::string raw;
  if (nameOrPath && !nameOrPath->empty())
    raw = llvm::sys::path::filename(StringRef(*nameOrPath).rtrim("/")).str();
  if (raw.empty()) {
    raw = llvm::sys::path::stem(filename).str();
    StringRef parent =
        llvm::sys::path::filename(llvm::sys::path::parent_path(filename));
    if (raw == "config" && !parent.empty() && parent != ".")
      raw = parent.str();
  }
  std::string name;
  for (char c : raw)
    name.push_back(llvm::isAlnum(c) ? llvm::toLower(c) : '_');
  if (name.empty() || llvm::isDigit(name.front()))
    name.insert(0, "model_");
  return name;
}

/// Everything the importer reads, validated.
struct ImportedConfig {
  std::string name;
  const Family *family = nullptr;
  int64_t hidden, layers, heads, kvHeads, ffn, vocab, positions;
  std::optional<int64_t> headDim;
  std::optional<double> ropeTheta; // rotary families only
  /// Llama 3.1's frequency scaling: factor, low_freq_factor,
  /// high_freq_factor, original_max_position_embeddings.
  struct RopeScaling {
    double factor, low, high;
    int64_t original;
  };
  std::optional<RopeScaling> ropeScaling;
  bool tied;
  Type dtype;
  /// The numerics the runtime computes (docs/import.md, "Numerics").
  double normEps = 1e-5;
  bool exactGelu = false;
  bool bias = false;
  bool qkvBias = false;
  std::optional<int64_t> slidingWindow;
  /// Gemma-2: only the even layers have the window, the odd ones attend
  /// globally.
  bool evenLayersWindowed = false;
  /// Gemma's sqrt(hidden_size); nn.Embedding's padding_idx.
  std::optional<double> embeddingScale;
  std::optional<int64_t> paddingToken;
  /// Gemma-2's attention: query_pre_attn_scalar^-0.5, attn_logit_softcapping.
  std::optional<double> attentionScale, attentionSoftcap, finalSoftcap;
  /// Gemma-2's sandwich norms.
  bool postNorms = false;
  /// What the config computes and the layers do not: costs hold, the
  /// runtime refuses to train it.
  std::vector<std::string> unmodelled;
};

/// Reads an ImportedConfig in steps, one per group of keys; the first
/// problem found is the one reported (one line to act on).
class ConfigImporter {
public:
  ConfigImporter(const ConfigReader &reader, StringRef filename,
                 MLIRContext *context)
      : reader(reader), filename(filename), context(context) {}

  FailureOr<ImportedConfig> run() {
    if (failed(readFamily()) || failed(refuseExperts()) ||
        failed(readSizes()) || failed(readHeads()) ||
        failed(readFeedForward()) || failed(checkActivation()) ||
        failed(readRotary()) || failed(readTied()) || failed(readDType()) ||
        failed(readNumerics()) || failed(readBiases()) || failed(readGemma()) ||
        failed(readPadding()) || failed(readSlidingWindow()))
      return failure();
    warnUnmodelled();
    auto nameOrPath = reader.optionalString({"_name_or_path"});
    if (failed(nameOrPath))
      return failure();
    config.name = getModelName(*nameOrPath, filename);
    return config;
  }

private:
  /// `key`, and GPT-2's name for it in a GPT-2 config.
  SmallVector<StringRef, 2> names(StringRef key, StringRef gpt2Alias) const {
    SmallVector<StringRef, 2> list{key};
    if (gpt2)
      list.push_back(gpt2Alias);
    return list;
  }

  LogicalResult readFamily() {
    auto modelTypeName = reader.optionalString({"model_type"});
    if (failed(modelTypeName))
      return failure();
    if (!*modelTypeName) {
      reader.error("model_type") << "missing required key 'model_type' "
                                    "(supported: "
                                 << kSupportedModelTypes << ")";
      return failure();
    }
    config.family = lookupFamily(**modelTypeName);
    if (!config.family) {
      reader.error("model_type")
          << "key 'model_type' = \"" << **modelTypeName
          << "\" is not supported (supported: " << kSupportedModelTypes << ")";
      return failure();
    }
    family = config.family;
    modelType = **modelTypeName;
    gpt2 = family == &kGpt2;
    return success();
  }

  /// Mixture-of-experts layers are a different layer kind; refuse them
  /// rather than counting one expert.
  LogicalResult refuseExperts() {
    for (StringRef key : {"num_local_experts", "num_experts"}) {
      auto experts = reader.optionalSize({key});
      if (failed(experts))
        return failure();
      if (*experts && **experts > 1) {
        reader.error(key) << "key '" << key << "' = " << **experts
                          << ": mixture-of-experts models are not supported";
        return failure();
      }
    }
    return success();
  }

  LogicalResult readSizes() {
    auto hidden =
        reader.requireSize(names("hidden_size", "n_embd"), &hiddenKey);
    if (failed(hidden))
      return failure();
    StringRef layersKey;
    auto layers =
        reader.requireSize(names("num_hidden_layers", "n_layer"), &layersKey);
    if (failed(layers))
      return failure();
    // Every layer is an op: a count no model has would only exhaust memory
    // (sluice-fuzz-config built 64 million of them). The deepest models
    // trained today have about 130.
    constexpr int64_t kMaxLayers = 1 << 16;
    if (*layers > kMaxLayers) {
      reader.error(layersKey)
          << "key '" << layersKey << "' = " << *layers
          << " is more layers than Sluice compiles (" << kMaxLayers << ")";
      return failure();
    }
    auto heads =
        reader.requireSize(names("num_attention_heads", "n_head"), &headsKey);
    if (failed(heads))
      return failure();
    auto vocab = reader.requireSize({"vocab_size"});
    if (failed(vocab))
      return failure();
    auto positions =
        reader.requireSize(names("max_position_embeddings", "n_positions"));
    if (failed(positions))
      return failure();
    config.hidden = *hidden;
    config.layers = *layers;
    config.heads = *heads;
    config.vocab = *vocab;
    config.positions = *positions;
    return success();
  }

  LogicalResult readHeads() {
    auto kvHeads = reader.optionalSize({"num_key_value_heads"});
    if (failed(kvHeads))
      return failure();
    // Each config class has its own default (MistralConfig 8, GemmaConfig
    // 16, Gemma2Config 4); Llama's is multi-head attention.
    int64_t kvDefault = llvm::StringSwitch<int64_t>(modelType)
                            .Case("mistral", 8)
                            .Case("gemma", 16)
                            .Case("gemma2", 4)
                            .Case("qwen2", 32)
                            .Default(config.heads);
    config.kvHeads = kvHeads->value_or(kvDefault);
    if (!*kvHeads && !gpt2)
      reader.remarkDefault(
          "num_key_value_heads",
          kvDefault == config.heads
              ? "num_attention_heads = " + Twine(config.heads)
              : Twine(kvDefault),
          kvDefault == config.heads
              ? Twine("Hugging Face's default: multi-head attention")
              : "Hugging Face's default for " + Twine(modelType));

    auto headDim = reader.optionalSize({"head_dim"});
    if (failed(headDim))
      return failure();
    config.headDim = *headDim;
    if (!config.headDim && family->headDimDefault) {
      config.headDim = family->headDimDefault;
      reader.remarkDefault("head_dim", Twine(family->headDimDefault),
                           "Hugging Face's default for " + family->name);
    }
    if (!config.headDim && config.hidden % config.heads != 0) {
      reader.error(hiddenKey)
          << "key '" << hiddenKey << "' = " << config.hidden
          << " is not divisible by key '" << headsKey << "' = " << config.heads;
      return failure();
    }
    if (config.heads % config.kvHeads != 0) {
      reader.error("num_key_value_heads")
          << "key '" << headsKey << "' = " << config.heads
          << " is not divisible by key 'num_key_value_heads' = "
          << config.kvHeads;
      return failure();
    }
    return success();
  }

  LogicalResult readFeedForward() {
    if (gpt2) {
      auto ffn = reader.optionalSize(names("intermediate_size", "n_inner"));
      if (failed(ffn))
        return failure();
      config.ffn = ffn->value_or(4 * config.hidden);
      if (!*ffn)
        reader.remarkDefault("n_inner", "4 * n_embd = " + Twine(config.ffn),
                             "GPT-2's definition of a null n_inner");
    } else {
      auto ffn = reader.requireSize({"intermediate_size"});
      if (failed(ffn))
        return failure();
      config.ffn = *ffn;
    }
    return success();
  }

  /// The activation must be one the family's MLP kind computes.
  LogicalResult checkActivation() {
    StringRef activationKey;
    auto activation =
        reader.optionalString(family->activationKeys, &activationKey);
    if (failed(activation))
      return failure();
    if (!*activation) {
      if (family->activationDefault.empty()) {
        reader.error(activationKey)
            << "missing required key '" << activationKey << "'";
        return failure();
      }
      reader.remarkDefault(activationKey,
                           "\"" + family->activationDefault + "\"",
                           "Hugging Face's default for " + family->name);
      config.exactGelu = family->activationDefault == "gelu";
    } else if (!llvm::is_contained(family->activations, **activation)) {
      reader.error(activationKey)
          << "key '" << activationKey << "' = \"" << **activation
          << "\" is not supported for model_type \"" << modelType
          << "\" (supported: " << llvm::join(family->activations, ", ") << ")";
      return failure();
    } else {
      // transformers' "gelu" is the exact x * Phi(x); the others are the
      // tanh approximation.
      config.exactGelu = **activation == "gelu";
    }
    return success();
  }

  /// Rotary positions (Llama, Gemma): the frequency base; GPT-2 learns a
  /// position table instead.
  LogicalResult readRotary() {
    if (family->learnedPositions)
      return success();
    auto theta = reader.optionalPositive("rope_theta");
    if (failed(theta))
      return failure();
    // transformers 5 saves the base and the scaling inside
    // `rope_parameters`.
    auto nested = reader.optionalPositive("rope_theta", "rope_parameters");
    if (failed(nested))
      return failure();
    if (!*theta)
      *theta = *nested;
    config.ropeTheta = theta->value_or(10000.0);
    if (!*theta)
      reader.remarkDefault("rope_theta", "10000.0",
                           "Hugging Face's default for " + family->name);
    return readRopeScaling();
  }

  /// The rotary frequencies' scaling: transformers 4's `rope_scaling`, or
  /// 5's `rope_parameters` (which holds rope_theta too). "default" is
  /// none; "llama3" (Llama 3.1 and 3.2) is computed; another kind is
  /// recorded as unmodelled, which the runtime refuses to train.
  LogicalResult readRopeScaling() {
    StringRef key =
        reader.has("rope_scaling") ? "rope_scaling" : "rope_parameters";
    if (!reader.has(key))
      return success();
    const llvm::json::Object *scaling = reader.getObject(key);
    if (!scaling) {
      reader.error(key) << "key '" << key << "' must be an object, got "
                        << ConfigReader::formatJSON(*reader.get(key));
      return failure();
    }
    std::optional<StringRef> type = scaling->getString("rope_type");
    if (!type) // transformers before 4.43 named it `type`
      type = scaling->getString("type");
    if (!type || *type == "default")
      return success();
    if (*type != "llama3") {
      unmodelled(key, "rotary positions use the unscaled frequencies of "
                      "rope_theta = " +
                          llvm::formatv("{0:F1}", *config.ropeTheta).str() +
                          ", not rope_type '" + *type + "'");
      return success();
    }
    auto number = [&](StringRef name) -> std::optional<double> {
      std::optional<double> value = scaling->getNumber(name);
      if (!value)
        reader.error(key) << "key '" << key << "." << name
                          << "' must be a number for rope_type 'llama3'";
      return value;
    };
    std::optional<double> factor = number("factor"),
                          low = number("low_freq_factor"),
                          high = number("high_freq_factor");
    std::optional<int64_t> original =
        scaling->getInteger("original_max_position_embeddings");
    if (!original)
      reader.error(key) << "key '" << key
                        << ".original_max_position_embeddings' must be an "
                           "integer for rope_type 'llama3'";
    if (!factor || !low || !high || !original)
      return failure();
    // The one check of the scaling, the runtime's and the dialect's.
    ::sluice::rt::Rotary rotary{*config.ropeTheta, *factor, *low, *high,
                                *original};
    if (std::string why = rotary.checkScaling(); !why.empty()) {
      reader.error(key) << "key '" << key << "': " << why;
      return failure();
    }
    config.ropeScaling = {*factor, *low, *high, *original};
    return success();
  }

  /// Records what the layers do not compute; warnUnmodelled says it once.
  void unmodelled(StringRef key, const Twine &what) {
    config.unmodelled.push_back((key + ": " + what).str());
    if (!firstUnmodelled)
      firstUnmodelled = reader.loc(key);
  }

  /// One warning for all of it, at the first key: sluice-compile's costs
  /// hold, sluice-run refuses to train the model.
  void warnUnmodelled() {
    if (config.unmodelled.empty())
      return;
    emitWarning(*firstUnmodelled)
        << "not modelled (the costs hold; sluice-run refuses to train this "
           "model): "
        << llvm::join(config.unmodelled, "; ");
  }

  /// Every norm's epsilon: `rms_norm_eps` (default 1e-6 in every rotary
  /// family's config class) or GPT-2's `layer_norm_epsilon` (1e-5).
  LogicalResult readNumerics() {
    StringRef key = gpt2 ? "layer_norm_epsilon" : "rms_norm_eps";
    auto eps = reader.optionalPositive(key);
    if (failed(eps))
      return failure();
    double fallback = gpt2 ? 1e-5 : 1e-6;
    config.normEps = eps->value_or(fallback);
    if (!*eps)
      reader.remarkDefault(key, gpt2 ? "1e-05" : "1e-06",
                           "Hugging Face's default for " + Twine(modelType));
    if (config.normEps >= 1) {
      reader.error(key) << "key '" << key << "' must be below 1, got "
                        << config.normEps;
      return failure();
    }
    return success();
  }

  /// GPT-2 has biases everywhere. Llama's `attention_bias` and `mlp_bias`
  /// add them to the attention and the feed-forward maps: both is a
  /// layer with biases, one alone is not modelled. GPT-2's attention
  /// scaling switches change the scores.
  LogicalResult readBiases() {
    config.bias = family->bias;
    if (gpt2) {
      auto scaled = reader.optionalBool("scale_attn_weights");
      auto byLayer = reader.optionalBool("scale_attn_by_inverse_layer_idx");
      if (failed(scaled) || failed(byLayer))
        return failure();
      if (*scaled && !**scaled)
        unmodelled("scale_attn_weights",
                   "attention scores are divided by sqrt(head_dim)");
      if (*byLayer && **byLayer)
        unmodelled("scale_attn_by_inverse_layer_idx",
                   "attention scores are not divided by the layer number");
      return success();
    }
    // Qwen2Attention builds its query, key and value projections with
    // biases and nothing else with one, whatever the config says.
    if (modelType == "qwen2") {
      config.qkvBias = true;
      auto window = reader.optionalBool("use_sliding_window");
      if (failed(window))
        return failure();
      if (window->value_or(false))
        unmodelled("use_sliding_window",
                   "the layers past max_window_layers attend over "
                   "sliding_window keys only");
      return success();
    }
    auto attention = reader.optionalBool("attention_bias");
    auto mlp = reader.optionalBool("mlp_bias");
    if (failed(attention) || failed(mlp))
      return failure();
    // transformers' Mistral has no biases whatever its config says (its
    // attention and feed-forward maps are built with bias=False): so
    // neither has Sluice's, and the keys are said to be ignored.
    if (modelType == "mistral") {
      for (auto [key, value] : {std::pair{"attention_bias", *attention},
                                std::pair{"mlp_bias", *mlp}})
        if (value.value_or(false))
          reader.remark(key) << "key '" << key
                             << "' is ignored, as transformers' Mistral "
                                "ignores it: its maps have no biases";
      return success();
    }
    bool onAttention = attention->value_or(false);
    bool onMlp = mlp->value_or(false);
    if (onAttention && onMlp)
      config.bias = true;
    else if (onAttention)
      unmodelled("attention_bias", "biases only on the attention's maps");
    else if (onMlp)
      unmodelled("mlp_bias", "biases only on the feed-forward maps");
    return success();
  }

  /// Gemma scales its embeddings by sqrt(hidden_size) (GemmaModel's
  /// `normalizer`); its norms' gain 1 + w is the weights' layout
  /// (sluice-run --load-hf adds the 1). Gemma-2 adds sandwich norms,
  /// soft-capping and its own attention scale (docs/import.md).
  LogicalResult readGemma() {
    if (family != &kGemma)
      return success();
    config.embeddingScale = std::sqrt(double(config.hidden));
    if (modelType != "gemma2")
      return success();
    config.postNorms = true;
    // Gemma2Attention: scores * query_pre_attn_scalar^-0.5 (whatever
    // head_dim is), then capped by attn_logit_softcapping (its eager
    // attention: transformers' SDPA path leaves the cap out).
    auto scalar = reader.optionalPositive("query_pre_attn_scalar");
    if (failed(scalar))
      return failure();
    config.attentionScale = std::pow(scalar->value_or(224.0), -0.5);
    if (!*scalar)
      reader.remarkDefault("query_pre_attn_scalar", "224",
                           "Hugging Face's default for gemma2");
    // Each cap: the config's, Gemma2Config's default when absent, none
    // when null.
    for (auto [key, fallback, into] :
         {std::tuple{"attn_logit_softcapping", 50.0, &config.attentionSoftcap},
          std::tuple{"final_logit_softcapping", 30.0, &config.finalSoftcap}}) {
      const llvm::json::Value *value = reader.get(key);
      if (value && value->kind() == llvm::json::Value::Null)
        continue;
      auto softcap = reader.optionalPositive(key);
      if (failed(softcap))
        return failure();
      *into = softcap->value_or(fallback);
      if (!*softcap)
        reader.remarkDefault(key, llvm::formatv("{0:F1}", fallback).str(),
                             "Hugging Face's default for gemma2");
    }
    return success();
  }

  /// transformers' Llama, Mistral and Gemma models look tokens up with
  /// nn.Embedding(padding_idx=pad_token_id): that row gets no gradient
  /// from the lookup. Their configs default it to none (Llama, Mistral)
  /// or 0 (Gemma, Gemma-2); GPT-2 has no padding index.
  LogicalResult readPadding() {
    if (family == &kGpt2)
      return success();
    const llvm::json::Value *value = reader.get("pad_token_id");
    if (value && value->kind() == llvm::json::Value::Null)
      return success();
    if (!value) {
      if (family == &kGemma)
        config.paddingToken = 0;
      return success();
    }
    std::optional<int64_t> pad = value->getAsInteger();
    if (!pad || *pad < 0 || *pad >= config.vocab) {
      reader.error("pad_token_id")
          << "key 'pad_token_id' must be a token below vocab_size = "
          << config.vocab << ", got " << ConfigReader::formatJSON(*value);
      return failure();
    }
    config.paddingToken = *pad;
    return success();
  }

  /// Mistral's and Gemma-2's attention window (each layer's `window`).
  LogicalResult readSlidingWindow() {
    if (modelType != "mistral" && modelType != "gemma2")
      return success();
    const llvm::json::Value *value = reader.get("sliding_window");
    if (value && value->kind() == llvm::json::Value::Null)
      return success(); // no window
    auto window = reader.optionalSize({"sliding_window"});
    if (failed(window))
      return failure();
    config.slidingWindow = window->value_or(4096);
    config.evenLayersWindowed = modelType == "gemma2";
    if (!*window)
      reader.remarkDefault("sliding_window", "4096",
                           "Hugging Face's default for " + Twine(modelType));
    return success();
  }

  LogicalResult readTied() {
    auto tied = reader.optionalBool("tie_word_embeddings");
    if (failed(tied))
      return failure();
    config.tied = tied->value_or(family->tieDefault);
    if (!*tied)
      reader.remarkDefault("tie_word_embeddings",
                           family->tieDefault ? "true" : "false",
                           "Hugging Face's default for " + family->name);
    return success();
  }

  LogicalResult readDType() {
    auto dtypeName = reader.optionalString({"torch_dtype", "dtype"});
    if (failed(dtypeName))
      return failure();
    Builder builder(context);
    if (!*dtypeName) {
      config.dtype = builder.getBF16Type();
      reader.remarkDefault("torch_dtype", "\"bfloat16\"",
                           "mixed-precision training");
    } else {
      config.dtype = llvm::StringSwitch<Type>(**dtypeName)
                         .Case("bfloat16", builder.getBF16Type())
                         .Case("float16", builder.getF16Type())
                         .Case("float32", builder.getF32Type())
                         .Default(Type());
      if (!config.dtype) {
        reader.error("torch_dtype")
            << "key 'torch_dtype' = \"" << **dtypeName
            << "\" is not supported (supported: bfloat16, float16, float32)";
        return failure();
      }
    }
    return success();
  }

  const ConfigReader &reader;
  StringRef filename;
  MLIRContext *context;
  ImportedConfig config;
  const Family *family = nullptr;
  std::string modelType;
  bool gpt2 = false;
  std::optional<Location> firstUnmodelled;
  /// The keys the sizes came from (GPT-2 spells them its own way).
  StringRef hiddenKey, headsKey;
};

FailureOr<ImportedConfig> readConfig(const ConfigReader &reader,
                                     StringRef filename, MLIRContext *context) {
  return ConfigImporter(reader, filename, context).run();
}

} // namespace

OwningOpRef<ModuleOp> mlir::sluice::importHFConfig(StringRef json,
                                                   StringRef filename,
                                                   MLIRContext *context) {
  context->loadDialect<SluiceDialect>();
  Location fileLoc = FileLineColLoc::get(context, filename, 1, 1);

  std::string deep;
  if (!::sluice::checkJsonDepth(json.str(), deep)) {
    emitError(fileLoc) << "invalid JSON: the config " << deep;
    return nullptr;
  }
  llvm::Expected<llvm::json::Value> parsed = llvm::json::parse(json);
  if (!parsed) {
    // llvm::json reports "[line:col, byte=N]: message", its column counted
    // after consuming the offending character: that is the character's
    // 1-based column, the convention of diagnostics.
    std::string message = llvm::toString(parsed.takeError());
    unsigned line = 1, column = 1;
    StringRef rest = message;
    if (rest.consume_front("[")) {
      rest.consumeInteger(10, line);
      rest.consume_front(":");
      rest.consumeInteger(10, column);
      rest = rest.drop_until([](char c) { return c == ']'; });
      rest.consume_front("]: ");
    }
    emitError(FileLineColLoc::get(context, filename, line, column))
        << "invalid JSON: " << rest;
    return nullptr;
  }
  const llvm::json::Object *object = parsed->getAsObject();
  if (!object) {
    emitError(fileLoc) << "config must be a JSON object, got "
                       << ConfigReader::formatJSON(*parsed);
    return nullptr;
  }

  ConfigReader reader(*object, json, filename, context);
  FailureOr<ImportedConfig> config = readConfig(reader, filename, context);
  if (failed(config))
    return nullptr;

  const Family &family = *config->family;
  OpBuilder builder(context);
  OwningOpRef<ModuleOp> module = ModuleOp::create(fileLoc);
  builder.setInsertionPointToEnd(module->getBody());
  auto size = [&](int64_t value) { return builder.getI64IntegerAttr(value); };
  auto model = ModelOp::create(builder, fileLoc, config->name,
                               /*seq_len=*/config->positions,
                               /*micro_batch=*/1, config->dtype);
  builder.createBlock(&model.getBody());
  model.setNormEps(config->normEps);
  model.setExactGelu(config->exactGelu);
  if (config->embeddingScale)
    model.setEmbeddingScale(*config->embeddingScale);
  if (config->paddingToken)
    model.setPaddingToken(*config->paddingToken);
  if (config->attentionScale)
    model.setAttentionScale(*config->attentionScale);
  if (config->attentionSoftcap)
    model.setAttentionSoftcap(*config->attentionSoftcap);
  if (config->finalSoftcap)
    model.setFinalSoftcap(*config->finalSoftcap);
  if (!config->unmodelled.empty()) {
    SmallVector<StringRef> what(config->unmodelled.begin(),
                                config->unmodelled.end());
    model.setUnmodelledAttr(builder.getStrArrayAttr(what));
  }

  // Name each op after the Hugging Face module it stands for, so that a
  // later diagnostic points at something the user recognises.
  auto named = [&](const Twine &name) {
    return NameLoc::get(builder.getStringAttr(name), fileLoc);
  };
  auto activation = RankedTensorType::get(
      {int64_t(1), config->positions, config->hidden}, config->dtype);
  Value x = EmbeddingOp::create(
      builder, named("embed_tokens"), activation, size(config->vocab),
      family.learnedPositions ? size(config->positions) : IntegerAttr(),
      /*shards=*/IntegerAttr());
  // Mistral's window is every layer's; Gemma-2's its even layers' (the
  // odd ones attend globally), as transformers builds them.
  auto window = [&](int64_t layer) {
    bool windowed = config->slidingWindow &&
                    (!config->evenLayersWindowed || layer % 2 == 0);
    return windowed ? size(*config->slidingWindow) : IntegerAttr();
  };
  for (int64_t i = 0; i < config->layers; ++i)
    x = TransformerLayerOp::create(
        builder, named("layers." + Twine(i)), activation, x,
        size(config->heads), size(config->kvHeads),
        config->headDim ? size(*config->headDim) : IntegerAttr(),
        size(config->ffn), NormKindAttr::get(context, family.norm),
        MlpKindAttr::get(context, family.mlp),
        config->bias ? builder.getUnitAttr() : UnitAttr(),
        config->qkvBias ? builder.getUnitAttr() : UnitAttr(),
        config->ropeTheta ? builder.getF64FloatAttr(*config->ropeTheta)
                          : FloatAttr(),
        config->ropeScaling
            ? RopeLlama3Attr::get(context,
                                  APFloat(config->ropeScaling->factor),
                                  APFloat(config->ropeScaling->low),
                                  APFloat(config->ropeScaling->high),
                                  config->ropeScaling->original)
            : RopeLlama3Attr(),
        config->postNorms ? builder.getUnitAttr() : UnitAttr(), window(i),
        /*shards=*/IntegerAttr());
  Value loss = OutputLayerOp::create(
      builder, named("lm_head"),
      RankedTensorType::get({}, builder.getF32Type()), x, size(config->vocab),
      NormKindAttr::get(context, family.norm),
      config->tied ? builder.getUnitAttr() : UnitAttr(),
      /*shards=*/IntegerAttr());
  ReturnOp::create(builder, fileLoc, loss);

  if (failed(verify(*module)))
    return nullptr;
  return module;
}
