//===- Executor.cpp - Run a plan, or the single-device reference ----------===//

#include "Executor.h"
#include "PassLanes.h"
#include "ExpertLoad.h"

#include <algorithm>
#include <cstdlib>
#include <chrono>
#include <thread>
#include <cmath>

namespace sluice::rt {

namespace {
using Clock = std::chrono::steady_clock;
double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}
} // namespace

std::vector<ParameterSpec> getDeviceParameters(const Plan &plan, int device,
                                               int shard, int member) {
  std::vector<ParameterSpec> specs;
  for (const StagePlan &stage : plan.stages)
    if (stage.device == device)
      for (int layer : stage.layers)
        for (ParameterSpec &spec :
             getLayerParameters(plan.model, layer,
                                {shard, plan.tp, member, plan.ep}))
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

Executor::Executor(const Plan &plan, int deviceIndex, Device &device,
                   Communicator &comm, TokenSource &data,
                   const TrainerOptions &options, Communicator *replicas,
                   Communicator *tensorGroup, Communicator *experts,
                   Communicator *expertReplicas, Communicator *contexts)
    : plan(plan), deviceIndex(deviceIndex), device(device),
      kernels(device.getKernels(StreamKind::Compute)),
      compute(device.getStream(StreamKind::Compute)),
      pipeline(device.getStream(StreamKind::Pipeline)), comm(comm), data(data),
      options(options),
      replicas(plan.getGradientRanks() > 1 ? replicas : nullptr),
      tensorGroup(plan.tp > 1 ? tensorGroup : nullptr),
      expertReplicas(plan.ep > 1 && plan.getExpertReplicas() > 1
                         ? expertReplicas
                         : nullptr),
      contexts(plan.cp > 1 ? contexts : nullptr),
      transfers(comm, options.commTimeout, times.commWait),
      tensorSums(plan, deviceIndex, this->tensorGroup, parameters, device,
                 transfers),
      expertParallel(plan, experts, device, transfers),
      gradientSync(plan, deviceIndex, parameters, this->replicas,
                   this->expertReplicas, device, transfers),
      profiler(plan, deviceIndex, device) {
  expertParallel.setDelay(options.allToAllDelay);
  const char *grouping = std::getenv("SLUICE_GROUP_TRANSFERS");
  groupTransfers = !(grouping && std::string(grouping) == "0");
  // Under ZeRO-2 and 3 a layer's weight gradients live in one window
  // while its W runs (scatterLayer clears it for the next layer's): a B
  // that wrote them earlier would write into another layer's.
  const char *overlap = std::getenv("SLUICE_TP_OVERLAP");
  overlapTensorSums = this->tensorGroup && plan.zero < 2 &&
                      !(overlap && std::string(overlap) == "0");
}

Executor::~Executor() = default;

Status Executor::prepare() {
  if (plan.tp > 1 && (!tensorGroup || tensorGroup->size() != plan.tp))
    return Status::error("the plan splits layers over " +
                         std::to_string(plan.tp) +
                         " tensor-parallel shards, but no communicator "
                         "spans them");
  if (plan.getGradientRanks() > 1 && !replicas)
    return Status::error("the plan has " +
                         std::to_string(plan.getGradientRanks()) +
                         " data- and context-parallel ranks per device, "
                         "but no communicator spans them");
  if (plan.cp > 1 && (!contexts || contexts->size() != plan.cp))
    return Status::error("the plan splits each sequence over " +
                         std::to_string(plan.cp) +
                         " context-parallel ranks, but no communicator "
                         "spans them");
  if (plan.ep > 1 && !expertParallel.isOn())
    return Status::error("the plan splits the experts over " +
                         std::to_string(plan.ep) +
                         " replicas, but no communicator spans them");
  if (plan.ep > 1 && plan.getExpertReplicas() > 1 &&
      (!expertReplicas || expertReplicas->size() != plan.getExpertReplicas()))
    return Status::error("the plan's experts are held by " +
                         std::to_string(plan.getExpertReplicas()) +
                         " ranks each, but no communicator spans them");
  if (Status st = prepareParameters(); !st)
    return st;
  prepareStages();
  if (Status st = tensorSums.prepare(); !st)
    return st;
  if (Status st = allocateBuffers(); !st)
    return st;
  profiler.createEvents(replicas != nullptr);
  if (Status st = planGradients(); !st)
    return st;
  return device.synchronize();
}

Status Executor::prepareParameters() {
  // ParameterStore::add ignores a tied table's second spec.
  for (const ParameterSpec &spec :
       getDeviceParameters(plan, deviceIndex, tensorSums.getShardIndex(),
                           expertParallel.getMember()))
    parameters.add(spec);
  if (plan.vocabulary.any())
    shards = std::make_unique<VocabularyShards>(
        plan, deviceIndex, device, comm, tensorGroup,
        tensorSums.getShardIndex());
  // ZeRO-2 and 3: the gradients live in a window of one layer's size,
  // each layer's reduce-scattered after its W (GradientSync.h).
  if (plan.zero >= 2) {
    if (Status st = parameters.setGradientGroups(gradientSync.planGroups());
        !st)
      return st;
    if (options.wholeGradients)
      parameters.keepWholeGradients();
  }
  parameters.layout();
  if (Status st = planSums(); !st)
    return st;
  // ZeRO-3: the weights too are the replica's parts, each layer's
  // gathered before a pass uses it (gatherLayer).
  // ZeRO-1 and 2 keep the replica's part of the moments from the start.
  if (zero)
    if (Status st = plan.zero == 3 ? parameters.setWeightShards(
                                         zero->getOwnedRanges(), plan.reshard)
                                   : parameters.setMomentShards(
                                         zero->getOwnedRanges());
        !st)
      return st;
  if (Status st = parameters.allocate(device, plan.precision, options.seed);
      !st)
    return st;
  if (shards) {
    shards->bind(parameters);
    shards->setProgressOthers([this] {
      transfers.progress();
      return Status::ok();
    });
    shards->setTimeout(options.commTimeout);
    transfers.setOthers([this] { return shards->progress(); });
  }
  return Status::ok();
}

/// A runner per stage of this device; under tensor parallelism its
/// collectives go through the group.
void Executor::prepareStages() {
  stages.resize(plan.stages.size());
  for (size_t s = 0; s < plan.stages.size(); ++s) {
    if (plan.stages[s].device != deviceIndex)
      continue;
    stages[s] = std::make_unique<StageRunner>(
        plan.shardModel, plan.stages[s].layers, parameters, kernels,
        plan.precision, plan.stages[s].recompute);
    if (tensorGroup)
      stages[s]->setTensorParallel(tensorSums.getCalls(),
                                   tensorSums.getShardIndex());
    if (expertParallel.isOn())
      stages[s]->setExperts(expertParallel.getCalls());
    if (plan.zero >= 2)
      stages[s]->setAfterWeight([this](int layer) { scatterLayer(layer); });
    if (plan.zero == 3)
      stages[s]->setBeforeLayer(
          [this](int layer, int next) { gatherLayer(layer, next); });
    if (contexts)
      stages[s]->setContext(getContextCalls());
  }
}

block::ContextGroup Executor::getContextCalls() {
  block::ContextGroup calls;
  calls.rank = contexts->rank();
  calls.size = contexts->size();
  calls.slices = plan.slices;
  // Ring attention's step (Liu et al., 2023, §3: the next block moves
  // while the current one is attended to). The transfers run on the
  // context stream, after what the compute stream has issued so far (the
  // block packed, the buffer received into read by the step before); the
  // pass waits for them (advancing the pipeline's transfers meanwhile)
  // only after the step's compute. On a GPU the NCCL kernels run beside
  // that compute; on CPU ranks the host streams are in order anyway and
  // MPI moves a message as far as its progress allows.
  calls.shift = [this](DevicePtr send, DevicePtr recv,
                       int64_t count) -> std::function<void()> {
    if (!scatterEnabled || !scatterFailure.isOk())
      return [] {};
    Stream &ring = device.getStream(StreamKind::Context);
    if (!ringReady)
      ringReady = device.createEvent();
    ringReady->record(compute);
    ring.wait(*ringReady);
    int size = contexts->size(), rank = contexts->rank();
    int next = (rank + 1) % size, previous = (rank + size - 1) % size;
    // Even ranks send first and odd ranks receive first: a transport whose
    // send waits for its receive (NCCL's, outside a group) pairs them in
    // that order around the ring.
    std::shared_ptr<Request> sent, received;
    for (int turn = 0; turn < 2; ++turn) {
      if ((turn == 0) == (rank % 2 == 0)) {
        contexts->describeNext("ring attention's send to context rank " +
                               std::to_string(next));
        sent = contexts->sendAsync(send, count, next, 0, ring);
      } else {
        contexts->describeNext("ring attention's receive from context "
                               "rank " +
                               std::to_string(previous));
        received = contexts->recvAsync(recv, count, previous, 0, ring);
      }
    }
    if (sent)
      transfers.track(*sent);
    if (received)
      transfers.track(*received);
    return [this, sent, received] {
      for (const std::shared_ptr<Request> &request : {sent, received}) {
        if (request)
          transfers.forget(request.get());
        if (!scatterFailure.isOk())
          continue;
        scatterFailure =
            request ? transfers.await(*request, compute)
                    : Status::error("the context-parallel transport cannot "
                                    "send or receive");
      }
    };
  };
  calls.sum = [this](DevicePtr data, int64_t count) {
    if (!scatterEnabled || !scatterFailure.isOk())
      return;
    contexts->describeNext("the load-balancing statistics' sum over the "
                           "context ranks");
    std::unique_ptr<Request> request =
        contexts->allReduceAsync(data, count, Reduction::Sum, 0, compute);
    scatterFailure = request ? transfers.await(*request, compute)
                             : Status::error("the context-parallel transport "
                                             "cannot all-reduce");
  };
  return calls;
}

void Executor::gatherLayer(int layer, int next) {
  if (!zero || !scatterEnabled || !scatterFailure.isOk())
    return;
  size_t group = gradientSync.getGroupOf(layer);
  Status st = zero->gatherGroup(group);
  if (st && next >= 0)
    st = zero->prefetchGroup(group, gradientSync.getGroupOf(next));
  if (!st)
    scatterFailure = st;
}

void Executor::scatterLayer(int layer) {
  scatterGroup(gradientSync.getGroupOf(layer));
}

void Executor::scatterGroup(size_t group) {
  if (!zero || !scatterEnabled || evaluating || !scatterFailure.isOk())
    return;
  Status st = tensorSums.sumAt(group);
  if (st)
    st = zero->reduceScatterGroup(group);
  if (!st)
    scatterFailure = st;
}

Status Executor::takeScatterFailure() {
  Status failure = scatterFailure;
  scatterFailure = Status::ok();
  return failure;
}

/// The workspace, the program's buffer slots, the tokens and the loss.
Status Executor::allocateBuffers() {
  DType act = plan.precision.activations;
  if (Status st = device.allocateBytes(
          act, getDeviceWorkspaceBytes(plan, deviceIndex), workspace);
      !st)
    return st;
  const DeviceProgram &program = plan.programs[deviceIndex];
  // Overlapped groups interleave two passes on the host (PassLanes.h),
  // and on a GPU run them on two compute streams: the backward's scratch
  // must not be the forward's.
  // ZeRO-3's two weight slots serve one pass at a time: an overlapped
  // group's passes run one after the other.
  // Context parallelism's collectives inside the passes keep one order
  // on every rank of the group: one pass at a time too.
  overlapGroups =
      options.overlapGroups && plan.zero != 3 && plan.cp == 1 &&
      std::any_of(program.instructions.begin(), program.instructions.end(),
                  [](const Instruction &in) { return in.paired; });
  if (overlapGroups) {
    if (Status st = device.allocateBytes(
            act, getDeviceWorkspaceBytes(plan, deviceIndex), laneWorkspace);
        !st)
      return st;
    if (device.isAsynchronous()) {
      if (Status st = device.openLanes(); !st)
        return st;
      laneFork = device.createEvent();
      laneJoin = device.createEvent();
    }
  }
  buffers.resize(program.buffers.size());
  for (size_t b = 0; b < program.buffers.size(); ++b)
    if (Status st = device.allocateBytes(act, program.buffers[b], buffers[b]);
        !st)
      return st;
  incoming.resize(buffers.size());
  sendOf.assign(buffers.size(), -1);
  // What each transfer waits for: only the pass that touched its slot
  // last, not the compute stream's tail (a send issued after the passes
  // the global order lists before it would otherwise leave only once they
  // finished). A slot no pass touched yet this step waits for nothing:
  // the previous step ended with the device synchronized.
  std::vector<int64_t> lastWrite(buffers.size(), -1),
      lastTouch(buffers.size(), -1);
  transferAfter.assign(program.instructions.size(), -1);
  for (size_t i = 0; i < program.instructions.size(); ++i) {
    const Instruction &instr = program.instructions[i];
    if (instr.op == Op::Send)
      transferAfter[i] = lastWrite[size_t(instr.buffer)];
    else if (instr.op == Op::Recv)
      transferAfter[i] = lastTouch[size_t(instr.buffer)];
    if (instr.op != Op::Exec)
      continue;
    for (int32_t slot : {instr.out, instr.state, instr.wstate, instr.kv})
      if (slot >= 0)
        lastWrite[size_t(slot)] = lastTouch[size_t(slot)] = int64_t(i);
    if (instr.in >= 0)
      lastTouch[size_t(instr.in)] = int64_t(i);
  }
  // Each stage's fp8 records and its sparse layers' routing over the step.
  fp8States.resize(stages.size());
  loads.resize(stages.size());
  for (size_t s = 0; s < stages.size(); ++s) {
    if (!stages[s])
      continue;
    if (int64_t count = stages[s]->getFp8StateFloats()) {
      if (Status st = device.allocate(DType::F32, count, fp8States[s]); !st)
        return st;
      stages[s]->bindFp8State(fp8States[s].get());
    }
    if (int64_t count = stages[s]->getLoadFloats()) {
      if (Status st = device.allocate(DType::F32, count, loads[s]); !st)
        return st;
      stages[s]->bindLoad(loads[s].get());
    }
  }
  // A message's activation elements per slice: the activation and what
  // follows it (a load-balancing loss's statistics; Layout.h
  // getMessageBytes), once rather than per transfer.
  messageElements.clear();
  for (size_t k = 0; k < plan.slices.size(); ++k)
    messageElements.push_back(
        getMessageBytes(plan.shardModel, plan.getSliceShape(int(k)),
                        plan.precision) /
        getSize(plan.precision.activations));

  ContextSplit split;
  if (contexts) {
    split.ranks = plan.cp;
    split.rank = contexts->rank();
    split.slices = plan.slices;
  }
  if (Status st = stepTokens.allocate(device, plan.model, plan.microbatches,
                                      split);
      !st)
    return st;
  return device.allocate(DType::F64, 1, lossSum);
}

Status Executor::planSums() {
  // A tied table whose two ends sit on different devices is held by both;
  // their gradients are summed before the update (Megatron's embedding
  // all-reduce). Sharded, the two ends share one shard on every device:
  // nothing to sum.
  const LayerConfig &out = plan.model.layers.back();
  int first = plan.stages.front().device, last = plan.stages.back().device;
  if (out.tied && first != last && !out.sharded)
    tiedGroup = {std::min(first, last), std::max(first, last)};
  averagedBy.clear();
  if (Status st = gradientSync.planRuns(!tiedGroup.empty(), averagedBy); !st)
    return st;
  if (plan.zero >= 2)
    if (Status st = gradientSync.planGroupRuns(!tiedGroup.empty()); !st)
      return st;
  if (plan.zero < 1)
    return Status::ok();
  // ZeRO-1 reduce-scatters at each grad_sync; ZeRO-2 and 3 each group
  // after its layer's W (scatterLayer).
  zero = std::make_unique<ZeroOne>(parameters, *replicas, device, transfers);
  return plan.zero >= 2 ? zero->planGroups(gradientSync.getGroupRuns(),
                                           gradientSync.getGroupExpertRuns(),
                                           gradientSync.getExpertReplicas())
                        : zero->plan(gradientSync.getRuns(),
                                     gradientSync.getExpertRuns(),
                                     gradientSync.getExpertReplicas());
}

/// Who counts which gradients in the global norm; the tensor group's sums
/// before the reduce-scatters that read them.
Status Executor::planGradients() {
  // The tensor group's sums of replicated gradients run before the
  // reduce-scatter that reads them: keyed by grad_sync, or by group.
  if (zero) {
    std::map<std::string, size_t> syncOf = averagedBy;
    if (plan.zero >= 2) {
      // Each layer's at its group's reduce-scatter; the vectors' at the
      // step's (reduceScatterVectors).
      syncOf = gradientSync.getGroupOfParameters();
      for (auto &[name, sync] : syncOf)
        if (parameters.isVectorGradient(name))
          sync = kVectorSums;
    }
    tensorSums.assignSyncs(syncOf);
  }
  return normPlan.plan(plan, parameters, deviceIndex,
                       tensorSums.getShardIndex(), tiedGroup,
                       tensorSums.getReplicatedKeyValues(),
                       zero ? &zero->getOwnedRanges() : nullptr, device);
}

Status Executor::shardOptimizerState() {
  return zero ? zero->shardOptimizerState() : Status::ok();
}

Status Executor::gatherOptimizerState() {
  return zero ? zero->gatherOptimizerState() : Status::ok();
}

Status Executor::settle(int32_t slot, Stream &stream) {
  if (slot < 0 || sendOf[slot] < 0)
    return Status::ok();
  Status st = transfers.await(*outgoing[sendOf[slot]], stream);
  sendOf[slot] = -1;
  return st;
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

Status Executor::runPass(const Instruction &instr, float lossScale,
                         DevicePtr scratch) {
  SliceShape s = plan.getSliceShape(instr.slice);
  if (instr.shard != Shard::None) {
    // A vocabulary shard's pass; under ZeRO-2 its rows' gradients
    // reduce-scattered after the pass that writes them (IB, T).
    // ZeRO-3: the shard's rows gathered first.
    if (plan.zero == 3)
      if (Status st = zero->gatherGroup(gradientSync.getGroupOf(instr.shard));
          !st)
        return st;
    Status st = shards->run(instr.pass, instr.mb, instr.slice, lossSum.get());
    if (st && plan.zero >= 2 &&
        (instr.pass == Pass::IB || instr.pass == Pass::T))
      scatterGroup(gradientSync.getGroupOf(instr.shard));
    return st;
  }
  StageRunner &stage = *stages[instr.stage];
  const TokenRows &batch = stepTokens.getBatches()[instr.mb];
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
                  scratch, lossSum.get());
    if (inputShard)
      shards->release(Shard::Input, instr.mb, instr.slice);
    return Status::ok();
  case Pass::B:
  case Pass::BW:
    // Evaluating, the shards' buffers still change hands as in training
    // (their passes run), and the stage computes nothing.
    if (outputShard)
      if (Status st = shards->getOutputGrad(instr.mb, instr.slice, in); !st)
        return st;
    if (inputShard)
      if (Status st = shards->getEmbeddingGrad(instr.mb, instr.slice, out); !st)
        return st;
  {
    // A BW pass computes the weight gradients after B anyway: under tensor
    // parallelism B takes some, to run beside the group's sums.
    bool rowWeights = instr.pass == Pass::BW && overlapTensorSums;
    if (!evaluating)
      stage.backwardInput(s, batch, in, out, slot(instr.state),
                          slot(instr.wstate), slot(instr.kv), scratch,
                          lossScale, slot(instr.rstate), rowWeights);
    if (outputShard)
      shards->release(Shard::Output, instr.mb, instr.slice);
    if (instr.pass == Pass::BW && !evaluating)
      stage.backwardWeight(s, batch, slot(instr.state), slot(instr.wstate),
                           scratch, slot(instr.rstate), rowWeights);
    return Status::ok();
  }
  case Pass::W:
    if (!evaluating)
      stage.backwardWeight(s, batch, slot(instr.state), slot(instr.wstate),
                           scratch, slot(instr.rstate));
    return Status::ok();
  default:
    return Status::ok();
  }
}

Status Executor::runStep(int64_t step, double &meanLoss) {
  auto stepStart = Clock::now();
  times = StepTimes();
  profiler.beginStep(compute);
  // Every microbatch's tokens, fetched and uploaded once per step.
  auto dataStart = Clock::now();
  stepTokens.upload(data, step, device, compute);
  times.data = seconds(dataStart, Clock::now());
  // The mean over every replica's microbatches: summed over the replicas
  // (grad_sync), each replica's share comes out right.
  const ModelConfig &model = plan.model;
  float lossScale = 1.0f / float(int64_t(plan.microbatches) * plan.dp *
                                 model.microBatch * model.seqLen);
  kernels.fill(lossSum.get(), 0.0, 1);
  for (const std::unique_ptr<StageRunner> &stage : stages)
    if (stage)
      stage->clearLoad();
  if (shards)
    shards->beginStep(stepTokens.getBatches(), lossScale);
  const DeviceProgram &program = plan.programs[deviceIndex];
  for (size_t i = 0; i < program.instructions.size(); ++i)
    if (Status st = dispatch(i, lossScale); !st)
      return st;
  // The drain is all waiting: it counts once, whole. (The sends it awaits
  // add their own waits to commWait as they finish; adding the drain's
  // time on top counted them twice, and --timing showed a negative
  // executor overhead.)
  double waitedBefore = times.commWait;
  auto drainStart = Clock::now();
  double hostLoss = 0;
  if (Status st = finishStep(hostLoss); !st)
    return st;
  if (Status st = finishFp8Step(); !st)
    return st;
  times.commWait = waitedBefore + seconds(drainStart, Clock::now());
  // An evaluation's passes are not the training step's (--profile's
  // per-pass costs, --trace's spans).
  double dispatchIdle =
      evaluating ? 0.0 : profiler.account(times, shards.get());
  if (Status st = reduceLoss(hostLoss); !st)
    return st;
  meanLoss = hostLoss * lossScale;
  // The latest step's split; the profile accumulates over all steps.
  times.total = seconds(stepStart, Clock::now());
  accountStep(dispatchIdle);
  return Status::ok();
}

Status Executor::evaluateStep(int64_t step, double &meanLoss) {
  // --timing reports the last training step's split, not this.
  StepTimes kept = times;
  evaluating = true;
  Status st = runStep(step, meanLoss);
  evaluating = false;
  times = kept;
  return st;
}

/// One instruction of the program, in its order.
Status Executor::dispatch(size_t &i, float lossScale) {
  const Instruction &instr = plan.programs[deviceIndex].instructions[i];
  if (Status st = injectFault(i); !st)
    return st;
  switch (instr.op) {
  case Op::Send:
  case Op::Recv:
    return issueTransfers(i);
  case Op::GradSync:
    if (evaluating)
      return Status::ok(); // no gradients: every replica skips it alike
    if (Status st = transfers.progressAll(); !st)
      return st;
    return issueGradSync(i);
  case Op::Collective: {
    if (Status st = transfers.progressAll(); !st)
      return st;
    auto start = Clock::now();
    Status st = shards->issue(instr.shard, instr.group, instr.mb, instr.slice,
                              instr.blocking);
    if (instr.blocking)
      times.commWait += seconds(start, Clock::now());
    return st;
  }
  case Op::Exec: {
    if (Status st = transfers.progressAll(); !st)
      return st;
    if (!instr.paired || !overlapGroups)
      return runExec(i, lossScale);
    size_t last = i;
    const std::vector<Instruction> &list =
        plan.programs[deviceIndex].instructions;
    while (last + 1 < list.size() && list[last].paired &&
           list[last + 1].op == Op::Exec)
      ++last;
    // A fault injected at a later member stops the rank there too.
    for (size_t j = i + 1; j <= last; ++j)
      if (Status st = injectFault(j); !st)
        return st;
    Status st = runGroup(i, last, lossScale);
    i = last;
    return st;
  }
  }
  return Status::ok();
}

Status Executor::injectFault(size_t i) const {
  if (int64_t(i) != options.failAtInstruction)
    return Status::ok();
  if (options.failHang)
    for (;;)
      std::this_thread::sleep_for(std::chrono::seconds(1));
  return Status::error(
      "instruction " + std::to_string(i) + " (" +
      plan.describe(plan.programs[deviceIndex].instructions[i]) +
      "): injected failure (--fail-at-instruction)");
}

void Executor::accountStep(double dispatchIdle) {
  if (!device.isAsynchronous())
    return;
  // The host's clocks around waits say nothing on a GPU: it enqueues ahead
  // and waits once at the end. Overhead is then what the device sat idle
  // for dispatch; communication the rest.
  double overhead = std::max(0.0, dispatchIdle - times.data);
  times.commWait =
      std::max(0.0, times.total - times.compute - times.data - overhead);
}

Status Executor::issueTransfers(size_t &i) {
  // The run of sends and receives from i, as one group: under NCCL each
  // operation of a communicator otherwise waits for the one before it, so
  // a receive the next pass needs would queue behind a send to the other
  // neighbour (Megatron-LM batches a step's sends and receives the same
  // way). Grouping instructions adjacent in the global order keeps one
  // position for them on every rank, so the order's proof holds. The run
  // stops before a receive into a slot one of its sends reads (that
  // receive waits for the send) and before an injected fault.
  //
  // The run's waits go on the pipeline stream before the group, a
  // receive's wait for an earlier send still reading its slot among them.
  // Under NCCL's rules that send, issued before on the same serial
  // communicator, has completed before any of the run could start, so the
  // wait delays nothing. MPI's operations do not wait for one another, so
  // there a hoisted wait could hold back a send a peer needs: a transport
  // that does not group keeps one transfer at a time.
  if (!groupTransfers || !comm.groupsTransfers()) {
    if (Status st = prepareTransfer(i); !st)
      return st;
    postTransfer(i);
    return Status::ok();
  }
  const std::vector<Instruction> &list =
      plan.programs[deviceIndex].instructions;
  size_t last = i;
  std::vector<int32_t> sent;
  if (list[i].op == Op::Send)
    sent.push_back(list[i].buffer);
  while (last + 1 < list.size() &&
         int64_t(last + 1) != options.failAtInstruction) {
    const Instruction &next = list[last + 1];
    if (next.op != Op::Send && next.op != Op::Recv)
      break;
    if (next.op == Op::Recv &&
        std::find(sent.begin(), sent.end(), next.buffer) != sent.end())
      break;
    if (next.op == Op::Send)
      sent.push_back(next.buffer);
    ++last;
  }
  for (size_t j = i; j <= last; ++j)
    if (Status st = prepareTransfer(j); !st)
      return st;
  if (last > i)
    comm.startGroup();
  for (size_t j = i; j <= last; ++j)
    postTransfer(j);
  Status st = last > i ? comm.endGroup() : Status::ok();
  i = last;
  return st;
}

Status Executor::prepareTransfer(size_t i) {
  const Instruction &instr = plan.programs[deviceIndex].instructions[i];
  // The pipeline stream moves what the slot's writer produced, and writes
  // a slot only after compute's earlier reads and writes of it: it waits
  // for that pass's end (allocateBuffers), not for every pass issued
  // before the transfer.
  if (int64_t after = transferAfter[i]; after >= 0)
    pipeline.wait(*profiler.getEnd(size_t(after)));
  if (instr.op == Op::Recv)
    return settle(instr.buffer, pipeline);
  return Status::ok();
}

void Executor::postTransfer(size_t i) {
  const Instruction &instr = plan.programs[deviceIndex].instructions[i];
  int64_t message = messageElements[size_t(instr.slice)];
  DevicePtr payload = slot(instr.buffer);
  comm.describeNext(plan.describe(instr));
  if (instr.op == Op::Send) {
    sendOf[instr.buffer] = int64_t(outgoing.size());
    outgoing.push_back(
        comm.sendAsync(payload, message, instr.peer, int(instr.key), pipeline));
    transfers.track(*outgoing.back());
  } else {
    incoming[instr.buffer] =
        comm.recvAsync(payload, message, instr.peer, int(instr.key), pipeline);
    transfers.track(*incoming[instr.buffer]);
  }
}

Status Executor::issueGradSync(size_t i) {
  // ZeRO-1: the shards' sums of replicated key/value heads and
  // token-summed norms first (the group runs this instruction in
  // lockstep), so that each replica's part is final once reduced.
  if (zero && !zero->isPerGroup())
    if (Status st = tensorSums.sumAt(i); !st)
      return st;
  return gradientSync.issue(i, profiler.getStart(i), profiler.getEnd(i),
                            zero.get());
}

/// A pass: its input once the receive filling it has arrived; its slots
/// once no send reads them any more.
Status Executor::prepareExec(size_t i) {
  const Instruction &instr = plan.programs[deviceIndex].instructions[i];
  bool dependent = instr.in >= 0 && incoming[instr.in];
  if (Status st = waitForCollectives(instr, dependent); !st)
    return st;
  profiler.setWaited(i, dependent);
  if (instr.in >= 0 && incoming[instr.in]) {
    if (Status st = transfers.await(*incoming[instr.in], compute); !st)
      return st;
    transfers.forget(incoming[instr.in].get());
    incoming[instr.in].reset();
  }
  for (int32_t written : {instr.out, instr.state, instr.wstate, instr.kv})
    if (Status st = settle(written, compute); !st)
      return st;
  return Status::ok();
}

Status Executor::runExec(size_t i, float lossScale) {
  const Instruction &instr = plan.programs[deviceIndex].instructions[i];
  if (Status st = prepareExec(i); !st)
    return st;
  profiler.getStart(i)->record(compute);
  if (Status st = runPass(instr, lossScale, workspace.get()); !st)
    return st;
  if (Status st = tensorSums.takeFailure(); !st)
    return st;
  if (Status st = expertParallel.takeFailure(); !st)
    return st;
  if (Status st = takeScatterFailure(); !st)
    return st;
  profiler.getEnd(i)->record(compute);
  return Status::ok();
}

Status Executor::runGroup(size_t first, size_t last, float lossScale) {
  const std::vector<Instruction> &list =
      plan.programs[deviceIndex].instructions;
  // The members' receives and sends come before and after the group
  // (the schedule's contract), so every input is here before either lane
  // starts.
  for (size_t j = first; j <= last; ++j)
    if (Status st = prepareExec(j); !st)
      return st;
  // The forward on one lane, the rest -- B then its W, or BW -- in order
  // on the other.
  size_t forward = last + 1;
  for (size_t j = first; j <= last && forward > last; ++j)
    if (list[j].pass == Pass::F)
      forward = j;
  Status results[2] = {Status::ok(), Status::ok()};
  // On a device with lanes, lane 1's stream forks from lane 0's after
  // every input has arrived (prepareExec's waits are lane 0's) and joins
  // it at the group's end, so what follows -- a send, the gradients' sum
  // -- waits for both passes (DeepSeek-AI, 2024, §3.2.1: two streams and
  // the events between them, no host round trip).
  bool streams = laneFork != nullptr;
  if (streams)
    laneFork->record(compute);
  auto runLane = [&](int lane, DevicePtr scratch) {
    device.setLane(lane);
    if (streams && lane == 1)
      compute.wait(*laneFork);
    for (size_t j = first; j <= last; ++j) {
      if ((j == forward) != (lane == 0))
        continue;
      profiler.getStart(j)->record(compute);
      if (Status st = runPass(list[j], lossScale, scratch); !st) {
        results[lane] = st;
        break;
      }
      profiler.getEnd(j)->record(compute);
    }
    if (streams && lane == 1)
      laneJoin->record(compute);
    device.setLane(0);
  };
  if (!lanes)
    lanes = std::make_unique<PassLanes>();
  lanes->run([&] { runLane(0, workspace.get()); },
             [&] { runLane(1, laneWorkspace.get()); });
  if (streams)
    compute.wait(*laneJoin);
  for (const Status &st : results)
    if (!st)
      return st;
  if (Status st = tensorSums.takeFailure(); !st)
    return st;
  if (Status st = takeScatterFailure(); !st)
    return st;
  return expertParallel.takeFailure();
}

/// Waits for the sends and the shards' collectives, then reads the loss
/// (the one host wait of the step).
Status Executor::finishStep(double &hostLoss) {
  for (auto &request : outgoing)
    if (Status st = transfers.await(*request, pipeline); !st)
      return st;
  outgoing.clear();
  transfers.clear();
  std::fill(sendOf.begin(), sendOf.end(), -1);
  if (shards)
    if (Status st = shards->finishStep(); !st)
      return st;
  device.download(&hostLoss, lossSum.get(), sizeof(double), compute);
  return device.synchronize();
}

/// The fp8 records at the step's end. A training step's amaxes are first
/// made the largest over the data-parallel replicas and the
/// tensor-parallel group, as Transformer Engine reduces them over its fp8
/// group: every replica and shard then scales as one device that saw the
/// whole batch and the whole weights would, and the scales stay equal
/// across the replicas. The rest of each record is equal everywhere
/// already, so the whole record is reduced.
Status Executor::finishFp8Step() {
  for (size_t s = 0; s < stages.size(); ++s) {
    if (fp8States[s].empty())
      continue;
    if (!evaluating) {
      if (replicas)
        if (Status st = transfers.await(
                *replicas->allReduceAsync(fp8States[s].get(),
                                          fp8States[s].size(), Reduction::Max,
                                          0, compute),
                compute);
            !st)
          return st;
      // The tensor group's collectives run on its own stream.
      if (tensorGroup)
        if (Status st = tensorSums.allReduce(
                fp8States[s].get(), fp8States[s].size(), Reduction::Max);
            !st)
          return st;
    }
    stages[s]->finishStep(/*trained=*/!evaluating);
  }
  return Status::ok();
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

/// The pipeline's devices hold different layers and the replicas route
/// different tokens: their sums are the step's. The tensor-parallel
/// shards route alike, so they are not summed over.
Status Executor::expertLoad(std::vector<double> &copies) {
  copies.clear();
  if (getExpertLoadSize(plan.shardModel) == 0)
    return Status::ok();
  std::vector<const StageRunner *> mine;
  for (const std::unique_ptr<StageRunner> &stage : stages)
    mine.push_back(stage.get());
  if (Status st =
          addExpertLoad(plan.shardModel, mine, device, compute, copies);
      !st)
    return st;
  Status st = comm.allReduceSum(copies.data(), int64_t(copies.size()));
  if (st && replicas)
    st = replicas->allReduceSum(copies.data(), int64_t(copies.size()));
  return st;
}

Status Executor::calibrateSlices(
    int repeats, std::map<std::string, std::vector<SliceSample>> &samples) {
  // Each rank calibrates alone: its tensor-parallel partners are not there
  // to sum with, so the samples time the shard's compute only (on every
  // way out of here, the sums resume).
  tensorSums.setEnabled(false);
  expertParallel.setEnabled(false);
  scatterEnabled = false;
  Status st =
      calibrateStages(plan, device, stages, parameters, repeats, samples);
  tensorSums.setEnabled(true);
  expertParallel.setEnabled(true);
  scatterEnabled = true;
  return st;
}

Status Executor::finalizeGradients() {
  if (Status st = gradientSync.finish(); !st)
    return st;
  if (zero) {
    // ZeRO-2 and 3: the vectors' gradients, whole for the step.
    if (zero->isPerGroup()) {
      if (Status st = tensorSums.sumAt(kVectorSums); !st)
        return st;
      if (Status st = zero->reduceScatterVectors(); !st)
        return st;
    }
    if (gradientSync.getTiedRun() >= 0)
      if (Status st =
              zero->sumTiedEnds(gradientSync.getTiedRun(), comm, tiedGroup);
          !st)
        return st;
    return options.wholeGradients ? zero->gatherWholeGradients()
                                  : Status::ok();
  }
  if (Status st = tensorSums.sumAll(); !st)
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

Status Executor::gradientNorm(double &norm) {
  double sum = 0;
  DevicePtr grads = zero ? zero->getPackedGrads() : parameters.getGrads();
  if (Status st = normPlan.sumSquares(device, grads, sum); !st)
    return st;
  // Over the pipeline; the tensor-parallel shards; ZeRO-1's replicas,
  // each of which holds its part (whole replicas hold alike gradients).
  Status st = comm.allReduceSum(&sum, 1);
  if (st && tensorGroup)
    st = tensorGroup->allReduceSum(&sum, 1);
  if (st && zero)
    st = replicas->allReduceSum(&sum, 1);
  // The expert group's members each hold their experts (GradientNormPlan
  // weighs the rest 1 / ep on each).
  if (st && expertParallel.isOn() && !zero)
    st = expertParallel.sumOverGroup(sum);
  // Taking out the shared heads can leave -0 or a rounding below zero. Not
  // std::max(0.0, sum): that is 0 for a NaN sum, which would hide a
  // diverged step from the divergence check.
  norm = sum < 0 ? 0.0 : std::sqrt(sum);
  return st;
}

Status Executor::applyOptimizer(int64_t step, float gradientScale) {
  AdamConfig adam = options.getAdam(step);
  adam.gradientScale = gradientScale;
  auto update = [&] {
    if (zero)
      return zero->applyOptimizer(adam, step);
    parameters.adamStep(adam, step);
    parameters.zeroGrads();
    return Status::ok();
  };
  if (!timeOptimizer)
    return update();
  // A profile prices the step's update too (CostModel: the measured
  // optimizer seconds of each device): timed alone.
  if (Status st = device.synchronize(); !st)
    return st;
  auto start = std::chrono::steady_clock::now();
  Status st = update();
  if (st)
    st = device.synchronize();
  optimizerSeconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  ++optimizerSteps;
  return st;
}

} // namespace sluice::rt
