//===- Executor.cpp - Run a plan, or the single-device reference ----------===//

#include "Executor.h"

#include <algorithm>
#include <chrono>
#include <thread>
#include <tuple>

namespace sluice::rt {

namespace {
using Clock = std::chrono::steady_clock;
double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}
} // namespace

std::vector<ParameterSpec> getDeviceParameters(const Plan &plan, int device,
                                               int shard) {
  std::vector<ParameterSpec> specs;
  for (const StagePlan &stage : plan.stages)
    if (stage.device == device)
      for (int layer : stage.layers)
        for (ParameterSpec &spec :
             getLayerParameters(plan.model, layer, {shard, plan.tp}))
          specs.push_back(std::move(spec));
  if (plan.vocabulary.input.present)
    specs.push_back(getInputShardSpec(plan, device, shard));
  if (plan.vocabulary.output.present)
    specs.push_back(getOutputShardSpec(plan, device, shard));
  return specs;
}

int64_t getDeviceWorkspaceBytes(const Plan &plan, int device) {
  int64_t work = 0;
  for (const StagePlan &stage : plan.stages)
    if (stage.device == device)
      for (size_t k = 0; k < plan.slices.size(); ++k)
        work =
            std::max(work, getWorkspaceBytes(plan.shardModel, stage.layers,
                                             plan.getSliceShape(int(k)),
                                             plan.precision, stage.recompute));
  return work;
}

namespace {
constexpr int kPasses = int(Pass::IB) + 1;
} // namespace

Executor::Executor(const Plan &plan, int deviceIndex, Device &device,
                   Communicator &comm, TokenSource &data,
                   const TrainerOptions &options, Communicator *replicas,
                   Communicator *tensorGroup)
    : plan(plan), deviceIndex(deviceIndex), device(device),
      kernels(device.getKernels(StreamKind::Compute)),
      compute(device.getStream(StreamKind::Compute)),
      pipeline(device.getStream(StreamKind::Pipeline)),
      dataStream(device.getStream(StreamKind::Data)), comm(comm), data(data),
      options(options), replicas(plan.dp > 1 ? replicas : nullptr),
      tensorGroup(plan.tp > 1 ? tensorGroup : nullptr),
      shardIndex(this->tensorGroup ? this->tensorGroup->rank() : 0) {}

Status Executor::prepare() {
  if (plan.tp > 1 && (!tensorGroup || tensorGroup->size() != plan.tp))
    return Status::error("the plan splits layers over " +
                         std::to_string(plan.tp) +
                         " tensor-parallel shards, but no communicator "
                         "spans them");
  if (plan.dp > 1 && !replicas)
    return Status::error("the plan has " + std::to_string(plan.dp) +
                         " data-parallel replicas, but no communicator "
                         "spans them");
  if (Status st = prepareParameters(); !st)
    return st;
  prepareStages();
  if (Status st = prepareGroupSums(); !st)
    return st;
  if (Status st = allocateBuffers(); !st)
    return st;
  createEvents();
  // A tied table whose two ends sit on different devices is held by both;
  // their gradients are summed before the update (Megatron's embedding
  // all-reduce).
  const LayerConfig &out = plan.model.layers.back();
  int first = plan.stages.front().device, last = plan.stages.back().device;
  // Sharded, the two ends share one shard on every device: nothing to sum.
  if (out.tied && first != last && !out.sharded)
    tiedGroup = {std::min(first, last), std::max(first, last)};
  std::map<std::string, size_t> averagedBy;
  if (Status st = planGradientSyncs(averagedBy); !st)
    return st;
  if (plan.zero == 1)
    if (Status st = planZero(averagedBy); !st)
      return st;
  planGradientNorm();
  if (Status st = device.allocate(DType::F64, 1, normSum); !st)
    return st;
  return device.synchronize();
}

void Executor::planGradientNorm() {
  // Each parameter once over the ranks: a tied table held at both ends by
  // the lower device, a tensor held whole by every shard (norms, the
  // biases after row-parallel projections, unsharded tables) by shard 0,
  // shared key/value heads by the first shard of their group.
  std::vector<NormPart> parts;
  for (const ParameterSpec &spec : parameters.specs()) {
    bool tiedCopy = spec.name == "embed.tokens" && !tiedGroup.empty() &&
                    deviceIndex != tiedGroup.front();
    bool shardCopy =
        plan.tp > 1 && shardIndex != 0 && !spec.isSlice() && !spec.isShard();
    if (tiedCopy || shardCopy)
      continue;
    int64_t at = parameters.offset(spec.name);
    if (!parts.empty() && parts.back().rows == 1 &&
        parts.back().offset + parts.back().cols == at)
      parts.back().cols += spec.size();
    else
      parts.push_back({at, 1, spec.size(), spec.size(), 1.0});
  }
  for (const ReplicatedKeyValues &r : replicatedKv) {
    if (r.group.front() == shardIndex)
      continue;
    int64_t width = r.queries + 2 * r.keyValues;
    parts.push_back({parameters.offset(r.weight) + r.queries,
                     plan.model.hidden, 2 * r.keyValues, width, -1.0});
    if (!r.bias.empty())
      parts.push_back({parameters.offset(r.bias) + r.queries, 1,
                       2 * r.keyValues, 2 * r.keyValues, -1.0});
  }
  if (plan.zero != 1) {
    normParts = std::move(parts);
    return;
  }
  // ZeRO-1: the same elements where this replica's parts hold them, row
  // by row, whole rows in blocks.
  int64_t packedAt = 0;
  for (const IndexRange &owned : ownedRanges) {
    int64_t lo = owned.first, hi = owned.first + owned.count;
    for (const NormPart &part : parts)
      for (int64_t row = 0; row < part.rows; ++row) {
        int64_t begin = part.offset + row * part.stride;
        int64_t from = std::max(lo, begin),
                to = std::min(hi, begin + part.cols);
        if (from >= to)
          continue;
        int64_t local = packedAt + (from - lo);
        NormPart *last = normParts.empty() ? nullptr : &normParts.back();
        bool whole = to - from == part.cols;
        if (whole && last && last->cols == part.cols &&
            last->stride == part.stride && last->weight == part.weight &&
            last->offset + last->rows * last->stride == local)
          ++last->rows;
        else
          normParts.push_back(
              {local, 1, to - from, whole ? part.stride : to - from,
               part.weight});
      }
    packedAt += owned.count;
  }
}

Status Executor::prepareParameters() {
  // ParameterStore::add ignores a tied table's second spec.
  for (const ParameterSpec &spec :
       getDeviceParameters(plan, deviceIndex, shardIndex))
    parameters.add(spec);
  if (plan.vocabulary.any())
    shards = std::make_unique<VocabularyShards>(plan, deviceIndex, device, comm,
                                                tensorGroup, shardIndex);
  if (Status st = parameters.allocate(device, plan.precision, options.seed);
      !st)
    return st;
  if (shards) {
    shards->bind(parameters);
    shards->setProgressOthers([this] {
      progressTransfers();
      return Status::ok();
    });
    shards->setTimeout(options.commTimeout);
  }
  return Status::ok();
}

/// A runner per stage of this device; under tensor parallelism its
/// collectives go through the group, each on the critical path.
void Executor::prepareStages() {
  stages.resize(plan.stages.size());
  for (size_t s = 0; s < plan.stages.size(); ++s) {
    if (plan.stages[s].device != deviceIndex)
      continue;
    stages[s] = std::make_unique<StageRunner>(
        plan.shardModel, plan.stages[s].layers, parameters, kernels,
        plan.precision, plan.stages[s].recompute);
    if (tensorGroup)
      stages[s]->setTensorParallel(getTensorGroupCalls(), shardIndex);
  }
}

StageRunner::TensorGroup Executor::getTensorGroupCalls() {
  // On the critical path (the blog's "Communication Overhead"): the pass
  // waits for each collective, advancing the pipeline's transfers.
  auto finish = [this](std::unique_ptr<Request> request, const char *what) {
    tensorFailure = request ? await(*request, compute)
                            : Status::error(std::string("the tensor-parallel "
                                                        "transport cannot ") +
                                            what +
                                            " (sequence parallelism needs "
                                            "it)");
  };
  StageRunner::TensorGroup group;
  group.reduce = [this, finish](DevicePtr data, int64_t count,
                                Reduction reduction) {
    if (tensorSums && tensorFailure)
      finish(tensorGroup->allReduceAsync(data, count, reduction, 0, compute),
             "all-reduce");
  };
  std::vector<int64_t> parts(plan.tp);
  group.reduceScatter = [this, finish, parts](DevicePtr data, DevicePtr out,
                                              int64_t count) mutable {
    std::fill(parts.begin(), parts.end(), count);
    if (tensorSums && tensorFailure)
      finish(tensorGroup->reduceScatterAsync(data, out, parts, 0, compute),
             "reduce-scatter");
  };
  group.allGather = [this, finish, parts](DevicePtr data,
                                          int64_t count) mutable {
    std::fill(parts.begin(), parts.end(), count);
    if (tensorSums && tensorFailure)
      finish(tensorGroup->allGatherAsync(data, parts, 0, compute),
             "all-gather");
  };
  return group;
}

/// Gradients a group of tensor-parallel shards holds alike, summed over
/// the group before the update.
Status Executor::prepareGroupSums() {
  // Sequence parallelism: each shard's norms' weight gradients are its
  // tokens' part, summed over the group before the update (Megatron-LM
  // all-reduces these "sequence-parallel" parameters' gradients alike).
  if (tensorGroup && plan.shardModel.sequenceShards > 1)
    for (const ParameterSpec &spec : parameters.specs())
      if (isTokenSummed(spec.name))
        tokenSummed.push_back({spec.name, spec.size()});
  // Key/value heads a group of shards holds alike (fewer heads than
  // shards): their gradients are summed over the group before the update.
  for (const StagePlan &stage : plan.stages)
    if (stage.device == deviceIndex && tensorGroup)
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
          r.keyValues = qkv[1].count;
        }
        for (int t = shardIndex / perHead * perHead;
             t < (shardIndex / perHead + 1) * perHead; ++t)
          r.group.push_back(t);
        kvScratchElements =
            std::max(kvScratchElements, plan.model.hidden * 2 * r.keyValues);
        replicatedKv.push_back(std::move(r));
      }
  if (kvScratchElements > 0)
    if (Status st = device.allocate(kMasterType, kvScratchElements, kvScratch);
        !st)
      return st;
  return Status::ok();
}

/// The workspace, the program's buffer slots, the tokens and the loss.
Status Executor::allocateBuffers() {
  DType act = plan.precision.activations;
  if (Status st = device.allocateBytes(
          act, getDeviceWorkspaceBytes(plan, deviceIndex), workspace);
      !st)
    return st;
  const DeviceProgram &program = plan.programs[deviceIndex];
  buffers.resize(program.buffers.size());
  for (size_t b = 0; b < program.buffers.size(); ++b)
    if (Status st = device.allocateBytes(act, program.buffers[b], buffers[b]);
        !st)
      return st;
  incoming.resize(buffers.size());
  sendOf.assign(buffers.size(), -1);

  const ModelConfig &model = plan.model;
  int64_t row = model.microBatch * (model.seqLen + 1);
  if (Status st = device.allocate(DType::I32, plan.microbatches * row, tokens);
      !st)
    return st;
  hostTokens.assign(plan.microbatches * row, 0);
  for (int mb = 0; mb < plan.microbatches; ++mb)
    batches.push_back({tokens.get() + mb * row, model.seqLen + 1});
  if (Status st = device.allocate(DType::F64, 1, lossSum); !st)
    return st;

  return Status::ok();
}

void Executor::createEvents() {
  const DeviceProgram &program = plan.programs[deviceIndex];
  ready = device.createEvent();
  stepBegin = device.createEvent();
  waited.assign(program.instructions.size(), 0);
  passStart.resize(program.instructions.size());
  passEnd.resize(program.instructions.size());
  for (size_t i = 0; i < program.instructions.size(); ++i)
    if (program.instructions[i].op == Op::Exec ||
        (program.instructions[i].op == Op::GradSync && replicas)) {
      passStart[i] = device.createEvent();
      passEnd[i] = device.createEvent();
    }
  profile.assign((plan.stages.size() + 2) * kPasses, PassProfile());
}

/// Data parallelism: what each grad_sync averages. A parameter goes to
/// the last grad_sync naming a stage or shard that holds it; adjacent
/// tensors are averaged in one call.
Status Executor::planGradientSyncs(std::map<std::string, size_t> &averagedBy) {
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
      for (const ParameterSpec &spec : getLayerParameters(plan.model, layer))
        averagedBy[spec.name] = i;
  }
  std::map<size_t, std::vector<std::pair<int64_t, int64_t>>> runs;
  for (const ParameterSpec &spec : parameters.specs())
    if (auto it = averagedBy.find(spec.name); it != averagedBy.end())
      runs[it->second].push_back({parameters.offset(spec.name), spec.size()});
  if (plan.dp > 1 && averagedBy.size() < parameters.specs().size())
    for (const ParameterSpec &spec : parameters.specs())
      if (!averagedBy.count(spec.name))
        return Status::error("device " + std::to_string(deviceIndex) +
                             ": no grad_sync averages the gradient of " +
                             spec.name);
  // ZeRO-1 with a tied table across devices: the table is a run of its
  // own, so both ends cut it into the same parts and replica r of each end
  // owns the same rows (their sum is then one of packed parts).
  int64_t tiedOffset = -1;
  if (plan.zero == 1 && !tiedGroup.empty() &&
      parameters.contains("embed.tokens"))
    tiedOffset = parameters.offset("embed.tokens");
  tiedRun = tiedOffset;
  for (auto &[instruction, list] : runs) {
    // Adjacent tensors are averaged in one call.
    std::sort(list.begin(), list.end());
    std::vector<std::pair<int64_t, int64_t>> merged;
    for (auto [offset, count] : list)
      if (!merged.empty() &&
          merged.back().first + merged.back().second == offset &&
          offset != tiedOffset && merged.back().first != tiedOffset)
        merged.back().second += count;
      else
        merged.push_back({offset, count});
    syncRuns[instruction] = std::move(merged);
  }
  return Status::ok();
}

/// ZeRO-1 (Megatron-LM's distributed optimizer): replica r owns part r
/// of every run the grad_syncs reduce -- its summed gradients, its
/// moments, its update -- and the step ends by all-gathering the
/// weights. Gradients another group sums too are summed before the
/// update: replicated key/value heads at their grad_sync, before the
/// reduce-scatter; a tied table's two ends part by part afterwards.
Status Executor::planZero(const std::map<std::string, size_t> &averagedBy) {
  for (ReplicatedKeyValues &r : replicatedKv)
    r.syncInstruction = averagedBy.at(r.weight);
  for (TokenSummed &t : tokenSummed)
    t.syncInstruction = averagedBy.at(t.name);
  int dp = plan.dp, me = replicas->rank();
  int64_t packed = 0;
  for (auto &[instruction, list] : syncRuns)
    for (auto [offset, count] : list) {
      ZeroRun run;
      run.offset = offset;
      int64_t part = (count + dp - 1) / dp;
      for (int r = 0; r < dp; ++r)
        run.counts.push_back(
            std::max<int64_t>(0, std::min(part, count - r * part)));
      int64_t mine = std::min(count, me * part);
      run.packedAt = packed;
      ownedRanges.push_back({offset + mine, run.counts[me]});
      packed += run.counts[me];
      zeroRuns[instruction].push_back(std::move(run));
    }
  // The moments stay whole until shardOptimizerState (after a
  // checkpoint is loaded into them).
  if (Status st = device.allocate(kMasterType, std::max<int64_t>(1, packed),
                                  packedGrads);
      !st)
    return st;
  return Status::ok();
}

Status Executor::shardOptimizerState() {
  if (plan.zero != 1 || !parameters.getMomentRanges().empty())
    return Status::ok();
  return parameters.shardMoments(ownedRanges);
}

Status Executor::gatherParts(DevicePtr buffer) {
  std::vector<std::unique_ptr<Request>> gathers;
  for (auto &[instruction, list] : zeroRuns)
    for (const ZeroRun &run : list) {
      std::unique_ptr<Request> gather =
          replicas->allGatherAsync(buffer + run.offset, run.counts, 0, compute);
      if (!gather)
        return Status::error("the data-parallel transport cannot all-gather "
                             "(ZeRO-1 needs it)");
      gathers.push_back(std::move(gather));
    }
  for (std::unique_ptr<Request> &gather : gathers)
    if (Status st = await(*gather, compute); !st)
      return st;
  return Status::ok();
}

Status Executor::gatherOptimizerState() {
  if (plan.zero != 1 || parameters.getMomentRanges().empty())
    return Status::ok();
  if (Status st = parameters.shardMoments({}); !st)
    return st;
  for (int which : {1, 2})
    if (Status st = gatherParts(parameters.getMoment(which)); !st)
      return st;
  return Status::ok();
}

size_t Executor::profileIndex(int stage, Shard shard, Pass pass) const {
  size_t owner =
      stage >= 0 ? size_t(stage) : plan.stages.size() + size_t(int(shard));
  return owner * kPasses + size_t(pass);
}

void Executor::progressTransfers() {
  // Drop what the host is done with; the rest get a turn.
  active.erase(std::remove_if(active.begin(), active.end(),
                              [](Request *r) { return r->test(); }),
               active.end());
}

Status Executor::progressAll() {
  progressTransfers();
  return shards ? shards->progress() : Status::ok();
}

Status Executor::await(Request &request, Stream &stream) {
  auto start = Clock::now();
  while (!request.test()) {
    if (Status st = progressAll(); !st)
      return st;
    // A host transport's peer that failed or never came: end the run
    // instead of waiting for good (NCCL's own waits are on the GPU).
    if (!comm.watchesProgress() &&
        seconds(start, Clock::now()) > options.commTimeout)
      return Status::error(
          "no progress for " + std::to_string(int64_t(options.commTimeout)) +
          " s (--comm-timeout) waiting for a transfer or collective; a peer "
          "has failed or never joined it");
    std::this_thread::yield();
  }
  Status st = request.waitOn(stream);
  times.commWait += seconds(start, Clock::now());
  return st;
}

Status Executor::settle(int32_t slot, Stream &stream) {
  if (slot < 0 || sendOf[slot] < 0)
    return Status::ok();
  Status st = await(*outgoing[sendOf[slot]], stream);
  sendOf[slot] = -1;
  return st;
}

std::vector<TraceSpan> Executor::getTrace() const {
  const DeviceProgram &program = plan.programs[deviceIndex];
  std::vector<TraceSpan> trace;
  for (const PassSpan &pass : passSpans)
    // describe() begins "exec ".
    trace.push_back(
        {plan.describe(program.instructions[pass.instruction]).substr(5),
         "compute", pass.start, pass.end});
  for (const PassSpan &sync : syncSpans)
    trace.push_back({plan.describe(program.instructions[sync.instruction]),
                     "data", sync.start, sync.end});
  for (const VocabularyShards::Span &c : collectiveSpans) {
    Instruction collective;
    collective.op = Op::Collective;
    collective.shard = c.shard;
    collective.group = c.group;
    collective.mb = c.mb;
    collective.slice = c.slice;
    trace.push_back({plan.describe(collective), "vocabulary", c.start, c.end});
  }
  return trace;
}

Status Executor::waitForCollectives(const Instruction &instr, bool &waited) {
  if (!shards)
    return Status::ok();
  if (std::optional<CollectiveRef> in = plan.getCollectiveInput(instr)) {
    waited = true;
    auto start = Clock::now();
    Status st =
        shards->waitFor(in->shard, in->group, instr.mb, instr.slice, compute);
    times.commWait += seconds(start, Clock::now());
    if (!st)
      return st;
  }
  return Status::ok();
}

Status Executor::runPass(const Instruction &instr, float lossScale) {
  SliceShape s = plan.getSliceShape(instr.slice);
  if (instr.shard != Shard::None)
    // A vocabulary shard's pass.
    return shards->run(instr.pass, instr.mb, instr.slice, lossSum.get());
  StageRunner &stage = *stages[instr.stage];
  const TokenRows &batch = batches[instr.mb];
  // The stages next to the vocabulary shards read and write the shards'
  // buffers instead of plan buffers.
  bool inputShard = plan.vocabulary.input.present && instr.stage == 0;
  bool outputShard =
      plan.vocabulary.output.present && instr.stage == plan.getLastStage();
  DevicePtr in = slot(instr.in), out = slot(instr.out);
  switch (instr.pass) {
  case Pass::F:
    if (inputShard)
      if (Status st = shards->getEmbedded(instr.mb, instr.slice, in); !st)
        return st;
    if (outputShard)
      if (Status st = shards->getLastOutput(instr.mb, instr.slice, out); !st)
        return st;
    stage.forward(s, batch, in, out, slot(instr.state), slot(instr.kv),
                  workspace.get(), lossSum.get());
    if (inputShard)
      shards->release(Shard::Input, instr.mb, instr.slice);
    return Status::ok();
  case Pass::B:
  case Pass::BW:
    if (outputShard)
      if (Status st = shards->getOutputGrad(instr.mb, instr.slice, in); !st)
        return st;
    if (inputShard)
      if (Status st = shards->getEmbeddingGrad(instr.mb, instr.slice, out); !st)
        return st;
    stage.backwardInput(s, batch, in, out, slot(instr.state),
                        slot(instr.wstate), slot(instr.kv), workspace.get(),
                        lossScale, slot(instr.rstate));
    if (outputShard)
      shards->release(Shard::Output, instr.mb, instr.slice);
    if (instr.pass == Pass::BW)
      stage.backwardWeight(s, batch, slot(instr.state), slot(instr.wstate),
                           workspace.get(), slot(instr.rstate));
    return Status::ok();
  case Pass::W:
    stage.backwardWeight(s, batch, slot(instr.state), slot(instr.wstate),
                         workspace.get(), slot(instr.rstate));
    return Status::ok();
  default:
    return Status::ok();
  }
}

Status Executor::runStep(int64_t step, double &meanLoss) {
  auto stepStart = Clock::now();
  times = StepTimes();
  stepBegin->record(compute);
  uploadTokens(step);
  // The mean over every replica's microbatches: summed over the replicas
  // (grad_sync), each replica's share comes out right.
  const ModelConfig &model = plan.model;
  float lossScale = 1.0f / float(int64_t(plan.microbatches) * plan.dp *
                                 model.microBatch * model.seqLen);
  kernels.fill(lossSum.get(), 0.0, 1);
  if (shards)
    shards->beginStep(batches, lossScale);

  const DeviceProgram &program = plan.programs[deviceIndex];
  for (size_t i = 0; i < program.instructions.size(); ++i) {
    const Instruction &instr = program.instructions[i];
    if (int64_t(i) == options.failAtInstruction && options.failHang)
      for (;;)
        std::this_thread::sleep_for(std::chrono::seconds(1));
    if (int64_t(i) == options.failAtInstruction)
      return Status::error("instruction " + std::to_string(i) + " (" +
                           plan.describe(instr) +
                           "): injected failure (--fail-at-instruction)");
    Status st = Status::ok();
    switch (instr.op) {
    case Op::Send:
    case Op::Recv:
      st = issueTransfer(instr);
      break;
    case Op::GradSync:
      if ((st = progressAll()))
        st = issueGradSync(i);
      break;
    case Op::Collective: {
      if (!(st = progressAll()))
        break;
      auto start = Clock::now();
      st = shards->issue(instr.shard, instr.group, instr.mb, instr.slice,
                         instr.blocking);
      if (instr.blocking)
        times.commWait += seconds(start, Clock::now());
      break;
    }
    case Op::Exec:
      if ((st = progressAll()))
        st = runExec(i, lossScale);
      break;
    }
    if (!st)
      return st;
  }
  auto drainStart = Clock::now();
  double hostLoss = 0;
  if (Status st = finishStep(hostLoss); !st)
    return st;
  times.commWait += seconds(drainStart, Clock::now());
  double dispatchIdle = accountPasses();
  if (Status st = reduceLoss(hostLoss); !st)
    return st;
  meanLoss = hostLoss * lossScale;
  // The latest step's split; the profile accumulates over all steps.
  times.total = seconds(stepStart, Clock::now());
  if (device.isAsynchronous()) {
    // The host's clocks around waits say nothing on a GPU: it enqueues
    // ahead and waits once at the end. Overhead is then what the device
    // sat idle for dispatch; communication the rest.
    double overhead = std::max(0.0, dispatchIdle - times.data);
    times.commWait =
        std::max(0.0, times.total - times.compute - times.data - overhead);
  }
  return Status::ok();
}

/// Every microbatch's tokens, fetched and uploaded once per step.
void Executor::uploadTokens(int64_t step) {
  auto dataStart = Clock::now();
  int64_t rows = plan.model.microBatch, seq = plan.model.seqLen;
  std::vector<int32_t> batch;
  int64_t row = rows * (seq + 1);
  for (int mb = 0; mb < plan.microbatches; ++mb) {
    data.getBatch(step, mb, rows, seq, batch);
    std::copy(batch.begin(), batch.end(), hostTokens.begin() + mb * row);
  }
  device.upload(tokens.get(), hostTokens.data(),
                int64_t(hostTokens.size() * sizeof(int32_t)), compute);
  times.data = seconds(dataStart, Clock::now());
}

Status Executor::issueTransfer(const Instruction &instr) {
  int64_t message =
      getMessageElements(plan.shardModel, plan.getSliceShape(instr.slice));
  // The pipeline stream moves what compute has produced, and writes a
  // slot only after compute's earlier reads of it.
  ready->record(compute);
  pipeline.wait(*ready);
  DevicePtr payload = slot(instr.buffer);
  comm.describeNext(plan.describe(instr));
  if (instr.op == Op::Send) {
    sendOf[instr.buffer] = int64_t(outgoing.size());
    outgoing.push_back(
        comm.sendAsync(payload, message, instr.peer, int(instr.key), pipeline));
    active.push_back(outgoing.back().get());
  } else {
    if (Status st = settle(instr.buffer, pipeline); !st)
      return st;
    incoming[instr.buffer] =
        comm.recvAsync(payload, message, instr.peer, int(instr.key), pipeline);
    active.push_back(incoming[instr.buffer].get());
  }
  return Status::ok();
}

Status Executor::issueGradSync(size_t i) {
  // ZeRO-1: the shards' sums of replicated key/value heads first (the
  // group runs this instruction in lockstep), so that each replica's
  // part is final once reduced.
  if (plan.zero == 1) {
    for (const ReplicatedKeyValues &r : replicatedKv)
      if (r.syncInstruction == i)
        if (Status st = sumReplicatedKeyValues(r); !st)
          return st;
    for (const TokenSummed &t : tokenSummed)
      if (t.syncInstruction == i)
        if (Status st = sumOverShards(t); !st)
          return st;
  }
  // The stage's gradients are final: their sum over the replicas runs
  // on the data stream while compute goes on.
  ready->record(compute);
  dataStream.wait(*ready);
  passStart[i]->record(dataStream);
  DevicePtr grads = parameters.getGrads();
  replicas->describeNext(plan.describe(
      plan.programs[deviceIndex].instructions[i]));
  // The span ends once every sum issued here has (recorded on return).
  struct Mark {
    Event &end;
    Stream &stream;
    ~Mark() { end.record(stream); }
  } mark{*passEnd[i], dataStream};
  if (plan.zero == 1) {
    // ZeRO-1: each replica receives the sum of its part only.
    for (const ZeroRun &run : zeroRuns[i]) {
      gradSyncs.push_back(replicas->reduceScatterAsync(
          grads + run.offset, packedGrads.get() + run.packedAt, run.counts, 0,
          dataStream));
      if (!gradSyncs.back())
        return Status::error("the data-parallel transport cannot "
                             "reduce-scatter (ZeRO-1 needs it)");
      active.push_back(gradSyncs.back().get());
    }
    return Status::ok();
  }
  for (auto [offset, count] : syncRuns[i]) {
    gradSyncs.push_back(replicas->allReduceAsync(grads + offset, count,
                                                 Reduction::Sum, 0, dataStream));
    active.push_back(gradSyncs.back().get());
  }
  return Status::ok();
}

/// A pass: its input once the receive filling it has arrived; its slots
/// once no send reads them any more.
Status Executor::runExec(size_t i, float lossScale) {
  const Instruction &instr = plan.programs[deviceIndex].instructions[i];
  bool dependent = instr.in >= 0 && incoming[instr.in];
  if (Status st = waitForCollectives(instr, dependent); !st)
    return st;
  waited[i] = dependent;
  if (instr.in >= 0 && incoming[instr.in]) {
    if (Status st = await(*incoming[instr.in], compute); !st)
      return st;
    Request *done = incoming[instr.in].get();
    active.erase(std::remove(active.begin(), active.end(), done), active.end());
    incoming[instr.in].reset();
  }
  for (int32_t written : {instr.out, instr.state, instr.wstate, instr.kv})
    if (Status st = settle(written, compute); !st)
      return st;
  passStart[i]->record(compute);
  if (Status st = runPass(instr, lossScale); !st)
    return st;
  if (!tensorFailure)
    return tensorFailure;
  passEnd[i]->record(compute);
  return Status::ok();
}

/// Waits for the sends and the shards' collectives, then reads the loss
/// (the one host wait of the step).
Status Executor::finishStep(double &hostLoss) {
  for (auto &request : outgoing)
    if (Status st = await(*request, pipeline); !st)
      return st;
  outgoing.clear();
  active.clear();
  std::fill(sendOf.begin(), sendOf.end(), -1);
  if (shards)
    if (Status st = shards->finishStep(); !st)
      return st;
  device.download(&hostLoss, lossSum.get(), sizeof(double), compute);
  return device.synchronize();
}

/// Reads the passes' events into the step's times, the spans and the
/// profile. Returns the device's idle time before each pass that waited
/// for nothing: the host had not enqueued it yet (dispatch; the first
/// one's also fetching the step's data).
double Executor::accountPasses() {
  const DeviceProgram &program = plan.programs[deviceIndex];
  double dispatchIdle = 0;
  Event *previous = stepBegin.get();
  passSpans.clear();
  collectiveSpans.clear();
  for (size_t i = 0; i < program.instructions.size(); ++i) {
    const Instruction &instr = program.instructions[i];
    if (instr.op != Op::Exec)
      continue;
    double took = passEnd[i]->secondsSince(*passStart[i]);
    double idle = std::max(0.0, passStart[i]->secondsSince(*previous));
    if (!waited[i])
      dispatchIdle += idle;
    previous = passEnd[i].get();
    double start = passStart[i]->secondsSince(*stepBegin);
    passSpans.push_back({i, start, start + took});
    times.compute += took;
    PassProfile &p =
        profile[profileIndex(instr.stage, instr.shard, instr.pass)];
    SliceShape s = plan.getSliceShape(instr.slice);
    p.seconds += took;
    p.runs += 1;
    p.tokens += s.rows * s.tokens;
  }
  syncSpans.clear();
  for (size_t i = 0; i < program.instructions.size(); ++i) {
    if (program.instructions[i].op != Op::GradSync || !passStart[i])
      continue;
    double start = passStart[i]->secondsSince(*stepBegin);
    double end = std::max(start, passEnd[i]->secondsSince(*stepBegin));
    syncSpans.push_back({i, start, end});
    times.gradSyncs += end - start;
    for (const PassSpan &pass : passSpans)
      times.gradSyncsOverlapped += std::max(
          0.0, std::min(end, pass.end) - std::max(start, pass.start));
  }
  if (shards) {
    // The passes are in order on one stream: a collective's overlap is its
    // intersection with them.
    collectiveSpans = shards->getSpans(*stepBegin);
    for (VocabularyShards::Span &c : collectiveSpans) {
      c.end = std::max(c.start, c.end);
      times.vocabCollectives += c.end - c.start;
      for (const PassSpan &pass : passSpans)
        times.vocabOverlapped += std::max(
            0.0, std::min(c.end, pass.end) - std::max(c.start, pass.start));
    }
  }
  return dispatchIdle;
}

/// Only the device with the output layer has loss (sharded: every device
/// its labels' part); everyone learns the sum.
Status Executor::reduceLoss(double &hostLoss) {
  auto reduceStart = Clock::now();
  Status st = comm.allReduceSum(&hostLoss, 1);
  if (st && replicas)
    st = replicas->allReduceSum(&hostLoss, 1);
  // The output layer's rows are split over the tensor-parallel shards
  // (vocabulary-parallel, or Vocabulary Parallelism over pp x tp): each
  // has the loss of the tokens whose label it holds.
  if (st && tensorGroup)
    st = tensorGroup->allReduceSum(&hostLoss, 1);
  times.commWait += seconds(reduceStart, Clock::now());
  return st;
}

std::map<std::pair<std::string, std::string>, PassProfile>
Executor::getProfile() const {
  std::map<std::pair<std::string, std::string>, PassProfile> named;
  for (size_t owner = 0; owner < plan.stages.size() + 2; ++owner)
    for (int pass = 0; pass < kPasses; ++pass) {
      const PassProfile &p = profile[owner * kPasses + pass];
      if (p.runs == 0)
        continue;
      std::string name = owner < plan.stages.size() ? plan.stages[owner].name
                         : owner == plan.stages.size()
                             ? plan.vocabulary.input.name
                             : plan.vocabulary.output.name;
      named[{name, passName(Pass(pass))}] = p;
    }
  return named;
}

Status Executor::calibrateSlices(
    int repeats, std::map<std::string, std::vector<SliceSample>> &samples) {
  const ModelConfig &model = plan.model;
  int64_t rows = model.microBatch, seq = model.seqLen, h = model.hidden;
  DType act = plan.precision.activations;
  // Lengths growing by about 1.5x up to the sequence, each at a few
  // contexts from none to the most it can have.
  std::vector<int64_t> lengths;
  for (int64_t i = 1; i < seq; i = std::max(i + 1, i * 3 / 2))
    lengths.push_back(i);
  lengths.push_back(seq);
  // Synthetic tokens: valid ids, any values.
  std::vector<int32_t> host(rows * (seq + 1));
  int64_t vocab = model.layers.front().vocab;
  for (size_t t = 0; t < host.size(); ++t)
    host[t] = int32_t((t * 7919) % vocab);
  DeviceBuffer synthetic;
  if (Status st = device.allocate(DType::I32, int64_t(host.size()), synthetic);
      !st)
    return st;
  device.upload(synthetic.get(), host.data(),
                int64_t(host.size() * sizeof(int32_t)), compute);
  TokenRows batch{synthetic.get(), seq + 1};
  int64_t activation = rows * h * getSize(act);
  // Each rank calibrates alone: its tensor-parallel partners are not there
  // to sum with, so the samples time the shard's compute only (on every
  // way out of here, the sums resume).
  tensorSums = false;
  struct Resume {
    bool &sums;
    ~Resume() { sums = true; }
  } resume{tensorSums};
  std::unique_ptr<Event> start = device.createEvent(),
                         end = device.createEvent();
  for (size_t index = 0; index < stages.size(); ++index) {
    if (!stages[index])
      continue;
    StageRunner &stage = *stages[index];
    std::vector<SliceSample> &out = samples[plan.stages[index].name];
    for (int64_t length : lengths)
      for (int part = 0; part <= 3; ++part) {
        int64_t context = (seq - length) * part / 3;
        if (part > 0 && context == 0)
          continue;
        SliceShape s{rows, length, context};
        // Fresh buffers of the sizes the layout gives this slice.
        DeviceBuffer state, wstate, rstate, kv, work, in, outBuf, grad, inGrad,
            loss;
        for (auto [buffer, type, bytes] :
             {std::tuple{&state, act, stage.getForwardStateBytes(s)},
              std::tuple{&rstate, act, stage.getRecomputedStateBytes(s)},
              std::tuple{&wstate, act, stage.getWeightStateBytes(s)},
              std::tuple{&kv, act, stage.getKeyValueBytes(rows)},
              std::tuple{&work, act, stage.getWorkspaceBytes(s)},
              std::tuple{&in, act, activation * length},
              std::tuple{&outBuf, act, activation * length},
              std::tuple{&grad, act, activation * length},
              std::tuple{&inGrad, act, activation * length},
              std::tuple{&loss, DType::F64, getSize(DType::F64)}})
          if (Status st = device.allocateBytes(type, bytes, *buffer); !st)
            return st;
        kernels.fill(in.get(), 0.01, rows * length * h);
        kernels.fill(grad.get(), 0.01, rows * length * h);
        double best = 1e300;
        for (int r = 0; r < repeats; ++r) {
          start->record(compute);
          stage.forward(s, batch, in.get(), outBuf.get(), state.get(), kv.get(),
                        work.get(), loss.get());
          stage.backwardInput(s, batch, grad.get(), inGrad.get(), state.get(),
                              wstate.get(), kv.get(), work.get(), 1.0f,
                              rstate.get());
          stage.backwardWeight(s, batch, state.get(), wstate.get(), work.get(),
                               rstate.get());
          end->record(compute);
          if (Status st = compute.synchronize(); !st)
            return st;
          best = std::min(best, end->secondsSince(*start));
        }
        out.push_back({length, context, best});
      }
  }
  // The calibration accumulated gradients into the real ones.
  parameters.zeroGrads();
  return compute.synchronize();
}

Status Executor::finalizeGradients() {
  // The replicas' sums: the optimizer reads them on the compute stream.
  for (std::unique_ptr<Request> &request : gradSyncs)
    if (Status st = await(*request, compute); !st)
      return st;
  gradSyncs.clear();
  if (plan.zero == 1) {
    int me = replicas->rank();
    // A tied table's two ends: replica r of each holds the same part.
    if (tiedRun >= 0)
      for (auto &[instruction, list] : zeroRuns)
        for (const ZeroRun &run : list)
          if (run.offset == tiedRun)
            if (Status st = comm.allReduceSum(packedGrads.get() + run.packedAt,
                                              run.counts[me], tiedGroup.data(),
                                              int(tiedGroup.size()), compute);
                !st)
              return st;
  }
  if (plan.zero == 1 && options.wholeGradients) {
    // Every replica's summed part back in its place, then to everyone.
    DevicePtr grads = parameters.getGrads();
    for (auto &[instruction, list] : zeroRuns)
      for (const ZeroRun &run : list) {
        int me = replicas->rank();
        int64_t at = 0;
        for (int r = 0; r < me; ++r)
          at += run.counts[r];
        kernels.copy(grads + run.offset + at, packedGrads.get() + run.packedAt,
                     run.counts[me]);
      }
    if (Status st = gatherParts(grads); !st)
      return st;
  }
  if (plan.zero == 1)
    return Status::ok();
  for (const ReplicatedKeyValues &r : replicatedKv)
    if (Status st = sumReplicatedKeyValues(r); !st)
      return st;
  for (const TokenSummed &t : tokenSummed)
    if (Status st = sumOverShards(t); !st)
      return st;
  if (tiedGroup.empty() || std::find(tiedGroup.begin(), tiedGroup.end(),
                                     deviceIndex) == tiedGroup.end())
    return Status::ok();
  // The table, or this tensor-parallel shard's rows of it (alike at both
  // ends).
  const std::string name = "embed.tokens";
  int64_t count = 0;
  for (const ParameterSpec &spec : parameters.specs())
    if (spec.name == name)
      count = spec.size();
  return comm.allReduceSum(parameters.grad(name), count, tiedGroup.data(),
                           int(tiedGroup.size()), compute);
}

Status Executor::sumOverShards(const TokenSummed &t) {
  std::unique_ptr<Request> sum = tensorGroup->allReduceAsync(
      parameters.grad(t.name), t.count, Reduction::Sum, 0, compute);
  return await(*sum, compute);
}

Status Executor::sumReplicatedKeyValues(const ReplicatedKeyValues &r) {
  // Each shard of the group has the part of the heads' gradient its query
  // heads gave; the sum is theirs.
  int64_t h = plan.model.hidden;
  int64_t width = r.queries + 2 * r.keyValues, cols = 2 * r.keyValues;
  DevicePtr weight = parameters.grad(r.weight), scratch = kvScratch.get();
  kernels.copyStrided(scratch, weight + r.queries,
                      {1, h, cols, 0, width, 0, cols});
  if (Status st = tensorGroup->allReduceSum(scratch, h * cols, r.group.data(),
                                            int(r.group.size()), compute);
      !st)
    return st;
  kernels.copyStrided(weight + r.queries, scratch,
                      {1, h, cols, 0, cols, 0, width});
  if (!r.bias.empty())
    if (Status st = tensorGroup->allReduceSum(
            parameters.grad(r.bias) + r.queries, cols, r.group.data(),
            int(r.group.size()), compute);
        !st)
      return st;
  return Status::ok();
}

Status Executor::gradientNorm(double &norm) {
  kernels.fill(normSum.get(), 0.0, 1);
  DevicePtr grads = plan.zero == 1 ? packedGrads.get() : parameters.getGrads();
  for (const NormPart &p : normParts)
    kernels.sumSquares(grads + p.offset, p.rows, p.cols, p.stride, p.weight,
                       normSum.get());
  double sum = 0;
  device.download(&sum, normSum.get(), sizeof(double), compute);
  if (Status st = compute.synchronize(); !st)
    return st;
  // Over the pipeline; the tensor-parallel shards; ZeRO-1's replicas,
  // each of which holds its part (whole replicas hold alike gradients).
  Status st = comm.allReduceSum(&sum, 1);
  if (st && tensorGroup)
    st = tensorGroup->allReduceSum(&sum, 1);
  if (st && plan.zero == 1)
    st = replicas->allReduceSum(&sum, 1);
  // Taking out the shared heads can leave -0 or a rounding below zero.
  norm = std::sqrt(std::max(0.0, sum));
  return st;
}

Status Executor::applyOptimizer(int64_t step, float gradientScale) {
  AdamConfig adam = options.getAdam(step);
  adam.gradientScale = gradientScale;
  if (plan.zero != 1) {
    parameters.adamStep(adam, step);
    parameters.zeroGrads();
    return Status::ok();
  }
  // ZeRO-1: this replica's part of the update, then every replica's
  // updated weights (and their working copy) to all.
  if (Status st = shardOptimizerState(); !st)
    return st;
  parameters.adamStep(adam, step, packedGrads.get());
  if (Status st = gatherParts(parameters.getMasters()); !st)
    return st;
  if (DevicePtr working = parameters.getWorking())
    if (Status st = gatherParts(working); !st)
      return st;
  parameters.zeroGrads();
  return Status::ok();
}

/// The model with its vocabulary layers whole: the reference never shards.
static ModelConfig unsharded(ModelConfig model) {
  for (LayerConfig &layer : model.layers)
    layer.sharded = false;
  return model;
}

ReferenceTrainer::ReferenceTrainer(const ModelConfig &sharded, int microbatches,
                                   const Precision &precision, Device &device,
                                   TokenSource &data,
                                   const TrainerOptions &options)
    : model(unsharded(sharded)), microbatches(microbatches),
      precision(precision), device(device), data(data), options(options) {}

Status ReferenceTrainer::prepare() {
  std::vector<int> all;
  for (size_t i = 0; i < model.layers.size(); ++i) {
    all.push_back(int(i));
    for (const ParameterSpec &spec : getLayerParameters(model, int(i)))
      parameters.add(spec);
  }
  if (Status st = parameters.allocate(device, precision, options.seed); !st)
    return st;
  stage = std::make_unique<StageRunner>(model, all, parameters,
                                        device.getKernels(StreamKind::Compute),
                                        precision);
  int64_t rows = model.microBatch, seq = model.seqLen;
  SliceShape whole{rows, seq, 0};
  DType act = precision.activations;
  for (auto [buffer, type, bytes] :
       {std::tuple{&forward, act, stage->getForwardStateBytes(whole)},
        std::tuple{&weight, act, stage->getWeightStateBytes(whole)},
        std::tuple{&kv, act, stage->getKeyValueBytes(rows)},
        std::tuple{&work, act, stage->getWorkspaceBytes(whole)},
        std::tuple{&tokens, DType::I32, rows * (seq + 1) * getSize(DType::I32)},
        std::tuple{&lossSum, DType::F64, getSize(DType::F64)},
        std::tuple{&normSum, DType::F64, getSize(DType::F64)}})
    if (Status st = device.allocateBytes(type, bytes, *buffer); !st)
      return st;
  return device.synchronize();
}

Status ReferenceTrainer::runStep(int64_t step, double &meanLoss) {
  int64_t rows = model.microBatch, seq = model.seqLen;
  SliceShape whole{rows, seq, 0};
  Kernels &kernels = device.getKernels(StreamKind::Compute);
  Stream &compute = device.getStream(StreamKind::Compute);
  float lossScale = 1.0f / float(microbatches * rows * seq);
  kernels.fill(lossSum.get(), 0.0, 1);
  for (int mb = 0; mb < microbatches; ++mb) {
    data.getBatch(step, mb, rows, seq, hostTokens);
    device.upload(tokens.get(), hostTokens.data(),
                  int64_t(hostTokens.size() * sizeof(int32_t)), compute);
    TokenRows batch{tokens.get(), seq + 1};
    stage->forward(whole, batch, nullptr, nullptr, forward.get(), kv.get(),
                   work.get(), lossSum.get());
    stage->backwardInput(whole, batch, nullptr, nullptr, forward.get(),
                         weight.get(), kv.get(), work.get(), lossScale);
    stage->backwardWeight(whole, batch, forward.get(), weight.get(),
                          work.get());
    // The host tokens are refilled for the next microbatch.
    if (Status st = compute.synchronize(); !st)
      return st;
  }
  double hostLoss = 0;
  device.download(&hostLoss, lossSum.get(), sizeof(double), compute);
  if (Status st = compute.synchronize(); !st)
    return st;
  meanLoss = hostLoss * lossScale;
  return Status::ok();
}

Status ReferenceTrainer::gradientNorm(double &norm) {
  Kernels &kernels = device.getKernels(StreamKind::Compute);
  Stream &compute = device.getStream(StreamKind::Compute);
  kernels.fill(normSum.get(), 0.0, 1);
  kernels.sumSquares(parameters.getGrads(), 1, parameters.getTotalElements(),
                     parameters.getTotalElements(), 1.0, normSum.get());
  double sum = 0;
  device.download(&sum, normSum.get(), sizeof(double), compute);
  if (Status st = compute.synchronize(); !st)
    return st;
  norm = std::sqrt(sum);
  return Status::ok();
}

Status ReferenceTrainer::applyOptimizer(int64_t step, float gradientScale) {
  AdamConfig adam = options.getAdam(step);
  adam.gradientScale = gradientScale;
  parameters.adamStep(adam, step);
  parameters.zeroGrads();
  return Status::ok();
}

} // namespace sluice::rt
