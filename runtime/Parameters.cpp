//===- Parameters.cpp - Weights, gradients and optimizer state ------------===//

#include "Parameters.h"

#include <algorithm>
#include <cmath>

namespace sluice::rt {

namespace {
/// GPT-2's initialisation scale for every weight matrix.
constexpr double kInitStd = 0.02;

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t hashName(const std::string &name) {
  uint64_t h = 1469598103934665603ULL; // FNV-1a
  for (unsigned char c : name)
    h = (h ^ c) * 1099511628211ULL;
  return h;
}

/// Element `i` of parameter `name`: N(0, 1) by Box-Muller from two
/// uniforms that depend on (seed, name, i) alone.
double normalSample(uint64_t seed, uint64_t nameHash, int64_t i) {
  uint64_t base = splitmix64(seed ^ nameHash) + 2 * uint64_t(i);
  double u1 = (double(splitmix64(base) >> 11) + 1.0) * 0x1.0p-53;
  double u2 = double(splitmix64(base + 1) >> 11) * 0x1.0p-53;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

std::string prefixOf(const ModelConfig &model, int index) {
  int transformer = 0;
  for (int i = 0; i < index; ++i)
    transformer += model.layers[i].kind == LayerKind::Transformer;
  return "layers." + std::to_string(transformer) + ".";
}
} // namespace

std::vector<ParameterSpec> getLayerParameters(const ModelConfig &model,
                                              int index) {
  const LayerConfig &layer = model.layers[index];
  int64_t h = model.hidden;
  std::vector<ParameterSpec> specs;
  auto norm = [&](const std::string &name) {
    specs.push_back({name + ".weight", {h}, InitKind::Ones});
    if (layer.norm == "layernorm")
      specs.push_back({name + ".bias", {h}, InitKind::Zeros});
  };
  auto linear = [&](const std::string &name, int64_t in, int64_t out) {
    specs.push_back({name + ".weight", {in, out}, InitKind::Normal});
    if (layer.bias)
      specs.push_back({name + ".bias", {out}, InitKind::Zeros});
  };
  switch (layer.kind) {
  case LayerKind::Embedding:
    if (!layer.sharded)
      specs.push_back({"embed.tokens", {layer.vocab, h}, InitKind::Normal});
    if (layer.positions > 0)
      specs.push_back(
          {"embed.positions", {layer.positions, h}, InitKind::Normal});
    break;
  case LayerKind::Transformer: {
    std::string p = prefixOf(model, index);
    int64_t hd = layer.heads * layer.headDim;
    int64_t kv = layer.kvHeads * layer.headDim;
    norm(p + "norm1");
    linear(p + "attn.qkv", h, hd + 2 * kv);
    linear(p + "attn.out", hd, h);
    norm(p + "norm2");
    if (layer.isGated())
      linear(p + "mlp.gate", h, layer.ffn);
    linear(p + "mlp.up", h, layer.ffn);
    linear(p + "mlp.down", layer.ffn, h);
    break;
  }
  case LayerKind::Output:
    norm("final_norm");
    if (!layer.sharded)
      specs.push_back({layer.tied ? "embed.tokens" : "lm_head.weight",
                       {layer.vocab, h},
                       InitKind::Normal});
    break;
  }
  return specs;
}

ParameterSpec getTableShard(const std::string &name, int64_t vocab,
                            int64_t paddedVocab, int64_t hidden, int device,
                            int devices) {
  int64_t rows = paddedVocab / devices, first = int64_t(device) * rows;
  ParameterSpec spec{name, {rows, hidden}, InitKind::Normal};
  spec.firstRow = first;
  spec.validRows = std::max<int64_t>(0, std::min(rows, vocab - first));
  return spec;
}

std::vector<ParameterSpec> getModelParameters(const ModelConfig &model) {
  ParameterStore store;
  for (size_t i = 0; i < model.layers.size(); ++i)
    for (const ParameterSpec &spec : getLayerParameters(model, int(i)))
      store.add(spec);
  return store.specs();
}

void ParameterStore::add(const ParameterSpec &spec) {
  if (index.count(spec.name))
    return;
  index[spec.name] = params.size();
  params.push_back(spec);
}

Status ParameterStore::allocate(Device &on, const Precision &p, uint64_t seed) {
  device = &on;
  precision = p;
  offsets.clear();
  total = 0;
  for (const ParameterSpec &spec : params) {
    offsets.push_back(total);
    total += spec.size();
  }
  std::vector<float> host(total, 0.0f);
  for (size_t k = 0; k < params.size(); ++k) {
    const ParameterSpec &spec = params[k];
    float *w = host.data() + offsets[k];
    uint64_t nameHash = hashName(spec.name);
    // A shard draws its rows' values by their place in the whole table, so
    // it starts equal to those rows of the unsharded table; padding is 0.
    int64_t base = spec.firstRow * spec.getRowSize();
    int64_t valid = spec.getValidRows() * spec.getRowSize();
    for (int64_t i = 0; i < spec.size(); ++i)
      w[i] = i >= valid                    ? 0.0f
             : spec.init == InitKind::Ones ? 1.0f
             : spec.init == InitKind::Zeros
                 ? 0.0f
                 : float(kInitStd * normalSample(seed, nameHash, base + i));
  }
  for (DeviceBuffer *buffer : {&weights, &grads, &moment1, &moment2})
    if (Status st = on.allocate(kMasterType, total, *buffer); !st)
      return st;
  if (precision.isMixed())
    if (Status st = on.allocate(precision.activations, total, working); !st)
      return st;
  return write(Tensor::Weights, host);
}

int64_t ParameterStore::offset(const std::string &name) const {
  return offsets[index.at(name)];
}

DevicePtr ParameterStore::weight(const std::string &name) const {
  auto it = index.find(name);
  if (it == index.end())
    return {};
  return (working.empty() ? weights.get() : working.get()) +
         offsets[it->second];
}

DevicePtr ParameterStore::master(const std::string &name) const {
  auto it = index.find(name);
  return it == index.end() ? DevicePtr() : weights.get() + offsets[it->second];
}

DevicePtr ParameterStore::grad(const std::string &name) const {
  auto it = index.find(name);
  return it == index.end() ? DevicePtr() : grads.get() + offsets[it->second];
}

void ParameterStore::zeroGrads() {
  device->getKernels(StreamKind::Compute).fill(grads.get(), 0.0, total);
}

void ParameterStore::adamStep(const AdamConfig &config, int64_t step) {
  device->getKernels(StreamKind::Compute)
      .adamUpdate(weights.get(), grads.get(), moment1.get(), moment2.get(),
                  total, config, step,
                  working.empty() ? DevicePtr() : working.get());
}

const DeviceBuffer &ParameterStore::buffer(Tensor which) const {
  switch (which) {
  case Tensor::Weights:
    return weights;
  case Tensor::Grads:
    return grads;
  case Tensor::Moment1:
    return moment1;
  case Tensor::Moment2:
    return moment2;
  }
  return weights;
}

Status ParameterStore::read(Tensor which, std::vector<float> &out) const {
  return downloadAll(*device, buffer(which), out);
}

Status ParameterStore::write(Tensor which, const std::vector<float> &in) {
  const DeviceBuffer &target = buffer(which);
  if (int64_t(in.size()) != target.size())
    return Status::error("parameter buffer of " +
                         std::to_string(target.size()) +
                         " values written with " + std::to_string(in.size()));
  Stream &stream = device->getStream(StreamKind::Compute);
  device->upload(target.get(), in.data(), target.getBytes(), stream);
  if (which == Tensor::Weights)
    refreshWorkingCopy();
  // The host vector may go once the copy has run.
  return stream.synchronize();
}

void ParameterStore::refreshWorkingCopy() {
  if (!working.empty())
    device->getKernels(StreamKind::Compute)
        .copy(working.get(), weights.get(), total);
}

} // namespace sluice::rt
