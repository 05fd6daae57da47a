//===- Vocab.cpp - The vocabulary shards of one device --------------------===//

#include "Vocab.h"

#include <cmath>
#include <thread>

namespace sluice::rt {

ParameterSpec getInputShardSpec(const Plan &plan, int device) {
  const ShardPlan &input = plan.vocabulary.input;
  return getTableShard("embed.tokens", input.vocab, input.paddedVocab,
                       plan.model.hidden, device, plan.devices);
}

ParameterSpec getOutputShardSpec(const Plan &plan, int device) {
  // Tied: the LM head is the embedding table, the same shard (§6.1:
  // "the same device placement ... the shared weight tensor").
  const ShardPlan &output = plan.vocabulary.output;
  bool tied = plan.model.layers.back().tied;
  return getTableShard(tied ? "embed.tokens" : "lm_head.weight", output.vocab,
                       output.paddedVocab, plan.model.hidden, device,
                       plan.devices);
}

VocabularyShards::VocabularyShards(const Plan &plan, int device,
                                   Kernels &kernels, Communicator &comm)
    : plan(plan), device(device), kernels(kernels), comm(comm),
      hidden(plan.model.hidden) {
  const VocabularyPlan &v = plan.vocabulary;
  if (v.input.present) {
    inSpec = getInputShardSpec(plan, device);
    inFirst = inSpec.firstRow;
    inCount = inSpec.getValidRows();
    inRows = inSpec.shape[0];
  }
  if (v.output.present) {
    outSpec = getOutputShardSpec(plan, device);
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

void VocabularyShards::beginStep(
    const std::vector<std::vector<int32_t>> &stepBatches, float scale) {
  batches = &stepBatches;
  lossScale = scale;
  completed.clear();
}

void VocabularyShards::finishStep() {
  for (const std::deque<Collective> &queue : queues)
    while (!queue.empty()) {
      progress();
      std::this_thread::yield();
    }
  slices.clear();
  batches = nullptr;
}

VocabularyShards::Slice &VocabularyShards::state(int mb, int slice) {
  return slices[{mb, slice}];
}

void VocabularyShards::prepareOutput(Slice &st, const SliceShape &s) {
  if (!st.x.empty() || !plan.vocabulary.output.present)
    return;
  int64_t rt = s.rows * s.tokens;
  st.x.assign(rt * hidden, 0.0f);
  st.logits.assign(rt * outRows, 0.0f);
  st.probs.assign(rt * outRows, 0.0f);
  for (auto *v : {&st.localMax, &st.localSum, &st.globalMax, &st.globalSum,
                  &st.scaledSum})
    v->assign(rt, 0.0f);
  st.dx.assign(rt * hidden, 0.0f);
  if (plan.vocabulary.algorithm == 2) {
    st.a.assign(rt * hidden, 0.0f);
    st.labelRows.assign(rt * hidden, 0.0f);
  }
  // Its passes, its collectives and, on the root, the last stage's
  // backward that reads the reduced gradient.
  const VocabularyPlan &v = plan.vocabulary;
  st.pendingOutput = (v.algorithm == 0 ? 3 : 2) + 1 + v.barriers +
                     (device == v.output.root ? 1 : 0);
}

void VocabularyShards::prepareInput(Slice &st, const SliceShape &s) {
  if (!st.partial.empty() || !plan.vocabulary.input.present)
    return;
  int64_t rt = s.rows * s.tokens;
  st.partial.assign(rt * hidden, 0.0f);
  st.grad.assign(rt * hidden, 0.0f);
  // IF, IB, two collectives and, on the root, the first stage's F.
  st.pendingInput = 4 + (device == plan.vocabulary.input.root ? 1 : 0);
}

void VocabularyShards::consume(Shard shard, int mb, int slice) {
  auto it = slices.find({mb, slice});
  if (it == slices.end())
    return;
  Slice &st = it->second;
  // The state goes once its last use is done: buffers the size of a
  // microbatch's logits do not pile up over a step.
  if (shard == Shard::Output && --st.pendingOutput == 0)
    for (auto *v : {&st.x, &st.logits, &st.probs, &st.localMax, &st.localSum,
                    &st.globalMax, &st.globalSum, &st.scaledSum, &st.a,
                    &st.labelRows, &st.dx})
      std::vector<float>().swap(*v);
  if (shard == Shard::Input && --st.pendingInput == 0) {
    std::vector<float>().swap(st.partial);
    std::vector<float>().swap(st.grad);
  }
  if (st.x.empty() && st.partial.empty() && st.pendingOutput <= 0 &&
      st.pendingInput <= 0)
    slices.erase(it);
}

void VocabularyShards::release(Shard shard, int mb, int slice) {
  consume(shard, mb, slice);
}

float *VocabularyShards::getEmbedded(int mb, int slice) {
  Slice &st = state(mb, slice);
  prepareInput(st, shape(slice));
  return st.partial.data();
}

float *VocabularyShards::getEmbeddingGrad(int mb, int slice) {
  Slice &st = state(mb, slice);
  prepareInput(st, shape(slice));
  return st.grad.data();
}

float *VocabularyShards::getLastOutput(int mb, int slice) {
  Slice &st = state(mb, slice);
  prepareOutput(st, shape(slice));
  return st.x.data();
}

float *VocabularyShards::getOutputGrad(int mb, int slice) {
  Slice &st = state(mb, slice);
  prepareOutput(st, shape(slice));
  return st.dx.data();
}

void VocabularyShards::run(Pass pass, int mb, int slice, double &lossSum) {
  SliceShape s = shape(slice);
  Slice &st = state(mb, slice);
  int64_t rt = s.rows * s.tokens, h = hidden;
  int64_t seq = plan.model.seqLen;
  const int32_t *tokens = (*batches)[mb].data() + s.offset;
  const int32_t *labels = tokens + 1;
  int64_t stride = seq + 1;
  int algorithm = plan.vocabulary.algorithm;
  switch (pass) {
  case Pass::IF:
    // Appendix C: look up the tokens in this device's rows, zeros for the
    // others; the reduce sums the parts onto the first stage's device.
    prepareInput(st, s);
    kernels.shardLookup(tokens, stride, s.rows, s.tokens, inTable, inFirst,
                        inCount, h, st.partial.data());
    consume(Shard::Input, mb, slice);
    return;
  case Pass::IB:
    kernels.shardScatterAdd(tokens, stride, s.rows, s.tokens, st.grad.data(),
                            inFirst, inCount, h, inGrad);
    consume(Shard::Input, mb, slice);
    return;
  case Pass::S: {
    prepareOutput(st, s);
    // Y = X W^T over this device's rows.
    if (outCount > 0)
      kernels.gemm(false, true, rt, outCount, h, 1.0f, st.x.data(), h, outTable,
                   h, 0.0f, st.logits.data(), outRows);
    if (algorithm == 0) {
      // Figure 4: only the local maximum before the first barrier.
      kernels.shardSoftmaxStatistics(st.logits.data(), rt, outCount, outRows,
                                     nullptr, st.localMax.data(),
                                     st.localSum.data(), nullptr);
    } else {
      // Equation 5: softmax' with the local maximum and sum.
      kernels.shardSoftmaxStatistics(st.logits.data(), rt, outCount, outRows,
                                     nullptr, st.localMax.data(),
                                     st.localSum.data(), st.probs.data());
    }
    if (algorithm == 2) {
      // Equation 6: A = softmax'(Y) W and B = G W before the barrier.
      if (outCount > 0)
        kernels.gemm(false, false, rt, h, outCount, 1.0f, st.probs.data(),
                     outRows, outTable, h, 0.0f, st.a.data(), h);
      kernels.labelRows(labels, stride, s.rows, s.tokens, outTable, outFirst,
                        outCount, h, st.labelRows.data());
    }
    consume(Shard::Output, mb, slice);
    return;
  }
  case Pass::S2:
    // The naive form's sum of exponentials under the global maximum.
    kernels.shardSoftmaxStatistics(st.logits.data(), rt, outCount, outRows,
                                   st.globalMax.data(), nullptr,
                                   st.localSum.data(), nullptr);
    consume(Shard::Output, mb, slice);
    return;
  case Pass::T: {
    float *probs = st.probs.data();
    if (algorithm == 0) {
      // softmax = exp(Y - M) / S from the global maximum and sum.
      kernels.shardSoftmaxStatistics(st.logits.data(), rt, outCount, outRows,
                                     st.globalMax.data(), nullptr,
                                     st.scaledSum.data(), probs);
      kernels.scaleRows(probs, st.scaledSum.data(), st.globalSum.data(), rt,
                        outCount, outRows);
    } else {
      // Equation 5: softmax = softmax' * s' exp(m' - M) / S.
      kernels.scaleRows(probs, st.scaledSum.data(), st.globalSum.data(), rt,
                        outCount, outRows);
    }
    lossSum += kernels.shardLoss(st.logits.data(), labels, stride, s.rows,
                                 s.tokens, outFirst, outCount, outRows,
                                 st.globalMax.data(), st.globalSum.data());
    // G = (softmax - onehot) / tokens, this device's columns.
    kernels.shardSoftmaxGrad(probs, labels, stride, s.rows, s.tokens, outFirst,
                             outCount, outRows, lossScale);
    if (algorithm != 2) {
      // dX = G W, reduced onto the last stage's device afterwards.
      if (outCount > 0)
        kernels.gemm(false, false, rt, h, outCount, 1.0f, probs, outRows,
                     outTable, h, 0.0f, st.dx.data(), h);
      else
        kernels.fill(st.dx.data(), 0.0f, rt * h);
    }
    // dW += G^T X.
    if (outCount > 0)
      kernels.gemm(true, false, outCount, h, rt, 1.0f, probs, outRows,
                   st.x.data(), h, 1.0f, outGrad, h);
    consume(Shard::Output, mb, slice);
    return;
  }
  default:
    return;
  }
}

std::vector<VocabularyShards::Step>
VocabularyShards::buildSteps(Shard shard, int group, int mb, int slice) {
  SliceShape s = shape(slice);
  Slice &st = state(mb, slice);
  int64_t rt = s.rows * s.tokens, h = hidden;
  int channel = int(shard);
  const VocabularyPlan &v = plan.vocabulary;
  std::vector<Step> steps;
  auto nothing = [] {};
  if (shard == Shard::Input) {
    prepareInput(st, s);
    int root = v.input.root;
    if (group == 0)
      steps.push_back({[=, &st] {
                         return comm.reduceSumAsync(st.partial.data(), rt * h,
                                                    root, channel);
                       },
                       nothing});
    else
      steps.push_back({[=, &st] {
                         return comm.broadcastAsync(st.grad.data(), rt * h,
                                                    root, channel);
                       },
                       nothing});
    return steps;
  }
  prepareOutput(st, s);
  int root = v.output.root;
  auto reduceDx = [=, &st] {
    return comm.reduceSumAsync(st.dx.data(), rt * h, root, channel);
  };
  auto allReduceMax = [=, &st] {
    kernels.copy(st.globalMax.data(), st.localMax.data(), rt);
    return comm.allReduceAsync(st.globalMax.data(), rt, Reduction::Max,
                               channel);
  };
  if (group == 0) {
    // C0: X from the last stage to every device.
    steps.push_back({[=, &st] {
                       return comm.broadcastAsync(st.x.data(), rt * h, root,
                                                  channel);
                     },
                     nothing});
    return steps;
  }
  if (v.algorithm == 0) {
    // Figure 4: max | sum | reduce, one collective each.
    if (group == 1)
      steps.push_back({allReduceMax, nothing});
    else if (group == 2)
      steps.push_back({[=, &st] {
                         kernels.copy(st.globalSum.data(), st.localSum.data(),
                                      rt);
                         return comm.allReduceAsync(st.globalSum.data(), rt,
                                                    Reduction::Sum, channel);
                       },
                       nothing});
    else
      steps.push_back({reduceDx, nothing});
    return steps;
  }
  if (group == 1) {
    // Equation 5 inside the barrier: M = max m', s'' = s' exp(m' - M),
    // S = sum s''.
    steps.push_back({allReduceMax, [=, &st] {
                       kernels.rescaleSum(
                           st.localSum.data(), st.localMax.data(),
                           st.globalMax.data(), rt, st.scaledSum.data());
                     }});
    steps.push_back({[=, &st] {
                       kernels.copy(st.globalSum.data(), st.scaledSum.data(),
                                    rt);
                       return comm.allReduceAsync(st.globalSum.data(), rt,
                                                  Reduction::Sum, channel);
                     },
                     nothing});
    if (v.algorithm == 2) {
      // Equation 6: dX = (A s'' / S - B) / tokens, then its reduce, in the
      // same barrier.
      steps.back().after = [=, &st] {
        kernels.combineGrad(st.a.data(), st.labelRows.data(),
                            st.scaledSum.data(), st.globalSum.data(), rt, h,
                            lossScale, st.dx.data());
      };
      steps.push_back({reduceDx, nothing});
    }
    return steps;
  }
  // Algorithm 1's second barrier: the reduce of dX.
  steps.push_back({reduceDx, nothing});
  return steps;
}

void VocabularyShards::issue(Shard shard, int group, int mb, int slice,
                             bool blocking) {
  Collective c{shard, group,  mb, slice, buildSteps(shard, group, mb, slice),
               0,     nullptr};
  queues[int(shard)].push_back(std::move(c));
  progress();
  while (blocking && !isComplete(shard, group, mb, slice)) {
    std::this_thread::yield();
    progress();
  }
}

bool VocabularyShards::isComplete(Shard shard, int group, int mb,
                                  int slice) const {
  return completed.count({int(shard), group, mb, slice}) != 0;
}

void VocabularyShards::finished(Shard shard, int mb, int slice) {
  consume(shard, mb, slice);
}

void VocabularyShards::progress() {
  for (std::deque<Collective> &queue : queues) {
    while (!queue.empty()) {
      Collective &head = queue.front();
      if (head.pending) {
        if (!head.pending->test())
          break;
        head.pending.reset();
        if (head.steps[head.next - 1].after)
          head.steps[head.next - 1].after();
      }
      if (head.next < head.steps.size()) {
        head.pending = head.steps[head.next++].start();
        continue;
      }
      completed.insert({int(head.shard), head.group, head.mb, head.slice});
      Shard shard = head.shard;
      int mb = head.mb, slice = head.slice;
      queue.pop_front();
      finished(shard, mb, slice);
    }
  }
}

} // namespace sluice::rt
