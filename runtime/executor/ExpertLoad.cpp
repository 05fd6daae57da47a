//===- ExpertLoad.cpp - A step's tokens per expert ------------------------===//

#include "ExpertLoad.h"

#include <algorithm>
#include <numeric>

namespace sluice::rt {

namespace {
/// Where each model layer's experts start in the model-wide vector (-1: a
/// dense layer).
std::vector<int64_t> getOffsets(const ModelConfig &model) {
  std::vector<int64_t> offsets(model.layers.size(), -1);
  int64_t at = 0;
  for (size_t i = 0; i < model.layers.size(); ++i) {
    const LayerConfig &l = model.layers[i];
    if (l.kind != LayerKind::Transformer || l.experts == 0)
      continue;
    offsets[i] = at;
    at += l.experts;
  }
  return offsets;
}
} // namespace

int64_t getExpertLoadSize(const ModelConfig &model) {
  int64_t size = 0;
  for (const LayerConfig &l : model.layers)
    if (l.kind == LayerKind::Transformer)
      size += l.experts;
  return size;
}

Status addExpertLoad(const ModelConfig &model,
                     const std::vector<const StageRunner *> &stages,
                     Device &device, Stream &stream,
                     std::vector<double> &copies) {
  std::vector<int64_t> offsets = getOffsets(model);
  copies.resize(size_t(getExpertLoadSize(model)), 0.0);
  // Each layer's copies then its probabilities' sums (moeBalance).
  std::vector<std::vector<float>> host;
  std::vector<std::pair<int, size_t>> where;
  for (const StageRunner *stage : stages) {
    if (!stage)
      continue;
    for (auto [layer, load] : stage->getLoads()) {
      int64_t experts = model.layers[size_t(layer)].experts;
      host.emplace_back(size_t(2 * experts));
      device.download(host.back().data(), load,
                      2 * experts * int64_t(sizeof(float)), stream);
      where.push_back({layer, host.size() - 1});
    }
  }
  if (Status st = stream.synchronize(); !st)
    return st;
  for (auto [layer, index] : where) {
    int64_t experts = model.layers[size_t(layer)].experts;
    for (int64_t e = 0; e < experts; ++e)
      copies[size_t(offsets[size_t(layer)] + e)] += host[index][size_t(e)];
  }
  return Status::ok();
}

ExpertLoad summarizeExpertLoad(const ModelConfig &model,
                               const std::vector<double> &copies) {
  ExpertLoad out;
  size_t at = 0;
  for (const LayerConfig &l : model.layers) {
    if (l.kind != LayerKind::Transformer || l.experts == 0)
      continue;
    if (at + size_t(l.experts) > copies.size())
      break;
    auto first = copies.begin() + std::ptrdiff_t(at);
    auto last = first + std::ptrdiff_t(l.experts);
    double mean = std::accumulate(first, last, 0.0) / double(l.experts);
    double ratio = mean > 0 ? *std::max_element(first, last) / mean : 0;
    out.layers.push_back(ratio);
    out.worst = std::max(out.worst, ratio);
    at += size_t(l.experts);
  }
  return out;
}

} // namespace sluice::rt
