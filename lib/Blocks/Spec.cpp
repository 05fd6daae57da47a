//===- Spec.cpp - A layer's spec as plans hold it, and its rules ----------===//
//
// Each BlockFields.def row through its TYPE's codec: how the value is
// written, read and checked. The plan writer (lib/Target) and the plan
// reader (runtime/Plan.cpp) both go through writeLayer/readLayer, and the
// dialect's verifier and the plan reader through checkLayer.
//
//===----------------------------------------------------------------------===//

#include "sluice/Blocks/Spec.h"

#include "sluice/Blocks/Feature.h"
#include "sluice/PlanFormat/Format.h"

#include "sluice/PlanFormat/Json.h"
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

namespace sluice::blocks {

using nlohmann::json;
using nlohmann::ordered_json;
namespace field = rt::field;

namespace {

enum Presence { Required, Written, Optional };

/// A TYPE's plan form. read() returns "" or why the value is not one.
template <class Tag> struct Codec;

std::string quoted(const char *key) { return std::string("'") + key + "'"; }

std::string joinNames(const std::vector<std::string> &names) {
  std::string list;
  for (const std::string &name : names)
    list += (list.empty() ? "" : ", ") + name;
  return list;
}

/// An integer in [min, max]; floats and integers past int64_t's range are
/// refused before any conversion (found by sluice-fuzz-plan).
std::string readInteger(const json &value, const char *key, int64_t min,
                        int64_t max, int64_t &out) {
  if (!value.is_number_integer() ||
      (value.is_number_unsigned() &&
       value.get<uint64_t>() > uint64_t(INT64_MAX)))
    return quoted(key) + " must be an integer, got " + value.dump();
  int64_t v = value.get<int64_t>();
  if (v < min)
    return min == 1 ? quoted(key) + " must be positive, got " +
                          std::to_string(v)
                    : quoted(key) + " must be at least " +
                          std::to_string(min) + ", got " + std::to_string(v);
  if (v > max)
    return quoted(key) + " = " + std::to_string(v) +
           " is larger than any size Sluice takes (" + std::to_string(max) +
           ")";
  out = v;
  return "";
}

/// The largest value a size field takes: the vocabulary's own limit.
int64_t getLimit(const char *key) {
  return std::string(key) == "vocab" ? rt::kMaxVocab : rt::kMaxDimension;
}

template <> struct Codec<field::Size> {
  static void write(ordered_json &j, const char *key, int64_t v) { j[key] = v; }
  static std::string read(const json &j, const char *key, int64_t &v) {
    return readInteger(j, key, 1, getLimit(key), v);
  }
};
template <> struct Codec<field::Count> {
  static void write(ordered_json &j, const char *key, int64_t v) { j[key] = v; }
  static std::string read(const json &j, const char *key, int64_t &v) {
    return readInteger(j, key, 0, getLimit(key), v);
  }
};
template <> struct Codec<field::Flag> {
  static void write(ordered_json &j, const char *key, bool v) { j[key] = v; }
  static std::string read(const json &j, const char *key, bool &v) {
    if (!j.is_boolean())
      return quoted(key) + " must be true or false, got " + j.dump();
    v = j.get<bool>();
    return "";
  }
};
template <> struct Codec<field::Real> {
  static void write(ordered_json &j, const char *key, double v) { j[key] = v; }
  static std::string read(const json &j, const char *key, double &v) {
    if (!j.is_number() || !(j.get<double>() > 0) ||
        !std::isfinite(j.get<double>()))
      return quoted(key) + " must be a positive number, got " + j.dump();
    v = j.get<double>();
    return "";
  }
};

/// An enum spelled by getName and read by `parse`.
template <class Enum, bool (*parse)(const std::string &, Enum &)>
struct EnumCodec {
  static void write(ordered_json &j, const char *key, Enum v) {
    j[key] = rt::getName(v);
  }
  static std::string read(const json &j, const char *key, Enum &v) {
    if (!j.is_string() || !parse(j.get<std::string>(), v))
      return "unknown " + std::string(key) + " " + j.dump();
    return "";
  }
};
template <>
struct Codec<field::Norm> : EnumCodec<rt::NormType, rt::parseNormType> {};
template <>
struct Codec<field::Mlp> : EnumCodec<rt::MlpType, rt::parseMlpType> {};
/// One of the names its key's SLUICE_BLOCK_CHOICES lists.
template <> struct Codec<field::Choice> {
  static void write(ordered_json &j, const char *key, const std::string &v) {
    j[key] = v;
  }
  static std::string read(const json &j, const char *key, std::string &v) {
    const std::vector<std::string> &names = getChoices(key);
    // Plans before a flag became a choice wrote true for its first form.
    if (j.is_boolean() && names.size() >= 2) {
      v = names[j.get<bool>() ? 1 : 0];
      return "";
    }
    if (j.is_string() &&
        std::find(names.begin(), names.end(), j.get<std::string>()) !=
            names.end()) {
      v = j.get<std::string>();
      return "";
    }
    return "unknown " + std::string(key) + " " + j.dump() + " (expected " +
           joinNames(names) + ")";
  }
};

/// Rotary positions: `rope_theta`, and `rope_scaling` in transformers' own
/// form ({"rope_type": "llama3", "factor", "low_freq_factor",
/// "high_freq_factor", "original_max_position_embeddings"} or
/// {"rope_type": "linear", "factor"}). The row's KEY is `rope_theta`.
template <> struct Codec<field::Rotary> {
  static void write(ordered_json &j, const char *, const rt::Rotary &r) {
    if (r.theta > 0)
      j["rope_theta"] = r.theta;
    if (!r.isScaled())
      return;
    ordered_json s = {{"rope_type", r.getScalingName()},
                      {"factor", r.factor}};
    if (r.yarn) {
      s["original_max_position_embeddings"] = r.originalPositions;
      s["beta_fast"] = r.betaFast;
      s["beta_slow"] = r.betaSlow;
      s["attention_factor"] = r.magnitude;
    } else if (!r.linear) {
      s["low_freq_factor"] = r.lowFreqFactor;
      s["high_freq_factor"] = r.highFreqFactor;
      s["original_max_position_embeddings"] = r.originalPositions;
    }
    j["rope_scaling"] = s;
  }
  /// `j` is the whole layer object: the row reads two keys.
  static std::string readLayer(const json &j, rt::Rotary &r) {
    if (j.contains("rope_theta")) {
      const json &theta = j["rope_theta"];
      if (!theta.is_number() || !(theta.get<double>() > 0) ||
          !std::isfinite(theta.get<double>()))
        return "'rope_theta' must be positive, got " + theta.dump();
      r.theta = theta.get<double>();
    }
    if (!j.contains("rope_scaling"))
      return "";
    const json &s = j["rope_scaling"];
    if (!s.is_object())
      return "rope_scaling must be an object, got " + s.dump();
    if (!s.contains("rope_type") || !s["rope_type"].is_string())
      return "rope_scaling has no 'rope_type'";
    std::string type = s["rope_type"].get<std::string>();
    if (type != "llama3" && type != "linear" && type != "yarn")
      return "rope_scaling: 'rope_type' = '" + type +
             "' is not one this runtime computes (llama3, linear, yarn)";
    r.linear = type == "linear";
    r.yarn = type == "yarn";
    auto number = [&](const char *name, double &out) -> std::string {
      if (!s.contains(name) || !s[name].is_number())
        return std::string("rope_scaling: '") + name +
               "' must be a number, got " +
               (s.contains(name) ? s[name].dump() : "nothing");
      out = s[name].get<double>();
      return "";
    };
    if (std::string why = number("factor", r.factor); !why.empty())
      return why;
    if (r.linear)
      return "";
    // llama3's bands or YaRN's ramp and magnitude, then the original
    // context both are measured against.
    using Number = std::pair<const char *, double *>;
    std::vector<Number> numbers =
        r.yarn ? std::vector<Number>{{"beta_fast", &r.betaFast},
                                     {"beta_slow", &r.betaSlow},
                                     {"attention_factor", &r.magnitude}}
               : std::vector<Number>{{"low_freq_factor", &r.lowFreqFactor},
                                     {"high_freq_factor", &r.highFreqFactor}};
    for (auto [name, into] : numbers)
      if (std::string why = number(name, *into); !why.empty())
        return why;
    if (!s.contains("original_max_position_embeddings"))
      return "rope_scaling has no 'original_max_position_embeddings'";
    return readInteger(s["original_max_position_embeddings"],
                       "original_max_position_embeddings", 1,
                       int64_t(1) << 40, r.originalPositions);
  }
};

template <> struct Codec<field::Names> {
  static void write(ordered_json &j, const char *key, const rt::Names &v) {
    j[key] = v;
  }
  static std::string read(const json &j, const char *key, rt::Names &v) {
    if (!j.is_array())
      return quoted(key) + " must be a list of names, got " + j.dump();
    v.clear();
    for (const json &item : j) {
      if (!item.is_string())
        return quoted(key) + " must be a list of names, got " + j.dump();
      v.push_back(item.get<std::string>());
    }
    return "";
  }
};

/// Reads one row of the table from layer object `j`.
template <class Tag, class T>
std::string readRow(const json &j, const char *key, Presence presence,
                    T &value) {
  if constexpr (std::is_same_v<Tag, field::Rotary>) {
    return Codec<Tag>::readLayer(j, value);
  } else {
    if (!j.contains(key))
      return presence == Required ? "has no " + quoted(key) : "";
    return Codec<Tag>::read(j[key], key, value);
  }
}

/// The plan keys of a row.
template <class Tag> std::vector<std::string> keysOf(const char *key) {
  if constexpr (std::is_same_v<Tag, field::Rotary>)
    return {"rope_theta", "rope_scaling"};
  else
    return {key};
}

} // namespace

const std::vector<std::string> &getChoices(const std::string &key) {
  static const std::map<std::string, std::vector<std::string>> choices = {
#define SLUICE_BLOCK_CHOICES(KEY, ...) {KEY, {__VA_ARGS__}},
#include "sluice/PlanFormat/BlockFields.def"
  };
  static const std::vector<std::string> none;
  auto it = choices.find(key);
  return it == choices.end() ? none : it->second;
}

ordered_json writeLayer(const LayerConfig &layer) {
  ordered_json j = ordered_json::object();
  j["kind"] = rt::layerKindName(layer.kind);
  unsigned bit = rt::getKindBit(layer.kind);
#define SLUICE_BLOCK_FIELD(KINDS, TYPE, MEMBER, KEY, DEFAULT, PRESENCE, DOC)  \
  if ((KINDS) & bit) {                                                        \
    using T = field::TYPE::type;                                              \
    if (PRESENCE != Optional || !(layer.MEMBER == T(DEFAULT)))                 \
      Codec<field::TYPE>::write(j, KEY, layer.MEMBER);                        \
  }
  {
    using namespace rt;
#include "sluice/PlanFormat/BlockFields.def"
  }
  return j;
}

std::string readLayer(const json &object, LayerConfig &layer) {
  if (!object.is_object())
    return "must be an object, got " + object.dump();
  unsigned bit = rt::getKindBit(layer.kind);
  std::set<std::string> known = {"kind"};
#define SLUICE_BLOCK_FIELD(KINDS, TYPE, MEMBER, KEY, DEFAULT, PRESENCE, DOC)  \
  if ((KINDS) & bit) {                                                        \
    for (const std::string &k : keysOf<field::TYPE>(KEY))                     \
      known.insert(k);                                                        \
    if (std::string why = readRow<field::TYPE>(object, KEY, PRESENCE,          \
                                               layer.MEMBER);                 \
        !why.empty())                                                         \
      return why;                                                             \
  }
  {
    using namespace rt;
#include "sluice/PlanFormat/BlockFields.def"
  }
  for (const auto &item : object.items())
    if (!known.count(item.key()))
      return "unknown key '" + item.key() + "' for a " +
             rt::layerKindName(layer.kind) + " layer";
  return "";
}

std::string printLayer(const LayerConfig &layer) {
  return writeLayer(layer).dump();
}

std::string parseLayer(const std::string &text, LayerConfig &layer) {
  json j = parseJson(text, /*allowExceptions=*/false);
  if (j.is_discarded() || !j.is_object() || !j.contains("kind") ||
      !j["kind"].is_string())
    return "not a layer's JSON object: " + text;
  std::string kind = j["kind"].get<std::string>();
  for (LayerKind k :
       {LayerKind::Embedding, LayerKind::Transformer, LayerKind::Output})
    if (kind == rt::layerKindName(k)) {
      layer = LayerConfig();
      layer.kind = k;
      return readLayer(j, layer);
    }
  return "unknown layer kind '" + kind + "'";
}

std::vector<std::string> getKeys(LayerKind kind) {
  unsigned bit = rt::getKindBit(kind);
  std::vector<std::string> keys;
#define SLUICE_BLOCK_FIELD(KINDS, TYPE, MEMBER, KEY, DEFAULT, PRESENCE, DOC)  \
  if ((KINDS) & bit)                                                          \
    for (const std::string &k : keysOf<field::TYPE>(KEY))                      \
      keys.push_back(k);
  {
    using namespace rt;
#include "sluice/PlanFormat/BlockFields.def"
  }
  return keys;
}

namespace {
/// A stated field's key; a choice's with its name ("key = name"), since
/// a family may say one form and not another.
template <class T> std::string statedKey(const char *key, const T &) {
  return key;
}
std::string statedKey(const char *key, const std::string &choice) {
  return std::string(key) + " = " + choice;
}
} // namespace

std::vector<std::string> getStatedKeys(const LayerConfig &layer) {
  std::vector<std::string> keys;
  const std::set<std::string> shape = {"heads", "kv_heads", "head_dim",
                                       "ffn",   "norm",     "mlp"};
#define SLUICE_BLOCK_FIELD(KINDS, TYPE, MEMBER, KEY, DEFAULT, PRESENCE, DOC)  \
  if (((KINDS) & rt::kTransformer) && !shape.count(KEY)) {                    \
    using T = field::TYPE::type;                                              \
    if constexpr (std::is_same_v<field::TYPE, field::Rotary>) {               \
      if (layer.rotary.theta > 0)                                             \
        keys.push_back("rope_theta");                                         \
      if (layer.rotary.isScaled())                                            \
        keys.push_back("rope_scaling");                                       \
    } else if (!(layer.MEMBER == T(DEFAULT))) {                                \
      keys.push_back(statedKey(KEY, layer.MEMBER));                           \
    }                                                                         \
  }
  {
    using namespace rt;
#include "sluice/PlanFormat/BlockFields.def"
  }
  return keys;
}

int64_t getHeadDim(const LayerConfig &layer, int64_t hidden) {
  if (layer.headDim > 0 || layer.heads < 1)
    return layer.headDim;
  return hidden / layer.heads;
}

int64_t getValueHeadDim(const LayerConfig &layer, int64_t hidden) {
  return layer.vHeadDim > 0 ? layer.vHeadDim : getHeadDim(layer, hidden);
}

namespace {
/// A size field's value: positive, and at most the limit, so that the
/// cost model's and the runtime's products of sizes cannot overflow (a
/// config's n_inner = 2^62 printed a wrapped parameter count).
std::string checkSize(const char *key, int64_t value, bool stated = true) {
  if (!stated && value == 0)
    return "";
  if (value < 1)
    return quoted(key) + " must be positive, got " + std::to_string(value);
  if (value > getLimit(key))
    return quoted(key) + " = " + std::to_string(value) +
           " is larger than any size Sluice takes (" +
           std::to_string(getLimit(key)) + ")";
  return "";
}

std::string checkTransformer(const LayerConfig &l, int64_t hidden) {
  for (auto [key, value] : {std::pair{"heads", l.heads},
                            std::pair{"kv_heads", l.kvHeads},
                            std::pair{"ffn", l.ffn}})
    if (std::string why = checkSize(key, value); !why.empty())
      return why;
  for (auto [key, value] : {std::pair{"head_dim", l.headDim},
                            std::pair{"v_head_dim", l.vHeadDim}})
    if (std::string why = checkSize(key, value, false); !why.empty())
      return why;
  if (l.headDim == 0 && hidden % l.heads != 0)
    return "hidden size " + std::to_string(hidden) +
           " is not divisible by 'heads' = " + std::to_string(l.heads);
  if (l.heads % l.kvHeads != 0)
    return "'heads' = " + std::to_string(l.heads) +
           " is not divisible by 'kv_heads' = " + std::to_string(l.kvHeads);
  if (std::string why = checkSize("window", l.window, false); !why.empty())
    return why;
  const rt::Rotary &rope = l.rotary;
  if (!(rope.theta >= 0) || !std::isfinite(rope.theta))
    return "'rope_theta' must be positive, got " + std::to_string(rope.theta);
  // (Multi-head latent attention rotates its rope_head_dim part only,
  // which its own rule holds even.)
  if (rope.theta > 0 && l.kvLoraRank == 0 && getHeadDim(l, hidden) % 2 != 0)
    return "rotary positions ('rope_theta') need an even head size, got " +
           std::to_string(getHeadDim(l, hidden));
  if (rope.isScaled() && rope.theta == 0)
    return "'rope_scaling' scales rotary frequencies, but the layer has no "
           "'rope_theta'";
  if (std::string why = rope.checkScaling(); !why.empty())
    return "rope_scaling: " + why;
  if (l.bias && l.qkvBias)
    return "'qkv_bias' with 'bias', which has every bias already";
  for (auto [key, value] : {std::pair{"experts", l.experts},
                            std::pair{"expert_groups", l.expertGroups},
                            std::pair{"top_groups", l.topGroups},
                            std::pair{"kv_lora_rank", l.kvLoraRank},
                            std::pair{"q_lora_rank", l.qLoraRank},
                            std::pair{"rope_head_dim", l.ropeHeadDim}})
    if (std::string why = checkSize(key, value, false); !why.empty())
      return why;
  if (std::string why = checkSize("shared_ffn", l.sharedFfn, false);
      !why.empty())
    return why;
  if (!(l.auxLoss >= 0) || !std::isfinite(l.auxLoss))
    return "'aux_loss' must be a positive number, got " +
           std::to_string(l.auxLoss);
  for (auto [key, value] : {std::pair{"routed_scale", l.routedScale},
                            std::pair{"bias_update", l.biasUpdate}})
    if (!(value >= 0) || !std::isfinite(value))
      return quoted(key) + " must be a positive number, got " +
             std::to_string(value);
  if (l.experts == 0) {
    const char *key = l.topK != 0              ? "top_k"
                      : l.normTopK             ? "norm_top_k"
                      : l.sharedFfn != 0       ? "shared_ffn"
                      : l.auxLoss != 0         ? "aux_loss"
                      : l.router != "softmax"  ? "router"
                      : l.expertGroups != 0    ? "expert_groups"
                      : l.topGroups != 0       ? "top_groups"
                      : l.routedScale != 1.0   ? "routed_scale"
                      : !l.sharedGate          ? "shared_gate"
                      : l.biasUpdate != 0      ? "bias_update"
                                               : nullptr;
    if (key)
      return quoted(key) +
             " belongs to a mixture of experts, but the layer has no "
             "'experts'";
  }
  if (l.kvLoraRank == 0) {
    const char *key = l.qLoraRank != 0    ? "q_lora_rank"
                      : l.ropeHeadDim != 0 ? "rope_head_dim"
                      : l.ropeInterleave   ? "rope_interleave"
                                           : nullptr;
    if (key)
      return quoted(key) +
             " belongs to multi-head latent attention, but the layer has no "
             "'kv_lora_rank'";
  }
  return "";
}
} // namespace

std::string checkLayer(const LayerConfig &layer, int64_t hidden) {
  switch (layer.kind) {
  case LayerKind::Embedding:
    if (std::string why = checkSize("vocab", layer.vocab); !why.empty())
      return why;
    if (layer.positions < 0 || layer.positions > rt::kMaxDimension)
      return checkSize("positions", layer.positions);
    return "";
  case LayerKind::Output:
    return checkSize("vocab", layer.vocab);
  case LayerKind::Transformer:
    break;
  }
  if (std::string why = checkTransformer(layer, hidden); !why.empty())
    return why;
  for (const std::string &name : layer.features)
    if (!lookupFeature(name))
      return "unknown block feature '" + name + "' (registered: " +
             getFeatureNames() + ")";
  for (const Feature *feature : getEnabledFeatures(layer))
    if (std::string why = feature->check(layer, hidden); !why.empty())
      return why;
  // A sublayer's input is made once (a norm, or the residual stream).
  for (Slot slot : {Slot::AttentionInput, Slot::FeedForwardInput}) {
    std::vector<const Feature *> at = getEnabledFeatures(layer, slot);
    if (at.size() > 1)
      return std::string("block features '") + at[0]->getName() + "' and '" +
             at[1]->getName() + "' both make the " +
             (slot == Slot::AttentionInput ? "attention's" : "feed-forward "
                                                             "block's") +
             " input";
  }
  // And the feed-forward block and the QKV projection are each the
  // core's or one feature's.
  for (auto [slot, what] :
       {std::pair{Slot::FeedForward, "the feed-forward block"},
        std::pair{Slot::QueryKeyValue, "the query, key and value projection"}}) {
    std::vector<const Feature *> whole = getEnabledFeatures(layer, slot);
    if (whole.size() > 1)
      return std::string("block features '") + whole[0]->getName() +
             "' and '" + whole[1]->getName() + "' both replace " + what;
  }
  return "";
}

} // namespace sluice::blocks
