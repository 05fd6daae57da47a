//===- CudaBackend.h - A rank's GPU and its communicators -------*- C++ -*-===//
//
// Where sluice-run's `--backend cuda` comes from: which GPU a rank uses and
// how it talks to the others (docs/gpu.md, docs/communication.md).
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_CUDA_CUDABACKEND_H
#define SLUICE_RUNTIME_CUDA_CUDABACKEND_H

#include "Backend.h"
#include "GpuPlacement.h"
#include "ProcessGroup.h"
#include "NcclCommunicator.h"
#include "Plan.h"

#include <memory>
#include <string>

namespace sluice::rt::cuda {

/// How this host's ranks sit on its GPUs (GpuPlacement.h).
using Placement = GpuPlacement;

/// Collective over the world: every rank calls it.
Status placeRank(HostGroup &world, Placement &out);

/// Opens this rank's GPU (not collective).
Status openDevice(const Placement &placement, std::unique_ptr<Device> &out);

/// The NCCL release this process runs with (2.30.7 is 23007; 0 if none).
int getNcclVersion();
/// The libraries this process loaded, with versions and files: the CUDA
/// runtime and driver, cuBLASLt (and the headers it was built against),
/// cuDNN and NCCL. Every GPU run prints it (a GPU log says what ran).
std::string describeLibraries();

/// Whether NCCL may put several ranks of one communicator on a GPU here
/// (NCCL 2.30 and later, with NCCL_MULTI_RANK_GPU_ENABLE=1).
bool ncclAllowsSharedGpus();

/// This rank's communicators: its pipeline, its replicas and its
/// tensor-parallel shards (null where the plan has none).
struct RankComms {
  std::unique_ptr<NcclMesh> mesh;
  std::unique_ptr<Communicator> groups[kMeshGroups];
  std::string chosen; // the transport, said
};

/// Collective: `transport` is "nccl" (NCCL between the GPUs), "mpi"
/// (device memory staged through pinned host memory; any placement), or
/// "auto" (NCCL unless ranks share a GPU that NCCL cannot share). `hosts`
/// are the same groups over MPI.
Status openCommunicators(HostGroup &world, Device &device,
                         const Placement &placement, const Plan &plan,
                         HostGroup *hosts[kMeshGroups],
                         const std::string &transport,
                         const NcclSettings &settings, RankComms &out);

} // namespace sluice::rt::cuda

#endif // SLUICE_RUNTIME_CUDA_CUDABACKEND_H
