//===- GradientSync.h - Data-parallel gradient sums and ZeRO-1 --*- C++ -*-===//
//
// With data-parallel replicas (plan.dp > 1) each grad_sync instruction
// averages a stage's (or a vocabulary shard's) gradients over the
// replicas, on the data stream while compute goes on with the passes
// before it (the overlap of PyTorch DDP's buckets and Megatron-LM's
// overlapped gradient reduction). ZeroOne is ZeRO-1 (Rajbhandari et al.,
// 2020; Megatron-LM's distributed optimizer): it replaces each average by a
// reduce-scatter, keeps each replica's part of the optimizer state and
// update, and ends the step by all-gathering the weights. Planned per
// gradient group instead (planGroups), it is ZeRO-2: each layer's
// gradients are reduce-scattered as soon as its W has computed them and
// added to the replica's part, so the whole gradient lives only in a
// window the size of one layer (ParameterStore::setGradientGroups). With
// the weights sharded as well (ParameterStore::setWeightShards) it is
// ZeRO-3: each group's working weights are all-gathered before a pass
// uses them (gatherGroup), and the update is the replica's part alone.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_EXECUTOR_GRADIENTSYNC_H
#define SLUICE_RUNTIME_EXECUTOR_GRADIENTSYNC_H

#include "Parameters.h"
#include "Plan.h"
#include "Transfers.h"
#include "Vocab.h"

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace sluice::rt {

/// (offset, count) runs of the flat gradient buffer, per grad_sync
/// instruction.
using SyncRuns = std::map<size_t, std::vector<std::pair<int64_t, int64_t>>>;

class ZeroOne {
public:
  ZeroOne(ParameterStore &parameters, Communicator &replicas, Device &device,
          TransferEngine &transfers);

  /// Replica r owns part r of every run (ceil(count / dp) elements, the
  /// last ones fewer); allocates this replica's summed parts. Under
  /// expert parallelism the expert maps' runs (`expertRuns`) are shared
  /// among the replicas holding the same experts (`experts`; null: this
  /// replica alone owns them) in the same way.
  Status plan(const SyncRuns &runs, const SyncRuns &expertRuns = {},
              Communicator *experts = nullptr);
  /// ZeRO-2: the runs of each gradient group (keyed by group), the
  /// gradients read from the parameters' window.
  Status planGroups(const SyncRuns &groupRuns,
                    const SyncRuns &groupExpertRuns = {},
                    Communicator *experts = nullptr);
  bool isPerGroup() const { return perGroup; }
  /// ZeRO-2: group `group`'s sums over the replicas, this replica's part
  /// added to its accumulated part, on the compute stream; the group's
  /// window zeroed for the next W.
  Status reduceScatterGroup(size_t group);
  /// ZeRO-2: the vectors' gradients, whole beside the window for the step
  /// (ParameterStore::setGradientGroups), reduce-scattered and added to
  /// the replica's parts once the step's passes are done.
  Status reduceScatterVectors();
  /// ZeRO-3: group `group`'s working weights, every replica's part cast
  /// to the working type and all-gathered into the group's slot, on the
  /// compute stream (nothing when the slot holds them already).
  Status gatherGroup(size_t group);
  /// ZeRO-3's prefetch: starts group `next`'s gather while the compute
  /// stream runs group `current`'s layer (FSDP's forward and backward
  /// prefetch; Zhao et al., 2023) -- its
  /// parts copied into its slot on the compute stream, the all-gather on
  /// the data stream; gatherGroup(next) then waits for it. Nothing when
  /// `next` is gathered already or shares `current`'s slot.
  Status prefetchGroup(size_t current, size_t next);
  /// This replica's parts of the flat buffers, in packed order.
  const std::vector<IndexRange> &getOwnedRanges() const { return owned; }
  /// This replica's summed gradients, its parts packed.
  DevicePtr getPackedGrads() const { return packed.get(); }

  /// grad_sync `instruction`: each run's sum, this replica's part only,
  /// on `stream`; the requests go to `out`.
  Status reduceScatter(size_t instruction, DevicePtr grads, Stream &stream,
                       std::vector<std::unique_ptr<Request>> &out);
  /// A tied table whose ends are on two devices (`tiedGroup` in `comm`):
  /// replica r of each end holds the same part; their sum.
  Status sumTiedEnds(int64_t tiedRun, Communicator &comm,
                     const std::vector<int> &tiedGroup);
  /// Every replica's summed part back in its place of the gradient
  /// buffer, then to everyone (--dump-grads, --check-against).
  Status gatherWholeGradients();

  /// Keeps only this replica's part of the moments (after a checkpoint
  /// is loaded into them whole), or gathers them whole (before one is
  /// written).
  Status shardOptimizerState();
  Status gatherOptimizerState();
  /// This replica's part of the update, then every replica's updated
  /// weights (and their working copy) to all.
  Status applyOptimizer(const AdamConfig &adam, int64_t step);

private:
  /// All-gathers the parts of every run of `buffer` and waits for them on
  /// the compute stream.
  Status gatherParts(DevicePtr buffer);
  /// ZeRO-3: copies group `group`'s parts into its slot on the compute
  /// stream and starts its all-gathers on `stream` (into `gathers`).
  Status startGather(size_t group, Stream &stream,
                     std::vector<std::unique_ptr<Request>> &gathers);
  struct Run;
  /// ZeRO-2: the sum over the run's group of its gradients at `grads`,
  /// this replica's part added to its accumulated part.
  Status addSummedPart(const Run &run, DevicePtr grads);

  /// A run and the group that shares it (null: this replica alone).
  struct Run {
    int64_t offset = 0;
    /// ZeRO-2: where the run's gradients sit in the window; a run of
    /// vectors, where they sit whole beside it (else -1).
    int64_t windowAt = 0, vectorAt = -1;
    std::vector<int64_t> counts; // per member of `group`
    int64_t packedAt = 0;        // this replica's part in `packed`
    Communicator *group = nullptr;
    int me = 0;
    /// Where this replica's part starts in the run.
    int64_t getMine() const {
      int64_t at = 0;
      for (int r = 0; r < me; ++r)
        at += counts[size_t(r)];
      return at;
    }
  };
  ParameterStore &parameters;
  Communicator &replicas;
  Device &device;
  Stream &compute;
  TransferEngine &transfers;
  std::map<size_t, std::vector<Run>> runs;
  std::vector<IndexRange> owned;
  DeviceBuffer packed;
  /// ZeRO-2: planned per group; a part's sum before it is added.
  bool perGroup = false;
  DeviceBuffer scratch;
  /// ZeRO-3: the prefetched group and its gathers in flight (none:
  /// SIZE_MAX), and the event the data stream waits on for its parts.
  size_t prefetched = ~size_t(0);
  std::vector<std::unique_ptr<Request>> prefetches;
  std::unique_ptr<Event> partsCopied;
};

class GradientSync {
public:
  /// `expertReplicas`: under expert parallelism, the replicas holding this
  /// member's experts (null when it is the only one).
  GradientSync(const Plan &plan, int deviceIndex, ParameterStore &parameters,
               Communicator *replicas, Communicator *expertReplicas,
               Device &device, TransferEngine &transfers);

  /// What each grad_sync averages: a parameter goes to the last grad_sync
  /// naming a stage or shard that holds it (`averagedBy`: name ->
  /// instruction); adjacent tensors are averaged in one call. With ZeRO-1
  /// and a tied table across devices (`tiedAcross`), the table is a run of
  /// its own, so both ends cut it into the same parts.
  Status planRuns(bool tiedAcross, std::map<std::string, size_t> &averagedBy);
  /// ZeRO-2: this device's gradient groups -- each layer's parameters,
  /// layers that share a parameter (a tied table) merged -- as parameter
  /// names in window order (for ParameterStore::setGradientGroups), and
  /// after allocation (groupRuns) each group's contiguous flat runs, a
  /// tied table across devices a run of its own.
  std::vector<std::vector<std::string>> planGroups();
  Status planGroupRuns(bool tiedAcross);
  const SyncRuns &getGroupRuns() const { return groupRuns; }
  /// Under expert parallelism, the expert maps' runs of each group.
  const SyncRuns &getGroupExpertRuns() const { return groupExpertRuns; }
  /// Each parameter's group (TensorGroupSums::assignSyncs' keys).
  std::map<std::string, size_t> getGroupOfParameters() const;
  /// The group of model layer `layer` (one of this device's), and of a
  /// vocabulary shard's rows (its IB or T pass writes their gradients).
  size_t getGroupOf(int layer) const { return groupOf.at(layer); }
  size_t getGroupOf(Shard shard) const {
    return shardGroupOf.at(int(shard));
  }
  const SyncRuns &getRuns() const { return runs; }
  /// Under expert parallelism, the expert maps' runs (summed over
  /// getExpertReplicas(), not the replicas).
  const SyncRuns &getExpertRuns() const { return expertRuns; }
  Communicator *getExpertReplicas() const { return expertReplicas; }
  /// The flat offset of a tied table across devices under ZeRO-1 (its own
  /// run), else -1.
  int64_t getTiedRun() const { return tiedRun; }

  /// Issues grad_sync `instruction`'s sums on the data stream once the
  /// compute stream's work so far is done, between `begin` and `end`;
  /// `zero` (if any) reduce-scatters instead of averaging.
  Status issue(size_t instruction, Event *begin, Event *end, ZeroOne *zero);
  /// Orders the compute stream after every sum issued this step.
  Status finish();

private:
  const Plan &plan;
  int deviceIndex;
  ParameterStore &parameters;
  Communicator *replicas;
  Stream &compute, &data;
  TransferEngine &transfers;
  std::unique_ptr<Event> ready;
  SyncRuns runs;
  SyncRuns expertRuns;
  std::vector<std::vector<std::string>> groups;
  std::map<int, size_t> groupOf, shardGroupOf;
  SyncRuns groupRuns, groupExpertRuns;
  Communicator *expertReplicas;
  int64_t tiedRun = -1;
  /// The step's sums in flight, until finish().
  std::vector<std::unique_ptr<Request>> inFlight;
};

} // namespace sluice::rt

#endif // SLUICE_RUNTIME_EXECUTOR_GRADIENTSYNC_H
