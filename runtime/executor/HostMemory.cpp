//===- HostMemory.cpp - What a rank needs against what the host has -------===//

#include "HostMemory.h"

#include "Executor.h"
#include "Parameters.h"

#include "sluice/PlanFormat/TrainingState.h"

#include <algorithm>
#include <map>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace sluice::rt {

namespace {
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
  // The training state as the compiler's cost model counts it too
  // (TrainingState.h): ZeRO-1 keeps a replica's part of the moments;
  // ZeRO-2 also of the gradients, with a window of the largest layer's;
  // ZeRO-3 of the weights too, with two gathered layers or the whole copy.
  // A member's experts shard over the ranks holding them (fewer than the
  // dp x cp the rest shard over).
  ParameterStateBytes state =
      getParameterStateBytes(plan.precision, plan.zero, plan.reshard);
  int64_t experts = 0;
  for (const ParameterSpec &spec : store.specs())
    if (spec.expertShare)
      experts += spec.size();
  need.stateBytes =
      state.forParameters(need.parameters - experts,
                          plan.getGradientRanks()) +
      (experts ? state.forParameters(experts, plan.getExpertReplicas()) : 0);
  if (state.transient) {
    // A layer's parameters as this rank holds them (a tensor-parallel
    // shard's, an expert-group member's).
    std::map<std::string, int64_t> held;
    for (const ParameterSpec &spec : store.specs())
      held[spec.name] = spec.size();
    int64_t largest = 0;
    for (const StagePlan &stage : plan.stages)
      if (stage.device == device)
        for (int layer : stage.layers) {
          int64_t count = 0;
          for (const ParameterSpec &spec :
               getLayerParameters(plan.model, layer))
            if (auto it = held.find(spec.name); it != held.end())
              count += it->second;
          largest = std::max(largest, count);
        }
    need.stateBytes += state.forLargestLayer(largest, plan.getGradientRanks());
  }
  need.bytes = need.stateBytes + getDeviceWorkspaceBytes(plan, device);
  // Summed in double and capped, as the tokens below: many buffers of
  // the largest size a plan may give would wrap 64 bits.
  double buffers = 0;
  if (device >= 0 && device < int(plan.programs.size()))
    for (int64_t bytes : plan.programs[device].buffers)
      buffers += double(bytes);
  need.bytes += int64_t(std::min(buffers, 0x1p60));
  // The step's tokens, every microbatch's, on the host and the device:
  // counted in double (a plan's counts may multiply past 64 bits) and
  // capped far above any host.
  double tokens = 2.0 * double(plan.microbatches) * double(plan.model.microBatch) *
                  double(plan.model.seqLen + 1) * double(sizeof(int32_t));
  need.bytes += int64_t(std::min(tokens, 0x1p60));
  return need;
}

int64_t getFp8WeightCopyBytes(const Plan &plan, int device) {
  if (!plan.precision.fp8Gemms)
    return 0;
  std::vector<ParameterSpec> specs = device < 0
                                         ? getModelParameters(plan.model)
                                         : getDeviceParameters(plan, device);
  auto endsWith = [](const std::string &name, const std::string &end) {
    return name.size() >= end.size() &&
           name.compare(name.size() - end.size(), end.size(), end) == 0;
  };
  int64_t bytes = 0;
  for (const ParameterSpec &spec : specs)
    for (const char *map : block::kMapWeightNames)
      if (endsWith(spec.name, map))
        bytes += 2 * (spec.size() + 512);
  return bytes;
}

MemoryNeed getReferenceMemoryNeed(const ModelConfig &model,
                                  const Precision &precision) {
  ParameterStore store;
  for (const ParameterSpec &spec : getModelParameters(model))
    store.add(spec);
  MemoryNeed need;
  need.parameters = countFloats(store);
  need.stateBytes =
      getParameterStateBytes(precision, 0).forParameters(need.parameters, 1);
  need.bytes = need.stateBytes;
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

std::string describeMemoryNeeds(const Plan &plan) {
  std::string text;
  for (int d = 0; d < plan.devices; ++d) {
    MemoryNeed need = getDeviceMemoryNeed(plan, d);
    char line[256];
    std::snprintf(line, sizeof(line),
                  "device %d: %lld bytes a rank (%s): training state %lld "
                  "bytes for %lld parameters, buffers and workspace %lld\n",
                  d, (long long)need.bytes, gib(need.bytes).c_str(),
                  (long long)need.stateBytes, (long long)need.parameters,
                  (long long)(need.bytes - need.stateBytes));
    text += line;
  }
  return text;
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
