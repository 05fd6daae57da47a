//===- CostModel.cpp - How long passes take, how much they keep -----------===//

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
// Memory: what the device reports (nvidia-smi's memory.total), GiB -- the
// H100 SXM's 81559 MiB and the H200's 143771 MiB as this project's GPU
// runs logged them (bench/results/h100-*, h200-*), the A100 80 GB's 81920
// and the V100 32 GB's 32510 MiB; the search plans to a headroom below it
// (--memory-headroom).
static const HardwareProfile kProfiles[] = {
    {"a100", 312e12, 0.50, 25e9, 10e-6, 2.039e12, 20e-6, 256, 8, 300e9, 5e-6,
     81920.0 / 1024},
    {"h100", 989e12, 0.45, 50e9, 8e-6, 3.35e12, 15e-6, 512, 8, 450e9, 5e-6,
     81559.0 / 1024},
    {"h200", 989e12, 0.45, 50e9, 8e-6, 4.8e12, 15e-6, 512, 8, 450e9, 5e-6,
     143771.0 / 1024},
    {"v100", 125e12, 0.40, 3.125e9, 30e-6, 0.9e12, 25e-6, 256, 8, 150e9, 8e-6,
     32510.0 / 1024},
};

llvm::StringRef mlir::sluice::stringifyLinkKind(LinkKind link) {
  return link == LinkKind::node ? "node" : "network";
}

llvm::ArrayRef<HardwareProfile> mlir::sluice::getHardwareProfiles() {
  return kProfiles;
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
    if (key == "a2a") {
      allToAll = value;
      continue;
    }
    std::optional<PassKind> pass = symbolizePassKind(key);
    if (!pass) {
      error = llvm::formatv("unknown cost '{0}' (expected F, B, W, BW, S, T, "
                            "IF, IB, comm or a2a)",
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

