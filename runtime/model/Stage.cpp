//===- Stage.cpp - The passes of one pipeline stage -----------------------===//
//
// A stage is a run of layers: the embedding (or its unsharded part), the
// transformer layers (runtime/blocks/TransformerBlock.cpp), the output
// layer (or its final norm). The runner carves every layer's state views
// for a slice and sequences the blocks' F, B and W over them; the
// embedding's and output layer's passes (whole, or split over the
// tensor-parallel shards) are runtime/blocks/VocabularyBlocks.cpp.
//
// Token slicing (TeraPipe, Seq1F1B): B runs a microbatch's slices in
// reverse, so that each slice's key/value gradients are complete (every
// later slice has added into them) when its own B reads them.
//
//===----------------------------------------------------------------------===//

#include "Stage.h"

#include <algorithm>
#include <array>
#include <tuple>

namespace sluice::rt {

namespace {

using block::LayerParams;

/// The core's parameters, by their names within the layer
/// (sluice/Blocks/Parameters.h's names after `layers.N.`; the vocabulary
/// layers' whole); a block feature's bind by name to the feature.
const std::pair<const char *, DevicePtr LayerParams::*> kFields[] = {
    {"embed.tokens", &LayerParams::table},
    {"embed.positions", &LayerParams::positions},
    {"lm_head.weight", &LayerParams::table},
    {"final_norm.weight", &LayerParams::normW},
    {"final_norm.bias", &LayerParams::normB},
    {block::getMapWeightName(block::Map::Qkv), &LayerParams::qkvW},
    {block::getMapWeightName(block::Map::Out), &LayerParams::outW},
    {block::getMapWeightName(block::Map::Gate), &LayerParams::gateW},
    {block::getMapWeightName(block::Map::Up), &LayerParams::upW},
    {block::getMapWeightName(block::Map::Down), &LayerParams::downW},
};

/// `name` without its layer's prefix (`layers.N.`).
std::string getFieldName(const std::string &name) {
  if (name.rfind("layers.", 0) != 0)
    return name;
  return name.substr(name.find('.', 7) + 1);
}

/// Layer `index`'s parameters in `store`, each bound to its block's field
/// or to the feature that declares it.
block::Layer bindLayer(const ModelConfig &model, int index,
                       ParameterStore &store) {
  block::Layer layer;
  layer.config = &model.layers[index];
  for (const ParameterSpec &spec : getLayerParameters(model, index)) {
    std::string field = getFieldName(spec.name);
    for (const auto &[name, member] : kFields)
      if (field == name) {
        layer.w.*member = store.weight(spec.name);
        layer.g.*member = store.grad(spec.name);
      }
  }
  if (layer.config->kind != LayerKind::Transformer)
    return layer;
  layer.coreFeedForward = blocks::hasCoreFeedForward(*layer.config);
  layer.coreProjection = blocks::hasCoreProjection(*layer.config);
  // The plan reader has checked that every enabled feature has a compute
  // part in this runtime.
  blocks::LayerShape shape =
      blocks::getLayerShape(model, *layer.config, "", {});
  for (const blocks::Feature *f : blocks::getEnabledFeatures(*layer.config)) {
    block::BoundFeature bound{f, block::lookupCompute(f->getName()), {}};
    std::vector<ParameterSpec> own;
    for (int slot = 0; slot < blocks::kSlots; ++slot)
      if (f->getSlots() & blocks::getSlotBit(blocks::Slot(slot)))
        f->addParameters(blocks::Slot(slot), shape, own);
    std::string prefix = getLayerPrefix(model, index);
    for (const ParameterSpec &spec : own)
      bound.params.push_back({spec.name, store.weight(prefix + spec.name),
                              store.grad(prefix + spec.name),
                              store.master(prefix + spec.name)});
    layer.features.push_back(std::move(bound));
  }
  return layer;
}

} // namespace

StageRunner::StageRunner(const ModelConfig &model, std::vector<int> layers,
                         ParameterStore &store, Kernels &kernels,
                         const Precision &precision, Recompute recompute)
    : model(model), layers(std::move(layers)), kernels(kernels),
      precision(precision), recompute(recompute), seams(model),
      transformer(model, kernels, precision, seams),
      embeddingBlock(model, kernels, seams), outputBlock(model, kernels, seams) {
  for (int index : this->layers)
    resolved.push_back(bindLayer(model, index, store));
  views.resize(resolved.size());
  balance = getBalanceLoss(model);
}

int64_t StageRunner::getFp8StateFloats() const {
  if (!precision.fp8Gemms)
    return 0;
  int64_t transformers = 0;
  for (const Layer &l : resolved)
    transformers += l.config->kind == LayerKind::Transformer;
  return transformers * block::kFp8RecordsPerLayer * kFp8RecordFloats;
}

void StageRunner::bindFp8State(DevicePtr state) {
  fp8State = state;
  if (!state)
    return;
  kernels.fill(state, 0.0, getFp8StateFloats());
  DevicePtr record = state;
  for (Layer &l : resolved) {
    if (l.config->kind != LayerKind::Transformer)
      continue;
    l.fp8 = record;
    for (int64_t r = 0; r < block::kFp8RecordsPerLayer;
         ++r, record = record + kFp8RecordFloats) {
      bool grad = r % block::kFp8Roles == int64_t(block::Role::Grad);
      kernels.fill(record + 2,
                   getFp8Max(grad ? Fp8Format::E5M2 : Fp8Format::E4M3), 1);
    }
  }
}

int64_t StageRunner::getLoadFloats() const {
  int64_t floats = 0;
  for (const Layer &l : resolved)
    if (l.config->kind == LayerKind::Transformer)
      floats += 2 * l.config->experts;
  return floats;
}

void StageRunner::bindLoad(DevicePtr to) {
  load = to;
  loads.assign(resolved.size(), DevicePtr());
  DevicePtr at = to;
  for (size_t i = 0; to && i < resolved.size(); ++i) {
    const LayerConfig &c = *resolved[i].config;
    if (c.kind != LayerKind::Transformer || c.experts == 0)
      continue;
    loads[i] = at;
    at = at + 2 * c.experts;
  }
  clearLoad();
}

void StageRunner::clearLoad() {
  if (load)
    kernels.fill(load, 0.0, getLoadFloats());
}

std::vector<std::pair<int, DevicePtr>> StageRunner::getLoads() const {
  std::vector<std::pair<int, DevicePtr>> out;
  for (size_t i = 0; i < loads.size(); ++i)
    if (loads[i])
      out.push_back({layers[i], loads[i]});
  return out;
}

void StageRunner::finishStep(bool trained) {
  if (fp8State)
    kernels.updateFp8Scales(fp8State, getFp8StateFloats() / kFp8RecordFloats,
                            trained);
}

void StageRunner::setTensorParallel(TensorGroup tensorGroup, int index) {
  seams.set(std::move(tensorGroup), index);
  // A vocabulary layer that splits (first or last in the stage): the
  // shard's rows; otherwise count -1, all of them.
  auto rowsOf = [&](int layer, bool present) {
    const LayerConfig &l = model.layers[layer];
    if (!present || l.vocabShards < 2)
      return block::TableRows();
    auto [first, count] = getShardVocabRows(l.vocab, index, l.vocabShards);
    return block::TableRows{first, count};
  };
  embeddingBlock.setRows(rowsOf(layers.front(), hasEmbedding()));
  outputBlock.setRows(rowsOf(layers.back(), hasOutput()));
}

bool StageRunner::hasEmbedding() const {
  return model.layers[layers.front()].kind == LayerKind::Embedding;
}

bool StageRunner::hasOutput() const {
  return model.layers[layers.back()].kind == LayerKind::Output;
}

int64_t StageRunner::getForwardStateBytes(const SliceShape &s) const {
  return rt::getForwardStateBytes(model, layers, s, precision, recompute);
}

int64_t StageRunner::getWeightStateBytes(const SliceShape &s) const {
  return rt::getWeightStateBytes(model, layers, s, precision);
}

int64_t StageRunner::getKeyValueBytes(int64_t rows) const {
  return rt::getKeyValueBytes(model, layers, rows, precision);
}

int64_t StageRunner::getWorkspaceBytes(const SliceShape &s) const {
  return rt::getWorkspaceBytes(model, layers, s, precision, recompute);
}

int64_t StageRunner::getRecomputedStateBytes(const SliceShape &s) const {
  return rt::getRecomputedStateBytes(model, layers, s, precision, recompute);
}

DevicePtr StageRunner::getFeatureWork(const SliceShape &s,
                                      DevicePtr workspace) const {
  return workspace.atByte(
      getFeatureScratchOffset(model, layers, s, precision),
      precision.activations);
}

void StageRunner::carve(const SliceShape &s, DevicePtr forwardState,
                        DevicePtr weightState, DevicePtr keyValues,
                        DevicePtr recomputed) {
  // The same walks, in the same order, that size the buffers (Layout.h).
  Arena forward(precision), weight(precision), kv(precision), again(precision);
  auto into = [&](Views &v, DevicePtr base, Arena &arena) {
    return [&v, base, &arena](Field f, int64_t count, Storage storage) {
      int64_t at = arena.take(count, storage);
      v.at[int(f)] =
          base ? base.atByte(at, getType(storage, arena.getPrecision()))
               : DevicePtr();
    };
  };
  for (size_t k = 0; k < resolved.size(); ++k) {
    const LayerConfig &c = *resolved[k].config;
    Views &v = views[k];
    std::fill(v.at.begin(), v.at.end(), DevicePtr());
    auto kept = into(v, forwardState, forward);
    auto redone = into(v, recomputed, again);
    walkForwardState(model, c, s, [&](Field f, int64_t count, Storage storage) {
      if (isRecomputed(f, recompute))
        redone(f, count, storage);
      else
        kept(f, count, storage);
    });
    walkWeightState(model, c, s, into(v, weightState, weight));
    walkLayerKeyValues(model, balance, layers[k], s.rows,
                       into(v, keyValues, kv));
  }
}

using namespace block;

//===----------------------------------------------------------------------===//
// The stage: embedding, transformer layers, output layer
//===----------------------------------------------------------------------===//

void StageRunner::forward(const SliceShape &s, const TokenRows &batch,
                          DevicePtr input, DevicePtr output,
                          DevicePtr forwardState, DevicePtr keyValues,
                          DevicePtr workspace, DevicePtr loss) {
  DevicePtr area;
  if (recompute != Recompute::None) {
    // What B will recompute is made in the workspace and dropped.
    RecomputeArea at = getRecomputeArea(model, layers, s, precision);
    area = workspace.atByte(at.area, precision.activations);
  }
  if (recompute == Recompute::Full) {
    // The checkpoint: the stage's input (none for a whole embedding, which
    // B looks up from the tokens again).
    if (int64_t count = getCheckpointElements(model, layers, s);
        input && count > 0)
      kernels.copy(forwardState, input, count);
    forwardState = DevicePtr();
  }
  carve(s, forwardState, nullptr, keyValues, area);
  DevicePtr stats = beginBalance(s, input, output);
  runForward(s, batch, input, output, workspace, loss, /*again=*/false, stats);
  // The microbatch's load-balancing loss, once its last slice has routed:
  // coefficient x experts x sum_e f_e P_e with f_e = count_e / (L T) and
  // P_e = probability sum_e / (L T) over L sparse layers and the T tokens
  // of the microbatch, in the loss's units (a sum over its tokens: times
  // T). Added by one tensor-parallel shard, as the group sums the loss.
  // Under context parallelism each rank routed its own tokens: the
  // statistics are summed over the ranks first (B's gradients read the
  // sums too), and one rank adds the loss.
  bool routed = s.offset + s.getSliceTokens() == model.seqLen;
  if (holdsBalance() && stats && routed && s.contextShards > 1)
    seams.getContext().sum(stats, 2 * balance.experts);
  if (holdsBalance() && stats && loss && routed &&
      seams.getShardIndex() == 0 && seams.getContext().rank == 0) {
    double tokens = double(s.rows * model.seqLen),
           layersCount = double(balance.layers);
    kernels.moeBalanceLoss(stats, balance.experts,
                           balance.coefficient * double(balance.experts) /
                               (layersCount * layersCount * tokens),
                           loss);
  }
}

bool StageRunner::receivesBalance() const {
  return balance.isOn() && balance.first < layers.front() &&
         layers.front() <= balance.last;
}

bool StageRunner::sendsBalance() const {
  return balance.isOn() && balance.first <= layers.back() &&
         layers.back() < balance.last;
}

bool StageRunner::holdsBalance() const {
  return balance.isOn() && layers.front() <= balance.last &&
         balance.last <= layers.back();
}

DevicePtr StageRunner::getBalanceStats() const {
  size_t at = size_t(std::find(layers.begin(), layers.end(), balance.last) -
                     layers.begin());
  return views[at][Field::BalanceStats];
}

DevicePtr StageRunner::getMessageBalance(DevicePtr message,
                                         const SliceShape &s) const {
  return message.atByte(getBalanceOffset(model, s, precision), DType::F32);
}

DevicePtr StageRunner::beginBalance(const SliceShape &s, DevicePtr input,
                                    DevicePtr output) {
  int64_t floats = balance.isOn() ? 2 * balance.experts : 0;
  DevicePtr from =
      receivesBalance() && input ? getMessageBalance(input, s) : DevicePtr();
  if (holdsBalance()) {
    DevicePtr stats = getBalanceStats();
    if (!stats)
      return {};
    if (s.offset == 0)
      kernels.fill(stats, 0.0, floats);
    if (from)
      kernels.add(stats, from, floats);
    return stats;
  }
  if (!sendsBalance() || !output)
    return {};
  DevicePtr stats = getMessageBalance(output, s);
  if (from)
    kernels.copy(stats, from, floats);
  else
    kernels.fill(stats, 0.0, floats);
  return stats;
}

void StageRunner::runForward(const SliceShape &s, const TokenRows &batch,
                             DevicePtr input, DevicePtr output,
                             DevicePtr workspace, DevicePtr loss, bool again,
                             DevicePtr stats) {
  Workspace work(workspace, precision, getLocalTokens(model, s) * model.hidden);
  DevicePtr current = input;
  for (size_t i = 0; i < resolved.size(); ++i) {
    const Layer &l = resolved[i];
    if (beforeLayer)
      beforeLayer(layers[i], i + 1 < layers.size() ? layers[i + 1] : -1);
    // B's recomputation routes as F did: nothing more to count.
    if (!again)
      transformer.setBalance(
          {stats, {}, 0, i < loads.size() ? loads[i] : DevicePtr()});
    else
      transformer.setBalance({});
    const LayerConfig &c = *l.config;
    const Views &v = views[i];
    bool last = i + 1 == resolved.size();
    DevicePtr dst = last && output ? output : work.ping[i % 2];
    switch (c.kind) {
    case LayerKind::Embedding:
      embeddingBlock.forward(l, v, s, batch, current, dst, work);
      break;
    case LayerKind::Transformer:
      transformer.forward(l, v, s, current, dst, workspace,
                          getFeatureWork(s, workspace), again);
      break;
    case LayerKind::Output:
      outputBlock.forward(l, v, s, batch, current, dst, work, loss);
      break;
    }
    current = dst;
  }
  transformer.setBalance({});
}

void StageRunner::backwardInput(const SliceShape &s, const TokenRows &batch,
                                DevicePtr outputGrad, DevicePtr inputGrad,
                                DevicePtr forwardState, DevicePtr weightState,
                                DevicePtr keyValues, DevicePtr workspace,
                                float lossScale, DevicePtr recomputedState,
                                bool rowWeights) {
  if (recompute == Recompute::Full) {
    // F once more, from the checkpoint, into the recomputed state; its
    // loss is counted already.
    RecomputeArea at = getRecomputeArea(model, layers, s, precision);
    DevicePtr checkpoint = getCheckpointBytes(model, layers, s, precision) > 0
                               ? forwardState
                               : DevicePtr();
    carve(s, nullptr, nullptr, keyValues, recomputedState);
    runForward(s, batch, checkpoint, nullptr, workspace,
               workspace.atByte(at.loss, DType::F64), /*again=*/true);
    forwardState = DevicePtr();
  }
  carve(s, forwardState, weightState, keyValues, recomputedState);
  if (recompute == Recompute::Selective)
    for (size_t k = 0; k < resolved.size(); ++k)
      if (resolved[k].config->kind == LayerKind::Transformer) {
        if (beforeLayer) {
          size_t next = k + 1;
          while (next < resolved.size() &&
                 resolved[next].config->kind != LayerKind::Transformer)
            ++next;
          beforeLayer(layers[k],
                      next < resolved.size() ? layers[next] : -1);
        }
        transformer.recompute(resolved[k], views[k], s, workspace);
      }
  // The microbatch's copies per expert: kept here, or from the next stage
  // (and sent on to the previous one). The loss's gradient at expert e's
  // probability of every token of every sparse layer is coefficient x
  // experts x count_e / (L T)^2 in the microbatch's mean loss; in the
  // summed loss lossScale scales (times T), coefficient x experts x
  // count_e / (L^2 T). One tensor-parallel shard adds it, as the group sums the
  // router's gradients and the input's.
  DevicePtr counts;
  if (holdsBalance())
    counts = getBalanceStats();
  else if (sendsBalance() && outputGrad)
    counts = getMessageBalance(outputGrad, s);
  if (counts && receivesBalance() && inputGrad)
    kernels.copy(getMessageBalance(inputGrad, s), counts, balance.experts);
  if (counts && seams.getShardIndex() == 0) {
    double sparse = double(balance.layers),
           tokens = double(s.rows * model.seqLen);
    transformer.setBalance(
        {{},
         counts,
         float(double(lossScale) * balance.coefficient *
               double(balance.experts) / (sparse * sparse * tokens))});
  }
  Workspace work(workspace, precision, getLocalTokens(model, s) * model.hidden);
  DevicePtr grad = outputGrad;
  for (size_t k = resolved.size(); k-- > 0;) {
    const Layer &l = resolved[k];
    const LayerConfig &c = *l.config;
    const Views &v = views[k];
    if (beforeLayer)
      beforeLayer(layers[k], k > 0 ? layers[k - 1] : -1);
    DevicePtr dst = k == 0 ? inputGrad : work.ping[k % 2];
    switch (c.kind) {
    case LayerKind::Embedding:
      embeddingBlock.backward(l, v, s, batch, grad, dst);
      break;
    case LayerKind::Transformer:
      transformer.backward(l, v, s, grad, dst, workspace,
                           getFeatureWork(s, workspace), rowWeights);
      break;
    case LayerKind::Output:
      outputBlock.backward(l, v, s, batch, grad, dst, work, lossScale);
      break;
    }
    grad = dst;
  }
  transformer.setBalance({});
}

void StageRunner::backwardWeight(const SliceShape &s, const TokenRows &batch,
                                 DevicePtr forwardState, DevicePtr weightState,
                                 DevicePtr workspace,
                                 DevicePtr recomputedState, bool rowWeights) {
  Workspace work(workspace, precision, getLocalTokens(model, s) * model.hidden);
  if (recompute == Recompute::Full)
    forwardState = DevicePtr();
  carve(s, forwardState, weightState, nullptr, recomputedState);
  for (size_t k = 0; k < resolved.size(); ++k) {
    const Layer &l = resolved[k];
    const LayerConfig &c = *l.config;
    const Views &v = views[k];
    if (beforeLayer)
      beforeLayer(layers[k], k + 1 < layers.size() ? layers[k + 1] : -1);
    switch (c.kind) {
    case LayerKind::Embedding:
      embeddingBlock.weight(l, v, s, batch);
      break;
    case LayerKind::Transformer:
      transformer.weight(l, v, s, workspace, getFeatureWork(s, workspace),
                         rowWeights);
      break;
    case LayerKind::Output:
      outputBlock.weight(l, v, s, work);
      break;
    }
    if (afterWeight)
      afterWeight(layers[k]);
  }
}

} // namespace sluice::rt
