//===- CpuDevice.h - The host as a device -----------------------*- C++ -*-===//
//
// The CPU backend's Device: host memory, and streams that run each piece
// of work when it is enqueued -- so every ordering a stream or event
// promises holds trivially, and an event's time is the host clock when it
// was recorded. Computes in fp32; a bf16 plan's arrays stay bf16 and each
// kernel call widens and rounds them (StagedKernels.h).
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_CPU_CPUDEVICE_H
#define SLUICE_RUNTIME_CPU_CPUDEVICE_H

#include "Backend.h"
#include "CpuKernels.h"
#include "StagedKernels.h"

namespace sluice::rt {

class CpuDevice final : public Device {
public:
  std::string describe() const override { return "cpu"; }
  bool supports(const Precision &) const override { return true; }
  Status allocate(DType type, int64_t count, DeviceBuffer &out) override;
  int64_t getFreeBytes() override { return -1; }
  Stream &getStream(StreamKind kind) override;
  Kernels &getKernels(StreamKind) override { return staged; }
  std::unique_ptr<Event> createEvent() override;
  void upload(DevicePtr dst, const void *host, int64_t bytes,
              Stream &stream) override;
  void download(void *host, DevicePtr src, int64_t bytes,
                Stream &stream) override;

protected:
  void release(void *data, int64_t bytes) override;

private:
  HostStream streams[kStreamKinds];
  CpuKernels kernels;
  StagedKernels staged{kernels};
};

} // namespace sluice::rt

#endif // SLUICE_RUNTIME_CPU_CPUDEVICE_H
