//===- MpiCommunicator.h - Communication over MPI ---------------*- C++ -*-===//

#ifndef SLUICE_RUNTIME_CPU_MPICOMMUNICATOR_H
#define SLUICE_RUNTIME_CPU_MPICOMMUNICATOR_H

#include "Backend.h"

namespace sluice::rt {

/// MPI_COMM_WORLD. The caller initialises and finalises MPI.
class MpiCommunicator final : public Communicator {
public:
  MpiCommunicator();
  int rank() const override { return worldRank; }
  int size() const override { return worldSize; }
  std::unique_ptr<Request> sendAsync(const float *data, int64_t n, int peer,
                                     int tag) override;
  std::unique_ptr<Request> recvAsync(float *data, int64_t n, int peer,
                                     int tag) override;
  int maxTag() const override { return tagUpperBound - 1; }
  std::unique_ptr<Request> broadcastAsync(float *data, int64_t n, int root,
                                          int channel) override;
  std::unique_ptr<Request> allReduceAsync(float *data, int64_t n,
                                          Reduction reduction,
                                          int channel) override;
  std::unique_ptr<Request> reduceSumAsync(float *data, int64_t n, int root,
                                          int channel) override;
  Status allReduceSum(float *data, int64_t n, const int *group,
                      int groupSize) override;
  Status allReduceSum(double *data, int64_t n) override;
  Status allReduceMax(double *data, int64_t n) override;
  Status gatherToRoot(const std::string &mine,
                      std::vector<std::string> &all) override;
  void barrier() override;
  [[noreturn]] void abort(int code) override;

private:
  int worldRank = 0, worldSize = 1, tagUpperBound = 32767;
  /// One duplicate of MPI_COMM_WORLD per channel (MPI_Comm values are ints
  /// in MPICH and pointers in Open MPI: kept opaque here).
  void *channels[kChannels] = {};
};

} // namespace sluice::rt

#endif // SLUICE_RUNTIME_CPU_MPICOMMUNICATOR_H
