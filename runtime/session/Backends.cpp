//===- Backends.cpp - The backends this build has -------------------------===//

#include "Backends.h"

#include "CpuDevice.h"
#if SLUICE_HAVE_CUDA
#include "CudaDevice.h"
#include "Device.h"
#endif

namespace sluice::rt {

const std::vector<BackendEntry> &getBackends() {
  static const std::vector<BackendEntry> backends = [] {
    std::vector<BackendEntry> list;
    list.push_back({"cpu", [](std::unique_ptr<Device> &out) {
                      out = std::make_unique<CpuDevice>();
                      return Status::ok();
                    }});
#if SLUICE_HAVE_CUDA
    list.push_back({"cuda", [](std::unique_ptr<Device> &out) {
                      std::vector<cuda::DeviceInfo> devices;
                      if (!cuda::listDevices(devices) || devices.empty())
                        return Status::error("no CUDA device on this machine");
                      std::unique_ptr<cuda::CudaDevice> gpu;
                      if (Status st = cuda::CudaDevice::open(0, gpu); !st)
                        return st;
                      out = std::move(gpu);
                      return Status::ok();
                    }});
#endif
    return list;
  }();
  return backends;
}

} // namespace sluice::rt
