//===- GradientSync.cpp - Data-parallel gradient sums and ZeRO-1 ----------===//

#include "GradientSync.h"

#include <algorithm>

namespace sluice::rt {

GradientSync::GradientSync(const Plan &plan, int deviceIndex,
                           ParameterStore &parameters, Communicator *replicas,
                           Communicator *expertReplicas, Device &device,
                           TransferEngine &transfers)
    : plan(plan), deviceIndex(deviceIndex), parameters(parameters),
      replicas(replicas), compute(device.getStream(StreamKind::Compute)),
      data(device.getStream(StreamKind::Data)), transfers(transfers),
      ready(device.createEvent()), expertReplicas(expertReplicas) {}

Status GradientSync::planRuns(bool tiedAcross,
                          std::map<std::string, size_t> &averagedBy) {
  const DeviceProgram &program = plan.programs[deviceIndex];
  for (size_t i = 0; i < program.instructions.size(); ++i) {
    const Instruction &instr = program.instructions[i];
    if (instr.op != Op::GradSync)
      continue;
    if (instr.shard != Shard::None) {
      ParameterSpec spec = instr.shard == Shard::Input
                               ? getInputShardSpec(plan, deviceIndex)
                               : getOutputShardSpec(plan, deviceIndex);
      averagedBy[spec.name] = i;
      continue;
    }
    for (int layer : plan.stages[instr.stage].layers)
      for (const ParameterSpec &spec :
           getLayerParameters(plan.model, layer))
        averagedBy[spec.name] = i;
  }
  // Under expert parallelism an expert map's gradient is this member's
  // experts' only: it is summed over the replicas holding the same experts
  // (expertReplicas), apart from the rest.
  SyncRuns unmerged, expertUnmerged;
  for (const ParameterSpec &spec : parameters.specs())
    if (auto it = averagedBy.find(spec.name); it != averagedBy.end())
      (spec.expertShare ? expertUnmerged : unmerged)[it->second]
          .push_back({parameters.offset(spec.name), spec.size()});
  if (plan.getGradientRanks() > 1)
    for (const ParameterSpec &spec : parameters.specs())
      if (!averagedBy.count(spec.name))
        return Status::error("device " + std::to_string(deviceIndex) +
                             ": no grad_sync averages the gradient of " +
                             spec.name);
  if (plan.zero == 1 && tiedAcross && parameters.contains("embed.tokens"))
    tiedRun = parameters.offset("embed.tokens");
  auto merge = [&](SyncRuns &from, SyncRuns &to) {
    for (auto &[instruction, list] : from) {
      std::sort(list.begin(), list.end());
      std::vector<std::pair<int64_t, int64_t>> merged;
      for (auto [offset, count] : list)
        if (!merged.empty() &&
            merged.back().first + merged.back().second == offset &&
            offset != tiedRun && merged.back().first != tiedRun)
          merged.back().second += count;
        else
          merged.push_back({offset, count});
      to[instruction] = std::move(merged);
    }
  };
  merge(unmerged, runs);
  merge(expertUnmerged, expertRuns);
  return Status::ok();
}

std::vector<std::vector<std::string>> GradientSync::planGroups() {
  groups.clear();
  groupOf.clear();
  std::map<std::string, size_t> named;
  for (const StagePlan &stage : plan.stages) {
    if (stage.device != deviceIndex)
      continue;
    for (int layer : stage.layers) {
      std::vector<ParameterSpec> specs = getLayerParameters(plan.model, layer);
      // A layer that shares a parameter with an earlier one (the output
      // layer of a tied table) joins that layer's group.
      size_t group = groups.size();
      for (const ParameterSpec &spec : specs)
        if (auto it = named.find(spec.name); it != named.end())
          group = it->second;
      if (group == groups.size())
        groups.emplace_back();
      for (const ParameterSpec &spec : specs)
        if (named.emplace(spec.name, group).second)
          groups[group].push_back(spec.name);
      groupOf[layer] = group;
    }
  }
  // The vocabulary shards' rows: a group each, one for both when the
  // table is tied (one shard).
  for (Shard shard : {Shard::Input, Shard::Output}) {
    const ShardPlan &plans = shard == Shard::Input ? plan.vocabulary.input
                                                   : plan.vocabulary.output;
    if (!plans.present)
      continue;
    std::string name = (shard == Shard::Input
                            ? getInputShardSpec(plan, deviceIndex)
                            : getOutputShardSpec(plan, deviceIndex))
                           .name;
    auto [it, added] = named.emplace(name, groups.size());
    if (added)
      groups.push_back({name});
    shardGroupOf[int(shard)] = it->second;
  }
  return groups;
}

Status GradientSync::planGroupRuns(bool tiedAcross) {
  groupRuns.clear();
  groupExpertRuns.clear();
  int64_t tied = tiedAcross && parameters.contains("embed.tokens")
                     ? parameters.offset("embed.tokens")
                     : -1;
  tiedRun = tied;
  std::map<std::string, const ParameterSpec *> specs;
  for (const ParameterSpec &spec : parameters.specs())
    specs[spec.name] = &spec;
  for (size_t g = 0; g < groups.size(); ++g) {
    // The expert maps' runs apart: summed over their own replicas.
    int64_t windowEnd[2] = {-1, -1};
    bool lastVector[2] = {false, false};
    for (const std::string &name : groups[g]) {
      const ParameterSpec &spec = *specs.at(name);
      bool expert = spec.expertShare;
      bool vector = parameters.isVectorGradient(name);
      std::vector<std::pair<int64_t, int64_t>> &list =
          (expert ? groupExpertRuns : groupRuns)[g];
      int64_t offset = parameters.offset(name),
              at = parameters.getWindowOffset(name), count = spec.size();
      // Merged where the flat runs and the window's places both follow
      // on, vectors with vectors (their gradients sit apart); the tied
      // table alone, so both ends cut it alike.
      if (!list.empty() && list.back().first + list.back().second == offset &&
          windowEnd[expert] == at && lastVector[expert] == vector &&
          offset != tied && list.back().first != tied)
        list.back().second += count;
      else
        list.push_back({offset, count});
      windowEnd[expert] = at + count;
      lastVector[expert] = vector;
    }
  }
  return Status::ok();
}

std::map<std::string, size_t> GradientSync::getGroupOfParameters() const {
  std::map<std::string, size_t> of;
  for (size_t g = 0; g < groups.size(); ++g)
    for (const std::string &name : groups[g])
      of[name] = g;
  return of;
}

Status GradientSync::issue(size_t instruction, Event *begin, Event *end,
                           ZeroOne *zero) {
  // The stage's gradients are final: their sum over the replicas runs on
  // the data stream while compute goes on.
  ready->record(compute);
  data.wait(*ready);
  if (begin)
    begin->record(data);
  // The span ends once every sum issued here has (recorded on return).
  struct Mark {
    Event *end;
    Stream &stream;
    ~Mark() {
      if (end)
        end->record(stream);
    }
  } mark{end, data};
  // ZeRO-2 has reduce-scattered every group as its W computed it.
  if (zero && zero->isPerGroup())
    return Status::ok();
  DevicePtr grads = parameters.getGrads();
  replicas->describeNext(
      plan.describe(plan.programs[deviceIndex].instructions[instruction]));
  size_t first = inFlight.size();
  if (zero) {
    if (Status st = zero->reduceScatter(instruction, grads, data, inFlight);
        !st)
      return st;
  } else {
    for (auto [offset, count] : runs[instruction])
      inFlight.push_back(replicas->allReduceAsync(grads + offset, count,
                                                  Reduction::Sum, 0, data));
    // The expert maps' sums, over the replicas holding the same experts
    // (none when each expert group is the whole data-parallel group).
    if (expertReplicas) {
      expertReplicas->describeNext(
          plan.describe(plan.programs[deviceIndex].instructions[instruction]));
      for (auto [offset, count] : expertRuns[instruction])
        inFlight.push_back(expertReplicas->allReduceAsync(
            grads + offset, count, Reduction::Sum, 0, data));
    }
  }
  for (size_t r = first; r < inFlight.size(); ++r)
    transfers.track(*inFlight[r]);
  return Status::ok();
}

Status GradientSync::finish() {
  // The optimizer reads the sums on the compute stream.
  for (std::unique_ptr<Request> &request : inFlight)
    if (Status st = transfers.await(*request, compute); !st)
      return st;
  inFlight.clear();
  return Status::ok();
}

ZeroOne::ZeroOne(ParameterStore &parameters, Communicator &replicas,
                 Device &device, TransferEngine &transfers)
    : parameters(parameters), replicas(replicas), device(device),
      compute(device.getStream(StreamKind::Compute)), transfers(transfers) {}

Status ZeroOne::plan(const SyncRuns &syncRuns, const SyncRuns &expertRuns,
                     Communicator *experts) {
  int64_t total = 0;
  auto add = [&](const SyncRuns &from, Communicator *group) {
    int size = group ? group->size() : 1, me = group ? group->rank() : 0;
    for (const auto &[instruction, list] : from)
      for (auto [offset, count] : list) {
        Run run;
        run.offset = offset;
        run.group = group;
        run.me = me;
        int64_t part = (count + size - 1) / size;
        for (int r = 0; r < size; ++r)
          run.counts.push_back(
              std::max<int64_t>(0, std::min(part, count - r * part)));
        int64_t mine = std::min(count, me * part);
        run.packedAt = total;
        owned.push_back({offset + mine, run.counts[size_t(me)]});
        total += run.counts[size_t(me)];
        runs[instruction].push_back(std::move(run));
      }
  };
  add(syncRuns, &replicas);
  add(expertRuns, experts);
  // The parameters are allocated with the moments as these parts
  // (ParameterStore::setMomentShards).
  return device.allocate(kMasterType, std::max<int64_t>(1, total), packed);
}

Status ZeroOne::planGroups(const SyncRuns &groupRuns,
                           const SyncRuns &groupExpertRuns,
                           Communicator *experts) {
  perGroup = true;
  if (Status st = plan(groupRuns, groupExpertRuns, experts); !st)
    return st;
  // Each run's place in the window: its first parameter's; a run of
  // vectors, where their whole gradients sit.
  std::map<int64_t, int64_t> windowOf, vectorOf;
  for (const ParameterSpec &spec : parameters.specs()) {
    windowOf[parameters.offset(spec.name)] =
        parameters.getWindowOffset(spec.name);
    if (parameters.isVectorGradient(spec.name))
      vectorOf[parameters.offset(spec.name)] =
          parameters.getVectorOffset(spec.name);
  }
  int64_t largest = 1;
  for (auto &[group, list] : runs)
    for (Run &run : list) {
      run.windowAt = windowOf.at(run.offset);
      if (auto v = vectorOf.find(run.offset); v != vectorOf.end())
        run.vectorAt = v->second;
      largest = std::max(largest, run.counts[size_t(run.me)]);
    }
  return device.allocate(kMasterType, largest, scratch);
}

Status ZeroOne::reduceScatterGroup(size_t group) {
  Kernels &kernels = device.getKernels(StreamKind::Compute);
  DevicePtr window = parameters.getGradientWindow();
  int64_t end = 0;
  for (const Run &run : runs[group]) {
    // Vectors once a step (reduceScatterVectors).
    if (run.vectorAt >= 0)
      continue;
    int64_t count = 0;
    for (int64_t c : run.counts)
      count += c;
    end = std::max(end, run.windowAt + count);
    if (Status st = addSummedPart(run, window + run.windowAt); !st)
      return st;
  }
  // The next W accumulates into a zero window.
  kernels.fill(window, 0.0, end);
  return Status::ok();
}

Status ZeroOne::addSummedPart(const Run &run, DevicePtr grads) {
  Kernels &kernels = device.getKernels(StreamKind::Compute);
  int64_t mine = run.counts[size_t(run.me)];
  if (!run.group) {
    // This replica's alone (its experts, held by no other): its sum is
    // its own.
    kernels.add(packed.get() + run.packedAt, grads, mine);
    return Status::ok();
  }
  std::unique_ptr<Request> request = run.group->reduceScatterAsync(
      grads, scratch.get(), run.counts, 0, compute);
  if (!request)
    return Status::error("the data-parallel transport cannot "
                         "reduce-scatter (ZeRO-2 needs it)");
  if (Status st = transfers.await(*request, compute); !st)
    return st;
  kernels.add(packed.get() + run.packedAt, scratch.get(), mine);
  return Status::ok();
}

Status ZeroOne::reduceScatterVectors() {
  DevicePtr vectors = parameters.getVectorGradients();
  for (auto &[group, list] : runs)
    for (const Run &run : list)
      if (run.vectorAt >= 0)
        if (Status st = addSummedPart(run, vectors + run.vectorAt); !st)
          return st;
  return Status::ok();
}

Status ZeroOne::gatherGroup(size_t group) {
  if (prefetched != ~size_t(0)) {
    // Started beside the previous layer (for this one, as the pass's
    // order says): the compute stream waits for it.
    size_t done = prefetched;
    prefetched = ~size_t(0);
    for (std::unique_ptr<Request> &gather : prefetches) {
      Status st = transfers.await(*gather, compute);
      transfers.forget(gather.get());
      if (!st)
        return st;
    }
    prefetches.clear();
    parameters.setGathered(done);
  }
  if (parameters.isGathered(group))
    return Status::ok();
  std::vector<std::unique_ptr<Request>> gathers;
  if (Status st = startGather(group, compute, gathers); !st)
    return st;
  for (std::unique_ptr<Request> &gather : gathers)
    if (Status st = transfers.await(*gather, compute); !st)
      return st;
  parameters.setGathered(group);
  return Status::ok();
}

Status ZeroOne::prefetchGroup(size_t current, size_t next) {
  if (prefetched != ~size_t(0) || parameters.isGathered(next) ||
      parameters.shareSlot(current, next))
    return Status::ok();
  Stream &data = device.getStream(StreamKind::Data);
  if (!partsCopied)
    partsCopied = device.createEvent();
  if (Status st = startGather(next, data, prefetches); !st)
    return st;
  for (std::unique_ptr<Request> &gather : prefetches)
    transfers.track(*gather);
  prefetched = next;
  return Status::ok();
}

Status ZeroOne::startGather(size_t group, Stream &stream,
                            std::vector<std::unique_ptr<Request>> &gathers) {
  Kernels &kernels = device.getKernels(StreamKind::Compute);
  DevicePtr slot = parameters.getWeightSlot(group);
  DevicePtr masters = parameters.getMasters();
  // The replica's parts packed, or (while a checkpoint is written or
  // loaded) the whole masters with every part in its place.
  bool packedMasters = !parameters.getMomentRanges().empty();
  for (const Run &run : runs[group]) {
    int64_t mine = run.getMine(), count = run.counts[size_t(run.me)];
    DevicePtr part = packedMasters ? masters + run.packedAt
                                   : masters + run.offset + mine;
    // Cast to the working type as it goes (Rajbhandari et al., 2020,
    // section 5.3: the fp16 parameters are what the all-gather moves).
    // On the compute stream: after the kernels that read the slot last.
    kernels.copy(slot + run.windowAt + mine, part, count);
  }
  if (&stream != &compute) {
    partsCopied->record(compute);
    stream.wait(*partsCopied);
  }
  for (const Run &run : runs[group]) {
    if (!run.group)
      continue; // this replica's alone
    std::unique_ptr<Request> gather =
        run.group->allGatherAsync(slot + run.windowAt, run.counts, 0, stream);
    if (!gather)
      return Status::error("the data-parallel transport cannot all-gather "
                           "(ZeRO-3 needs it)");
    gathers.push_back(std::move(gather));
  }
  return Status::ok();
}

Status ZeroOne::reduceScatter(size_t instruction, DevicePtr grads,
                              Stream &stream,
                              std::vector<std::unique_ptr<Request>> &out) {
  for (const Run &run : runs[instruction]) {
    if (!run.group) {
      // This replica's alone: its sum is its own.
      device.getKernels(StreamKind::Data)
          .copy(packed.get() + run.packedAt, grads + run.offset,
                run.counts[0]);
      continue;
    }
    std::unique_ptr<Request> request = run.group->reduceScatterAsync(
        grads + run.offset, packed.get() + run.packedAt, run.counts, 0,
        stream);
    if (!request)
      return Status::error("the data-parallel transport cannot "
                           "reduce-scatter (ZeRO-1 needs it)");
    out.push_back(std::move(request));
  }
  return Status::ok();
}

Status ZeroOne::sumTiedEnds(int64_t tiedRun, Communicator &comm,
                            const std::vector<int> &tiedGroup) {
  for (auto &[instruction, list] : runs)
    for (const Run &run : list)
      if (run.offset == tiedRun)
        if (Status st = comm.allReduceSum(packed.get() + run.packedAt,
                                          run.counts[size_t(run.me)],
                                          tiedGroup.data(),
                                          int(tiedGroup.size()), compute);
            !st)
          return st;
  return Status::ok();
}

Status ZeroOne::gatherWholeGradients() {
  Kernels &kernels = device.getKernels(StreamKind::Compute);
  DevicePtr grads = parameters.getGrads();
  for (auto &[instruction, list] : runs)
    for (const Run &run : list)
      kernels.copy(grads + run.offset + run.getMine(),
                   packed.get() + run.packedAt, run.counts[size_t(run.me)]);
  return gatherParts(grads);
}

Status ZeroOne::gatherParts(DevicePtr buffer) {
  std::vector<std::unique_ptr<Request>> gathers;
  for (auto &[instruction, list] : runs)
    for (const Run &run : list) {
      if (!run.group)
        continue; // this replica's alone
      std::unique_ptr<Request> gather = run.group->allGatherAsync(
          buffer + run.offset, run.counts, 0, compute);
      if (!gather)
        return Status::error("the data-parallel transport cannot all-gather "
                             "(ZeRO-1 needs it)");
      gathers.push_back(std::move(gather));
    }
  for (std::unique_ptr<Request> &gather : gathers)
    if (Status st = transfers.await(*gather, compute); !st)
      return st;
  return Status::ok();
}

Status ZeroOne::shardOptimizerState() {
  if (!parameters.getMomentRanges().empty())
    return Status::ok();
  return parameters.shardMoments(owned);
}

Status ZeroOne::gatherOptimizerState() {
  if (parameters.getMomentRanges().empty())
    return Status::ok();
  if (Status st = parameters.shardMoments({}); !st)
    return st;
  for (int which : {1, 2})
    if (Status st = gatherParts(parameters.getMoment(which)); !st)
      return st;
  // ZeRO-3's weights were packed with the moments.
  if (parameters.isWeightSharded())
    return gatherParts(parameters.getMasters());
  return Status::ok();
}

Status ZeroOne::applyOptimizer(const AdamConfig &adam, int64_t step) {
  if (Status st = shardOptimizerState(); !st)
    return st;
  parameters.adamStep(adam, step, packed.get());
  // ZeRO-2 accumulates the step's parts from zero.
  if (perGroup)
    device.getKernels(StreamKind::Compute)
        .fill(packed.get(), 0.0, packed.size());
  // ZeRO-3 gathers each group where a pass next uses it (gatherGroup).
  if (parameters.isWeightSharded()) {
    parameters.zeroGrads();
    return Status::ok();
  }
  if (Status st = gatherParts(parameters.getMasters()); !st)
    return st;
  if (DevicePtr working = parameters.getWorking())
    if (Status st = gatherParts(working); !st)
      return st;
  parameters.zeroGrads();
  return Status::ok();
}

} // namespace sluice::rt
