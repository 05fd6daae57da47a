//===- HostMemory.cpp - What a rank needs against what the host has -------===//

#include "HostMemory.h"

#include "Executor.h"
#include "Parameters.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace sluice::rt {

namespace {
/// Weights, gradients and the two Adam moments, in fp32; mixed precision
/// adds the weights' working copy.
int64_t bytesPerParameter(const Precision &precision) {
  return 4 * getSize(kMasterType) +
         (precision.isMixed() ? getSize(precision.activations) : 0);
}

int64_t countFloats(const ParameterStore &store) {
  int64_t n = 0;
  for (const ParameterSpec &spec : store.specs())
    n += spec.size();
  return n;
}

std::string gib(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f GiB",
                double(bytes) / (1024.0 * 1024.0 * 1024.0));
  return text;
}

std::string count(int64_t n) {
  char text[32];
  if (n >= 1000000000)
    std::snprintf(text, sizeof(text), "%.2f billion", n / 1e9);
  else if (n >= 1000000)
    std::snprintf(text, sizeof(text), "%.2f million", n / 1e6);
  else
    std::snprintf(text, sizeof(text), "%lld", static_cast<long long>(n));
  return text;
}
} // namespace

MemoryNeed getDeviceMemoryNeed(const Plan &plan, int device) {
  // The parameters the executor adds, without allocating them.
  ParameterStore store;
  for (const ParameterSpec &spec : getDeviceParameters(plan, device))
    store.add(spec);
  MemoryNeed need;
  need.parameters = countFloats(store);
  need.bytes = need.parameters * bytesPerParameter(plan.precision) +
               getDeviceWorkspaceBytes(plan, device);
  if (device >= 0 && device < int(plan.programs.size()))
    for (int64_t bytes : plan.programs[device].buffers)
      need.bytes += bytes;
  // The step's tokens, every microbatch's, on the host and the device:
  // counted in double (a plan's counts may multiply past 64 bits) and
  // capped far above any host.
  double tokens = 2.0 * double(plan.microbatches) * double(plan.model.microBatch) *
                  double(plan.model.seqLen + 1) * double(sizeof(int32_t));
  need.bytes += int64_t(std::min(tokens, 0x1p60));
  return need;
}

MemoryNeed getReferenceMemoryNeed(const ModelConfig &model,
                                  const Precision &precision) {
  ParameterStore store;
  for (const ParameterSpec &spec : getModelParameters(model))
    store.add(spec);
  MemoryNeed need;
  need.parameters = countFloats(store);
  need.bytes = need.parameters * bytesPerParameter(precision);
  SliceShape whole{model.microBatch, model.seqLen, 0};
  std::vector<int> all;
  for (size_t i = 0; i < model.layers.size(); ++i)
    all.push_back(int(i));
  need.bytes += getForwardStateBytes(model, all, whole, precision) +
                getWeightStateBytes(model, all, whole, precision) +
                getKeyValueBytes(model, all, model.microBatch, precision) +
                getWorkspaceBytes(model, all, whole, precision);
  return need;
}

int64_t getAvailableHostBytes() {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string key;
    int64_t kib = 0;
    if (fields >> key >> kib && key == "MemAvailable:")
      return kib * 1024;
  }
  return -1;
}

Status checkMemoryNeed(const MemoryNeed &need, int64_t limit,
                       const std::string &who, const std::string &limitSource,
                       const std::string &advice) {
  if (limit < 0 || need.bytes <= limit)
    return Status::ok();
  return Status::error(
      who + " " + gib(need.bytes) + " of host memory (" +
      count(need.parameters) +
      " parameters with fp32 weights, gradients and Adam moments, plus "
      "activations), more than the " +
      gib(limit) + " " + limitSource + "; " + advice);
}

} // namespace sluice::rt
