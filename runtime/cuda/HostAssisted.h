//===- HostAssisted.h - What GPU communicators do on the host ---*- C++ -*-===//
//
// The part every GPU communicator shares: ranks, host values (the step's
// loss, the checks), gathering strings and barriers go through the job's
// host group (ProcessGroup.h: MPI in this build); so does the tied
// embedding table's group sum, once per step, staged through host memory
// rather than a communicator per group.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_CUDA_HOSTASSISTED_H
#define SLUICE_RUNTIME_CUDA_HOSTASSISTED_H

#include "CudaDevice.h"
#include "ProcessGroup.h"

namespace sluice::rt::cuda {

class HostAssistedCommunicator : public HostBackedCommunicator {
public:
  Status allReduceSum(DevicePtr data, int64_t count, const int *group,
                      int groupSize, Stream &stream) override;
  using HostBackedCommunicator::allReduceSum;

protected:
  HostAssistedCommunicator(HostGroup &host, CudaDevice &device)
      : HostBackedCommunicator(host), device(device) {}

  CudaDevice &device;
  HostStream hostStream;
};

} // namespace sluice::rt::cuda

#endif // SLUICE_RUNTIME_CUDA_HOSTASSISTED_H
