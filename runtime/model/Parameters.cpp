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

} // namespace

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
  for (DeviceBuffer *buffer : {&weights, &moment1, &moment2})
    if (Status st = on.allocate(kMasterType, total, *buffer); !st)
      return st;
  if (Status st = on.allocate(kMasterType, windowSize ? windowSize : total,
                              grads);
      !st)
    return st;
  if (windowSize && wholeKept)
    if (Status st = on.allocate(kMasterType, total, whole); !st)
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
  if (it == index.end())
    return {};
  if (windowSize)
    return grads.get() + windowAt.at(name);
  return grads.get() + offsets[it->second];
}

Status ParameterStore::setGradientGroups(
    const std::vector<std::vector<std::string>> &groups) {
  windowAt.clear();
  windowSize = 0;
  for (const std::vector<std::string> &group : groups) {
    int64_t at = 0;
    for (const std::string &name : group) {
      auto it = index.find(name);
      if (it == index.end())
        return Status::error("gradient window: no parameter '" + name + "'");
      if (!windowAt.emplace(name, at).second)
        return Status::error("gradient window: '" + name +
                             "' is in two groups");
      at += params[it->second].size();
    }
    windowSize = std::max(windowSize, at);
  }
  for (const ParameterSpec &spec : params)
    if (!windowAt.count(spec.name))
      return Status::error("gradient window: '" + spec.name +
                           "' is in no group");
  return Status::ok();
}

void ParameterStore::zeroGrads() {
  device->getKernels(StreamKind::Compute)
      .fill(grads.get(), 0.0, windowSize ? windowSize : total);
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
    return windowSize ? whole : grads;
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

Status ParameterStore::readMaster(const std::string &name,
                                  std::vector<float> &out) const {
  auto it = index.find(name);
  if (it == index.end())
    return Status::error("no parameter '" + name + "' on this rank");
  out.resize(size_t(params[it->second].size()));
  Stream &stream = device->getStream(StreamKind::Compute);
  device->download(out.data(), master(name),
                   int64_t(out.size() * sizeof(float)), stream);
  return stream.synchronize();
}

Status ParameterStore::writeMaster(const std::string &name,
                                   const std::vector<float> &in) {
  auto it = index.find(name);
  if (it == index.end())
    return Status::error("no parameter '" + name + "' on this rank");
  if (int64_t(in.size()) != params[it->second].size())
    return Status::error("parameter '" + name + "' of " +
                         std::to_string(params[it->second].size()) +
                         " values written with " + std::to_string(in.size()));
  Stream &stream = device->getStream(StreamKind::Compute);
  device->upload(master(name), in.data(), int64_t(in.size() * sizeof(float)),
                 stream);
  if (!working.empty())
    device->getKernels(StreamKind::Compute)
        .copy(weight(name), master(name), int64_t(in.size()));
  // The host vector may go once the copy has run.
  return stream.synchronize();
}

void ParameterStore::refreshWorkingCopy() {
  if (!working.empty())
    device->getKernels(StreamKind::Compute)
        .copy(working.get(), weights.get(), total);
}

} // namespace sluice::rt
