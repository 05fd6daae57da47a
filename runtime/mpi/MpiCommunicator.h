//===- MpiCommunicator.h - Communication over MPI ---------------*- C++ -*-===//
//
// MPI_COMM_WORLD as a Communicator over host memory: every DevicePtr it is
// given must be host memory (the CPU backend's, or the pinned staging
// buffers of the CUDA backend's staged communicator). The streams it is
// given are host streams, on which work runs when enqueued: an MPI call
// is posted at once, and Request::waitOn blocks until MPI has finished.
// Nothing is copied: a send reads its source until it completes.
//
// Element types: fp32, f64 and int32 map to MPI's; bf16 travels as 16-bit
// words and is reduced with MPI operations of our own (round to nearest
// even after each fp32 sum or max), since MPI has no bf16.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_CPU_MPICOMMUNICATOR_H
#define SLUICE_RUNTIME_CPU_MPICOMMUNICATOR_H

#include "Backend.h"
#include "ProcessGroup.h"

namespace sluice::rt {

/// MPI_COMM_WORLD, or a part of it (split). The caller initialises and
/// finalises MPI. abort() ends every rank of the world. It is the job's
/// process group too (ProcessGroup.h): MPI is how the ranks met.
class MpiCommunicator final : public HostGroup {
public:
  MpiCommunicator();
  /// The ranks of MPI_COMM_WORLD that give the same `color`, ranked by
  /// `key` (MPI_Comm_split; collective over the world). A negative color
  /// takes part in the split and gets null.
  static std::unique_ptr<MpiCommunicator> split(int color, int key);
  /// The MPI communicator this one spans (an MPI_Comm *).
  void *getHandle() const { return base; }
  ~MpiCommunicator() override;
  int rank() const override { return worldRank; }
  int size() const override { return worldSize; }
  // Every device operation (runtime/DeviceCollectives.def).
#define SLUICE_DEVICE_OP(NAME, PARAMS, REQUIRED)                               \
  std::unique_ptr<Request> NAME PARAMS override;
#include "DeviceCollectives.def"
  int maxTag() const override { return tagUpperBound - 1; }
  Status allReduceSum(DevicePtr data, int64_t count, const int *group,
                      int groupSize, Stream &stream) override;
  Status allReduceSum(double *data, int64_t n) override;
  Status allReduceMax(double *data, int64_t n) override;
  Status gatherToRoot(const std::string &mine,
                      std::vector<std::string> &all) override;
  void barrier() override;
  [[noreturn]] void abort(int code) override;

  // ProcessGroup.
  std::unique_ptr<ProcessGroup> splitByHost() override;
  std::unique_ptr<ProcessGroup> splitGroup(int color, int key) override;
  std::unique_ptr<HostGroup> splitHostGroup(int color, int key) override;
  Status allReduceInts(int64_t *values, int count,
                       Reduction reduction) override;
  Status allGatherBytes(const void *mine, int64_t bytes, void *all) override;
  Status broadcastBytes(void *data, int64_t bytes, int root) override;

private:
  /// Takes an MPI_Comm (heap, owned); null: MPI_COMM_WORLD.
  explicit MpiCommunicator(void *owned);
  /// The communicator this one spans (MPI_Comm *).
  void *base = nullptr;
  int worldRank = 0, worldSize = 1, tagUpperBound = 32767;
  /// One duplicate of MPI_COMM_WORLD per channel, and the bf16 sum and max
  /// operations (MPI handles are ints in MPICH and pointers in Open MPI:
  /// kept opaque here).
  void *channels[kChannels] = {};
  void *bf16Sum = nullptr, *bf16Max = nullptr;
};

} // namespace sluice::rt

#endif // SLUICE_RUNTIME_CPU_MPICOMMUNICATOR_H
