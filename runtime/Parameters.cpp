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

namespace {
int64_t total(const std::vector<IndexRange> &ranges) {
  int64_t n = 0;
  for (const IndexRange &r : ranges)
    n += r.count;
  return n;
}

/// How a tensor-parallel shard holds a linear map's weight [in, out].
enum class Split {
  Whole,   // every shard all of it
  Columns, // column-parallel: output features `parts`; the bias sliced too
  Rows,    // row-parallel: input features `parts`; the bias whole
};
} // namespace

std::vector<ParameterSpec> getLayerParameters(const ModelConfig &model,
                                              int index, TensorShard shard) {
  const LayerConfig &layer = model.layers[index];
  int64_t h = model.hidden;
  std::vector<ParameterSpec> specs;
  auto norm = [&](const std::string &name) {
    specs.push_back({name + ".weight", {h}, InitKind::Ones});
    if (!layer.isRms())
      specs.push_back({name + ".bias", {h}, InitKind::Zeros});
  };
  std::string sliceName = "tp" + std::to_string(shard.index) + "of" +
                          std::to_string(shard.count);
  auto linear = [&](const std::string &name, int64_t in, int64_t out,
                    Split split, std::vector<IndexRange> parts,
                    bool hasBias) {
    ParameterSpec weight{name + ".weight", {in, out}, InitKind::Normal};
    ParameterSpec bias{name + ".bias", {out}, InitKind::Zeros};
    if (shard.count > 1 && split != Split::Whole) {
      weight.whole = weight.shape;
      weight.sliceName = sliceName;
      if (split == Split::Columns) {
        weight.shape[1] = total(parts);
        weight.columns = parts;
        // A vector's elements are its rows.
        bias.whole = bias.shape;
        bias.shape[0] = total(parts);
        bias.rows = parts;
        bias.sliceName = sliceName;
      } else {
        weight.shape[0] = total(parts);
        weight.rows = parts;
      }
    }
    specs.push_back(std::move(weight));
    if (hasBias)
      specs.push_back(std::move(bias));
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
    ParameterSpec spec{name, {count, h}, InitKind::Normal};
    spec.whole = {layer.vocab, h};
    spec.rows = {{first, count}};
    spec.sliceName = sliceName;
    specs.push_back(std::move(spec));
  };
  switch (layer.kind) {
  case LayerKind::Embedding:
    if (!layer.sharded)
      table("embed.tokens");
    if (layer.positions > 0)
      specs.push_back(
          {"embed.positions", {layer.positions, h}, InitKind::Normal});
    break;
  case LayerKind::Transformer: {
    std::string p = prefixOf(model, index);
    int64_t d = layer.headDim, hd = layer.heads * d, kv = layer.kvHeads * d;
    int64_t t = shard.index, n = shard.count;
    // Shard t's query heads, the key/value heads they read, its share of
    // the feed-forward width (checkTensorParallel holds).
    int64_t queries = layer.heads / n * d;
    int64_t kvHeads = getShardKvHeads(layer, int(n));
    int64_t firstKv = layer.kvHeads >= n ? t * kvHeads : t / (n / layer.kvHeads);
    int64_t f = layer.ffn / n;
    norm(p + "norm1");
    linear(p + "attn.qkv", h, hd + 2 * kv, Split::Columns,
           {{t * queries, queries},
            {hd + firstKv * d, kvHeads * d},
            {hd + kv + firstKv * d, kvHeads * d}},
           layer.hasQkvBias());
    // Qwen3's query and key norms: a gain of head_dim that every head
    // shares, whole on every tensor-parallel shard (each shard's gradient
    // is its heads' part; the group sums them, TensorGroupSums).
    if (layer.qkNorm)
      for (const char *name : {"attn.q_norm.weight", "attn.k_norm.weight"})
        specs.push_back({p + name, {d}, InitKind::Ones});
    linear(p + "attn.out", hd, h, Split::Rows, {{t * queries, queries}},
           layer.bias);
    if (layer.postNorms)
      norm(p + "post_attn_norm");
    norm(p + "norm2");
    if (layer.isGated())
      linear(p + "mlp.gate", h, layer.ffn, Split::Columns, {{t * f, f}},
             layer.bias);
    linear(p + "mlp.up", h, layer.ffn, Split::Columns, {{t * f, f}},
           layer.bias);
    linear(p + "mlp.down", layer.ffn, h, Split::Rows, {{t * f, f}},
           layer.bias);
    if (layer.postNorms)
      norm(p + "post_mlp_norm");
    break;
  }
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

namespace {
bool endsWith(const std::string &name, const std::string &suffix) {
  return name.size() >= suffix.size() &&
         name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}
} // namespace

bool isHeadSummed(const std::string &name) {
  return endsWith(name, ".attn.q_norm.weight") ||
         endsWith(name, ".attn.k_norm.weight");
}

bool isTokenSummed(const std::string &name) {
  auto ends = [&](const std::string &suffix) { return endsWith(name, suffix); };
  for (const char *norm : {"norm1.", "norm2.", "final_norm.",
                           "post_attn_norm.", "post_mlp_norm."})
    for (const char *part : {"weight", "bias"})
      if (ends(std::string(norm) + part))
        return true;
  return false;
}

ModelConfig getWholeModel(const ModelConfig &model) {
  ModelConfig whole = model;
  whole.sequenceShards = 1;
  for (LayerConfig &l : whole.layers) {
    l.sharded = false;
    l.vocabShards = 1;
  }
  return whole;
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
  decaySegments.clear();
  for (const ParameterSpec &spec : params) {
    offsets.push_back(total);
    bool decayed = isDecayed(spec);
    if (!decaySegments.empty() && decaySegments.back().second == decayed)
      decaySegments.back().first.count += spec.size();
    else
      decaySegments.push_back({{total, spec.size()}, decayed});
    total += spec.size();
  }
  std::vector<float> host(total, 0.0f);
  for (size_t k = 0; k < params.size(); ++k) {
    const ParameterSpec &spec = params[k];
    float *w = host.data() + offsets[k];
    uint64_t nameHash = hashName(spec.name);
    // A shard or slice draws its values by their place in the whole
    // tensor, so it starts equal to that part of the unsharded tensor;
    // padding is 0.
    for (const TensorRun &run : getRuns(spec))
      for (int64_t i = 0; i < run.count; ++i)
        w[run.local + i] =
            spec.init == InitKind::Ones ? 1.0f
            : spec.init == InitKind::Zeros
                ? 0.0f
                : float(kInitStd *
                        normalSample(seed, nameHash, run.global + i));
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

void ParameterStore::adamRange(const AdamConfig &config, int64_t step,
                               int64_t first, int64_t count, DevicePtr gradsAt,
                               int64_t moments) {
  Kernels &k = device->getKernels(StreamKind::Compute);
  for (const auto &[segment, decayed] : decaySegments) {
    int64_t lo = std::max(first, segment.first);
    int64_t hi = std::min(first + count, segment.first + segment.count);
    if (lo >= hi)
      continue;
    AdamConfig c = config;
    if (!decayed)
      c.weightDecay = 0.0f;
    int64_t at = moments + (lo - first);
    k.adamUpdate(weights.get() + lo, gradsAt + (lo - first),
                 moment1.get() + at, moment2.get() + at, hi - lo, c, step,
                 working.empty() ? DevicePtr() : working.get() + lo);
  }
}

void ParameterStore::adamStep(const AdamConfig &config, int64_t step) {
  adamRange(config, step, 0, total, grads.get(), 0);
}

Status ParameterStore::shardMoments(const std::vector<IndexRange> &owned) {
  if (!owned.empty() && !ranges.empty())
    return Status::error("the optimizer state is sharded already: gather it "
                         "before sharding it again");
  Kernels &k = device->getKernels(StreamKind::Compute);
  int64_t packed = 0;
  for (const IndexRange &r : owned)
    packed += r.count;
  DeviceBuffer m, v;
  for (DeviceBuffer *b : {&m, &v})
    if (Status st = device->allocate(kMasterType,
                                     owned.empty() ? total : packed, *b);
        !st)
      return st;
  if (owned.empty()) {
    // Back to whole: the owned parts in their places, zeros elsewhere.
    k.fill(m.get(), 0.0, total);
    k.fill(v.get(), 0.0, total);
    int64_t at = 0;
    for (const IndexRange &r : ranges) {
      k.copy(m.get() + r.first, moment1.get() + at, r.count);
      k.copy(v.get() + r.first, moment2.get() + at, r.count);
      at += r.count;
    }
  } else {
    int64_t at = 0;
    for (const IndexRange &r : owned) {
      k.copy(m.get() + at, moment1.get() + r.first, r.count);
      k.copy(v.get() + at, moment2.get() + r.first, r.count);
      at += r.count;
    }
  }
  moment1 = std::move(m);
  moment2 = std::move(v);
  ranges = owned;
  return Status::ok();
}

void ParameterStore::adamStep(const AdamConfig &config, int64_t step,
                              DevicePtr packedGrads) {
  if (ranges.empty())
    return adamStep(config, step);
  int64_t at = 0;
  for (const IndexRange &r : ranges) {
    adamRange(config, step, r.first, r.count, packedGrads + at, at);
    at += r.count;
  }
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

static bool isMoment(ParameterStore::Tensor which) {
  return which == ParameterStore::Tensor::Moment1 ||
         which == ParameterStore::Tensor::Moment2;
}

static const char *const kShardedMoments =
    "the optimizer state is sharded over the data-parallel replicas "
    "(ZeRO-1): gather it before reading or writing it whole";

Status ParameterStore::read(Tensor which, std::vector<float> &out) const {
  if (isMoment(which) && !ranges.empty())
    return Status::error(kShardedMoments);
  return downloadAll(*device, buffer(which), out);
}

Status ParameterStore::write(Tensor which, const std::vector<float> &in) {
  if (isMoment(which) && !ranges.empty())
    return Status::error(kShardedMoments);
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
