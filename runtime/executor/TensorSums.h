//===- TensorSums.h - What a tensor-parallel group sums ---------*- C++ -*-===//
//
// With tensor parallelism (plan.tp > 1) a device's shards sum partial
// results inside the passes (the calls a StageRunner issues: Megatron-LM's
// f and g operators), and some gradients before the update: those each
// shard has for its own tokens only (sequence parallelism's norms), and
// those of key/value heads a group of shards holds alike (fewer heads than
// shards). This is where both live.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_EXECUTOR_TENSORSUMS_H
#define SLUICE_RUNTIME_EXECUTOR_TENSORSUMS_H

#include "Plan.h"
#include "Stage.h"
#include "Transfers.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace sluice::rt {

class TensorGroupSums {
public:
  /// `group` spans the device's shards (rank = shard index); null: the
  /// layers are whole and nothing here does anything.
  TensorGroupSums(const Plan &plan, int deviceIndex, Communicator *group,
                  ParameterStore &parameters, Device &device,
                  TransferEngine &transfers);

  int getShardIndex() const { return shardIndex; }
  /// Finds the gradients to sum before the update; allocates scratch.
  Status prepare();
  /// The collectives a stage runner issues, on the group's stream
  /// (StreamKind::Tensor) after the compute stream's work so far. The
  /// all-reduce the pass waits for at once (Weitkamp, 2024,
  /// "Communication Overhead"); the started ones when it reads their
  /// result, so compute it enqueues meanwhile runs beside them (a BW
  /// pass's weight-gradient GEMMs, TransformerBlock::backward). The waits
  /// advance the pipeline's transfers. A failure is kept for
  /// takeFailure(), as the runner's calls return nothing.
  StageRunner::TensorGroup getCalls();
  /// An all-reduce of `count` elements over the group, in place, ordered
  /// on the compute stream (the fp8 records' maxima at a step's end).
  Status allReduce(DevicePtr data, int64_t count, Reduction reduction);
  /// The first failure of a call since the last take, if any.
  Status takeFailure() {
    Status st = failure;
    failure = Status::ok();
    return st;
  }
  /// Off while a rank calibrates alone: its partners are not there.
  void setEnabled(bool on) { enabled = on; }

  /// ZeRO-1: each sum is issued at the grad_sync that reduces its
  /// parameter (name -> instruction), before the reduce-scatter.
  void assignSyncs(const std::map<std::string, size_t> &averagedBy);
  /// The sums assigned to grad_sync `instruction` (ZeRO-1).
  Status sumAt(size_t instruction);
  /// Every sum (without ZeRO-1: once the step's passes are done).
  Status sumAll();

  /// A layer whose key/value heads this shard holds alike with `group`
  /// (ranks in the tensor group): the K and V columns of its QKV
  /// projection.
  struct ReplicatedKeyValues {
    std::string weight, bias;
    // Local columns: the queries', then the keys' and values' together.
    int64_t queries = 0, keyValues = 0;
    std::vector<int> group;
    size_t syncInstruction = 0;
  };
  const std::vector<ReplicatedKeyValues> &getReplicatedKeyValues() const {
    return replicatedKv;
  }

private:
  /// A parameter whole on every shard whose gradient each shard has a part
  /// of (ParameterSpec::reduce): under sequence parallelism, its tokens'; a
  /// gain every head shares, its heads'.
  struct GroupSummed {
    std::string name;
    int64_t count = 0;
    size_t syncInstruction = 0;
  };
  Status sum(const ReplicatedKeyValues &r);
  Status sum(const GroupSummed &t);
  /// The group's stream, after the compute stream's work so far: every
  /// collective of the group's communicator runs there, in the order
  /// issued (NCCL's rule for one communicator).
  Stream &handOver();

  const Plan &plan;
  int deviceIndex;
  Communicator *group;
  int shardIndex;
  ParameterStore &parameters;
  Device &device;
  Kernels &kernels;
  Stream &compute, &tensor;
  std::unique_ptr<Event> ready;
  TransferEngine &transfers;
  bool enabled = true;
  Status failure = Status::ok();
  std::vector<ReplicatedKeyValues> replicatedKv;
  std::vector<GroupSummed> groupSummed;
  DeviceBuffer kvScratch;
  int64_t kvScratchElements = 0;
};

} // namespace sluice::rt

#endif // SLUICE_RUNTIME_EXECUTOR_TENSORSUMS_H
