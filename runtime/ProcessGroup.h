//===- ProcessGroup.h - The job's processes on the host side ----*- C++ -*-===//
//
// How a job's processes find and agree with each other before and around
// training -- which ranks share a host or a GPU, whether any rank failed a
// check, the NCCL bootstrap's unique id -- as torch.distributed's process
// groups and NCCL's bootstrap network do it. Device data moves through
// Communicators (Backend.h); this is the host's small talk. The runtime
// core programs against this interface and links no MPI: runtime/mpi
// implements it over MPI (MpiCommunicator), and another launcher (a TCP
// store, a scheduler's PMIx) can implement it instead.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_PROCESSGROUP_H
#define SLUICE_RUNTIME_PROCESSGROUP_H

#include "Backend.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace sluice::rt {

class ProcessGroup {
public:
  virtual ~ProcessGroup() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  /// The ranks of this group on this rank's host, ranked as here
  /// (collective over the group).
  virtual std::unique_ptr<ProcessGroup> splitByHost() = 0;
  /// The ranks of this group giving the same `color`, ranked by `key`
  /// (collective over the group).
  virtual std::unique_ptr<ProcessGroup> splitGroup(int color, int key) = 0;

  /// Every rank's `count` values reduced element-wise, on every rank.
  virtual Status allReduceInts(int64_t *values, int count,
                               Reduction reduction) = 0;
  /// Every rank's `bytes` bytes at `mine`, in rank order, into `all`
  /// (size() * bytes).
  virtual Status allGatherBytes(const void *mine, int64_t bytes,
                                void *all) = 0;
  /// Rank `root`'s `bytes` bytes at `data`, to every rank's `data`.
  virtual Status broadcastBytes(void *data, int64_t bytes, int root) = 0;
  /// Ends every process of the job now: a failure the others cannot learn
  /// of otherwise.
  [[noreturn]] virtual void abort(int code) = 0;
};

/// A process group that also moves host-staged data: the job's ranks as
/// a Communicator (sends, collectives and host values over host memory)
/// and as a ProcessGroup (their meeting and agreement). The GPU backend's
/// communicators stand on one -- NCCL's bootstrap and the staged transport
/// -- and so name no launcher; runtime/mpi's MpiCommunicator is the one
/// the build has.
class HostGroup : public Communicator, public ProcessGroup {
public:
  // One rank, size and abort for both interfaces.
  int rank() const override = 0;
  int size() const override = 0;
  [[noreturn]] void abort(int code) override = 0;
  /// The ranks of this group giving the same `color`, ranked by `key`, as
  /// a host group of their own; null where `color` is negative (collective
  /// over the group).
  virtual std::unique_ptr<HostGroup> splitHostGroup(int color, int key) = 0;
};

/// A communicator whose host side -- ranks, the transport's largest tag,
/// host values, strings gathered to the root, barriers and the job's
/// abort -- is a host group's; a transport built on one adds its device
/// operations (the CUDA backend's, the NCCL emulation's).
class HostBackedCommunicator : public Communicator {
public:
  int rank() const override { return host.rank(); }
  int size() const override { return host.size(); }
  int maxTag() const override { return host.maxTag(); }
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
  using Communicator::allReduceSum;

protected:
  explicit HostBackedCommunicator(HostGroup &host) : host(host) {}
  HostGroup &host;
};

} // namespace sluice::rt

#endif // SLUICE_RUNTIME_PROCESSGROUP_H
