//===- Vocab.cpp - The vocabulary shards of one device --------------------===//

#include "Vocab.h"

#include <chrono>
#include <cmath>
#include <thread>

namespace sluice::rt {

ParameterSpec getInputShardSpec(const Plan &plan, int device, int shard) {
  const ShardPlan &input = plan.vocabulary.input;
  return getTableShard("embed.tokens", input.vocab, input.paddedVocab,
                       plan.model.hidden, device, plan.devices,
                       {shard, plan.tp});
}

ParameterSpec getOutputShardSpec(const Plan &plan, int device, int shard) {
  // Tied: the LM head is the embedding table, the same shard (§6.1:
  // "the same device placement ... the shared weight tensor").
  const ShardPlan &output = plan.vocabulary.output;
  bool tied = plan.model.layers.back().tied;
  return getTableShard(tied ? "embed.tokens" : "lm_head.weight", output.vocab,
                       output.paddedVocab, plan.model.hidden, device,
                       plan.devices, {shard, plan.tp});
}

VocabularyShards::VocabularyShards(const Plan &plan, int deviceIndex,
                                   Device &device, Communicator &comm,
                                   Communicator *tensorGroup, int shardIndex)
    : plan(plan), deviceIndex(deviceIndex), device(device),
      kernels(device.getKernels(StreamKind::Compute)),
      streamKernels(device.getKernels(StreamKind::Vocabulary)),
      compute(device.getStream(StreamKind::Compute)),
      vocabStream(device.getStream(StreamKind::Vocabulary)), comm(comm),
      tensorGroup(plan.tp > 1 ? tensorGroup : nullptr), shardIndex(shardIndex),
      precision(plan.precision), hidden(plan.model.hidden),
      ready(device.createEvent()),
      collectives(device, vocabStream, comm, this->tensorGroup) {
  // A finished collective is one use fewer of its slice's state.
  collectives.setOnDone([this](const CollectiveQueue::Key &key) {
    auto [shard, group, mb, slice] = key;
    consume(Shard(shard), mb, slice);
  });
  const VocabularyPlan &v = plan.vocabulary;
  if (v.input.present) {
    inSpec = getInputShardSpec(plan, deviceIndex, shardIndex);
    inFirst = inSpec.firstRow;
    inCount = inSpec.getValidRows();
    inRows = inSpec.shape[0];
  }
  if (v.output.present) {
    outSpec = getOutputShardSpec(plan, deviceIndex, shardIndex);
    outFirst = outSpec.firstRow;
    outCount = outSpec.getValidRows();
    outRows = outSpec.shape[0];
  }
}

void VocabularyShards::bind(ParameterStore &store) {
  if (plan.vocabulary.input.present) {
    inTable = store.weight(inSpec.name);
    inGrad = store.grad(inSpec.name);
  }
  if (plan.vocabulary.output.present) {
    outTable = store.weight(outSpec.name);
    outGrad = store.grad(outSpec.name);
  }
}

void VocabularyShards::beginStep(const std::vector<TokenRows> &stepBatches,
                                 float scale) {
  batches = &stepBatches;
  lossScale = scale;
  collectives.beginStep();
}

std::vector<VocabularyShards::Span> VocabularyShards::getSpans(Event &origin) {
  std::vector<Span> spans;
  for (const CollectiveQueue::Span &c : collectives.getSpans(origin)) {
    auto [shard, group, mb, slice] = c.key;
    spans.push_back({Shard(shard), group, mb, slice, c.start, c.end});
  }
  return spans;
}

Status VocabularyShards::finishStep() {
  // The compute stream's later work (the next step, the optimizer) comes
  // after every collective of this one.
  if (Status st = collectives.finish(compute); !st)
    return st;
  slices.clear();
  batches = nullptr;
  return Status::ok();
}

VocabularyShards::Slice &VocabularyShards::state(int mb, int slice) {
  return slices[{mb, slice}];
}

Status VocabularyShards::prepareOutput(Slice &st, const SliceShape &s) {
  if (!st.x.empty() || !plan.vocabulary.output.present)
    return Status::ok();
  int64_t rt = s.rows * s.tokens;
  DType act = precision.activations;
  struct Want {
    DeviceBuffer *buffer;
    DType type;
    int64_t count;
  };
  std::vector<Want> wants = {
      {&st.x, act, rt * hidden},       {&st.logits, DType::F32, rt * outRows},
      {&st.probs, act, rt * outRows},  {&st.localMax, DType::F32, rt},
      {&st.localSum, DType::F32, rt},  {&st.globalMax, DType::F32, rt},
      {&st.globalSum, DType::F32, rt}, {&st.scaledSum, DType::F32, rt},
      {&st.dx, act, rt * hidden}};
  if (plan.vocabulary.algorithm == 2) {
    wants.push_back({&st.a, act, rt * hidden});
    wants.push_back({&st.labelRows, act, rt * hidden});
  }
  for (const Want &w : wants)
    if (Status status = device.allocate(w.type, w.count, *w.buffer); !status)
      return status;
  // Its passes, its collectives and, on the root, the last stage's
  // backward that reads the reduced gradient.
  const VocabularyPlan &v = plan.vocabulary;
  st.pendingOutput = getNumShardPasses(Shard::Output, v.algorithm) + 1 +
                     v.barriers + (deviceIndex == v.output.root ? 1 : 0);
  return Status::ok();
}

Status VocabularyShards::prepareInput(Slice &st, const SliceShape &s) {
  if (!st.partial.empty() || !plan.vocabulary.input.present)
    return Status::ok();
  int64_t rt = s.rows * s.tokens;
  for (DeviceBuffer *buffer : {&st.partial, &st.grad})
    if (Status status =
            device.allocate(precision.activations, rt * hidden, *buffer);
        !status)
      return status;
  // IF, IB, two collectives and, on the root, the first stage's F.
  st.pendingInput = 4 + (deviceIndex == plan.vocabulary.input.root ? 1 : 0);
  return Status::ok();
}

void VocabularyShards::consume(Shard shard, int mb, int slice) {
  auto it = slices.find({mb, slice});
  if (it == slices.end())
    return;
  Slice &st = it->second;
  // The state goes once its last use is done: buffers the size of a
  // microbatch's logits do not pile up over a step. (The device takes the
  // memory back only once the streams that used it are past this point.)
  if (shard == Shard::Output && --st.pendingOutput == 0)
    for (DeviceBuffer *b : {&st.x, &st.logits, &st.probs, &st.localMax,
                            &st.localSum, &st.globalMax, &st.globalSum,
                            &st.scaledSum, &st.a, &st.labelRows, &st.dx})
      b->reset();
  if (shard == Shard::Input && --st.pendingInput == 0) {
    st.partial.reset();
    st.grad.reset();
  }
  if (st.x.empty() && st.partial.empty() && st.pendingOutput <= 0 &&
      st.pendingInput <= 0)
    slices.erase(it);
}

void VocabularyShards::release(Shard shard, int mb, int slice) {
  consume(shard, mb, slice);
}

Status VocabularyShards::getSliceBuffer(int mb, int slice, Shard shard,
                                        DeviceBuffer Slice::*buffer,
                                        DevicePtr &out) {
  Slice &st = state(mb, slice);
  Status status = shard == Shard::Input ? prepareInput(st, shape(slice))
                                        : prepareOutput(st, shape(slice));
  out = (st.*buffer).get();
  return status;
}

Status VocabularyShards::getEmbedded(int mb, int slice, DevicePtr &out) {
  return getSliceBuffer(mb, slice, Shard::Input, &Slice::partial, out);
}

Status VocabularyShards::getEmbeddingGrad(int mb, int slice, DevicePtr &out) {
  return getSliceBuffer(mb, slice, Shard::Input, &Slice::grad, out);
}

Status VocabularyShards::getLastOutput(int mb, int slice, DevicePtr &out) {
  return getSliceBuffer(mb, slice, Shard::Output, &Slice::x, out);
}

Status VocabularyShards::getOutputGrad(int mb, int slice, DevicePtr &out) {
  return getSliceBuffer(mb, slice, Shard::Output, &Slice::dx, out);
}

Status VocabularyShards::run(Pass pass, int mb, int slice, DevicePtr loss) {
  SliceShape s = shape(slice);
  Slice &st = state(mb, slice);
  int64_t rt = s.rows * s.tokens, h = hidden;
  const TokenRows &batch = (*batches)[mb];
  DevicePtr tokens = batch.tokensAt(s), labels = batch.labelsAt(s);
  int64_t stride = batch.stride;
  int algorithm = plan.vocabulary.algorithm;
  switch (pass) {
  case Pass::IF:
    // Appendix C: look up the tokens in this device's rows, zeros for the
    // others; the reduce sums the parts onto the first stage's device.
    if (Status status = prepareInput(st, s); !status)
      return status;
    kernels.shardLookup(tokens, stride, s.rows, s.tokens, inTable, inFirst,
                        inCount, h, st.partial.get());
    consume(Shard::Input, mb, slice);
    return Status::ok();
  case Pass::IB:
    kernels.shardScatterAdd(tokens, stride, s.rows, s.tokens, st.grad.get(),
                            inFirst, inCount, h, inGrad);
    consume(Shard::Input, mb, slice);
    return Status::ok();
  case Pass::S: {
    if (Status status = prepareOutput(st, s); !status)
      return status;
    // Y = X W^T over this device's rows.
    if (outCount > 0)
      kernels.gemm(false, true, rt, outCount, h, 1.0f, st.x.get(), h, outTable,
                   h, 0.0f, st.logits.get(), outRows);
    // Figure 4 (naive): only the local maximum before the first barrier;
    // equation 5: softmax' with the local maximum and sum.
    kernels.shardSoftmaxStatistics(
        st.logits.get(), rt, outCount, outRows, nullptr, st.localMax.get(),
        st.localSum.get(), algorithm == 0 ? DevicePtr() : st.probs.get());
    if (algorithm == 2) {
      // Equation 6: A = softmax'(Y) W and B = G W before the barrier.
      if (outCount > 0)
        kernels.gemm(false, false, rt, h, outCount, 1.0f, st.probs.get(),
                     outRows, outTable, h, 0.0f, st.a.get(), h);
      kernels.labelRows(labels, stride, s.rows, s.tokens, outTable, outFirst,
                        outCount, h, st.labelRows.get());
    }
    consume(Shard::Output, mb, slice);
    return Status::ok();
  }
  case Pass::S2:
    // The naive form's sum of exponentials under the global maximum.
    kernels.shardSoftmaxStatistics(st.logits.get(), rt, outCount, outRows,
                                   st.globalMax.get(), nullptr,
                                   st.localSum.get(), nullptr);
    consume(Shard::Output, mb, slice);
    return Status::ok();
  case Pass::T: {
    DevicePtr probs = st.probs.get();
    if (algorithm == 0) {
      // softmax = exp(Y - M) / S from the global maximum and sum.
      kernels.shardSoftmaxStatistics(st.logits.get(), rt, outCount, outRows,
                                     st.globalMax.get(), nullptr,
                                     st.scaledSum.get(), probs);
      kernels.scaleRows(probs, st.scaledSum.get(), st.globalSum.get(), rt,
                        outCount, outRows);
    } else {
      // Equation 5: softmax = softmax' * s' exp(m' - M) / S.
      kernels.scaleRows(probs, st.scaledSum.get(), st.globalSum.get(), rt,
                        outCount, outRows);
    }
    kernels.shardLoss(st.logits.get(), labels, stride, s.rows, s.tokens,
                      outFirst, outCount, outRows, st.globalMax.get(),
                      st.globalSum.get(), loss);
    // G = (softmax - onehot) / tokens, this device's columns.
    kernels.shardSoftmaxGrad(probs, labels, stride, s.rows, s.tokens, outFirst,
                             outCount, outRows, lossScale);
    if (algorithm != 2) {
      // dX = G W, reduced onto the last stage's device afterwards.
      if (outCount > 0)
        kernels.gemm(false, false, rt, h, outCount, 1.0f, probs, outRows,
                     outTable, h, 0.0f, st.dx.get(), h);
      else
        kernels.fill(st.dx.get(), 0.0, rt * h);
    }
    // dW += G^T X.
    if (outCount > 0)
      kernels.gemm(true, false, outCount, h, rt, 1.0f, probs, outRows,
                   st.x.get(), h, 1.0f, outGrad, h);
    consume(Shard::Output, mb, slice);
    return Status::ok();
  }
  default:
    return Status::ok();
  }
}

namespace {
/// Builds the steps of one collective: each a transfer over the pipeline's
/// devices (`comm`) on the vocabulary stream, then, over pp x tp, one over
/// the device's tensor-parallel shards, and what runs after it.
struct StepBuilder {
  using Step = VocabularyShards::Step;
  Communicator &comm;
  Communicator *tensorGroup;
  Stream &stream;
  int channel;
  std::vector<Step> steps;

  static void nothing() {}

  void add(std::function<std::unique_ptr<Request>()> start) {
    steps.push_back({std::move(start), nothing});
  }

  /// Over pp x tp: after the pipeline's collective, the device's shards
  /// combine what their parts of the rows gave (the maxima and sums on
  /// every device; the reduced gradients on the root, where every shard of
  /// the group is its pipeline's root). The reduction is exact for the
  /// maximum and associative for the sums.
  void overShards(DevicePtr data, int64_t count, Reduction reduction,
                  std::function<void()> after) {
    if (!tensorGroup) {
      steps.back().after = std::move(after);
      return;
    }
    Communicator *group = tensorGroup;
    Stream *on = &stream;
    int tag = 1 + channel;
    steps.push_back({[=] {
                       return group->allReduceAsync(data, count, reduction, tag,
                                                    *on);
                     },
                     std::move(after)});
  }

  void broadcast(DevicePtr data, int64_t count, int root) {
    Communicator *c = &comm;
    Stream *on = &stream;
    int tag = channel;
    add([=] { return c->broadcastAsync(data, count, root, tag, *on); });
  }

  /// A sum onto `root`, then over its shards.
  void reduceSum(DevicePtr data, int64_t count, int root, int deviceIndex) {
    Communicator *c = &comm;
    Stream *on = &stream;
    int tag = channel;
    add([=] { return c->reduceSumAsync(data, count, root, tag, *on); });
    if (deviceIndex == root)
      overShards(data, count, Reduction::Sum, nothing);
  }

  /// `from` copied into `to`, reduced over every device and shard.
  void allReduce(Kernels &k, DevicePtr to, DevicePtr from, int64_t count,
                 Reduction reduction, std::function<void()> after) {
    Communicator *c = &comm;
    Stream *on = &stream;
    Kernels *kernels = &k;
    int tag = channel;
    add([=] {
      kernels->copy(to, from, count);
      return c->allReduceAsync(to, count, reduction, tag, *on);
    });
    overShards(to, count, reduction, std::move(after));
  }
};
} // namespace

std::vector<VocabularyShards::Step>
VocabularyShards::buildSteps(Shard shard, int group, int mb, int slice) {
  SliceShape s = shape(slice);
  Slice &st = state(mb, slice);
  int64_t rt = s.rows * s.tokens, h = hidden;
  const VocabularyPlan &v = plan.vocabulary;
  Kernels &k = streamKernels;
  StepBuilder b{comm, tensorGroup, vocabStream, int(shard), {}};
  if (shard == Shard::Input) {
    if (group == 0)
      b.reduceSum(st.partial.get(), rt * h, v.input.root, deviceIndex);
    else
      // The gradient at the root is the same on every shard (the first
      // stage's B ends in whole tensors): each pipeline broadcasts its own.
      b.broadcast(st.grad.get(), rt * h, v.input.root);
    return std::move(b.steps);
  }
  int root = v.output.root;
  auto reduceDx = [&] { b.reduceSum(st.dx.get(), rt * h, root, deviceIndex); };
  auto allReduceMax = [&](std::function<void()> after) {
    b.allReduce(k, st.globalMax.get(), st.localMax.get(), rt, Reduction::Max,
                std::move(after));
  };
  // S over the group from `from` (the local sums, or equation 5's
  // rescaled ones).
  auto allReduceSum = [&](DevicePtr from, std::function<void()> after) {
    b.allReduce(k, st.globalSum.get(), from, rt, Reduction::Sum,
                std::move(after));
  };
  if (group == 0) {
    // C0: X from the last stage to every device (the same X on each of
    // the last device's shards: each pipeline broadcasts its own).
    b.broadcast(st.x.get(), rt * h, root);
  } else if (v.algorithm == 0) {
    // Figure 4: max | sum | reduce, one collective each.
    if (group == 1)
      allReduceMax(StepBuilder::nothing);
    else if (group == 2)
      allReduceSum(st.localSum.get(), StepBuilder::nothing);
    else
      reduceDx();
  } else if (group == 1) {
    // Equation 5 inside the barrier: M = max m', s'' = s' exp(m' - M),
    // S = sum s''.
    allReduceMax([=, &st, &k] {
      k.rescaleSum(st.localSum.get(), st.localMax.get(), st.globalMax.get(), rt,
                   st.scaledSum.get());
    });
    if (v.algorithm != 2) {
      allReduceSum(st.scaledSum.get(), StepBuilder::nothing);
    } else {
      // Equation 6: dX = (A s'' / S - B) / tokens, then its reduce, in the
      // same barrier.
      allReduceSum(st.scaledSum.get(), [=, &st, &k] {
        k.combineGrad(st.a.get(), st.labelRows.get(), st.scaledSum.get(),
                      st.globalSum.get(), rt, h, lossScale, st.dx.get());
      });
      reduceDx();
    }
  } else {
    // Algorithm 1's second barrier: the reduce of dX.
    reduceDx();
  }
  return std::move(b.steps);
}

Status VocabularyShards::issue(Shard shard, int group, int mb, int slice,
                               bool blocking) {
  Slice &st = state(mb, slice);
  SliceShape s = shape(slice);
  if (Status status =
          shard == Shard::Input ? prepareInput(st, s) : prepareOutput(st, s);
      !status)
    return status;
  // The collective carries what the compute stream has produced so far.
  ready->record(compute);
  vocabStream.wait(*ready);
  Instruction instr;
  instr.op = Op::Collective;
  instr.shard = shard;
  instr.group = group;
  instr.mb = mb;
  instr.slice = slice;
  if (Status status = collectives.post({int(shard), group, mb, slice},
                                       buildSteps(shard, group, mb, slice),
                                       plan.describe(instr));
      !status)
    return status;
  if (blocking)
    return waitFor(shard, group, mb, slice, compute);
  return Status::ok();
}

Status VocabularyShards::waitFor(Shard shard, int group, int mb, int slice,
                                 Stream &stream) {
  return collectives.waitFor({int(shard), group, mb, slice}, stream);
}

Status VocabularyShards::progress() { return collectives.progress(); }

} // namespace sluice::rt
