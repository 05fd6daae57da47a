//===- RankBackend.h - A rank's device and communicators --------*- C++ -*-===//
//
// Where a rank sits in the plan's pp x dp x tp mesh, the device it runs
// on and the communicators of its groups, opened for the backend and
// transport a session asks for -- after checking that the host's (or the
// GPU's) memory holds what the ranks there need.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_SESSION_RANKBACKEND_H
#define SLUICE_RUNTIME_SESSION_RANKBACKEND_H

#include "CommLayout.h"
#include "MpiCommunicator.h"
#include "NcclEmulation.h"
#include "Plan.h"
#include "SessionOptions.h"
#if SLUICE_HAVE_CUDA
#include "CudaBackend.h"
#endif

#include <memory>

namespace sluice::rt::session {

/// This rank's device and the communicators its plan runs over.
struct RankBackend {
  std::unique_ptr<Device> device;
  /// This rank's pipeline, replicas, tensor-parallel shards and expert
  /// group over MPI
  /// (host values; the CPU backend's transport), where the plan splits
  /// the world.
  std::unique_ptr<HostGroup> hostGroups[kMeshGroups];
#if SLUICE_HAVE_CUDA
  /// The GPU's communicators over those groups (NCCL, or staged MPI).
  cuda::RankComms gpu;
#endif
  /// --backend cpu --transport nccl: the groups under NCCL's rules.
  std::unique_ptr<NcclEmulation> emulation;
  std::unique_ptr<Communicator> emulated[kMeshGroups];
  /// The communicator the plan's pipeline runs over (rank = device).
  Communicator *comm = nullptr;
  /// With data parallelism: the ranks holding this device's replicas, and
  /// which replica this rank is.
  Communicator *replicas = nullptr;
  int replica = 0;
  /// With tensor parallelism: the ranks holding this device's shards.
  Communicator *shards = nullptr;
  /// With expert parallelism: the replicas of this device's shard that
  /// split the experts with it (rank = member), and those holding the same
  /// experts as it (rank = replica / ep; none when dp = ep).
  Communicator *experts = nullptr, *expertReplicas = nullptr;
  /// With context parallelism: the ranks this rank's sequences split
  /// over (rank = context), and which of them this rank is.
  Communicator *contexts = nullptr;
  int context = 0;
  /// With either: the ranks of this rank's replica, every device and shard
  /// (they write a checkpoint together); under expert parallelism, of its
  /// expert group.
  std::unique_ptr<Communicator> model;
  /// The CPU backend's threads (0: another backend).
  int threads = 0;
};

/// The kernels `plan` runs (Kernels.def's list, less those of what the
/// plan leaves out: FP8 GEMMs, logit soft-capping, vocabulary shards or the
/// whole vocabulary layers).
std::vector<Kernels::Id> getKernelsNeeded(const Plan &plan);

/// The first kernel `plan` needs that `kernels` does not run in the plan's
/// precision, described for an error ("gemmFp8 (fp8)"); empty when it runs
/// them all.
std::string findUnsupportedKernel(const Plan &plan, const Kernels &kernels);

/// Opens `out` for `options.backend` (collective over `world`); ends the
/// session everywhere when a rank cannot, or when the backend lacks a
/// kernel the plan needs.
void openBackend(HostGroup &world, const Plan &plan,
                 const SessionOptions &options, RankBackend &out);

} // namespace sluice::rt::session

#endif // SLUICE_RUNTIME_SESSION_RANKBACKEND_H
