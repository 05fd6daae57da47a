//===- HostMemory.h - What a rank needs against what the host has -*- C++
//-*-===//
//
// A plan for a real model (Llama-3-8B: 8 billion parameters, 128 GB with
// gradients and Adam moments in fp32) would have the CPU runtime allocate
// memory lazily and be killed by the kernel half-way through the first
// step. These estimates let sluice-run refuse such a run before it starts,
// with the figures a user needs to pick more devices or a smaller model.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_HOSTMEMORY_H
#define SLUICE_RUNTIME_HOSTMEMORY_H

#include "Plan.h"
#include "Status.h"

#include <cstdint>
#include <string>

namespace sluice::rt {

struct MemoryNeed {
  int64_t parameters = 0; // parameter count (weights)
  int64_t bytes = 0;      // everything the rank holds for the whole run
  /// Of `bytes`, the parameters' training state (TrainingState.h).
  int64_t stateBytes = 0;
};

/// One device of a plan: its parameters with gradients and both Adam
/// moments, its vocabulary shards, the plan's buffers and the largest
/// workspace of its stages.
MemoryNeed getDeviceMemoryNeed(const Plan &plan, int device);

/// The single-process reference: the whole model and one microbatch's
/// state.
MemoryNeed getReferenceMemoryNeed(const ModelConfig &model,
                                  const Precision &precision);

/// The fp8 precision on a GPU: the FP8 copies of the transformer
/// projections' weights that the kernels quantize once a step and keep
/// (Fp8Operand::steady), one per layout the GEMMs take (F reads W^T, B
/// reads W): 2 bytes a weight element held (and a 256-byte scale slot
/// and alignment per copy). `device` -1: the whole model (the
/// reference). 0 in the other precisions.
int64_t getFp8WeightCopyBytes(const Plan &plan, int device);

/// `sluice-run PLAN --memory`: a line per pipeline device of what one of
/// its ranks needs, the training state apart (the figure sluice-compile's
/// --report gives as `parameter_bytes`).
std::string describeMemoryNeeds(const Plan &plan);

/// MemAvailable of /proc/meminfo, in bytes; -1 where unknown.
int64_t getAvailableHostBytes();

/// An error naming the figures when `need` exceeds `limit` bytes (no
/// check when limit < 0); `who` names the rank or the reference with its
/// verb ("rank 0 needs", "the 4 ranks on this host need"), `advice` what
/// would help where it is ("a smaller model, or --memory-limit").
Status checkMemoryNeed(const MemoryNeed &need, int64_t limit,
                       const std::string &who, const std::string &limitSource,
                       const std::string &advice);

} // namespace sluice::rt

#endif // SLUICE_RUNTIME_HOSTMEMORY_H
