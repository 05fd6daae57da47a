//===- Device.h - CUDA device discovery -------------------------*- C++ -*-===//
//
// What the CUDA backend needs to know about the GPUs before it picks one per
// rank: how many there are and what each can do.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_CUDA_DEVICE_H
#define SLUICE_RUNTIME_CUDA_DEVICE_H

#include "Status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace sluice::rt::cuda {

struct DeviceInfo {
  int index = 0;
  std::string name;
  int computeMajor = 0;
  int computeMinor = 0;
  int multiprocessors = 0;
  std::size_t globalMemoryBytes = 0;
  /// The GPU's UUID (16 bytes): the same physical GPU under every index
  /// and CUDA_VISIBLE_DEVICES a process sees.
  std::string uuid;
};

/// Fills `devices` with every visible GPU. A machine without a GPU or
/// without a driver yields an empty list and Status::ok(): the CPU backend
/// is the answer there, not an error.
Status listDevices(std::vector<DeviceInfo> &devices);

} // namespace sluice::rt::cuda

#endif // SLUICE_RUNTIME_CUDA_DEVICE_H
