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

void ParameterStore::layout() {
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
}

Status ParameterStore::allocate(Device &on, const Precision &p, uint64_t seed) {
  device = &on;
  precision = p;
  if (offsets.size() != params.size())
    layout();
  // The initial weights: all of them, or under ZeRO-3 only this
  // replica's parts, packed (no rank holds the whole model). Drawn on the
  // host a piece at a time and uploaded, so that the host never holds a
  // whole copy either (4 bytes a parameter at a run's start).
  std::vector<IndexRange> drawn;
  if (shardWeights)
    drawn = ranges;
  else
    drawn.push_back({0, total});
  int64_t kept = 0;
  for (const IndexRange &r : drawn)
    kept += r.count;
  if (Status st = on.allocate(kMasterType, std::max<int64_t>(1, kept), weights);
      !st)
    return st;
  constexpr int64_t kPiece = int64_t(1) << 22;
  std::vector<float> host;
  Stream &stream = on.getStream(StreamKind::Compute);
  int64_t packedAt = 0;
  for (const IndexRange &range : drawn)
    for (int64_t first = range.first; first < range.first + range.count;
         first += kPiece) {
      int64_t count = std::min(kPiece, range.first + range.count - first);
      // The last piece's upload reads the buffer until it has run.
      if (Status st = stream.synchronize(); !st)
        return st;
      host.assign(size_t(count), 0.0f);
      drawInitialValues(seed, first, count, host.data());
      on.upload(weights.get() + packedAt, host.data(),
                count * int64_t(sizeof(float)), stream);
      packedAt += count;
    }
  // The moments: this replica's parts when sharded from the start (no
  // rank holds them whole), else whole.
  int64_t moments = total;
  if (!ranges.empty()) {
    moments = 0;
    for (const IndexRange &r : ranges)
      moments += r.count;
  }
  for (DeviceBuffer *buffer : {&moment1, &moment2})
    if (Status st =
            on.allocate(kMasterType, std::max<int64_t>(1, moments), *buffer);
        !st)
      return st;
  if (shardWeights) {
    DType used = precision.isMixed() ? precision.activations : kMasterType;
    int64_t size = 0;
    slotAt.clear();
    for (size_t g = 0; g < groupSizes.size(); ++g) {
      if (reshard == Reshard::Step) {
        slotAt.push_back(size);
        size += groupSizes[g];
      } else {
        slotAt.push_back(int64_t(g % 2) * windowSize);
      }
    }
    if (reshard == Reshard::EveryPass)
      size = 2 * windowSize;
    held.assign(reshard == Reshard::Step ? groupSizes.size() : 2, -1);
    if (Status st = on.allocate(used, std::max<int64_t>(1, size), slots); !st)
      return st;
  }
  if (Status st = on.allocate(kMasterType, windowSize ? windowSize : total,
                              grads);
      !st)
    return st;
  if (windowSize && wholeKept)
    if (Status st = on.allocate(kMasterType, total, whole); !st)
      return st;
  if (vectorSize)
    if (Status st = on.allocate(kMasterType, vectorSize, vectorGrads); !st)
      return st;
  if (precision.isMixed() && !shardWeights)
    if (Status st = on.allocate(precision.activations, total, working); !st)
      return st;
  refreshWorkingCopy();
  // The host vector may go once the copy has run.
  return stream.synchronize();
}

void ParameterStore::drawInitialValues(uint64_t seed, int64_t first,
                                       int64_t count, float *out) const {
  int64_t end = first + count;
  for (size_t k = 0; k < params.size(); ++k) {
    const ParameterSpec &spec = params[k];
    if (offsets[k] >= end || offsets[k] + spec.size() <= first)
      continue;
    uint64_t nameHash = hashName(spec.name);
    // A shard or slice draws its values by their place in the whole
    // tensor, so it starts equal to that part of the unsharded tensor;
    // padding is 0.
    for (const TensorRun &run : getRuns(spec)) {
      int64_t at = offsets[k] + run.local;
      int64_t lo = std::max<int64_t>(0, first - at),
              hi = std::min<int64_t>(run.count, end - at);
      for (int64_t i = lo; i < hi; ++i)
        out[at + i - first] =
            spec.init == InitKind::Ones ? 1.0f
            : spec.init == InitKind::Zeros
                ? 0.0f
                : float(kInitStd *
                        normalSample(seed, nameHash, run.global + i));
    }
  }
}

int64_t ParameterStore::offset(const std::string &name) const {
  return offsets[index.at(name)];
}

DevicePtr ParameterStore::weight(const std::string &name) const {
  auto it = index.find(name);
  if (it == index.end())
    return {};
  if (shardWeights)
    return getWeightSlot(groupOf.at(name)) + windowAt.at(name);
  return (working.empty() ? weights.get() : working.get()) +
         offsets[it->second];
}

DevicePtr ParameterStore::master(const std::string &name) const {
  auto it = index.find(name);
  if (it == index.end())
    return {};
  // ZeRO-3 keeps no whole masters: an fp32 plan's gathered weights are
  // them (checkShardedWeights refuses what reads them in a 16-bit plan).
  if (shardWeights)
    return precision.isMixed() ? DevicePtr() : weight(name);
  return weights.get() + offsets[it->second];
}

Status ParameterStore::setMomentShards(const std::vector<IndexRange> &owned) {
  if (device)
    return Status::error("the moments' shards are set before the "
                         "parameters are allocated");
  ranges = owned;
  return Status::ok();
}

Status ParameterStore::setWeightShards(const std::vector<IndexRange> &owned,
                                       Reshard how) {
  if (!windowSize)
    return Status::error("ZeRO-3 shards the weights by the gradient groups: "
                         "set them first");
  if (device)
    return Status::error("ZeRO-3's weight shards are set before the "
                         "parameters are allocated");
  shardWeights = true;
  reshard = how;
  ranges = owned;
  return Status::ok();
}

DevicePtr ParameterStore::getWeightSlot(size_t group) const {
  return slots.get() + slotAt[group];
}

bool ParameterStore::isGathered(size_t group) const {
  size_t slot = reshard == Reshard::Step ? group : group % 2;
  return held[slot] == int64_t(group);
}

void ParameterStore::setGathered(size_t group) {
  held[reshard == Reshard::Step ? group : group % 2] = int64_t(group);
}

void ParameterStore::dropGathered() {
  std::fill(held.begin(), held.end(), -1);
}

DevicePtr ParameterStore::grad(const std::string &name) const {
  auto it = index.find(name);
  if (it == index.end())
    return {};
  if (auto v = vectorAt.find(name); v != vectorAt.end())
    return vectorGrads.get() + v->second;
  if (windowSize)
    return grads.get() + windowAt.at(name);
  return grads.get() + offsets[it->second];
}

Status ParameterStore::setGradientGroups(
    const std::vector<std::vector<std::string>> &groups) {
  windowAt.clear();
  groupOf.clear();
  groupSizes.clear();
  vectorAt.clear();
  vectorSize = 0;
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
      groupOf[name] = groupSizes.size();
      const ParameterSpec &spec = params[it->second];
      if (!isDecayed(spec)) {
        vectorAt[name] = vectorSize;
        vectorSize += spec.size();
      }
      at += spec.size();
    }
    groupSizes.push_back(at);
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
  if (vectorSize)
    device->getKernels(StreamKind::Compute)
        .fill(vectorGrads.get(), 0.0, vectorSize);
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
    // ZeRO-3's weights are packed as the moments are.
    k.adamUpdate(weights.get() + (shardWeights && !ranges.empty() ? at : lo),
                 gradsAt + (lo - first), moment1.get() + at,
                 moment2.get() + at, hi - lo, c, step,
                 working.empty() ? DevicePtr() : working.get() + lo);
  }
}

void ParameterStore::adamStep(const AdamConfig &config, int64_t step) {
  adamRange(config, step, 0, total, grads.get(), 0);
  dropGathered();
}

Status ParameterStore::shardMoments(const std::vector<IndexRange> &owned) {
  if (!owned.empty() && !ranges.empty())
    return Status::error("the optimizer state is sharded already: gather it "
                         "before sharding it again");
  Kernels &k = device->getKernels(StreamKind::Compute);
  int64_t packed = 0;
  for (const IndexRange &r : owned)
    packed += r.count;
  // ZeRO-3's weights are packed and unpacked with the moments.
  std::vector<DeviceBuffer *> from = {&moment1, &moment2};
  if (shardWeights)
    from.push_back(&weights);
  for (DeviceBuffer *buffer : from) {
    DeviceBuffer to;
    if (Status st = device->allocate(
            kMasterType, std::max<int64_t>(1, owned.empty() ? total : packed),
            to);
        !st)
      return st;
    int64_t at = 0;
    // Back to whole: the owned parts in their places, zeros elsewhere
    // (allocate zeroes).
    for (const IndexRange &r : owned.empty() ? ranges : owned) {
      if (owned.empty())
        k.copy(to.get() + r.first, buffer->get() + at, r.count);
      else
        k.copy(to.get() + at, buffer->get() + r.first, r.count);
      at += r.count;
    }
    *buffer = std::move(to);
  }
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
  dropGathered();
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
    "(ZeRO): gather it before reading or writing it whole";

/// Whether `which` is held as this replica's parts only.
bool ParameterStore::isPacked(Tensor which) const {
  return !ranges.empty() &&
         (isMoment(which) || (shardWeights && which == Tensor::Weights));
}

Status ParameterStore::read(Tensor which, std::vector<float> &out) const {
  if (isPacked(which))
    return Status::error(kShardedMoments);
  return downloadAll(*device, buffer(which), out);
}

Status ParameterStore::write(Tensor which, const std::vector<float> &in) {
  if (isPacked(which))
    return Status::error(kShardedMoments);
  const DeviceBuffer &target = buffer(which);
  if (int64_t(in.size()) != target.size())
    return Status::error("parameter buffer of " +
                         std::to_string(target.size()) +
                         " values written with " + std::to_string(in.size()));
  Stream &stream = device->getStream(StreamKind::Compute);
  device->upload(target.get(), in.data(), target.getBytes(), stream);
  if (which == Tensor::Weights) {
    refreshWorkingCopy();
    if (shardWeights)
      dropGathered();
  }
  // The host vector may go once the copy has run.
  return stream.synchronize();
}

static const char *const kShardedMaster =
    "ZeRO-3 keeps only this replica's part of each weight";

Status ParameterStore::readMaster(const std::string &name,
                                  std::vector<float> &out) const {
  auto it = index.find(name);
  if (it == index.end())
    return Status::error("no parameter '" + name + "' on this rank");
  if (shardWeights)
    return Status::error(std::string(kShardedMaster) + ": '" + name +
                         "' cannot be read whole");
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
  if (shardWeights)
    return Status::error(std::string(kShardedMaster) + ": '" + name +
                         "' cannot be written whole");
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
