//===- Parameters.cpp - A model's parameters, declared --------------------===//

#include "sluice/Blocks/Parameters.h"

#include "sluice/Blocks/Feature.h"

#include <algorithm>
#include <set>

namespace sluice::rt {

namespace {
int64_t total(const std::vector<IndexRange> &ranges) {
  int64_t n = 0;
  for (const IndexRange &r : ranges)
    n += r.count;
  return n;
}

} // namespace

std::string getLayerPrefix(const ModelConfig &model, int index) {
  if (model.layers[index].kind != LayerKind::Transformer)
    return "";
  int transformer = 0;
  for (int i = 0; i < index; ++i)
    transformer += model.layers[i].kind == LayerKind::Transformer;
  return "layers." + std::to_string(transformer) + ".";
}

ParameterSpec makeParameter(const std::string &name,
                            const std::vector<int64_t> &whole, InitKind init,
                            TensorShard shard, Split split,
                            const std::vector<IndexRange> &parts) {
  ParameterSpec spec{name, whole, init};
  if (shard.count <= 1 || split == Split::Whole)
    return spec;
  spec.whole = whole;
  spec.sliceName =
      "tp" + std::to_string(shard.index) + "of" + std::to_string(shard.count);
  // A vector's elements are its rows.
  if (split == Split::Columns && whole.size() == 2) {
    spec.shape[1] = total(parts);
    spec.columns = parts;
  } else {
    spec.shape[0] = total(parts);
    spec.rows = parts;
  }
  return spec;
}

CoreSplit getCoreSplit(const LayerConfig &layer, TensorShard shard) {
  int64_t d = layer.headDim, dv = layer.getValueDim(), hd = layer.heads * d,
          kv = layer.kvHeads * d;
  int64_t t = shard.index, n = shard.count;
  int64_t queries = layer.heads / n * d, context = layer.heads / n * dv;
  int64_t kvHeads = getShardKvHeads(layer, int(n));
  int64_t firstKv =
      layer.kvHeads >= n ? t * kvHeads : t / (n / layer.kvHeads);
  int64_t f = layer.ffn / n;
  CoreSplit split;
  split.queries = {{t * queries, queries}};
  split.keys = {{hd + firstKv * d, kvHeads * d}};
  split.qkv = {split.queries[0], split.keys[0],
               {hd + kv + firstKv * dv, kvHeads * dv}};
  split.context = {{t * context, context}};
  split.ffn = {{t * f, f}};
  return split;
}

std::vector<ParameterSpec> getTransformerParameters(const ModelConfig &model,
                                                    const LayerConfig &layer,
                                                    const std::string &prefix,
                                                    TensorShard shard) {
  blocks::LayerShape shape =
      blocks::getLayerShape(model, layer, prefix, shard);
  int64_t h = model.hidden, hd = layer.heads * layer.headDim,
          kv = layer.kvHeads * layer.headDim,
          values = layer.kvHeads * layer.getValueDim(),
          context = layer.heads * layer.getValueDim();
  std::vector<ParameterSpec> specs;
  // The core's linear maps (weights [in, out]) between the slots'
  // features, in the order F reaches them.
  auto linear = [&](const char *name, int64_t in, int64_t out, Split split,
                    const std::vector<IndexRange> &parts) {
    specs.push_back(makeParameter(prefix + name, {in, out}, InitKind::Normal,
                                  shard, split, parts));
    specs.back().matmul = true;
  };
  auto features = [&](blocks::Slot slot) {
    for (const blocks::Feature *f : blocks::getEnabledFeatures(layer, slot))
      f->addParameters(slot, shape, specs);
  };
  features(blocks::Slot::AttentionInput);
  if (blocks::hasCoreProjection(layer))
    linear("attn.qkv.weight", h, hd + kv + values, Split::Columns,
           shape.split.qkv);
  else
    features(blocks::Slot::QueryKeyValue);
  features(blocks::Slot::Projections);
  linear("attn.out.weight", context, h, Split::Rows, shape.split.context);
  features(blocks::Slot::AttentionOutput);
  features(blocks::Slot::FeedForwardInput);
  if (blocks::hasCoreFeedForward(layer)) {
    if (layer.isGated())
      linear("mlp.gate.weight", h, layer.ffn, Split::Columns, shape.split.ffn);
    linear("mlp.up.weight", h, layer.ffn, Split::Columns, shape.split.ffn);
    features(blocks::Slot::FeedForwardHidden);
    linear("mlp.down.weight", layer.ffn, h, Split::Rows, shape.split.ffn);
  } else {
    features(blocks::Slot::FeedForward);
  }
  features(blocks::Slot::FeedForwardOutput);
  return specs;
}

std::vector<ParameterSpec> getLayerParameters(const ModelConfig &model,
                                              int index, TensorShard shard) {
  const LayerConfig &layer = model.layers[index];
  int64_t h = model.hidden;
  std::vector<ParameterSpec> specs;
  // The final norm (the output layer's): summed over the tensor-parallel
  // group under sequence parallelism, as the blocks' norms.
  auto norm = [&](const std::string &name) {
    specs.push_back({name + ".weight", {h}, InitKind::Ones});
    specs.back().reduce = Reduce::Tokens;
    if (!layer.isRms()) {
      specs.push_back({name + ".bias", {h}, InitKind::Zeros});
      specs.back().reduce = Reduce::Tokens;
    }
  };
  // A vocabulary layer's table: whole, or the shard's rows of it
  // (vocabulary-parallel; a tied table alike at both ends).
  auto table = [&](const std::string &name) {
    if (!splitsVocabulary(layer, shard.count)) {
      specs.push_back({name, {layer.vocab, h}, InitKind::Normal});
      return;
    }
    auto [first, count] =
        getShardVocabRows(layer.vocab, shard.index, shard.count);
    specs.push_back(makeParameter(name, {layer.vocab, h}, InitKind::Normal,
                                  shard, Split::Rows, {{first, count}}));
  };
  switch (layer.kind) {
  case LayerKind::Embedding:
    if (!layer.sharded)
      table("embed.tokens");
    if (layer.positions > 0)
      specs.push_back(
          {"embed.positions", {layer.positions, h}, InitKind::Normal});
    break;
  case LayerKind::Transformer:
    return getTransformerParameters(model, layer, getLayerPrefix(model, index),
                                    shard);
  case LayerKind::Output:
    norm("final_norm");
    if (!layer.sharded)
      table(layer.tied ? "embed.tokens" : "lm_head.weight");
    break;
  }
  return specs;
}

std::vector<TensorRun> getRuns(const ParameterSpec &spec) {
  int64_t rowSize = spec.getRowSize();
  if (!spec.isSlice())
    return {{0, spec.firstRow * rowSize, spec.getValidRows() * rowSize}};
  std::vector<IndexRange> rows = spec.rows;
  if (rows.empty())
    rows.push_back({0, spec.whole[0]});
  int64_t wholeRow = 1;
  for (size_t i = 1; i < spec.whole.size(); ++i)
    wholeRow *= spec.whole[i];
  std::vector<TensorRun> runs;
  int64_t local = 0;
  for (const IndexRange &r : rows) {
    if (spec.columns.empty()) {
      runs.push_back({local, r.first * wholeRow, r.count * rowSize});
      local += r.count * rowSize;
      continue;
    }
    for (int64_t i = 0; i < r.count; ++i)
      for (const IndexRange &c : spec.columns) {
        runs.push_back({local, (r.first + i) * wholeRow + c.first, c.count});
        local += c.count;
      }
  }
  return runs;
}

int64_t getWholeElements(const ParameterSpec &spec) {
  if (spec.isShard())
    return -1;
  int64_t n = 1;
  for (int64_t d : spec.isSlice() ? spec.whole : spec.shape)
    n *= d;
  return n;
}

ParameterSpec getTableShard(const std::string &name, int64_t vocab,
                            int64_t paddedVocab, int64_t hidden, int device,
                            int devices, TensorShard shard) {
  int64_t rows = paddedVocab / devices, first = int64_t(device) * rows;
  // A tensor-parallel shard's part of the device's rows: the last parts
  // may hold fewer real rows (or none); the rest is padding, as is the
  // device's.
  int64_t part = (rows + shard.count - 1) / shard.count;
  int64_t begin = std::min(rows, int64_t(shard.index) * part);
  ParameterSpec spec{name, {part, hidden}, InitKind::Normal};
  spec.firstRow = first + begin;
  spec.validRows = std::max<int64_t>(
      0, std::min({part, rows - begin, vocab - spec.firstRow}));
  return spec;
}

ModelConfig getWholeModel(const ModelConfig &model) {
  ModelConfig whole = model;
  whole.sequenceShards = 1;
  whole.tensorShards = 1;
  whole.expertShards = 1;
  whole.expertCapacity = 0;
  for (LayerConfig &l : whole.layers) {
    l.sharded = false;
    l.vocabShards = 1;
  }
  return whole;
}

std::vector<ParameterSpec> getModelParameters(const ModelConfig &model) {
  std::vector<ParameterSpec> all;
  std::set<std::string> seen;
  for (size_t i = 0; i < model.layers.size(); ++i)
    for (const ParameterSpec &spec : getLayerParameters(model, int(i)))
      if (seen.insert(spec.name).second)
        all.push_back(spec);
  return all;
}

} // namespace sluice::rt
