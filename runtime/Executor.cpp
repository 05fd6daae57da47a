//===- Executor.cpp - Run a plan, or the single-device reference ----------===//

#include "Executor.h"

#include <algorithm>
#include <chrono>
#include <thread>

namespace sluice::rt {

namespace {
using Clock = std::chrono::steady_clock;
double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}
const char *passName(Pass pass) {
  static const char *const names[] = {"F",  "B", "W",  "BW", "S",
                                      "S2", "T", "IF", "IB"};
  return names[int(pass)];
}
} // namespace

std::vector<ParameterSpec> getDeviceParameters(const Plan &plan, int device) {
  std::vector<ParameterSpec> specs;
  for (const StagePlan &stage : plan.stages)
    if (stage.device == device)
      for (int layer : stage.layers)
        for (ParameterSpec &spec : getLayerParameters(plan.model, layer))
          specs.push_back(std::move(spec));
  if (plan.vocabulary.input.present)
    specs.push_back(getInputShardSpec(plan, device));
  if (plan.vocabulary.output.present)
    specs.push_back(getOutputShardSpec(plan, device));
  return specs;
}

int64_t getDeviceWorkspaceFloats(const Plan &plan, int device) {
  int64_t work = 0;
  for (const StagePlan &stage : plan.stages)
    if (stage.device == device)
      for (size_t k = 0; k < plan.slices.size(); ++k)
        work = std::max(work, getWorkspaceFloats(plan.model, stage.layers,
                                                 plan.getSliceShape(int(k))));
  return work;
}

Executor::Executor(const Plan &plan, int device, Kernels &kernels,
                   Communicator &comm, TokenSource &data,
                   const TrainerOptions &options)
    : plan(plan), device(device), kernels(kernels), comm(comm), data(data),
      options(options) {
  // ParameterStore::add ignores a tied table's second spec.
  for (const ParameterSpec &spec : getDeviceParameters(plan, device))
    parameters.add(spec);
  if (plan.vocabulary.any())
    shards = std::make_unique<VocabularyShards>(plan, device, kernels, comm);
  parameters.allocate(options.seed);
  if (shards)
    shards->bind(parameters);
  stages.resize(plan.stages.size());
  for (size_t s = 0; s < plan.stages.size(); ++s)
    if (plan.stages[s].device == device)
      stages[s] = std::make_unique<StageRunner>(
          plan.model, plan.stages[s].layers, parameters, kernels);
  workspace.assign(getDeviceWorkspaceFloats(plan, device), 0.0f);
  const DeviceProgram &program = plan.programs[device];
  for (int64_t bytes : program.buffers)
    buffers.emplace_back(bytes / sizeof(float), 0.0f);
  incoming.resize(buffers.size());

  // A tied table whose two ends sit on different devices is held by both;
  // their gradients are summed before the update (Megatron's embedding
  // all-reduce).
  const LayerConfig &out = plan.model.layers.back();
  int first = plan.stages.front().device, last = plan.stages.back().device;
  // Sharded, the two ends share one shard on every device: nothing to sum.
  if (out.tied && first != last && !out.sharded)
    tiedGroup = {std::min(first, last), std::max(first, last)};
}

Status Executor::waitFor(Request &request) {
  auto start = Clock::now();
  while (!request.test())
    std::this_thread::yield();
  times.commWait += seconds(start, Clock::now());
  return Status::ok();
}

void Executor::waitForCollectives(const Instruction &instr) {
  if (!shards)
    return;
  for (auto [shard, group] : plan.getCollectiveInputs(instr)) {
    if (shards->isComplete(shard, group, instr.mb, instr.slice))
      continue;
    auto start = Clock::now();
    while (!shards->isComplete(shard, group, instr.mb, instr.slice)) {
      shards->progress();
      std::this_thread::yield();
    }
    times.commWait += seconds(start, Clock::now());
  }
}

Status Executor::runStep(int64_t step, double &meanLoss) {
  auto stepStart = Clock::now();
  times = StepTimes();
  const ModelConfig &model = plan.model;
  int64_t rows = model.microBatch, seq = model.seqLen;
  // Each microbatch's tokens, fetched once per step.
  std::vector<std::vector<int32_t>> batches(plan.microbatches);
  auto dataStart = Clock::now();
  for (int mb = 0; mb < plan.microbatches; ++mb)
    data.getBatch(step, mb, rows, seq, batches[mb]);
  times.data = seconds(dataStart, Clock::now());
  float lossScale = 1.0f / float(plan.microbatches * rows * seq);
  double lossSum = 0;
  if (shards)
    shards->beginStep(batches, lossScale);
  int lastStage = plan.getLastStage();

  const DeviceProgram &program = plan.programs[device];
  for (size_t i = 0; i < program.instructions.size(); ++i) {
    const Instruction &instr = program.instructions[i];
    if (int64_t(i) == options.failAtInstruction)
      return Status::error("instruction " + std::to_string(i) + " (" +
                           plan.describe(instr) +
                           "): injected failure (--fail-at-instruction)");
    SliceShape s = plan.getSliceShape(instr.slice);
    int64_t messageFloats = getMessageFloats(model, s);
    if (instr.op == Op::Send) {
      outgoing.push_back(comm.sendAsync(slot(instr.buffer), messageFloats,
                                        instr.peer, int(instr.key)));
      continue;
    }
    if (instr.op == Op::Recv) {
      incoming[instr.buffer] = comm.recvAsync(slot(instr.buffer), messageFloats,
                                              instr.peer, int(instr.key));
      continue;
    }
    if (shards)
      shards->progress();
    if (instr.op == Op::Collective) {
      auto start = Clock::now();
      shards->issue(instr.shard, instr.group, instr.mb, instr.slice,
                    instr.blocking);
      if (instr.blocking)
        times.commWait += seconds(start, Clock::now());
      continue;
    }
    waitForCollectives(instr);
    if (instr.shard != Shard::None) {
      // A vocabulary shard's pass.
      auto start = Clock::now();
      shards->run(instr.pass, instr.mb, instr.slice, lossSum);
      double took = seconds(start, Clock::now());
      times.compute += took;
      const ShardPlan &shard = instr.shard == Shard::Input
                                   ? plan.vocabulary.input
                                   : plan.vocabulary.output;
      PassProfile &p = profile[{shard.name, passName(instr.pass)}];
      p.seconds += took;
      p.runs += 1;
      p.tokens += s.rows * s.tokens;
      continue;
    }
    // A pass: wait for its input if a receive is filling it.
    if (instr.in >= 0 && incoming[instr.in]) {
      Status st = waitFor(*incoming[instr.in]);
      if (!st)
        return st;
      incoming[instr.in].reset();
    }
    StageRunner &stage = *stages[instr.stage];
    TokenRows tokens{batches[instr.mb].data(), seq + 1};
    // The stages next to the vocabulary shards read and write the shards'
    // buffers instead of plan buffers.
    bool inputShard = plan.vocabulary.input.present && instr.stage == 0;
    bool outputShard =
        plan.vocabulary.output.present && instr.stage == lastStage;
    float *in = slot(instr.in), *out = slot(instr.out);
    auto start = Clock::now();
    switch (instr.pass) {
    case Pass::F:
      if (inputShard)
        in = shards->getEmbedded(instr.mb, instr.slice);
      if (outputShard)
        out = shards->getLastOutput(instr.mb, instr.slice);
      stage.forward(s, tokens, in, out, slot(instr.state), slot(instr.kv),
                    workspace.data(), &lossSum);
      if (inputShard)
        shards->release(Shard::Input, instr.mb, instr.slice);
      break;
    case Pass::B:
    case Pass::BW:
      if (outputShard)
        in = shards->getOutputGrad(instr.mb, instr.slice);
      if (inputShard)
        out = shards->getEmbeddingGrad(instr.mb, instr.slice);
      stage.backwardInput(s, tokens, in, out, slot(instr.state),
                          slot(instr.wstate), slot(instr.kv), workspace.data(),
                          lossScale);
      if (outputShard)
        shards->release(Shard::Output, instr.mb, instr.slice);
      if (instr.pass == Pass::BW)
        stage.backwardWeight(s, tokens, slot(instr.state), slot(instr.wstate),
                             workspace.data());
      break;
    case Pass::W:
      stage.backwardWeight(s, tokens, slot(instr.state), slot(instr.wstate),
                           workspace.data());
      break;
    default:
      break;
    }
    double took = seconds(start, Clock::now());
    times.compute += took;
    PassProfile &p =
        profile[{plan.stages[instr.stage].name, passName(instr.pass)}];
    p.seconds += took;
    p.runs += 1;
    p.tokens += s.rows * s.tokens;
  }
  for (auto &request : outgoing) {
    Status st = waitFor(*request);
    if (!st)
      return st;
  }
  outgoing.clear();
  if (shards) {
    auto drainStart = Clock::now();
    shards->finishStep();
    times.commWait += seconds(drainStart, Clock::now());
  }

  // Only the device with the output layer has loss (sharded: every
  // device its labels' part); everyone learns the sum.
  auto reduceStart = Clock::now();
  Status st = comm.allReduceSum(&lossSum, 1);
  times.commWait += seconds(reduceStart, Clock::now());
  if (!st)
    return st;
  meanLoss = lossSum * lossScale;
  // The latest step's split; the profile accumulates over all steps.
  times.total = seconds(stepStart, Clock::now());
  return Status::ok();
}

std::map<std::string, std::vector<Executor::SliceSample>>
Executor::calibrateSlices(int repeats) {
  const ModelConfig &model = plan.model;
  int64_t rows = model.microBatch, seq = model.seqLen, h = model.hidden;
  // Lengths growing by about 1.5x up to the sequence, each at a few
  // contexts from none to the most it can have.
  std::vector<int64_t> lengths;
  for (int64_t i = 1; i < seq; i = std::max(i + 1, i * 3 / 2))
    lengths.push_back(i);
  lengths.push_back(seq);
  // Synthetic tokens: valid ids, any values.
  std::vector<int32_t> tokens(rows * (seq + 1));
  int64_t vocab = model.layers.front().vocab;
  for (size_t t = 0; t < tokens.size(); ++t)
    tokens[t] = int32_t((t * 7919) % vocab);
  TokenRows batch{tokens.data(), seq + 1};
  std::map<std::string, std::vector<SliceSample>> samples;
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
        std::vector<float> state(stage.getForwardStateFloats(s));
        std::vector<float> wstate(stage.getWeightStateFloats(s));
        std::vector<float> kv(stage.getKeyValueFloats(rows));
        std::vector<float> work(stage.getWorkspaceFloats(s));
        std::vector<float> in(rows * length * h, 0.01f);
        std::vector<float> outBuf(rows * length * h);
        std::vector<float> grad(rows * length * h, 0.01f);
        std::vector<float> inGrad(rows * length * h);
        double best = 1e300;
        for (int r = 0; r < repeats; ++r) {
          double ignored = 0;
          auto start = Clock::now();
          stage.forward(s, batch, in.data(), outBuf.data(), state.data(),
                        kv.data(), work.data(), &ignored);
          stage.backwardInput(s, batch, grad.data(), inGrad.data(),
                              state.data(), wstate.data(), kv.data(),
                              work.data(), 1.0f);
          stage.backwardWeight(s, batch, state.data(), wstate.data(),
                               work.data());
          best = std::min(best, seconds(start, Clock::now()));
        }
        out.push_back({length, context, best});
      }
  }
  // The calibration accumulated gradients into the real ones.
  parameters.zeroGrads();
  return samples;
}

Status Executor::finalizeGradients() {
  if (tiedGroup.empty() ||
      std::find(tiedGroup.begin(), tiedGroup.end(), device) == tiedGroup.end())
    return Status::ok();
  const std::string name = "embed.tokens";
  const LayerConfig &emb = plan.model.layers.front();
  return comm.allReduceSum(parameters.grad(name), emb.vocab * plan.model.hidden,
                           tiedGroup.data(), int(tiedGroup.size()));
}

void Executor::applyOptimizer(int64_t step) {
  parameters.adamStep(kernels, options.adam, step);
  parameters.zeroGrads();
}

/// The model with its vocabulary layers whole: the reference never shards.
static ModelConfig unsharded(ModelConfig model) {
  for (LayerConfig &layer : model.layers)
    layer.sharded = false;
  return model;
}

ReferenceTrainer::ReferenceTrainer(const ModelConfig &sharded, int microbatches,
                                   Kernels &kernels, TokenSource &data,
                                   const TrainerOptions &options)
    : model(unsharded(sharded)), microbatches(microbatches), kernels(kernels),
      data(data), options(options) {
  std::vector<int> all;
  for (size_t i = 0; i < model.layers.size(); ++i) {
    all.push_back(int(i));
    for (const ParameterSpec &spec : getLayerParameters(model, int(i)))
      parameters.add(spec);
  }
  parameters.allocate(options.seed);
  stage = std::make_unique<StageRunner>(model, all, parameters, kernels);
}

Status ReferenceTrainer::runStep(int64_t step, double &meanLoss) {
  int64_t rows = model.microBatch, seq = model.seqLen;
  SliceShape whole{rows, seq, 0};
  std::vector<float> forward(stage->getForwardStateFloats(whole));
  std::vector<float> weight(stage->getWeightStateFloats(whole));
  std::vector<float> kv(stage->getKeyValueFloats(rows));
  std::vector<float> work(stage->getWorkspaceFloats(whole));
  std::vector<int32_t> tokens;
  float lossScale = 1.0f / float(microbatches * rows * seq);
  double lossSum = 0;
  for (int mb = 0; mb < microbatches; ++mb) {
    data.getBatch(step, mb, rows, seq, tokens);
    TokenRows batch{tokens.data(), seq + 1};
    stage->forward(whole, batch, nullptr, nullptr, forward.data(), kv.data(),
                   work.data(), &lossSum);
    stage->backwardInput(whole, batch, nullptr, nullptr, forward.data(),
                         weight.data(), kv.data(), work.data(), lossScale);
    stage->backwardWeight(whole, batch, forward.data(), weight.data(),
                          work.data());
  }
  meanLoss = lossSum * lossScale;
  return Status::ok();
}

void ReferenceTrainer::applyOptimizer(int64_t step) {
  parameters.adamStep(kernels, options.adam, step);
  parameters.zeroGrads();
}

} // namespace sluice::rt
