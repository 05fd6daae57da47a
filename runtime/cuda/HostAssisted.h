//===- HostAssisted.h - What GPU communicators do through MPI ---*- C++ -*-===//
//
// The part every GPU communicator shares: ranks, host values (the step's
// loss, the checks), gathering strings and barriers go through MPI on the
// host; so does the tied embedding table's group sum, once per step,
// staged through host memory rather than a communicator per group.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_CUDA_HOSTASSISTED_H
#define SLUICE_RUNTIME_CUDA_HOSTASSISTED_H

#include "CudaDevice.h"
#include "MpiCommunicator.h"

namespace sluice::rt::cuda {

class HostAssistedCommunicator : public Communicator {
public:
  int rank() const override { return host.rank(); }
  int size() const override { return host.size(); }
  int maxTag() const override { return host.maxTag(); }
  Status allReduceSum(DevicePtr data, int64_t count, const int *group,
                      int groupSize, Stream &stream) override;
  Status allReduceSum(double *data, int64_t n) override {
    return host.allReduceSum(data, n);
  }
  Status allReduceMax(double *data, int64_t n) override {
    return host.allReduceMax(data, n);
  }
  Status gatherToRoot(const std::string &mine,
                      std::vector<std::string> &all) override {
    return host.gatherToRoot(mine, all);
  }
  void barrier() override { host.barrier(); }
  [[noreturn]] void abort(int code) override { host.abort(code); }

protected:
  HostAssistedCommunicator(MpiCommunicator &host, CudaDevice &device)
      : host(host), device(device) {}

  MpiCommunicator &host;
  CudaDevice &device;
  HostStream hostStream;
};

} // namespace sluice::rt::cuda

#endif // SLUICE_RUNTIME_CUDA_HOSTASSISTED_H
