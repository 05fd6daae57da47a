//===- StagedCommunicator.h - MPI through pinned host memory ----*- C++ -*-===//
//
// A Communicator for GPU memory over a host transport: every transfer is
// copied to pinned host memory on the stream it is ordered after, moved by
// the MPI communicator (runtime/mpi/HostGroup.h), and copied back to
// the device on that stream. It is how several ranks share one GPU (NCCL
// refuses two ranks of a communicator on one device before 2.30), and
// works on any machine with MPI, at the cost of two copies per transfer.
//
// A request advances in phases that never block the host: the device-to-
// host copy completes (an event), MPI is posted, MPI completes, the copy
// back is enqueued. test() advances it; waitOn(stream) blocks the host
// until MPI is done and then only enqueues a wait on the copy back. A
// send's source may be written once its copy out has run, so waitOn for a
// send does not wait for MPI at all. Collectives are posted in the order
// they were issued on each channel, as MPI requires, because the
// vocabulary shards run one collective per channel at a time.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_CUDA_STAGEDCOMMUNICATOR_H
#define SLUICE_RUNTIME_CUDA_STAGEDCOMMUNICATOR_H

#include "HostAssisted.h"

#include <map>
#include <memory>
#include <vector>

namespace sluice::rt::cuda {

/// Pinned host buffers, reused by size once the device is done with them.
class PinnedPool {
public:
  ~PinnedPool();
  /// `bytes` of pinned memory (null if the host has none left).
  void *take(int64_t bytes);
  /// Returns a buffer, reusable once `pending` (a copy still reading it;
  /// may be null) has happened.
  void give(void *data, int64_t bytes, std::unique_ptr<Event> pending);

private:
  struct Block {
    void *data;
    std::unique_ptr<Event> pending;
  };
  std::map<int64_t, std::vector<Block>> free;
};

class StagedCommunicator final : public HostAssistedCommunicator {
public:
  StagedCommunicator(HostGroup &host, CudaDevice &device)
      : HostAssistedCommunicator(host, device) {}

  // Every device operation (runtime/DeviceCollectives.def).
#define SLUICE_DEVICE_OP(NAME, PARAMS, REQUIRED)                               \
  std::unique_ptr<Request> NAME PARAMS override;
#include "DeviceCollectives.def"

  /// What a staged request needs from its communicator.
  HostGroup &getHost() { return host; }
  CudaDevice &getDevice() { return device; }
  PinnedPool &getPool() { return pool; }

private:
  /// A send (or receive) through a pinned host buffer.
  std::unique_ptr<Request> stagePointToPoint(bool send, DevicePtr data,
                                             int64_t count, int peer, int tag,
                                             Stream &stream);
  PinnedPool pool;
};

} // namespace sluice::rt::cuda

#endif // SLUICE_RUNTIME_CUDA_STAGEDCOMMUNICATOR_H
