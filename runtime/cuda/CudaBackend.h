//===- CudaBackend.h - A rank's GPU and its communicator --------*- C++ -*-===//
//
// Where sluice-run's `--backend cuda` comes from: which GPU a rank uses and
// how it talks to the others.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_CUDA_CUDABACKEND_H
#define SLUICE_RUNTIME_CUDA_CUDABACKEND_H

#include "Backend.h"
#include "MpiCommunicator.h"
#include "Plan.h"

#include <memory>
#include <string>

namespace sluice::rt::cuda {

/// How this host's ranks sit on its GPUs.
struct Placement {
  int gpu = 0;       // this rank's GPU
  int gpus = 0;      // GPUs on the host
  int hostRanks = 1; // ranks on the host
  int sharing = 1;   // ranks on this rank's GPU
  int gpuRank = 0;   // this rank among them
  bool empty() const { return gpus == 0; }
};

/// The host's ranks spread round-robin over its GPUs (collective over the
/// world: every rank calls it).
Status placeRank(MpiCommunicator &world, Placement &out);

/// Opens this rank's GPU (not collective).
Status openDevice(const Placement &placement, std::unique_ptr<Device> &out);

/// The communicator (collective): `transport` is "nccl" (one rank per GPU:
/// NCCL refuses two ranks of a communicator on one GPU), "mpi" (device
/// memory staged through pinned host memory; any placement), or "auto"
/// (NCCL where every GPU has one rank, else MPI).
Status openCommunicator(MpiCommunicator &world, Device &device,
                        const Placement &placement, const Plan &plan,
                        const std::string &transport,
                        std::unique_ptr<Communicator> &out,
                        std::string &chosen);

} // namespace sluice::rt::cuda

#endif // SLUICE_RUNTIME_CUDA_CUDABACKEND_H
