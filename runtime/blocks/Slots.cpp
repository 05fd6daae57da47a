//===- Slots.cpp - Block features: the compute parts' registry ------------===//

#include "Slots.h"

#include <map>

namespace sluice::rt::block {

// The compute parts the build found (lib/Blocks/*/Compute.cpp;
// runtime/CMakeLists.txt writes the list).
#define SLUICE_BLOCK_COMPUTE(name) const FeatureCompute &getCompute_##name();
#include "FeatureComputes.inc"
#undef SLUICE_BLOCK_COMPUTE

namespace {
std::map<std::string, const FeatureCompute *> &getRegistry() {
  static std::map<std::string, const FeatureCompute *> computes = [] {
    std::map<std::string, const FeatureCompute *> found;
#define SLUICE_BLOCK_COMPUTE(name) found[#name] = &getCompute_##name();
#include "FeatureComputes.inc"
#undef SLUICE_BLOCK_COMPUTE
    return found;
  }();
  return computes;
}
} // namespace

const FeatureCompute *lookupCompute(const std::string &name) {
  auto it = getRegistry().find(name);
  return it == getRegistry().end() ? nullptr : it->second;
}

void registerCompute(const std::string &name, const FeatureCompute &compute) {
  getRegistry().emplace(name, &compute);
}

HiddenNorm getHiddenNorm(const SlotContext &c, Slot slot) {
  const auto &pair =
      static_cast<const blocks::HiddenNormPair &>(*c.feature.shape);
  std::string name = pair.getNormName(slot);
  int base = pair.getStateBase(slot);
  return {c.weight(name + ".weight"),
          c.weight(name + ".bias"),
          c.grad(name + ".weight"),
          c.grad(name + ".bias"),
          c.region(base),
          c.region(base + 1)};
}

} // namespace sluice::rt::block
