//===- TensorSums.cpp - What a tensor-parallel group sums -----------------===//

#include "TensorSums.h"

#include <algorithm>

namespace sluice::rt {

TensorGroupSums::TensorGroupSums(const Plan &plan, int deviceIndex,
                                 Communicator *group,
                                 ParameterStore &parameters, Device &device,
                                 TransferEngine &transfers)
    : plan(plan), deviceIndex(deviceIndex), group(group),
      shardIndex(group ? group->rank() : 0), parameters(parameters),
      device(device), kernels(device.getKernels(StreamKind::Compute)),
      compute(device.getStream(StreamKind::Compute)),
      tensor(device.getStream(StreamKind::Tensor)), transfers(transfers) {}

Stream &TensorGroupSums::handOver() {
  if (!ready)
    ready = device.createEvent();
  ready->record(compute);
  tensor.wait(*ready);
  return tensor;
}

StageRunner::TensorGroup TensorGroupSums::getCalls() {
  // The compute stream waits for a request (advancing the pipeline's
  // transfers meanwhile); a failure is kept, the first one only.
  auto finish = [this](Request *request, const char *what) {
    if (!failure)
      return;
    failure = request ? transfers.await(*request, compute)
                      : Status::error(std::string("the tensor-parallel "
                                                  "transport cannot ") +
                                      what + " (sequence parallelism needs it)");
  };
  // Started: the pass waits when it reads the result, and enqueues work
  // that does not touch `data` or `out` first.
  auto started = [finish](std::unique_ptr<Request> request, const char *what) {
    std::shared_ptr<Request> held = std::move(request);
    return block::PendingCollective(
        [finish, held, what] { finish(held.get(), what); });
  };
  StageRunner::TensorGroup calls;
  calls.reduce = [this, finish](DevicePtr data, int64_t count,
                                Reduction reduction) {
    if (enabled && failure)
      finish(
          group->allReduceAsync(data, count, reduction, 0, handOver()).get(),
          "all-reduce");
  };
  calls.startReduce = [this, started](DevicePtr data, int64_t count) {
    if (!enabled || !failure)
      return block::PendingCollective();
    return started(
        group->allReduceAsync(data, count, Reduction::Sum, 0, handOver()),
        "all-reduce");
  };
  std::vector<int64_t> parts(plan.tp);
  calls.reduceScatter = [this, started,
                         parts](DevicePtr data, DevicePtr out,
                                int64_t count) mutable {
    std::fill(parts.begin(), parts.end(), count);
    if (!enabled || !failure)
      return block::PendingCollective();
    return started(
        group->reduceScatterAsync(data, out, parts, 0, handOver()),
        "reduce-scatter");
  };
  calls.allGather = [this, started,
                     parts](DevicePtr data,
                            int64_t count) mutable -> block::PendingCollective {
    std::fill(parts.begin(), parts.end(), count);
    if (!enabled || !failure)
      return block::PendingCollective();
    return started(group->allGatherAsync(data, parts, 0, handOver()),
                   "all-gather");
  };
  return calls;
}

Status TensorGroupSums::allReduce(DevicePtr data, int64_t count,
                                  Reduction reduction) {
  std::unique_ptr<Request> request =
      group->allReduceAsync(data, count, reduction, 0, handOver());
  return transfers.await(*request, compute);
}

Status TensorGroupSums::prepare() {
  if (!group)
    return Status::ok();
  // What each parameter's declaration says the group sums (Reduce):
  // under sequence parallelism the norms' weight gradients are each
  // shard's tokens' part (Megatron-LM all-reduces these
  // "sequence-parallel" parameters' gradients alike); a gain every head
  // shares has each shard's heads' part.
  bool sequence = plan.shardModel.sequenceShards > 1;
  for (const ParameterSpec &spec : parameters.specs())
    if ((sequence && spec.reduce == Reduce::Tokens) ||
        spec.reduce == Reduce::Shards)
      groupSummed.push_back({spec.name, spec.size()});
  // Key/value heads a group of shards holds alike (fewer heads than
  // shards): their gradients are summed over the group before the update.
  for (const StagePlan &stage : plan.stages) {
    if (stage.device != deviceIndex)
      continue;
    for (int layer : stage.layers) {
      const LayerConfig &whole = plan.model.layers[layer];
      if (whole.kind != LayerKind::Transformer || whole.kvHeads >= plan.tp)
        continue;
      int perHead = plan.tp / int(whole.kvHeads);
      // The QKV projection's slices: query, key and value column ranges
      // (the bias's as its elements).
      ReplicatedKeyValues r;
      for (const ParameterSpec &spec :
           getLayerParameters(plan.model, layer, {shardIndex, plan.tp})) {
        const std::vector<IndexRange> &qkv =
            spec.shape.size() == 2 ? spec.columns : spec.rows;
        if (qkv.size() != 3)
          continue;
        (spec.shape.size() == 2 ? r.weight : r.bias) = spec.name;
        r.queries = qkv[0].count;
        r.keyValues = qkv[1].count + qkv[2].count;
      }
      int first = shardIndex / perHead * perHead;
      for (int t = first; t < first + perHead; ++t)
        r.group.push_back(t);
      kvScratchElements =
          std::max(kvScratchElements, plan.model.hidden * r.keyValues);
      replicatedKv.push_back(std::move(r));
    }
  }
  if (kvScratchElements > 0)
    return device.allocate(kMasterType, kvScratchElements, kvScratch);
  return Status::ok();
}

void TensorGroupSums::assignSyncs(
    const std::map<std::string, size_t> &averagedBy) {
  for (ReplicatedKeyValues &r : replicatedKv)
    r.syncInstruction = averagedBy.at(r.weight);
  for (GroupSummed &t : groupSummed)
    t.syncInstruction = averagedBy.at(t.name);
}

Status TensorGroupSums::sumAt(size_t instruction) {
  for (const ReplicatedKeyValues &r : replicatedKv)
    if (r.syncInstruction == instruction)
      if (Status st = sum(r); !st)
        return st;
  for (const GroupSummed &t : groupSummed)
    if (t.syncInstruction == instruction)
      if (Status st = sum(t); !st)
        return st;
  return Status::ok();
}

Status TensorGroupSums::sumAll() {
  for (const ReplicatedKeyValues &r : replicatedKv)
    if (Status st = sum(r); !st)
      return st;
  for (const GroupSummed &t : groupSummed)
    if (Status st = sum(t); !st)
      return st;
  return Status::ok();
}

Status TensorGroupSums::sum(const GroupSummed &t) {
  return allReduce(parameters.grad(t.name), t.count, Reduction::Sum);
}

Status TensorGroupSums::sum(const ReplicatedKeyValues &r) {
  // Each shard of the group has the part of the heads' gradient its query
  // heads gave; the sum is theirs.
  int64_t h = plan.model.hidden;
  int64_t width = r.queries + r.keyValues, cols = r.keyValues;
  DevicePtr weight = parameters.grad(r.weight), scratch = kvScratch.get();
  kernels.copyStrided(scratch, weight + r.queries,
                      {1, h, cols, 0, width, 0, cols});
  if (Status st = group->allReduceSum(scratch, h * cols, r.group.data(),
                                      int(r.group.size()), compute);
      !st)
    return st;
  kernels.copyStrided(weight + r.queries, scratch,
                      {1, h, cols, 0, cols, 0, width});
  if (!r.bias.empty())
    return group->allReduceSum(parameters.grad(r.bias) + r.queries, cols,
                               r.group.data(), int(r.group.size()), compute);
  return Status::ok();
}

} // namespace sluice::rt
