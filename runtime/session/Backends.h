//===- Backends.h - The backends this build has -----------------*- C++ -*-===//
//
// One list of the device backends a build holds -- the CPU's always, the
// CUDA backend's where nvcc was found -- each able to open a device of its
// kind in this process. The backend conformance suite
// (test/conformance) runs over every entry; a new backend adds itself
// here and is held to the same suite.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_SESSION_BACKENDS_H
#define SLUICE_RUNTIME_SESSION_BACKENDS_H

#include "Backend.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace sluice::rt {

struct BackendEntry {
  /// What --backend calls it: "cpu", "cuda".
  std::string name;
  /// Opens this process's first device of the kind; an error names why
  /// there is none (no GPU, no driver).
  std::function<Status(std::unique_ptr<Device> &)> open;
};

/// The backends of this build, the CPU's first.
const std::vector<BackendEntry> &getBackends();

} // namespace sluice::rt

#endif // SLUICE_RUNTIME_SESSION_BACKENDS_H
