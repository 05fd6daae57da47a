//===- GpuPlacement.h - Which GPU each rank of a host uses ------*- C++ -*-===//
//
// A host's ranks spread round-robin over the GPUs each of them sees, then
// counted per physical GPU by its UUID: right both when every rank sees
// every GPU (8 ranks, 8 GPUs: one each) and when a launcher gives each rank
// its own (SLURM's --gpus-per-task=1: each sees one GPU, index 0, but a
// different one), where counting by index would put all 8 on one GPU.
// Plain data, so that the rule is tested without a GPU.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_GPUPLACEMENT_H
#define SLUICE_RUNTIME_GPUPLACEMENT_H

#include <string>
#include <vector>

namespace sluice::rt {

struct GpuPlacement {
  int gpu = 0;       // this rank's GPU, as its process numbers them
  int gpus = 0;      // distinct GPUs the host's ranks use
  int hostRanks = 1; // ranks on the host
  int sharing = 1;   // ranks on this rank's GPU
  int gpuRank = 0;   // this rank among them
  int gpuColor = 0;  // the same for every rank on this GPU, per host
  bool empty() const { return gpus == 0; }
};

/// The GPU index host rank `hostRank` takes among the `visible` GPUs its
/// process sees (round-robin).
int chooseGpu(int hostRank, int visible);

/// Where host rank `hostRank` sits, given the UUID of the GPU each of the
/// host's ranks chose, in host-rank order (`chosen` is this rank's index;
/// an empty UUID list: no GPU here).
GpuPlacement placeOnGpus(int hostRank, int chosen,
                         const std::vector<std::string> &uuids);

} // namespace sluice::rt

#endif // SLUICE_RUNTIME_GPUPLACEMENT_H
