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

} // namespace sluice::rt

#endif // SLUICE_RUNTIME_PROCESSGROUP_H
