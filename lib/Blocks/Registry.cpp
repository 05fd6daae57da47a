//===- Registry.cpp - Block features: the registry ------------------------===//

#include "sluice/Blocks/Feature.h"

#include <algorithm>

namespace sluice::blocks {

// The folders the build found (lib/Blocks/CMakeLists.txt writes the list).
#define SLUICE_BLOCK_FEATURE(name) const Feature &getFeature_##name();
#include "Features.inc"
#undef SLUICE_BLOCK_FEATURE

namespace {
std::vector<const Feature *> &getList() {
  static std::vector<const Feature *> features = [] {
    std::vector<const Feature *> found;
#define SLUICE_BLOCK_FEATURE(name) found.push_back(&getFeature_##name());
#include "Features.inc"
#undef SLUICE_BLOCK_FEATURE
    return found;
  }();
  return features;
}
} // namespace

bool Feature::isEnabled(const LayerConfig &layer) const {
  return info.field ? layer.*info.field : layer.hasFeature(getName());
}

void Feature::setEnabled(LayerConfig &layer, bool on, int) const {
  if (info.field) {
    layer.*info.field = on;
    return;
  }
  rt::Names &names = layer.features;
  names.erase(std::remove(names.begin(), names.end(), getName()), names.end());
  if (on)
    names.push_back(getName());
}

const std::vector<const Feature *> &getFeatures() { return getList(); }

void registerFeature(const Feature &feature) {
  if (!lookupFeature(feature.getName()))
    getList().push_back(&feature);
}

const Feature *lookupFeature(const std::string &name) {
  for (const Feature *f : getList())
    if (name == f->getName())
      return f;
  return nullptr;
}

std::string getFeatureNames() {
  std::string names;
  for (const Feature *f : getList())
    names += (names.empty() ? "" : ", ") + std::string(f->getName());
  return names;
}

int getFeatureIndex(const Feature &feature) {
  const std::vector<const Feature *> &all = getList();
  return int(std::find(all.begin(), all.end(), &feature) - all.begin());
}

std::vector<const Feature *> getEnabledFeatures(const LayerConfig &layer,
                                                Slot slot) {
  std::vector<const Feature *> at;
  for (const Feature *f : getEnabledFeatures(layer))
    if (f->getSlots() & getSlotBit(slot))
      at.push_back(f);
  return at;
}

bool hasCoreFeedForward(const LayerConfig &layer) {
  for (const Feature *f : getEnabledFeatures(layer))
    if (f->getSlots() & getSlotBit(Slot::FeedForward))
      return false;
  return true;
}

bool hasCoreProjection(const LayerConfig &layer) {
  for (const Feature *f : getEnabledFeatures(layer))
    if (f->getSlots() & getSlotBit(Slot::QueryKeyValue))
      return false;
  return true;
}

LayerShape getLayerShape(const ModelConfig &model, const LayerConfig &layer,
                         const std::string &prefix, rt::TensorShard shard) {
  return {model, layer, prefix, shard, rt::getCoreSplit(layer, shard)};
}

std::string checkLayerTensorParallel(const LayerConfig &layer, int tp) {
  if (std::string why = rt::checkLayerTensorParallel(layer, tp); !why.empty())
    return why;
  for (const Feature *f : getEnabledFeatures(layer))
    if (std::string why = f->checkTensorParallel(layer, tp); !why.empty())
      return why;
  return "";
}

std::string checkTensorParallel(const ModelConfig &model, int tp) {
  if (std::string why = rt::checkTensorParallel(model, tp); !why.empty())
    return why;
  int transformer = 0;
  for (const LayerConfig &l : model.layers) {
    if (l.kind != rt::LayerKind::Transformer)
      continue;
    if (std::string why = blocks::checkLayerTensorParallel(l, tp); !why.empty())
      return "layer " + std::to_string(transformer) + ": " + why;
    ++transformer;
  }
  return "";
}

std::vector<const Feature *> getEnabledFeatures(const LayerConfig &layer) {
  std::vector<const Feature *> on;
  if (layer.kind != rt::LayerKind::Transformer)
    return on;
  for (const Feature *f : getList())
    if (f->isEnabled(layer))
      on.push_back(f);
  std::stable_sort(on.begin(), on.end(),
                   [](const Feature *a, const Feature *b) {
                     return a->getOrder() < b->getOrder();
                   });
  return on;
}

void addHiddenNorm(const LayerShape &shape, const std::string &name,
                   std::vector<rt::ParameterSpec> &out) {
  out.push_back({name + ".weight", {shape.hidden()}, rt::InitKind::Ones});
  out.back().reduce = rt::Reduce::Tokens;
  if (shape.layer.isRms())
    return;
  out.push_back({name + ".bias", {shape.hidden()}, rt::InitKind::Zeros});
  out.back().reduce = rt::Reduce::Tokens;
}

void walkHiddenNormState(int base, const LayerShape &shape,
                         const rt::SliceShape &s, const RegionFn &fn) {
  int64_t local = rt::getLocalTokens(shape.model, s);
  fn(base, local * shape.hidden(), rt::Storage::Activation);
  fn(base + 1, local, rt::Storage::Fp32);
}

int HiddenNormPair::getIndex(Slot slot) const {
  // The earlier slot has the lower bit.
  unsigned earlier = getSlots() & ~(getSlots() - 1);
  return getSlotBit(slot) == earlier ? 0 : 1;
}

void HiddenNormPair::addParameters(Slot slot, const LayerShape &shape,
                                   std::vector<rt::ParameterSpec> &out) const {
  addHiddenNorm(shape, shape.prefix + getNormName(slot), out);
}

void HiddenNormPair::walkState(State state, Slot slot, const LayerShape &shape,
                               const rt::SliceShape &s,
                               const RegionFn &fn) const {
  if (state == State::Forward)
    walkHiddenNormState(getStateBase(slot), shape, s, fn);
}

} // namespace sluice::blocks
