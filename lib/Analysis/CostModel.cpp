//===- CostModel.cpp - How long passes take, how much they keep -----------===//

#include "sluice/Analysis/CostModel.h"

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

// Peak dense tensor-core throughput from the vendors' data sheets; the
// efficiency is the fraction Megatron-style training reaches on a whole
// transformer layer (the vocabulary-parallelism paper's 1F1B baselines run
// at 40-50% MFU on A100). Links are the inter-node network a pipeline
// crosses: 200 Gb/s HDR InfiniBand for A100 clusters, 400 Gb/s NDR for
// H100, and the 25 Gb/s network of AWS p3.16xlarge V100 nodes that
// TeraPipe's evaluation used.
// Memory bandwidth: the data sheets' HBM figures (A100 SXM 80 GB, H100
// SXM, V100 SXM2). The per-layer overhead is about a dozen kernel launches
// of a few microseconds each.
// Saturation: 256 tokens on a V100 (TeraPipe, Figure 3), proportionally
// more on a GPU with more FLOP/s per byte of bandwidth.
// Nodes: 8 GPUs (DGX/HGX A100 and H100, p3.16xlarge) joined by NVLink,
// per GPU and direction 12 x 25 GB/s (A100, NVLink 3), 18 x 25 GB/s
// (H100, NVLink 4), 6 x 25 GB/s (V100, NVLink 2); a few microseconds a
// message.
// H200: the H100's Hopper tensor cores and NVLink 4 with 4.8 TB/s of HBM3e
// (141 GB; 140 GiB as the device reports it), on the same NDR network.
// Memory: what each GPU offers a process, GiB.
static const HardwareProfile kProfiles[] = {
    {"a100", 312e12, 0.50, 25e9, 10e-6, 2.039e12, 20e-6, 256, 8, 300e9, 5e-6,
     80},
    {"h100", 989e12, 0.45, 50e9, 8e-6, 3.35e12, 15e-6, 512, 8, 450e9, 5e-6, 80},
    {"h200", 989e12, 0.45, 50e9, 8e-6, 4.8e12, 15e-6, 512, 8, 450e9, 5e-6, 140},
    {"v100", 125e12, 0.40, 3.125e9, 30e-6, 0.9e12, 25e-6, 256, 8, 150e9, 8e-6,
     32},
};

llvm::StringRef mlir::sluice::stringifyLinkKind(LinkKind link) {
  return link == LinkKind::node ? "node" : "network";
}

/// Whether tensor-parallel shards split the vocabulary layers' tables by
/// rows (the runtime's splitsVocabulary, both ends alike): not when
/// Vocabulary Parallelism's shards hold them.
static bool splitsVocabulary(ModelOp model) {
  return model.getBody().getOps<VocabInputOp>().empty();
}

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

llvm::ArrayRef<HardwareProfile> mlir::sluice::getHardwareProfiles() {
  return kProfiles;
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
    if (auto e = dyn_cast<EmbeddingOp>(layer); e && split) {
      profile.params += (shardRows(e.getVocab()) + e.getPositions().value_or(0)) *
                        model.getHidden();
      profile.hasEmbedding = true;
      continue;
    }
    if (auto o = dyn_cast<OutputLayerOp>(layer); o && split) {
      profile.vocab = shardRows(o.getVocab());
      profile.params +=
          getParameterCount(layer) - (o.getVocab() - profile.vocab) *
                                         model.getHidden();
      profile.hasOutput = true;
      continue;
    }
    profile.params += getParameterCount(layer);
    if (auto e = dyn_cast<EmbeddingOp>(layer))
      profile.hasEmbedding = true;
    else if (auto o = dyn_cast<OutputLayerOp>(layer)) {
      profile.hasOutput = true;
      profile.vocab = o.getVocab();
    }
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
    attention += 4.0 * double(shape.heads * shape.headDim) *
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
    perToken += 2.0 * double(s.kvHeads * s.headDim * dtypeBytes);
  return perToken * (withGradients ? 2.0 : 1.0) * double(tokens) *
         double(microBatch);
}

double StageProfile::getActivationBytes(int64_t tokens) const {
  double perToken = 0;
  if (recompute == RecomputeKind::full)
    // The stage's input alone (a stage that embeds looks tokens up again).
    return hasEmbedding ? 0.0
                        : double(hidden * dtypeBytes) * double(tokens) *
                              double(microBatch) / double(sequenceShards);
  bool selective = recompute == RecomputeKind::selective;
  for (const TransformerShape &s : layers) {
    // Selective recomputation drops the attention output, its softmax
    // statistics and the MLP's activation.
    // Sequence parallelism keeps the norms' and the column-parallel
    // projections' inputs as the shard's slice of the tokens.
    double kept = 4.0 * double(s.hidden) / double(sequenceShards) +
                  double((s.heads + 2 * s.kvHeads) * s.headDim) +
                  (selective ? 0.0 : double(s.heads * s.headDim)) +
                  double(s.ffn) * ((s.isGated() ? 3.0 : 2.0) -
                                   (selective ? 1.0 : 0.0));
    perToken += kept * double(dtypeBytes) + (selective ? 0.0 : 4.0) *
                                                double(s.heads);
  }
  if (hasOutput)
    perToken += 4.0 * double(vocab) +
                double(hidden * dtypeBytes) / double(sequenceShards);
  return perToken * double(tokens) * double(microBatch);
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

/// One `key=value` override of a hardware profile (`h100:key=value,...`):
/// the cluster's own node size, links and efficiency. False with `error`
/// naming the entry where it is not one.
static bool applyOverride(HardwareProfile &hw, llvm::StringRef entry,
                          std::string &error) {
  auto [key, text] = entry.split('=');
  key = key.trim();
  text = text.trim();
  double value;
  if (text.getAsDouble(value) || !std::isfinite(value) || value <= 0) {
    error = llvm::formatv("'{0}' of --costs {1} must be a positive number, "
                          "got '{2}'",
                          key, hw.name, text)
                .str();
    return false;
  }
  if (key == "gpus-per-node") {
    if (value != std::floor(value)) {
      error = llvm::formatv("'gpus-per-node' of --costs {0} must be a whole "
                            "number, got '{1}'",
                            hw.name, text)
                  .str();
      return false;
    }
    hw.nodeGpus = int64_t(value);
  } else if (key == "node-bandwidth") {
    hw.nodeBandwidth = value * 1e9;
  } else if (key == "network-bandwidth") {
    hw.linkBandwidth = value * 1e9;
  } else if (key == "node-latency") {
    hw.nodeLatency = value * 1e-6;
  } else if (key == "network-latency") {
    hw.linkLatency = value * 1e-6;
  } else if (key == "efficiency") {
    if (value > 1) {
      error = llvm::formatv("'efficiency' of --costs {0} is a fraction of the "
                            "peak, at most 1, got '{1}'",
                            hw.name, text)
                  .str();
      return false;
    }
    hw.efficiency = value;
  } else if (key == "memory") {
    hw.memoryGiB = value;
  } else {
    error = llvm::formatv("unknown setting '{0}' of --costs {1} (expected "
                          "gpus-per-node, node-bandwidth, network-bandwidth "
                          "(GB/s), node-latency, network-latency (us), "
                          "efficiency, memory (GiB) or calibrate (a "
                          "sluice-run --profile file))",
                          key, hw.name)
                .str();
    return false;
  }
  return true;
}

/// `NAME`, `NAMExG` or either with `:key=value,...` overrides, of a
/// hardware profile: with xG, G GPUs share each layer (tensor parallelism,
/// as in TeraPipe's Table 1 #Op column), together G times the FLOP/s and
/// memory bandwidth; their communication is not modelled. Nullopt with
/// `error` empty where the spec names no profile, set where it names one
/// badly.
static std::optional<std::pair<HardwareProfile, unsigned>>
parseHardware(llvm::StringRef spec, std::string &error) {
  auto [head, overrides] = spec.split(':');
  for (const HardwareProfile &profile : kProfiles) {
    if (!head.starts_with(profile.name))
      continue;
    llvm::StringRef rest = head.drop_front(profile.name.size());
    unsigned gpus = 1;
    if (!rest.empty() &&
        (!rest.consume_front("x") || rest.getAsInteger(10, gpus) || gpus < 1))
      continue;
    HardwareProfile scaled = profile;
    llvm::SmallVector<llvm::StringRef> entries;
    overrides.split(entries, ',', -1, /*KeepEmpty=*/false);
    for (llvm::StringRef entry : entries)
      if (!entry.trim().starts_with("calibrate=") &&
          !applyOverride(scaled, entry, error))
        return std::nullopt;
    scaled.peakFlops *= gpus;
    scaled.memoryBandwidth *= gpus;
    return std::make_pair(scaled, gpus);
  }
  return std::nullopt;
}

bool CostModel::readProfile(llvm::StringRef path, std::string &error) {
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer) {
    error = "cannot read cost profile '" + path.str() + "'";
    return false;
  }
  std::string deep;
  if (!::sluice::checkJsonDepth((*buffer)->getBuffer().str(), deep)) {
    error = "cost profile '" + path.str() + "' " + deep;
    return false;
  }
  llvm::Expected<llvm::json::Value> json =
      llvm::json::parse((*buffer)->getBuffer());
  const llvm::json::Object *root = json ? json->getAsObject() : nullptr;
  const llvm::json::Object *stages = root ? root->getObject("stages") : nullptr;
  if (!json)
    llvm::consumeError(json.takeError());
  if (!stages || root->getString("format") != "sluice-profile") {
    error = "'" + path.str() + "' is not a sluice-run --profile file";
    return false;
  }
  kind = Kind::Measured;
  if (std::optional<int64_t> tp = root->getInteger("tensor_parallel"))
    measuredTensorParallel = std::max<int64_t>(1, *tp);
  if (const llvm::json::Object *optimizer =
          root->getObject("optimizer_seconds"))
    for (const auto &[device, seconds] : *optimizer) {
      int64_t index;
      std::optional<double> value = seconds.getAsNumber();
      if (!llvm::StringRef(device).getAsInteger(10, index) && value &&
          *value >= 0)
        measuredOptimizer[index] = *value;
    }
  for (const auto &[stage, passes] : *stages) {
    const llvm::json::Object *byPass = passes.getAsObject();
    if (!byPass)
      continue;
    if (std::optional<int64_t> layers = byPass->getInteger("layers"))
      measuredLayers[stage.str()] = *layers;
    for (const auto &[pass, entry] : *byPass)
      if (const llvm::json::Object *e = entry.getAsObject())
        if (std::optional<double> spt = e->getNumber("seconds_per_token"))
          measured[stage.str()][pass.str()] = *spt;
    if (const llvm::json::Array *samples = byPass->getArray("slice_samples"))
      for (const llvm::json::Value &sample : *samples)
        if (const llvm::json::Array *triple = sample.getAsArray();
            triple && triple->size() == 3) {
          std::optional<double> i = (*triple)[0].getAsNumber(),
                                j = (*triple)[1].getAsNumber(),
                                t = (*triple)[2].getAsNumber();
          if (i && j && t)
            sliceSamples[stage.str()].push_back({*i, *j, *t});
        }
  }
  return true;
}

bool CostModel::readExplicitCosts(llvm::StringRef spec, std::string &error) {
  kind = Kind::Explicit;
  bool haveBW = false;
  llvm::SmallVector<llvm::StringRef> entries;
  spec.split(entries, ',', -1, /*KeepEmpty=*/false);
  for (llvm::StringRef entry : entries) {
    auto [key, text] = entry.split('=');
    key = key.trim();
    text = text.trim();
    double value;
    if (text.getAsDouble(value) || !std::isfinite(value)) {
      error = llvm::formatv("cost '{0}' must be a number, got '{1}'", key, text)
                  .str();
      return false;
    }
    if (value < 0) {
      error =
          llvm::formatv("cost '{0}' must be non-negative, got {1}", key, text)
              .str();
      return false;
    }
    if (key == "comm") {
      comm = value;
      continue;
    }
    std::optional<PassKind> pass = symbolizePassKind(key);
    if (!pass) {
      error = llvm::formatv("unknown cost '{0}' (expected F, B, W, BW, S, T, "
                            "IF, IB or comm)",
                            key)
                  .str();
      return false;
    }
    perPass[size_t(*pass)] = value;
    haveBW |= *pass == PassKind::BW;
  }
  if (!haveBW)
    perPass[size_t(PassKind::BW)] =
        perPass[size_t(PassKind::B)] + perPass[size_t(PassKind::W)];
  return true;
}

std::optional<CostModel> CostModel::parse(llvm::StringRef spec,
                                          std::string &error) {
  CostModel model;
  model.spec = spec.str();
  spec = spec.trim();
  if (spec == "unit") {
    model.kind = Kind::Unit;
    model.perPass[size_t(PassKind::F)] = 1;
    model.perPass[size_t(PassKind::B)] = 1;
    model.perPass[size_t(PassKind::W)] = 1;
    model.perPass[size_t(PassKind::BW)] = 2;
    return model;
  }
  if (auto hardware = parseHardware(spec, error)) {
    model.kind = Kind::Analytic;
    model.hardware = hardware->first;
    model.deviceGpus = hardware->second;
    llvm::SmallVector<llvm::StringRef> entries;
    spec.split(':').second.split(entries, ',', -1, /*KeepEmpty=*/false);
    for (llvm::StringRef entry : entries) {
      llvm::StringRef path = entry.trim();
      if (!path.consume_front("calibrate="))
        continue;
      CostModel profile;
      if (!profile.readProfile(path.trim(), error))
        return std::nullopt;
      model.calibrationPath = path.trim().str();
      model.calibrationTensorParallel = profile.measuredTensorParallel;
      model.calibrationSecondsPerToken = 0;
      for (const auto &[stage, passes] : profile.measured)
        for (const auto &[pass, secondsPerToken] : passes)
          model.calibrationSecondsPerToken += secondsPerToken;
      if (!(model.calibrationSecondsPerToken > 0)) {
        error = "cost profile '" + model.calibrationPath +
                "' times no pass: nothing to calibrate --costs " +
                spec.split(':').first.str() + " with";
        return std::nullopt;
      }
    }
    return model;
  }
  if (!error.empty())
    return std::nullopt;
  if (spec.contains(':')) {
    llvm::SmallVector<llvm::StringRef> names;
    for (const HardwareProfile &profile : kProfiles)
      names.push_back(profile.name);
    error = llvm::formatv("unknown GPU '{0}' in --costs {1} (settings after "
                          "':' override one of {2})",
                          spec.split(':').first, spec, llvm::join(names, ", "))
                .str();
    return std::nullopt;
  }
  // A profile from `sluice-run --profile` (docs/sluice-run.md).
  if (spec.ends_with(".json")) {
    if (!model.readProfile(spec, error))
      return std::nullopt;
    return model;
  }
  if (!spec.contains('=')) {
    llvm::SmallVector<llvm::StringRef> names{"unit"};
    for (const HardwareProfile &profile : kProfiles)
      names.push_back(profile.name);
    error = llvm::formatv("unknown cost model '{0}' (expected {1}, or costs "
                          "such as F=1,B=1,W=1,S=0.2,T=0.2,comm=0.1)",
                          spec, llvm::join(names, ", "))
                .str();
    return std::nullopt;
  }
  if (!model.readExplicitCosts(spec, error))
    return std::nullopt;
  return model;
}

double CostModel::getComputeTime(const StageProfile &stage, PassKind pass,
                                 int64_t tokens, int64_t prefix, int chunks,
                                 int slices) const {
  if (kind == Kind::Measured)
    return getMeasured(stage.name, pass) * double(tokens * stage.microBatch);
  if (kind != Kind::Analytic)
    return perPass[size_t(pass)] / double(chunks * slices);
  return stage.getPassTime(pass, tokens, prefix, *getHardware());
}

std::optional<double> CostModel::calibrateEfficiency(ModelOp model,
                                                     std::string &error) const {
  if (calibrationPath.empty() || !hardware)
    return std::nullopt;
  // The whole model as one stage on one of the profile's shards: the
  // passes' time summed layer by layer does not depend on where the
  // stages are cut (or whether they are yet), and a sharded vocabulary's
  // passes compute the same output layer as the last stage's (their
  // softmax exchange aside).
  StageProfile whole =
      StageProfile::getWholeModel(model, calibrationTensorParallel);
  whole.hasEmbedding = true;
  int tp = int(calibrationTensorParallel);
  model.walk([&](Operation *op) {
    if (auto head = dyn_cast<OutputLayerOp>(op))
      whole.vocab = tp > 1 && splitsVocabulary(model)
                        ? ::sluice::rt::getShardVocabRows(head.getVocab(), 0, tp)
                              .second
                        : head.getVocab();
    else if (auto head = dyn_cast<VocabOutputOp>(op))
      whole.vocab =
          ::sluice::rt::getShardVocabRows(head.getVocab(), 0, tp).second;
  });
  whole.hasOutput = whole.vocab > 0;
  if (whole.layers.empty() && !whole.hasOutput) {
    error = "cost profile '" + calibrationPath +
            "' cannot calibrate a model without layers";
    return std::nullopt;
  }
  double tokens = double(whole.seqLen * whole.microBatch);
  auto secondsPerToken = [&](double efficiency) {
    HardwareProfile hw = *hardware;
    hw.efficiency = efficiency;
    double time = 0;
    for (PassKind pass : {PassKind::F, PassKind::B, PassKind::W})
      time += whole.getPassTime(pass, whole.seqLen, 0, hw);
    return time / tokens;
  };
  double measuredTime = calibrationSecondsPerToken;
  if (secondsPerToken(1.0) > measuredTime) {
    error = llvm::formatv("cost profile '{0}' ran this model's passes in "
                          "{1:e3} s a token, faster than {2} can at its "
                          "peak ({3:e3} s): a profile of another GPU or "
                          "another model",
                          calibrationPath, measuredTime, hardware->name,
                          secondsPerToken(1.0))
                .str();
    return std::nullopt;
  }
  // The time falls as the efficiency rises: bisect on a log scale.
  double low = 1e-9, high = 1.0;
  for (int i = 0; i < 200 && high - low > 1e-12 * high; ++i) {
    double mid = std::sqrt(low * high);
    (secondsPerToken(mid) > measuredTime ? low : high) = mid;
  }
  return high;
}

const std::vector<std::array<double, 3>> &
CostModel::getSliceSamples(const std::string &stage) const {
  static const std::vector<std::array<double, 3>> none;
  auto it = sliceSamples.find(stage);
  return it == sliceSamples.end() ? none : it->second;
}

double CostModel::getMeasured(const std::string &stage, PassKind pass) const {
  auto it = measured.find(stage);
  if (it == measured.end())
    return -1;
  auto time = [&](llvm::StringRef name) {
    auto p = it->second.find(name.str());
    return p == it->second.end() ? -1.0 : p->second;
  };
  double direct = time(stringifyPassKind(pass));
  if (direct >= 0)
    return direct;
  // A profile of the other backward form: BW = B + W, B = W = BW / 2.
  if (pass == PassKind::BW && time("B") >= 0 && time("W") >= 0)
    return time("B") + time("W");
  if ((pass == PassKind::B || pass == PassKind::W) && time("BW") >= 0)
    return time("BW") / 2;
  return pass == PassKind::F || pass == PassKind::B || pass == PassKind::W ||
                 pass == PassKind::BW
             ? -1
             : 0;
}

std::string CostModel::checkCoverage(llvm::ArrayRef<StageProfile> stages,
                                     llvm::ArrayRef<PassKind> passes) const {
  if (kind != Kind::Measured)
    return "";
  for (const StageProfile &stage : stages) {
    int64_t layers =
        int64_t(stage.layers.size()) + stage.hasEmbedding + stage.hasOutput;
    auto measuredAt = measuredLayers.find(stage.name);
    if (measuredAt != measuredLayers.end() && measuredAt->second != layers)
      return "the profile '" + spec + "' measured stage " + stage.name +
             " with " + std::to_string(measuredAt->second) +
             " layers, this partitioning gives it " + std::to_string(layers);
    for (PassKind pass : passes)
      if (getMeasured(stage.name, pass) < 0)
        return "the profile '" + spec + "' has no time for pass " +
               stringifyPassKind(pass).str() + " of stage " + stage.name +
               " (it was measured on another partitioning)";
  }
  return "";
}

double CostModel::getTransferTime(int64_t bytes, LinkKind link) const {
  if (kind == Kind::Measured)
    return 0;
  if (kind != Kind::Analytic)
    return comm;
  if (link == LinkKind::node)
    return hardware->nodeLatency + double(bytes) / hardware->nodeBandwidth;
  return hardware->linkLatency + double(bytes) / hardware->linkBandwidth;
}

int64_t CostModel::getNodeDevices() const {
  if (kind != Kind::Analytic)
    return 1;
  return std::max<int64_t>(1, hardware->nodeGpus / deviceGpus);
}

LinkKind CostModel::getGroupLink(int64_t first, int64_t stride, int64_t count,
                                 int64_t groupStride, int64_t groups) const {
  int64_t node = getNodeDevices();
  // Ranks grow along a group: it fits in a node when its ends do.
  for (int64_t g = 0; g < groups; ++g) {
    int64_t begin = first + g * groupStride;
    if (begin / node != (begin + (count - 1) * stride) / node)
      return LinkKind::network;
  }
  return LinkKind::node;
}

double CostModel::getVocabComputeTime(const VocabProfile &vocab, PassKind pass,
                                      int64_t tokens, int slices) const {
  switch (kind) {
  case Kind::Measured: {
    bool input = pass == PassKind::IF || pass == PassKind::IB;
    double spt = getMeasured(input ? vocab.inputName : vocab.outputName, pass);
    return std::max(spt, 0.0) * double(tokens * vocab.microBatch);
  }
  case Kind::Analytic:
    return vocab.getPassFlops(pass, tokens) /
           (hardware->peakFlops * hardware->efficiency);
  default:
    // Per device per microbatch, like the stages' passes; a shard is one
    // per device whatever its chunks.
    return perPass[size_t(pass)] / double(slices);
  }
}

double CostModel::getCollectiveTime(double bytes, bool allReduce,
                                    int64_t devices, LinkKind link) const {
  if (kind == Kind::Measured || devices < 2)
    return 0;
  if (kind != Kind::Analytic)
    return comm;
  // Ring algorithms: 2 (p - 1) steps of bytes / p for an all-reduce,
  // p - 1 for a (pipelined) broadcast or reduce.
  double steps = double(devices - 1) * (allReduce ? 2.0 : 1.0);
  bool node = link == LinkKind::node;
  double latency = node ? hardware->nodeLatency : hardware->linkLatency;
  double bandwidth = node ? hardware->nodeBandwidth : hardware->linkBandwidth;
  return steps * latency + steps * bytes / double(devices) / bandwidth;
}

std::vector<int64_t> mlir::sluice::getUniformSlices(int64_t seqLen,
                                                    int64_t slices) {
  std::vector<int64_t> lengths(slices, seqLen / slices);
  for (int64_t i = 0; i < seqLen % slices; ++i)
    ++lengths[i];
  return lengths;
}

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
  for (size_t s = 0; s < profiles.size(); ++s)
    for (size_t kind = 0; kind < kKinds; ++kind)
      for (int slice = 0; slice < k; ++slice) {
        size_t at = (s * kKinds + kind) * k + slice;
        compute[at] =
            costs.getComputeTime(profiles[s], PassKind(kind), lengths[slice],
                                 prefixes[slice], pipeline.chunks, k);
        if (tp < 2 || costs.getKind() != CostModel::Kind::Analytic)
          continue;
        // Every collective moves a tensor per token: scaled to the slice.
        // A B that recomputes the forward runs the forward's again.
        const StageProfile &stage = profiles[s];
        bool full = stage.recompute == RecomputeKind::full;
        double scale = double(lengths[slice]) / double(stage.seqLen);
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
}

double PipelineCosts::getTensorParallelTime(const sched::Work &work) const {
  if (sched::isVocabPass(work.kind))
    return 0;
  return tensorParallel[(size_t(work.stage) * kKinds + size_t(work.kind)) *
                            pipeline.slices +
                        work.slice];
}

double PipelineCosts::getGradientSyncTime(llvm::StringRef name) const {
  auto it = stageParams.find(name);
  if (mesh.dp < 2 || it == stageParams.end() || profiles.empty())
    return 0;
  // The gradients in the model's type, averaged over the replicas: a ring
  // all-reduce, or under ZeRO-1 its reduce-scatter half (each replica
  // gets the sum of its part).
  double bytes = double(it->second * profiles.front().dtypeBytes);
  return costs.getCollectiveTime(bytes, /*allReduce=*/mesh.zero == 0, mesh.dp,
                                 dataLink);
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
  return links;
}

double PipelineCosts::getCollectiveTime(const sched::CollectiveId &id) const {
  bool allReduce = id.shard == sched::ShardKind::Output && id.group > 0 &&
                   !(vocab.algorithm == 0 && id.group == 3) &&
                   !(vocab.algorithm == 1 && id.group == 2);
  // Over pp x tp: the pipeline's collective, then the device's shards'
  // all-reduce of what it reduced (runtime/Vocab.cpp).
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

int64_t PipelineCosts::getParameterBytes(int device) const {
  int64_t params = getDeviceParameters(device);
  if (mesh.zero == 1 && mesh.dp > 1)
    // The 16-bit weights and gradients whole, the fp32 master weights and
    // both moments one replica's part (ceil).
    return params * (kTrainingBytesPerParameter - kOptimizerBytesPerParameter) +
           (params + mesh.dp - 1) / mesh.dp * kOptimizerBytesPerParameter;
  return params * kTrainingBytesPerParameter;
}

int64_t PipelineCosts::getDeviceParameters(int device) const {
  int64_t params = 0;
  for (size_t s = 0; s < profiles.size(); ++s)
    if (pipeline.getDevice(s) == device)
      params += profiles[s].params;
  // Every device holds its rows of the vocabulary shards; the input
  // shard's root also the positions.
  params += vocab.getShardParams();
  if (vocab.input && device == pipeline.getInputRoot())
    params += vocab.positions * vocab.hidden;
  return params;
}

/// The parameters whose optimizer state a replica of `device` holds.
static int64_t getOptimizerShare(int64_t params, const MeshShape &mesh) {
  return mesh.zero == 1 && mesh.dp > 1 ? (params + mesh.dp - 1) / mesh.dp
                                       : params;
}

int64_t PipelineCosts::getOptimizerBytes(int device) const {
  return getOptimizerShare(getDeviceParameters(device), mesh) *
         kOptimizerBytesPerParameter;
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
  // 16-bit weights (the ring all-reduce's other half).
  double bytes = double(getOptimizerShare(params, mesh)) *
                 double(7 * 4 + (dtype < 4 ? dtype : 0));
  double time = bytes / hw->memoryBandwidth;
  if (mesh.zero == 1 && mesh.dp > 1)
    time += costs.getCollectiveTime(double(params * dtype),
                                    /*allReduce=*/false, mesh.dp, dataLink);
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
