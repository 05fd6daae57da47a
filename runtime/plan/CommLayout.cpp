//===- CommLayout.cpp - The communicators a plan needs on a rank ----------===//

#include "CommLayout.h"

#include <set>

namespace sluice::rt {

MeshPosition getMeshPosition(const Plan &plan, int rank) {
  int tp = plan.tp, dp = plan.dp, cp = plan.cp;
  MeshPosition at;
  at.shard = rank % tp;
  at.context = (rank / tp) % cp;
  at.replica = (rank / (tp * cp)) % dp;
  at.device = rank / (tp * cp * dp);
  return at;
}


namespace {
/// A tied table's two ends on different devices (Executor::prepare decides
/// alike).
bool hasTiedPair(const Plan &plan) {
  const LayerConfig &out = plan.model.layers.back();
  return out.tied && !out.sharded &&
         plan.stages.front().device != plan.stages.back().device;
}

/// Shards per key/value head group, for layers with fewer key/value heads
/// than shards (Executor::prepareGroupSums).
std::set<int> getKeyValueGroupSizes(const Plan &plan) {
  std::set<int> sizes;
  if (plan.tp > 1)
    for (const LayerConfig &layer : plan.model.layers)
      if (layer.kind == LayerKind::Transformer && layer.kvHeads < plan.tp)
        sizes.insert(plan.tp / int(layer.kvHeads));
  return sizes;
}
} // namespace

std::vector<CommSpec> getCommLayout(const Plan &plan, const MeshPosition &at) {
  std::vector<CommSpec> layout;
  int tp = plan.tp, dp = plan.dp, cp = plan.cp;
  int pipelineColor = (at.replica * cp + at.context) * tp + at.shard;
  int replicaColor = at.device * tp + at.shard;
  int shardColor = (at.device * dp + at.replica) * cp + at.context;
  int contextColor = (at.device * dp + at.replica) * tp + at.shard;
  bool vocabulary = plan.vocabulary.any();
  if (plan.devices > 1) {
    layout.push_back({"pipeline", MeshGroup::Pipeline, pipelineColor,
                      at.device, StreamKind::Pipeline, {}});
    if (vocabulary)
      layout.push_back({"vocabulary", MeshGroup::Pipeline, pipelineColor,
                        at.device, StreamKind::Vocabulary, {}});
  }
  if (hasTiedPair(plan)) {
    int first = plan.stages.front().device, last = plan.stages.back().device;
    bool member = at.device == first || at.device == last;
    layout.push_back({"tied", MeshGroup::Pipeline, member ? pipelineColor : -1,
                      at.device, std::nullopt,
                      {std::min(first, last), std::max(first, last)}});
  }
  if (dp * cp > 1)
    layout.push_back({"data", MeshGroup::Replicas, replicaColor,
                      at.getGradientRank(plan), StreamKind::Data, {}});
  // Ring attention's transfers inside the passes, on a stream of their
  // own so that the next block moves while the current one is attended
  // to (Executor::getContextCalls).
  if (cp > 1)
    layout.push_back({"context", MeshGroup::Context, contextColor, at.context,
                      StreamKind::Context, {}});
  // The tensor-parallel collectives inside the passes, on a stream of
  // their own: the compute stream hands each over with an event and waits
  // for it where the pass reads its result, so a backward's sums of input
  // gradients run beside weight-gradient GEMMs (TensorGroupSums).
  if (tp > 1) {
    layout.push_back({"tensor", MeshGroup::Shards, shardColor, at.shard,
                      StreamKind::Tensor, {}});
    if (vocabulary)
      layout.push_back({"tensor-vocabulary", MeshGroup::Shards, shardColor,
                        at.shard, StreamKind::Vocabulary, {}});
  }
  if (plan.ep > 1) {
    // The dispatch's all-to-alls, on the compute stream (inside the
    // passes, whose next kernel reads them): ep replicas at one context
    // rank, each sending its own tokens.
    layout.push_back({"experts", MeshGroup::Experts,
                      (replicaColor * (dp / plan.ep) + at.replica / plan.ep) *
                              cp +
                          at.context,
                      at.replica % plan.ep, StreamKind::Compute, {}});
    // The expert gradients' sums (ZeRO: reduce-scatters and all-gathers)
    // over the ranks holding the same experts, every ep-th replica's
    // context-parallel ranks, on the data stream as the others'.
    if (plan.getExpertReplicas() > 1)
      layout.push_back({"expert-replicas", MeshGroup::ExpertReplicas,
                        replicaColor * plan.ep + at.replica % plan.ep,
                        at.replica / plan.ep * cp + at.context,
                        StreamKind::Data, {}});
  }
  for (int size : getKeyValueGroupSizes(plan)) {
    int group = at.shard / size;
    CommSpec spec{"kv-heads-" + std::to_string(size), MeshGroup::Shards,
                  shardColor * tp + group, at.shard, std::nullopt, {}};
    for (int t = group * size; t < (group + 1) * size; ++t)
      spec.members.push_back(t);
    layout.push_back(std::move(spec));
  }
  return layout;
}

} // namespace sluice::rt
