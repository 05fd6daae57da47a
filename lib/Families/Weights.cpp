//===- Weights.cpp - Sluice's parameters under a family's names -----------===//
//
// The naming engine: each Sluice parameter (runtime/model/Parameters.cpp's names)
// as the pieces of Hugging Face tensors it is made of, under a family's
// WeightNames.
//
//===----------------------------------------------------------------------===//

#include "Common.h"

#include "sluice/Blocks/Parameters.h"

#include <algorithm>

namespace sluice::families {

const LayerConfig *getTransformerLayer(const ModelConfig &model,
                                       int64_t index) {
  int64_t seen = 0;
  for (const LayerConfig &l : model.layers)
    if (l.kind == rt::LayerKind::Transformer && seen++ == index)
      return &l;
  return nullptr;
}

int64_t countTransformerLayers(const ModelConfig &model) {
  return std::count_if(model.layers.begin(), model.layers.end(),
                       [](const LayerConfig &l) {
                         return l.kind == rt::LayerKind::Transformer;
                       });
}

WeightNames getLlamaWeightNames() {
  WeightNames n;
  n.prefix = "model.";
  n.tokens = "embed_tokens";
  n.finalNorm = "norm";
  n.layers = "layers.";
  n.modules = {{"norm1", "input_layernorm"},
               {"norm2", "post_attention_layernorm"},
               {"attn.out", "self_attn.o_proj"},
               {"mlp.gate", "mlp.gate_proj"},
               {"mlp.up", "mlp.up_proj"},
               {"mlp.down", "mlp.down_proj"}};
  n.q = "self_attn.q_proj";
  n.k = "self_attn.k_proj";
  n.v = "self_attn.v_proj";
  return n;
}

void addQkNormNames(WeightNames &names) {
  names.modules["attn.q_norm"] = "self_attn.q_norm";
  names.modules["attn.k_norm"] = "self_attn.k_norm";
}

WeightNames getQwenExpertWeightNames(bool qkNorms) {
  WeightNames n = getLlamaWeightNames();
  addExpertNames(n, "mlp.gate", "mlp.experts.{}.",
                 {"gate_proj", "up_proj", "down_proj"});
  if (qkNorms)
    addQkNormNames(n);
  return n;
}

void addExpertNames(WeightNames &names, const std::string &router,
                    const std::string &experts,
                    const std::array<const char *, 3> &maps) {
  names.modules["mlp.router"] = router;
  for (size_t i = 0; i < 3; ++i)
    names.modules[std::string("mlp.experts.") + kExpertMaps[i]] =
        experts + maps[i];
}

void addSharedExpertNames(WeightNames &names, const std::string &module) {
  for (const char *map : kExpertMaps)
    names.modules[std::string("mlp.shared.") + map] =
        module + map + "_proj";
}

void addPostNormNames(WeightNames &names) {
  names.modules["post_attn_norm"] = "post_attention_layernorm";
  names.modules["post_mlp_norm"] = "post_feedforward_layernorm";
}

std::string getLayerTensor(const WeightNames &names, const std::string &prefix,
                           int64_t index, const std::string &tensor) {
  return prefix + names.layers + std::to_string(index) + "." + tensor;
}

namespace {

/// Parameter `field` ("attn.qkv.weight") of transformer layer `index`:
/// the QKV projection from the family's q, k and v maps side by side, and
/// every other parameter from the module `names` maps it to, in the shape
/// its declaration gives (a vector; a linear map [in, out], which
/// nn.Linear stores transposed). Gains are stored as w for 1 + w where the
/// family says so.
bool getLayerSource(const WeightNames &names, const std::string &prefix,
                    const ModelConfig &model, const LayerConfig &l,
                    int64_t index, const std::string &field, Source &src) {
  bool weight =
      field.size() > 7 && field.compare(field.size() - 7, 7, ".weight") == 0;
  std::string module = field.substr(0, field.rfind('.'));
  std::string suffix = weight ? ".weight" : ".bias";
  std::string at = prefix + names.layers + std::to_string(index) + ".";
  const rt::ParameterSpec *spec = nullptr;
  std::vector<rt::ParameterSpec> specs =
      rt::getTransformerParameters(model, l, "");
  for (const rt::ParameterSpec &s : specs)
    if (s.name == field)
      spec = &s;
  if (!spec)
    return false;
  int64_t in = spec->shape.size() == 2 ? spec->shape[0] : 1;
  int64_t out = spec->shape.back();
  src.rows = in;
  src.columns = out;
  bool transposed = spec->shape.size() == 2 && names.linearTransposed;
  if (module == "attn.qkv" && !names.q.empty()) {
    int64_t hd = l.heads * l.headDim, kv = l.kvHeads * l.headDim,
            values = l.kvHeads * l.getValueDim();
    src.pieces = {{at + names.q + suffix, 0, hd, transposed},
                  {at + names.k + suffix, hd, kv, transposed},
                  {at + names.v + suffix, hd + kv, values, transposed}};
    return true;
  }
  if (auto named = names.tensors.find(field); named != names.tensors.end()) {
    src.pieces = {{at + named->second, 0, out, transposed}};
    return true;
  }
  auto it = names.modules.find(module);
  if (it == names.modules.end())
    return false;
  // A mixture of experts' stacked tensor: one row block per expert, from
  // the module its name pattern gives with the expert's index for "{}".
  if (size_t slot = it->second.find("{}"); slot != std::string::npos) {
    int64_t block = in / std::max<int64_t>(1, l.experts);
    for (int64_t e = 0; e < l.experts; ++e) {
      std::string name = it->second;
      name.replace(slot, 2, std::to_string(e));
      src.pieces.push_back(
          {at + name + suffix, 0, out, transposed, e * block, block});
    }
    return true;
  }
  src.pieces = {{at + it->second + suffix, 0, out, transposed}};
  if (names.normOffset && spec->init == rt::InitKind::Ones)
    src.offset = 1.0f;
  return true;
}

} // namespace

bool getSource(const WeightNames &names, const std::string &prefix,
               const ModelConfig &model, const std::string &name, Source &src,
               std::string &why) {
  src = Source();
  int64_t h = model.hidden;
  // One Hugging Face tensor, [rows, hidden] (a vector: one row).
  auto whole = [&](const std::string &tensor, int64_t rows) {
    src.rows = rows;
    src.columns = h;
    src.pieces = {{tensor, 0, h, false}};
    return true;
  };
  if (name == "embed.tokens")
    return whole(prefix + names.tokens + ".weight", model.layers.front().vocab);
  if (name == "embed.positions" && !names.positions.empty())
    return whole(prefix + names.positions + ".weight",
                 model.layers.front().positions);
  if (name == "lm_head.weight")
    return whole("lm_head.weight", model.layers.back().vocab);
  if (name.rfind("final_norm.", 0) == 0) {
    src.offset = names.normOffset ? 1.0f : 0.0f;
    return whole(prefix + names.finalNorm + "." + name.substr(11), 1);
  }
  int64_t index = -1;
  size_t dot = std::string::npos;
  if (name.rfind("layers.", 0) == 0) {
    dot = name.find('.', 7);
    index = std::stoll(name.substr(7, dot - 7));
  }
  const LayerConfig *layer =
      index >= 0 ? getTransformerLayer(model, index) : nullptr;
  if (!layer || !getLayerSource(names, prefix, model, *layer, index,
                                name.substr(dot + 1), src)) {
    why = "parameter " + name + " has no Hugging Face counterpart";
    return false;
  }
  return true;
}

} // namespace sluice::families
