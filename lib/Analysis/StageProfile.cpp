//===- StageProfile.cpp - What a stage and a vocabulary shard compute -----===//
//
// A stage's transformer layers (their shapes as the block spec gives them,
// split over tensor-parallel shards), its vocabulary layers, and from them
// the FLOPs and bytes of each pass: what the cost model prices.
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

/// One tensor-parallel shard of a layer, as sluice-shard-tensors splits it:
/// query heads and the feed-forward width divided, key/value heads divided
/// or, when fewer than the shards, one replicated head per shard.
static TransformerShape shardLayer(TransformerShape shape, int64_t tp) {
  if (tp <= 1)
    return shape;
  shape.heads /= tp;
  shape.kvHeads = shape.kvHeads >= tp ? shape.kvHeads / tp : 1;
  shape.ffn /= tp;
  return shape;
}

StageProfile StageProfile::getWholeModel(ModelOp model, int64_t tp) {
  StageProfile profile;
  profile.name = "model";
  profile.hidden = model.getHidden();
  profile.seqLen = model.getSeqLen();
  profile.microBatch = model.getMicroBatch();
  profile.dtypeBytes =
      std::max<int64_t>(1, model.getDtype().getIntOrFloatBitWidth() / 8);
  model.walk([&](TransformerLayerOp layer) {
    profile.layers.push_back(shardLayer(TransformerShape::get(layer), tp));
  });
  return profile;
}


StageProfile StageProfile::get(StageOp stage, ModelOp model, int64_t tp) {
  StageProfile profile;
  profile.name = stage.getSymName().str();
  profile.hidden = model.getHidden();
  profile.seqLen = model.getSeqLen();
  profile.microBatch = model.getMicroBatch();
  profile.dtypeBytes =
      std::max<int64_t>(1, model.getDtype().getIntOrFloatBitWidth() / 8);
  for (Operation *layer : stage.getLayers()) {
    if (auto t = dyn_cast<TransformerLayerOp>(layer)) {
      profile.layers.push_back(shardLayer(TransformerShape::get(t), tp));
      profile.params += getParameterCount(profile.layers.back());
      continue;
    }
    // The vocabulary-parallel layers: the first (largest) shard's rows, by
    // the runtime's rule.
    auto shardRows = [&](int64_t vocab) {
      return ::sluice::rt::getShardVocabRows(vocab, 0, int(tp)).second;
    };
    bool split = tp > 1 && splitsVocabulary(model);
    int64_t params = getParameterCount(layer);
    if (auto e = dyn_cast<EmbeddingOp>(layer)) {
      if (split)
        params = (shardRows(e.getVocab()) + e.getPositions().value_or(0)) *
                 model.getHidden();
      profile.hasEmbedding = true;
    } else if (auto o = dyn_cast<OutputLayerOp>(layer)) {
      profile.vocab = split ? shardRows(o.getVocab()) : o.getVocab();
      params -= (o.getVocab() - profile.vocab) * model.getHidden();
      profile.hasOutput = true;
    }
    profile.params += params;
    profile.vocabLayerParams = std::max(profile.vocabLayerParams, params);
  }
  profile.recompute = stage.getRecompute().value_or(RecomputeKind::none);
  return profile;
}

double StageProfile::getForwardFlops(int64_t tokens, int64_t prefix) const {
  double flops = 0;
  for (const TransformerShape &shape : layers)
    flops += mlir::sluice::getForwardFlops(shape, tokens, prefix);
  if (hasOutput)
    flops += 2.0 * double(hidden) * double(vocab) * double(tokens);
  return flops * double(microBatch);
}

double StageProfile::getPassFlops(PassKind kind, int64_t tokens,
                                  int64_t prefix) const {
  // Split each layer's forward into its matmul part and its attention part:
  // the attention part has no weights, so W never repeats it and B does it
  // twice (gradients of both operands of Q.K^T and P.V).
  double forward = getForwardFlops(tokens, prefix);
  double attention = 0;
  for (const TransformerShape &shape : layers) {
    double t = double(tokens);
    attention += 2.0 *
                 double(shape.heads * (shape.headDim + shape.getValueDim())) *
                 (t * double(prefix) + t * (t + 1.0) / 2.0);
  }
  attention *= double(microBatch);
  double matmul = forward - attention;
  // What B does again before its own work: the whole forward, or (selective)
  // the attention core; the MLP activation is no FLOPs in this count.
  double again = recompute == RecomputeKind::full        ? forward
                 : recompute == RecomputeKind::selective ? attention
                                                         : 0.0;
  switch (kind) {
  case PassKind::F:
    return forward;
  case PassKind::B:
    return matmul + 2.0 * attention + again;
  case PassKind::W:
    return matmul;
  case PassKind::BW:
    return 2.0 * matmul + 2.0 * attention + again;
  default:
    return 0;
  }
}

double StageProfile::getPassTime(PassKind kind, int64_t tokens, int64_t prefix,
                                 const HardwareProfile &hw) const {
  double rate = hw.peakFlops * hw.efficiency;
  // Weight traffic per pass, in multiples of the weights' bytes.
  double traffic = kind == PassKind::F || kind == PassKind::B ? 1.0
                   : kind == PassKind::W                      ? 2.0
                   : kind == PassKind::BW                     ? 3.0
                                                              : 0.0;
  if (traffic == 0)
    return 0;
  // One layer at a time: a profile of this stage with that layer alone.
  StageProfile one = *this;
  one.hasEmbedding = one.hasOutput = false;
  double time = 0;
  // Tokens of the whole microbatch below saturation run as slowly as a
  // saturating pass's matmuls (attention, which grows with the context,
  // is left as it is).
  double saturation = std::max(
      0.0, hw.saturationTokens / double(std::max<int64_t>(microBatch, 1)) -
               double(tokens));
  for (const TransformerShape &shape : layers) {
    one.layers = {shape};
    double flops = one.getPassFlops(kind, tokens, prefix);
    if (saturation > 0)
      flops += saturation *
               (one.getPassFlops(kind, 2, 0) - one.getPassFlops(kind, 1, 0));
    double bytes = traffic * double(getParameterCount(shape) * dtypeBytes);
    time +=
        std::max(flops / rate, bytes / hw.memoryBandwidth) + hw.layerOverhead;
  }
  if (hasOutput) {
    // The LM head: a [vocab, hidden] matmul per token and its weights.
    bool backward = kind == PassKind::B || kind == PassKind::BW;
    double times = (kind == PassKind::BW ? 2.0 : 1.0) +
                   (backward && recompute == RecomputeKind::full ? 1.0 : 0.0);
    double flops = 2.0 * double(hidden) * double(vocab) * double(tokens) *
                   double(microBatch) * times;
    double bytes = traffic * double(hidden * vocab * dtypeBytes);
    time +=
        std::max(flops / rate, bytes / hw.memoryBandwidth) + hw.layerOverhead;
  }
  return time;
}

double StageProfile::getKeyValueBytes(int64_t tokens,
                                      bool withGradients) const {
  double perToken = 0;
  for (const TransformerShape &s : layers)
    perToken += double(s.kvHeads * (s.headDim + s.getValueDim()) * dtypeBytes);
  // A context-parallel rank's own tokens' (ring attention).
  return perToken * (withGradients ? 2.0 : 1.0) * double(tokens) *
         double(microBatch) / double(contextShards);
}

double StageProfile::getActivationBytes(int64_t tokens,
                                        RecomputeKind recompute) const {
  double perToken = 0;
  if (recompute == RecomputeKind::full)
    // The stage's input alone (a stage that embeds looks tokens up again).
    return hasEmbedding ? 0.0
                        : double(hidden * dtypeBytes) * double(tokens) *
                              double(microBatch) / double(sequenceShards) /
                              double(contextShards);
  bool selective = recompute == RecomputeKind::selective;
  for (const TransformerShape &s : layers) {
    // Selective recomputation drops the attention output, its softmax
    // statistics and the MLP's activation.
    // Sequence parallelism keeps the norms' and the column-parallel
    // projections' inputs as the shard's slice of the tokens.
    double kept = 4.0 * double(s.hidden) / double(sequenceShards) +
                  double((s.heads + s.kvHeads) * s.headDim +
                         s.kvHeads * s.getValueDim()) +
                  (selective ? 0.0 : double(s.heads * s.getValueDim())) +
                  double(s.ffn) * ((s.isGated() ? 3.0 : 2.0) -
                                   (selective ? 1.0 : 0.0));
    perToken += kept * double(dtypeBytes) + (selective ? 0.0 : 4.0) *
                                                double(s.heads);
  }
  if (hasOutput)
    perToken += 4.0 * double(vocab) +
                double(hidden * dtypeBytes) / double(sequenceShards);
  // Context parallelism: the rank's share of the tokens, its keys and
  // values included (ring attention passes them around, keeping none).
  return perToken * double(tokens) * double(microBatch) /
         double(contextShards);
}

VocabProfile VocabProfile::get(ModelOp model, int64_t tensorParallel) {
  VocabProfile profile;
  profile.tensorParallel = std::max<int64_t>(1, tensorParallel);
  profile.hidden = model.getHidden();
  profile.seqLen = model.getSeqLen();
  profile.microBatch = model.getMicroBatch();
  profile.dtypeBytes =
      std::max<int64_t>(1, model.getDtype().getIntOrFloatBitWidth() / 8);
  for (Operation &op : model.getBody().front()) {
    if (auto in = dyn_cast<VocabInputOp>(op)) {
      profile.input = true;
      profile.devices = in.getDevices();
      profile.paddedVocab = in.getPaddedVocab();
      profile.positions = in.getPositions().value_or(0);
      profile.inputName = in.getSymName().str();
    } else if (auto out = dyn_cast<VocabOutputOp>(op)) {
      profile.output = true;
      profile.devices = out.getDevices();
      profile.paddedVocab = out.getPaddedVocab();
      profile.algorithm = static_cast<int>(out.getAlgorithm());
      profile.tied = out.getTied();
      profile.outputName = out.getSymName().str();
    }
  }
  return profile;
}

double VocabProfile::getPassFlops(PassKind kind, int64_t tokens) const {
  double t = double(tokens * microBatch);
  double matmul = 2.0 * double(hidden) * double(getShardRows()) * t;
  double elements = double(getShardRows()) * t;
  switch (kind) {
  case PassKind::S:
    // Logits, max, sum of exponentials, softmax; Algorithm 2 also
    // softmax' W.
    return matmul * (algorithm == 2 ? 2.0 : 1.0) + 4.0 * elements;
  case PassKind::S2:
    return 3.0 * elements;
  case PassKind::T:
    // The (rescaled) softmax gradient, then the weight gradient and,
    // except in Algorithm 2, the input gradient.
    return matmul * (algorithm == 2 ? 1.0 : 2.0) + 2.0 * elements;
  case PassKind::IF:
  case PassKind::IB:
    return double(hidden) * t;
  default:
    return 0;
  }
}

int64_t VocabProfile::getShardParams() const {
  int64_t tables = int64_t(output) + int64_t(input && !(tied && output));
  return tables * getShardRows() * hidden;
}

double VocabProfile::getKeptBytes(int64_t tokens) const {
  if (!output)
    return 0;
  double t = double(tokens * microBatch);
  return t * (4.0 * double(getShardRows()) + double(hidden * dtypeBytes));
}

double VocabProfile::getCollectiveBytes(const sched::CollectiveId &id,
                                        int64_t tokens) const {
  double t = double(tokens * microBatch);
  double activation = t * double(hidden * dtypeBytes);
  double statistics = 4.0 * t; // one fp32 per token
  if (id.shard == sched::ShardKind::Input)
    return activation;
  if (id.group == 0)
    return activation;
  int barriers = ::sluice::rt::getBarriers(algorithm);
  bool last = id.group == barriers;
  if (algorithm == 0)
    return last ? activation : statistics;
  // Algorithms 1 and 2 all-reduce the maximum and the sum in group 1;
  // the input gradient's reduce is the last group (Algorithm 2: the same).
  return (id.group == 1 ? 2.0 * statistics : 0.0) + (last ? activation : 0.0);
}

double VocabProfile::getShardGroupBytes(const sched::CollectiveId &id,
                                        int64_t tokens) const {
  bool broadcast = id.shard == sched::ShardKind::Input ? id.group == 1
                                                       : id.group == 0;
  if (tensorParallel < 2 || broadcast)
    return 0;
  return getCollectiveBytes(id, tokens);
}

