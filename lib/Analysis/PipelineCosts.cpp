//===- PipelineCosts.cpp - What a pipeline's passes cost ------------------===//
//
// The cost model applied to one partitioned model and its schedule: each
// pass's time and the tensor-parallel collectives inside it, the
// vocabulary shards' passes and collectives, gradient synchronisation,
// activation and key/value memory, the optimizer step.
//
//===----------------------------------------------------------------------===//

#include "sluice/Analysis/CostModel.h"

#include "CostModelShared.h"

#include "sluice/PlanFormat/Format.h"
#include "sluice/PlanFormat/JsonDepth.h"
#include "sluice/PlanFormat/ModelConfig.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cmath>

using namespace mlir;
using namespace mlir::sluice;

/// A stage's tensor-parallel collectives in F, B and W: the bytes of each
/// for the whole sequence and whether it is an all-reduce (else an
/// all-gather or reduce-scatter, which move half as much).
namespace {
struct StageCollectives {
  std::vector<std::pair<double, bool>> forward, backward, weight;
};
} // namespace

/// The collectives of `stage` before sluice-shard-tensors writes them, in
/// closed form: per transformer layer the blog's table ("Communication
/// Overhead", Weitkamp, 2024) -- into each of the two
/// column-parallel regions an identity in F and an all-reduce of the input
/// gradient in B, out of each row-parallel one an all-reduce of the
/// partial sums in F. With sequence parallelism each all-reduce becomes
/// an all-gather and a reduce-scatter (the same bytes over the links), and
/// W gathers the sliced inputs of the column-parallel projections again.
/// The vocabulary-parallel embedding leaves like a row-parallel region
/// (its masked lookups summed); the output layer enters like a
/// column-parallel one and all-reduces two fp32 statistics per token in F.
static StageCollectives getClosedFormCollectives(const StageProfile &stage,
                                                 bool splitsVocabulary,
                                                 bool sequenceParallel) {
  StageCollectives c;
  double tokens = double(stage.seqLen * stage.microBatch);
  double activation = tokens * double(stage.hidden * stage.dtypeBytes);
  auto enter = [&] {
    if (sequenceParallel) {
      c.forward.push_back({activation, false});
      c.backward.push_back({activation, false});
      c.weight.push_back({activation, false});
    } else {
      c.backward.push_back({activation, true});
    }
  };
  auto leave = [&] {
    if (sequenceParallel) {
      c.forward.push_back({activation, false});
      c.backward.push_back({activation, false});
    } else {
      c.forward.push_back({activation, true});
    }
  };
  if (stage.hasEmbedding && splitsVocabulary)
    leave();
  for (size_t i = 0; i < stage.layers.size(); ++i)
    for (int region = 0; region < 2; ++region) {
      enter();
      leave();
    }
  if (stage.hasOutput && splitsVocabulary) {
    enter();
    c.forward.push_back({4.0 * tokens, true});
    c.forward.push_back({4.0 * tokens, true});
  }
  return c;
}

static std::optional<StageCollectives> getStageCollectives(StageOp stage) {
  StageCollectives collectives;
  auto append = [](std::vector<std::pair<double, bool>> &to,
                   llvm::ArrayRef<ShardCollective> from) {
    for (const ShardCollective &c : from)
      // (Expert parallelism's all-to-alls cross the expert group, priced
      // apart: expertParallel.)
      if (c.kind != CollectiveKind::all_to_all)
        to.push_back({double(c.elements * c.elementBytes),
                      c.kind == CollectiveKind::all_reduce});
  };
  bool bodies = true;
  stage.getBody().walk([&](Operation *layer) {
    if (!isa<TransformerLayerOp, EmbeddingOp, OutputLayerOp>(layer))
      return WalkResult::advance();
    if (layer->getRegion(0).empty()) {
      bodies = false;
      return WalkResult::interrupt();
    }
    ShardTraffic traffic = getShardTraffic(layer);
    append(collectives.forward, traffic.forward);
    append(collectives.backward, traffic.backward);
    append(collectives.weight, traffic.weight);
    return WalkResult::skip();
  });
  if (!bodies)
    return std::nullopt;
  return collectives;
}

PipelineCosts::PipelineCosts(ModelOp model, const sched::Pipeline &pipeline,
                             const CostModel &costModel, MeshShape mesh)
    : pipeline(pipeline), costs(costModel), mesh(mesh) {
  // The runtime's training state for the model's element type: a 16-bit
  // model trains in mixed precision (its plan's --precision).
  stateBytes = rt::getParameterStateBytes(
      model.getDtype().isF32() ? rt::Precision::fp32() : rt::Precision::bf16(),
      int(mesh.zero), mesh.reshard);
  // Below, `costs` is this table's copy: calibrated for this model.
  if (!costs.getCalibrationPath().empty()) {
    if (std::optional<double> efficiency =
            costs.calibrateEfficiency(model, calibrationError))
      costs.setEfficiency(*efficiency);
  }
  std::vector<StageCollectives> collectives;
  for (StageOp stage : mlir::sluice::getStages(model)) {
    profiles.push_back(StageProfile::get(stage, model, mesh.tp));
    if (mesh.sequenceParallel)
      profiles.back().sequenceShards = mesh.tp;
    profiles.back().contextShards = std::max<int64_t>(1, mesh.cp);
    // The shard bodies' collectives once sluice-shard-tensors wrote them,
    // the same in closed form before.
    std::optional<StageCollectives> spelled;
    if (mesh.tp > 1)
      spelled = getStageCollectives(stage);
    collectives.push_back(spelled ? *spelled
                                  : getClosedFormCollectives(
                                        profiles.back(),
                                        splitsVocabulary(model),
                                        mesh.sequenceParallel));
    stageParams[profiles.back().name] = profiles.back().params;
    int64_t experts = 0;
    for (const TransformerShape &l : profiles.back().layers)
      experts += l.experts * 3 * l.hidden * l.ffn;
    stageExperts[profiles.back().name] = experts;
    transformerLayers += stage.getNumTransformerLayers();
    // MFU counts the model's FLOPs, not what the shards repeat.
    forwardFlops += StageProfile::get(stage, model)
                        .getForwardFlops(model.getSeqLen(), 0);
  }
  // Where the groups sit (rank d*tp*dp + r*tp + t): a tensor-parallel
  // group is tp consecutive ranks, a device's replicas every tp-th rank,
  // a pipeline every (tp*dp)-th. A kind of traffic is as slow as its
  // slowest group.
  int64_t p = pipeline.devices, tp = mesh.tp, dp = mesh.dp;
  int64_t ranks = p * tp * dp;
  tensorLink = costs.getGroupLink(0, 1, tp, tp, ranks / tp);
  dataLink = LinkKind::node;
  for (int64_t d = 0; d < p; ++d)
    if (costs.getGroupLink(d * tp * dp, tp, dp, 1, tp) == LinkKind::network)
      dataLink = LinkKind::network;
  pipelineLink = costs.getGroupLink(0, tp * dp, p, 1, tp * dp);
  // A context-parallel group is `cp` consecutive replicas of a shard (of
  // the dp x cp: every tp-th rank); an expert group `ep` replicas at one
  // context rank (every tp x cp-th rank). Group g of `size` members
  // `spacing` replicas apart starts at (g / spacing) size spacing +
  // g mod spacing.
  int64_t ep = std::max<int64_t>(1, mesh.ep);
  int64_t cp = std::max<int64_t>(1, mesh.cp);
  auto replicaGroupLink = [&](int64_t size, int64_t spacing) {
    for (int64_t d = 0; d < p; ++d)
      for (int64_t g = 0; g < dp / size; ++g) {
        int64_t start = g / spacing * size * spacing + g % spacing;
        if (costs.getGroupLink(d * tp * dp + start * tp, tp * spacing, size,
                               1, tp) == LinkKind::network)
          return LinkKind::network;
      }
    return LinkKind::node;
  };
  expertLink = replicaGroupLink(ep, cp);
  contextLink = replicaGroupLink(cp, 1);

  for (int64_t length : model.getSliceLengths(pipeline.slices))
    lengths.push_back(length);
  int64_t prefix = 0;
  for (int64_t length : lengths) {
    prefixes.push_back(prefix);
    prefix += length;
  }
  int k = pipeline.slices;
  compute.assign(profiles.size() * kKinds * k, 0.0);
  tensorParallel.assign(profiles.size() * kKinds * k, 0.0);
  expertParallel.assign(profiles.size() * kKinds * k, 0.0);
  contextExchange.assign(profiles.size() * kKinds * k, 0.0);
  for (size_t s = 0; s < profiles.size(); ++s)
    for (size_t kind = 0; kind < kKinds; ++kind)
      for (int slice = 0; slice < k; ++slice) {
        size_t at = (s * kKinds + kind) * k + slice;
        compute[at] =
            costs.getComputeTime(profiles[s], PassKind(kind), lengths[slice],
                                 prefixes[slice], pipeline.chunks, k);
        if (cp > 1 && costs.getKind() == CostModel::Kind::Analytic) {
          // Each rank computes 1/cp of the pass: its tokens' share of the
          // projections and, with the causal balance (2 cp chunks, rank i
          // holding i and 2 cp - 1 - i), of attention's blocks. Ring
          // attention (TransformerBlock::ringForward, ringBackward): per
          // layer the rank's keys and values of the prefix (the slice and
          // every earlier one, 1/cp of them) pass cp - 1 ranks in F, each
          // transfer beside a step's compute; B passes them again (and a
          // recomputing B once more) and, after each step, an fp32
          // accumulator of their gradients cp times, waited for. The pass
          // takes the longer of its compute and the overlapped transfers,
          // plus the waited ones.
          const StageProfile &stage = profiles[s];
          PassKind pass = PassKind(kind);
          bool full = stage.recompute == RecomputeKind::full;
          bool backward = pass == PassKind::B || pass == PassKind::BW;
          int overlapped = pass == PassKind::F ? 1
                           : backward          ? 1 + (full ? 1 : 0)
                                               : 0;
          double beside = 0, waited = 0;
          for (const TransformerShape &l : stage.layers) {
            if (overlapped == 0)
              break;
            int64_t bytes = (prefixes[slice] + lengths[slice]) / cp *
                            stage.microBatch * l.kvHeads *
                            (l.headDim + l.getValueDim());
            double move =
                costs.getTransferTime(bytes * stage.dtypeBytes, contextLink);
            beside += double(overlapped * (cp - 1)) * move;
            if (backward)
              waited += double(cp) *
                        costs.getTransferTime(bytes * 4, contextLink);
          }
          double own = compute[at] / double(cp);
          contextExchange[at] = std::max(0.0, beside - own) + waited;
          compute[at] = own + contextExchange[at];
        }
        if (double call = costs.getAllToAllTime(); call > 0 && ep > 1) {
          // Explicit costs: the runtime's calls, each `a2a` long.
          PassKind pass = PassKind(kind);
          bool full = profiles[s].recompute == RecomputeKind::full;
          int calls = pass == PassKind::F   ? 3
                      : pass == PassKind::B || pass == PassKind::BW
                          ? 2 + (full ? 3 : 0)
                          : 0;
          for (const TransformerShape &l : profiles[s].layers)
            if (l.experts > 0)
              expertParallel[at] += calls * call;
          compute[at] += expertParallel[at];
        }
        if (costs.getKind() != CostModel::Kind::Analytic)
          continue;
        if (ep > 1) {
          // Each sparse layer sends its tokens' copies to their experts'
          // members and back (two all-to-alls of tokens x top_k rows a
          // member) in F and in B, W none; the counts' exchange is
          // latency only.
          const StageProfile &stage = profiles[s];
          PassKind pass = PassKind(kind);
          bool full = stage.recompute == RecomputeKind::full;
          int times = pass == PassKind::F ? 1
                      : pass == PassKind::B || pass == PassKind::BW
                          ? (full ? 2 : 1)
                          : 0;
          for (const TransformerShape &l : stage.layers)
            if (l.experts > 0 && times > 0) {
              double bytes = double(lengths[slice] / cp * stage.microBatch *
                                    l.topK * stage.hidden * stage.dtypeBytes);
              expertParallel[at] +=
                  times * (2 * costs.getCollectiveTime(bytes, false, ep,
                                                       expertLink) +
                           costs.getCollectiveTime(0, false, ep, expertLink));
            }
          compute[at] += expertParallel[at];
        }
        if (tp < 2)
          continue;
        // Every collective moves a tensor per token: scaled to the slice.
        // A B that recomputes the forward runs the forward's again.
        const StageProfile &stage = profiles[s];
        bool full = stage.recompute == RecomputeKind::full;
        double scale =
            double(lengths[slice]) / double(stage.seqLen) / double(cp);
        auto add = [&](llvm::ArrayRef<std::pair<double, bool>> list) {
          for (auto [bytes, allReduce] : list)
            tensorParallel[at] += costs.getCollectiveTime(
                bytes * scale, allReduce, tp, tensorLink);
        };
        PassKind pass = PassKind(kind);
        if (pass == PassKind::F || (full && (pass == PassKind::B ||
                                             pass == PassKind::BW)))
          add(collectives[s].forward);
        if (pass == PassKind::B || pass == PassKind::BW)
          add(collectives[s].backward);
        if (pass == PassKind::W || pass == PassKind::BW)
          add(collectives[s].weight);
        compute[at] += tensorParallel[at];
      }
  for (int slice = 0; slice < k; ++slice)
    transfer.push_back(costs.getTransferTime(
        profiles.front().getMessageBytes(lengths[slice]), pipelineLink));
  vocab = VocabProfile::get(model, tp);
  if (vocab.input)
    stageParams[vocab.inputName] =
        (vocab.tied && vocab.output ? 0 : vocab.getShardRows() * vocab.hidden);
  if (vocab.output)
    stageParams[vocab.outputName] = vocab.getShardRows() * vocab.hidden;
  vocabCompute.assign(kKinds * k, 0.0);
  for (size_t kind = 0; kind < kKinds; ++kind)
    if (sched::isVocabPass(PassKind(kind)))
      for (int slice = 0; slice < k; ++slice)
        vocabCompute[kind * k + slice] =
            costs.getVocabComputeTime(vocab, PassKind(kind), lengths[slice], k);
  // ZeRO-3 re-sharding every pass: the runtime gathers each layer's
  // weights in every pass, the next layer's on the data stream beside the
  // current one's compute (ZeroOne::prefetchGroup): a pass takes the
  // longer of its compute and its gathers, plus its first layer's gather,
  // which nothing hides. Per step: once, at the update
  // (getOptimizerTime).
  if (mesh.zero == 3 && mesh.reshard == rt::Reshard::EveryPass) {
    for (size_t s = 0; s < profiles.size(); ++s) {
      double gather = getParameterGatherTime(profiles[s].name);
      double first =
          gather / double(std::max<size_t>(1, profiles[s].layers.size()));
      for (size_t kind = 0; kind < kKinds; ++kind)
        if (!sched::isVocabPass(PassKind(kind)))
          for (int slice = 0; slice < k; ++slice) {
            double &pass = compute[(s * kKinds + kind) * k + slice];
            pass = std::max(pass, gather) + first;
          }
    }
    // The vocabulary shards' rows, before each pass that reads them.
    for (size_t kind = 0; kind < kKinds; ++kind) {
      PassKind pass = PassKind(kind);
      bool input = pass == PassKind::IF || pass == PassKind::IB;
      bool output = pass == PassKind::S || pass == PassKind::T;
      double gather =
          input && vocab.input ? getParameterGatherTime(vocab.inputName)
          : output && vocab.output ? getParameterGatherTime(vocab.outputName)
                                   : 0;
      for (int slice = 0; slice < k; ++slice)
        vocabCompute[kind * k + slice] += gather;
    }
  }
}

double PipelineCosts::getTensorParallelTime(const sched::Work &work) const {
  return sched::isVocabPass(work.kind) ? 0 : tensorParallel[getIndex(work)];
}

double PipelineCosts::getExpertParallelTime(const sched::Work &work) const {
  return sched::isVocabPass(work.kind) ? 0 : expertParallel[getIndex(work)];
}

double PipelineCosts::getReplicaCollectiveTime(llvm::StringRef name,
                                                bool allReduce) const {
  auto it = stageParams.find(name);
  if (mesh.dp < 2 || it == stageParams.end() || profiles.empty())
    return 0;
  // The stage's parameters in the model's type over the replicas (dp x
  // cp ranks: mesh.dp counts both); under expert parallelism a member's
  // experts over the dp / ep x cp ranks holding them, after the rest.
  int64_t ep = std::max<int64_t>(1, mesh.ep), experts = 0;
  if (ep > 1)
    if (auto e = stageExperts.find(name); e != stageExperts.end())
      experts = e->second;
  int64_t dtype = profiles.front().dtypeBytes;
  double time = costs.getCollectiveTime(double((it->second - experts) * dtype),
                                        allReduce, mesh.dp, dataLink);
  if (experts)
    time += costs.getCollectiveTime(double(experts / ep * dtype), allReduce,
                                    mesh.dp / ep, dataLink);
  return time;
}

double PipelineCosts::getGradientSyncTime(llvm::StringRef name) const {
  // The gradients averaged over the replicas: a ring all-reduce, or
  // under ZeRO its reduce-scatter half (each replica gets the sum of its
  // part) -- ZeRO-2 and 3 one for every microbatch's gradients.
  double time = getReplicaCollectiveTime(name, /*allReduce=*/mesh.zero == 0);
  return mesh.zero >= 2 ? time * double(pipeline.microbatches) : time;
}

double PipelineCosts::getContextExchangeBytes(int device) const {
  int64_t cp = std::max<int64_t>(1, mesh.cp);
  if (cp < 2)
    return 0;
  // Ring attention's buffers (TransformerScratch::context): two blocks of
  // the rank's keys and values of the whole sequence (the last slice's
  // prefix) and two fp32 accumulators of their gradients, for the largest
  // layer; the chunk's statistics are small beside them.
  double largest = 0;
  for (size_t s = 0; s < profiles.size(); ++s) {
    if (pipeline.getDevice(s) != device)
      continue;
    const StageProfile &stage = profiles[s];
    for (const TransformerShape &l : stage.layers)
      largest = std::max(
          largest, double(stage.seqLen / cp * stage.microBatch * l.kvHeads *
                          (l.headDim + l.getValueDim()) *
                          (stage.dtypeBytes + 4)));
  }
  return 2.0 * largest;
}

double PipelineCosts::getContextExchangeTime(const sched::Work &work) const {
  return sched::isVocabPass(work.kind) ? 0 : contextExchange[getIndex(work)];
}

double PipelineCosts::getParameterGatherTime(llvm::StringRef name) const {
  // The all-gather is the reduce-scatter's mirror: the same ring steps
  // and bytes.
  return mesh.zero < 3 ? 0
                       : getReplicaCollectiveTime(name, /*allReduce=*/false);
}

int64_t PipelineCosts::getParameterGathersPerStep() const {
  if (mesh.zero < 3)
    return 0;
  if (mesh.reshard == rt::Reshard::Step)
    return 1;
  // F, B and W of every microbatch (a BW is one pass).
  return int64_t(pipeline.microbatches) * (pipeline.splitBackward ? 3 : 2);
}

std::vector<LinkUse> PipelineCosts::getLinks() const {
  std::vector<LinkUse> links;
  if (pipeline.devices > 1)
    links.push_back({"pipeline", 2, pipelineLink});
  if (pipeline.vocab.any())
    links.push_back({"vocabulary", pipeline.devices, pipelineLink});
  if (mesh.tp > 1)
    links.push_back({"tensor-parallel", mesh.tp, tensorLink});
  if (mesh.dp > 1)
    links.push_back({"data-parallel", mesh.dp, dataLink});
  if (mesh.ep > 1)
    links.push_back({"expert-parallel", mesh.ep, expertLink});
  if (mesh.cp > 1)
    links.push_back({"context-parallel", mesh.cp, contextLink});
  return links;
}

double PipelineCosts::getCollectiveTime(const sched::CollectiveId &id) const {
  bool allReduce = id.shard == sched::ShardKind::Output && id.group > 0 &&
                   !(vocab.algorithm == 0 && id.group == 3) &&
                   !(vocab.algorithm == 1 && id.group == 2);
  // Over pp x tp: the pipeline's collective, then the device's shards'
  // all-reduce of what it reduced (runtime/model/Vocab.cpp).
  double time = costs.getCollectiveTime(
      vocab.getCollectiveBytes(id, lengths[id.slice]), allReduce,
      pipeline.devices, pipelineLink);
  if (double shards = vocab.getShardGroupBytes(id, lengths[id.slice]))
    time += costs.getCollectiveTime(shards, /*allReduce=*/true, mesh.tp,
                                    tensorLink);
  return time;
}

double PipelineCosts::getActivationUnits(const sched::Work &work) const {
  if (transformerLayers == 0 || sched::isVocabPass(work.kind))
    return 0;
  const StageProfile &stage = profiles[work.stage];
  double share = double(stage.layers.size()) * pipeline.devices /
                 double(transformerLayers);
  return share * double(lengths[work.slice]) / double(stage.seqLen);
}

double PipelineCosts::getActivationBytes(const sched::Work &work) const {
  if (sched::isVocabPass(work.kind))
    return vocab.getKeptBytes(lengths[work.slice]);
  const StageProfile &stage = profiles[work.stage];
  int64_t tokens = lengths[work.slice];
  if (pipeline.slices == 1)
    return stage.getActivationBytes(tokens);
  // Sliced: the keys and values are the microbatch's key/value state.
  return stage.getActivationBytes(tokens) -
         stage.getKeyValueBytes(tokens, /*withGradients=*/false);
}

double PipelineCosts::getKeyValueStateBytes(int stage) const {
  if (pipeline.slices == 1)
    return 0;
  const StageProfile &profile = profiles[stage];
  return profile.getKeyValueBytes(profile.seqLen, /*withGradients=*/true);
}

int64_t PipelineCosts::getStateBytes(int64_t dense, int64_t experts,
                                     bool optimizer) const {
  int64_t ep = std::max<int64_t>(1, mesh.ep);
  auto of = [&](int64_t params, int64_t replicas) {
    return optimizer ? stateBytes.optimizerFor(params, replicas)
                     : stateBytes.forParameters(params, replicas);
  };
  if (experts == 0)
    return of(dense, mesh.dp);
  return of(dense, mesh.dp) + of(experts, mesh.dp / ep);
}

int64_t PipelineCosts::getDeviceExperts(int device) const {
  int64_t experts = 0;
  if (mesh.ep > 1)
    for (size_t s = 0; s < profiles.size(); ++s)
      if (pipeline.getDevice(s) == device)
        experts += stageExperts.at(profiles[s].name) / mesh.ep;
  return experts;
}

int64_t PipelineCosts::getParameterBytes(int device) const {
  int64_t params = getDeviceParameters(device),
          experts = getDeviceExperts(device);
  return getStateBytes(params - experts, experts, /*optimizer=*/false) +
         stateBytes.forLargestLayer(getLargestLayerParameters(device),
                                    mesh.dp);
}

int64_t PipelineCosts::getLargestLayerParameters(int device) const {
  int64_t largest = 0, ep = std::max<int64_t>(1, mesh.ep);
  for (size_t s = 0; s < profiles.size(); ++s) {
    if (pipeline.getDevice(s) != device)
      continue;
    const StageProfile &stage = profiles[s];
    for (const TransformerShape &l : stage.layers) {
      int64_t experts = l.experts * 3 * l.hidden * l.ffn;
      largest = std::max(largest, getParameterCount(l) - experts +
                                      experts / ep);
    }
    largest = std::max(largest, stage.vocabLayerParams);
  }
  // Every device's rows of the vocabulary shards (the input shard's root
  // also the positions).
  int64_t rows = vocab.getShardParams();
  if (vocab.input && device == pipeline.getInputRoot())
    rows += vocab.positions * vocab.hidden;
  return std::max(largest, rows);
}

int64_t PipelineCosts::getDeviceParameters(int device) const {
  int64_t params = 0;
  // An expert-group member holds 1 / ep of each stage's experts.
  for (size_t s = 0; s < profiles.size(); ++s)
    if (pipeline.getDevice(s) == device)
      params += profiles[s].params -
                (mesh.ep > 1 ? stageExperts.at(profiles[s].name) -
                                   stageExperts.at(profiles[s].name) / mesh.ep
                             : 0);
  // Every device holds its rows of the vocabulary shards; the input
  // shard's root also the positions.
  params += vocab.getShardParams();
  if (vocab.input && device == pipeline.getInputRoot())
    params += vocab.positions * vocab.hidden;
  return params;
}

double PipelineCosts::getRecomputeAreaBytes(int device) const {
  int64_t longest = 0;
  for (int64_t length : lengths)
    longest = std::max(longest, length);
  double area = 0;
  for (size_t s = 0; s < profiles.size(); ++s) {
    const StageProfile &stage = profiles[s];
    if (pipeline.getDevice(s) != device ||
        stage.recompute == RecomputeKind::none)
      continue;
    area = std::max(area,
                    stage.getActivationBytes(longest, RecomputeKind::none) -
                        stage.getActivationBytes(longest));
  }
  return area;
}

int64_t PipelineCosts::getOptimizerBytes(int device) const {
  int64_t params = getDeviceParameters(device),
          experts = getDeviceExperts(device);
  return getStateBytes(params - experts, experts, /*optimizer=*/true);
}

double PipelineCosts::getOptimizerTime(int device) const {
  // A profile of this mesh timed each device's update as it ran.
  if (costs.getKind() == CostModel::Kind::Measured)
    return costs.getMeasuredOptimizer(device).value_or(0);
  const HardwareProfile *hw = costs.getHardware();
  if (!hw || costs.getKind() != CostModel::Kind::Analytic || profiles.empty())
    return 0;
  int64_t params = getDeviceParameters(device);
  int64_t dtype = profiles.front().dtypeBytes;
  // Read w, g, m, v and write w, m, v in fp32; and the working copy. Under
  // ZeRO-1 a replica updates its part, then the replicas all-gather the
  // 16-bit weights (the ring all-reduce's other half). (A member's experts
  // are shared by dp / ep replicas: its part of them is as large.)
  int64_t experts = getDeviceExperts(device),
          ep = std::max<int64_t>(1, mesh.ep);
  bool sharded = mesh.zero >= 1 && mesh.dp > 1;
  int64_t share = sharded ? (params - experts + mesh.dp - 1) / mesh.dp +
                                experts / std::max<int64_t>(1, mesh.dp / ep)
                          : params;
  // ZeRO-3 keeps no working copy to refresh: its gathers cast as they go.
  int64_t working = dtype < 4 && mesh.zero < 3 ? dtype : 0;
  double bytes = double(share) * double(7 * 4 + working);
  double time = bytes / hw->memoryBandwidth;
  if (sharded && mesh.zero < 3)
    time += costs.getCollectiveTime(double(params * dtype),
                                    /*allReduce=*/false, mesh.dp, dataLink);
  // ZeRO-3 re-sharding per step: each stage's weights gathered once a
  // step, charged here beside the update that makes them stale.
  if (mesh.zero == 3 && mesh.reshard == rt::Reshard::Step)
    for (size_t s = 0; s < profiles.size(); ++s)
      if (pipeline.getDevice(int(s)) == device)
        time += getParameterGatherTime(profiles[s].name);
  return time;
}

double PipelineCosts::getStepFlops() const {
  // F + B + W = three forwards (LayerCost.h), for every microbatch; the
  // output layer's logits, input gradient and weight gradient likewise.
  double forward = forwardFlops;
  if (vocab.output)
    forward += 2.0 * double(vocab.hidden) * double(vocab.paddedVocab) *
               double(vocab.seqLen * vocab.microBatch);
  return 3.0 * forward * pipeline.microbatches;
}
