//===- Weights.cpp - Sluice's parameters under a family's names -----------===//
//
// The naming engine: each Sluice parameter (runtime/Parameters.cpp's names)
// as the pieces of Hugging Face tensors it is made of, under a family's
// WeightNames.
//
//===----------------------------------------------------------------------===//

#include "Common.h"

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
  n.norm1 = "input_layernorm";
  n.norm2 = "post_attention_layernorm";
  n.q = "self_attn.q_proj";
  n.k = "self_attn.k_proj";
  n.v = "self_attn.v_proj";
  n.attnOut = "self_attn.o_proj";
  n.gate = "mlp.gate_proj";
  n.up = "mlp.up_proj";
  n.down = "mlp.down_proj";
  return n;
}

std::string getLayerTensor(const WeightNames &names, const std::string &prefix,
                           int64_t index, const std::string &tensor) {
  return prefix + names.layers + std::to_string(index) + "." + tensor;
}

namespace {

/// Parameter `field` ("attn.qkv.weight") of transformer layer `index`.
bool getLayerSource(const WeightNames &names, const std::string &prefix,
                    const ModelConfig &model, const LayerConfig &l,
                    int64_t index, const std::string &field, Source &src) {
  int64_t h = model.hidden, hd = l.heads * l.headDim,
          kv = l.kvHeads * l.headDim;
  bool weight =
      field.size() > 7 && field.compare(field.size() - 7, 7, ".weight") == 0;
  std::string kind = field.substr(0, field.rfind('.'));
  std::string suffix = weight ? ".weight" : ".bias";
  std::string at = prefix + names.layers + std::to_string(index) + ".";
  // A linear map [in, out]: nn.Linear stores [out, in], GPT-2's Conv1D
  // [in, out]; a bias is a vector of `out`.
  auto linear = [&](int64_t in,
                    std::vector<std::pair<std::string, int64_t>> parts) {
    src.rows = weight ? in : 1;
    src.columns = 0;
    src.pieces.clear();
    for (auto &[tensor, width] : parts) {
      src.pieces.push_back({at + tensor + suffix, src.columns, width,
                            weight && names.linearTransposed});
      src.columns += width;
    }
    return true;
  };
  const std::string *norm = kind == "norm1"            ? &names.norm1
                            : kind == "norm2"          ? &names.norm2
                            : kind == "post_attn_norm" ? &names.postAttnNorm
                            : kind == "post_mlp_norm"  ? &names.postMlpNorm
                                                       : nullptr;
  if (norm && !norm->empty()) {
    src.rows = 1;
    src.columns = h;
    src.pieces = {{at + *norm + suffix, 0, h, false}};
    src.offset = names.normOffset && weight ? 1.0f : 0.0f;
    return true;
  }
  // Qwen3's query and key norms: one gain of head_dim each, shared by the
  // heads.
  const std::string *headNorm = kind == "attn.q_norm"   ? &names.qNorm
                                : kind == "attn.k_norm" ? &names.kNorm
                                                        : nullptr;
  if (headNorm && !headNorm->empty()) {
    src.rows = 1;
    src.columns = l.headDim;
    src.pieces = {{at + *headNorm + suffix, 0, l.headDim, false}};
    return true;
  }
  if (kind == "attn.qkv")
    return names.qkv.empty()
               ? linear(h, {{names.q, hd}, {names.k, kv}, {names.v, kv}})
               : linear(h, {{names.qkv, hd + 2 * kv}});
  if (kind == "attn.out")
    return linear(hd, {{names.attnOut, h}});
  if (kind == "mlp.gate" && !names.gate.empty())
    return linear(h, {{names.gate, l.ffn}});
  if (kind == "mlp.up")
    return linear(h, {{names.up, l.ffn}});
  if (kind == "mlp.down")
    return linear(l.ffn, {{names.down, h}});
  return false;
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
