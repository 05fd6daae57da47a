//===- CommLayout.h - The communicators a plan needs on a rank --*- C++ -*-===//
//
// Which NCCL-style communicators a rank of a plan's mesh holds, and over
// which ranks (docs/communication.md). Every communicator is split from
// the world, one split per entry, in this order on every rank; a rank that
// is not a member still takes part in the split. The CUDA backend splits
// NCCL communicators from it (NcclMesh), the CPU backend's NCCL emulation
// MPI ones, so both hold exactly the same set.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_COMMLAYOUT_H
#define SLUICE_RUNTIME_COMMLAYOUT_H

#include "Backend.h"
#include "Plan.h"

#include <optional>
#include <string>
#include <vector>

namespace sluice::rt {

/// Where a rank sits in the plan's mesh.
struct MeshPosition {
  int device = 0, replica = 0, shard = 0;
  /// The context-parallel rank within the replica (0 without cp).
  int context = 0;
  /// The rank's place among the device's ranks that sum its gradients
  /// (its replicas' context-parallel ranks).
  int getGradientRank(const Plan &plan) const {
    return replica * plan.cp + context;
  }
};

/// The rank's mesh position: the tensor-parallel shard fastest, then the
/// context-parallel rank, then the data-parallel replica, then the
/// pipeline device (Megatron-LM's order: a node holds whole
/// tensor-parallel groups, then context-parallel ones).
MeshPosition getMeshPosition(const Plan &plan, int rank);

/// A rank's groups: its pipeline (same replica, context rank and shard;
/// rank = device), the ranks that sum its gradients (same device and
/// shard: every replica's context-parallel ranks; rank = replica * cp +
/// context), its
/// tensor-parallel shards (same device and replica; rank = shard), its
/// expert group (same device, shard and context rank, the ep consecutive
/// replicas that split the experts; rank = replica mod ep), the ranks
/// holding the same experts as it (same device and shard, every ep-th
/// replica's context-parallel ranks; rank = replica / ep * cp + context),
/// and its context-parallel group (same device, replica and shard; rank =
/// context).
enum class MeshGroup {
  Pipeline = 0,
  Replicas = 1,
  Shards = 2,
  Experts = 3,
  ExpertReplicas = 4,
  Context = 5
};
constexpr int kMeshGroups = 6;


struct CommSpec {
  std::string name;
  MeshGroup group;
  /// The split's color for this rank; -1: not a member.
  int color = -1;
  /// The rank within the communicator (the split's key).
  int key = 0;
  /// The stream the group's operations on this communicator run on; none
  /// for a sub-group's sums (a tied table's two ends, shards sharing
  /// key/value heads).
  std::optional<StreamKind> stream;
  /// A sub-group's members, as ranks of `group`.
  std::vector<int> members;
};

/// Every communicator `plan` needs besides the world, for the rank at
/// `at`, in the order every rank splits them.
std::vector<CommSpec> getCommLayout(const Plan &plan, const MeshPosition &at);

} // namespace sluice::rt

#endif // SLUICE_RUNTIME_COMMLAYOUT_H
