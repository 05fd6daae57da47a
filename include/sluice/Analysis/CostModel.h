//===- CostModel.h - How long passes take, how much they keep ---*- C++ -*-===//
//
// Three cost models, chosen by a spec string (`--costs`):
//
//  * `unit`: F = B = W = 1 and BW = 2 per device per microbatch, divided
//    evenly over the device's chunks and the microbatch's token slices;
//    vocabulary and input-layer passes and transfers cost 0. This is the
//    model under which the papers' bubble and memory formulas are exact.
//  * explicit, `F=1,B=1,W=1,S=0.2,T=0.2,comm=0.1`: the same scaling with
//    the given per-device-per-microbatch costs (BW defaults to B + W).
//  * analytic, `a100`, `h100`, `h200`, `v100` (`v100x8`: a cell of 8 GPUs
//  splitting
//    every layer, tensor-parallel, as one device of 8x the FLOP/s and
//    memory bandwidth -- their all-reduces not modelled): FLOPs of the stage's
//    layers for the slice's tokens and prefix (LayerCost.h) over the hardware's
//    achievable FLOP/s; a transfer costs latency + bytes / bandwidth. Times are
//    in seconds. The GPUs sit in nodes of `nodeGpus`; the pp x tp x dp ranks
//    fill them in Megatron-LM's order (tensor-parallel index fastest), and a
//    collective runs on the intra-node link when its group fits in a node,
//    on the network otherwise (PipelineCosts, MeshShape). Tensor-parallel
//    all-reduces lengthen the passes that issue them; data-parallel gradient
//    all-reduces run beside them (the simulator). A cluster unlike the
//    preset's node is the preset with overrides after a colon:
//    `h100:gpus-per-node=4,network-bandwidth=25,network-latency=12` --
//    bandwidths in GB/s per GPU and direction, latencies in microseconds,
//    `efficiency` (of the peak), `memory` (GiB per GPU).
//  * measured, a `.json` file written by `sluice-run --profile`: seconds per
//    token of each pass of each stage (by stage name); transfers free.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_ANALYSIS_COSTMODEL_H
#define SLUICE_ANALYSIS_COSTMODEL_H

#include "sluice/Analysis/LayerCost.h"
#include "sluice/PlanFormat/TrainingState.h"
#include "sluice/Schedule/Pipeline.h"

#include "llvm/ADT/StringRef.h"

#include <array>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mlir::sluice {

/// A GPU and its pipeline link, as the analytic model sees it.
struct HardwareProfile {
  llvm::StringLiteral name;
  /// Dense bf16/fp16 tensor-core peak, FLOP/s.
  double peakFlops;
  /// Fraction of the peak a well-tuned transformer layer reaches.
  double efficiency;
  /// Point-to-point bandwidth between pipeline neighbours, bytes/s.
  double linkBandwidth;
  /// Per-message latency, seconds.
  double linkLatency;
  /// Device memory bandwidth, bytes/s: a pass cannot stream its layer's
  /// weights faster (why short slices under-use a GPU, TeraPipe Figure 3).
  double memoryBandwidth;
  /// Fixed time of one layer's pass: kernel launches and synchronisation.
  double layerOverhead;
  /// A layer's matmuls over fewer tokens (of the whole microbatch) than
  /// this do not fill the GPU and take as long as this many: TeraPipe's
  /// Figure 3 measures a flat forward time up to 256 tokens on a V100.
  double saturationTokens;
  /// GPUs per node and the link between them (NVLink): bandwidth per GPU
  /// and direction, bytes/s, and per-message latency, seconds.
  int64_t nodeGpus;
  double nodeBandwidth;
  double nodeLatency;
  /// Memory per GPU, GiB (what --search plans for unless told).
  double memoryGiB;
};

/// Which link a collective or transfer crosses: the intra-node one (NVLink)
/// when every group of it fits in one node, the network otherwise.
enum class LinkKind { node, network };
llvm::StringRef stringifyLinkKind(LinkKind link);

/// How the pipeline's devices are sharded and replicated: each of its
/// devices is `tp` tensor-parallel shards, the whole pipeline `dp`
/// data-parallel replicas, on pp x tp x dp ranks numbered as Megatron-LM
/// numbers them (docs/parallelism.md): rank d*tp*dp + r*tp + t is shard t
/// of replica r of device d.
struct MeshShape {
  int64_t tp = 1;
  int64_t dp = 1;
  /// ZeRO stage (TrainingState.h): 1 shards Adam's moments and the summed
  /// gradients over the dp replicas (Megatron-LM's distributed optimizer),
  /// 2 the gradient accumulator too, 3 the weights too.
  int64_t zero = 0;
  /// Megatron-LM's sequence parallelism: between the tensor-parallel
  /// regions a shard holds 1/tp of the tokens (all-gathers and
  /// reduce-scatters instead of all-reduces).
  bool sequenceParallel = false;
  /// Expert parallelism: each sparse layer's experts split over ep
  /// consecutive replicas (docs/moe.md).
  int64_t ep = 1;
  /// ZeRO-3: when a layer's gathered weights are freed.
  rt::Reshard reshard = rt::Reshard::EveryPass;
  /// Context parallelism (docs/parallelism.md): each microbatch's tokens
  /// split over cp consecutive replicas of the dp (which counts them:
  /// sluice.program's dp x cp), attention's keys and values passed around
  /// them (ring attention) in F and B with their gradients in B, as the
  /// runtime runs it.
  int64_t cp = 1;
};

llvm::ArrayRef<HardwareProfile> getHardwareProfiles();

/// The activations a stage or a vocabulary shard passes: a microbatch of
/// `microBatch` sequences of `seqLen` tokens, `hidden` wide, elements of
/// `dtypeBytes`.
struct ActivationShape {
  int64_t hidden = 0;
  int64_t seqLen = 0;
  int64_t microBatch = 1;
  int64_t dtypeBytes = 2;
};

/// What one pipeline stage holds, as far as costs are concerned.
struct StageProfile : ActivationShape {
  std::string name;
  std::vector<TransformerShape> layers;
  bool hasEmbedding = false;
  bool hasOutput = false;
  int64_t vocab = 0;
  /// Parameters the stage holds (a tied table counted on both ends).
  int64_t params = 0;
  /// Of those, the largest embedding or output layer's (0 without).
  int64_t vocabLayerParams = 0;
  /// What B recomputes (the stage's `recompute`): its FLOPs are added to
  /// B's and BW's, its tensors left out of the activation bytes.
  RecomputeKind recompute = RecomputeKind::none;

  /// The profile of one of `tp` tensor-parallel shards of `stage`
  /// (sluice-shard-tensors' split: heads, key/value heads -- one replicated
  /// head when fewer than shards -- and the feed-forward width divided;
  /// norms, row-parallel biases, embedding and output layer whole).
  static StageProfile get(StageOp stage, ModelOp model, int64_t tp = 1);
  /// Every transformer layer of `model` (partitioned into stages or not)
  /// as one stage named "model", on one of `tp` shards; no embedding or
  /// output layer.
  static StageProfile getWholeModel(ModelOp model, int64_t tp = 1);

  /// Forward FLOPs of `tokens` tokens after `prefix` tokens of context, for
  /// the whole microbatch.
  double getForwardFlops(int64_t tokens, int64_t prefix) const;
  /// FLOPs of a pass: B is the input gradient (the forward's matmuls once
  /// more, attention twice), W the weight gradient (the matmuls once), BW
  /// both. Embedding lookups and their scatter are not FLOPs.
  double getPassFlops(PassKind kind, int64_t tokens, int64_t prefix) const;
  /// Time of a pass on `hw`, layer by layer: the longer of its FLOPs at the
  /// achievable rate and its weight traffic at memory bandwidth (F and B
  /// read the weights, W reads them and updates fp32 gradients), plus the
  /// layer's fixed overhead.
  double getPassTime(PassKind kind, int64_t tokens, int64_t prefix,
                     const HardwareProfile &hw) const;
  /// Bytes kept from F until B for `tokens` tokens of the microbatch:
  /// what autograd saves without recomputation, with flash attention (no
  /// s x s scores): norm and projection inputs, Q, K, V, the attention
  /// output, the MLP's pre- and post-activation tensors, the softmax
  /// statistics in fp32, and the output layer's fp32 logits.
  double getActivationBytes(int64_t tokens) const {
    return getActivationBytes(tokens, recompute);
  }
  /// The same were the stage to recompute `as` instead.
  double getActivationBytes(int64_t tokens, RecomputeKind as) const;
  /// Of those, the keys and values (`tokens` of them). A token-sliced
  /// microbatch keeps the whole sequence's keys and values, and gradients
  /// for them that later slices' backward passes accumulate into, from its
  /// first slice's F to its last backward (the runtime's key/value state).
  double getKeyValueBytes(int64_t tokens, bool withGradients) const;
  /// With sequence parallelism, the tensor-parallel shards each holding
  /// 1/sequenceShards of the tokens between the layers' tensor-parallel
  /// regions: of the activations kept and sent, only that slice.
  int64_t sequenceShards = 1;
  /// With context parallelism, the ranks each microbatch's tokens are
  /// split over: each holds and sends 1/contextShards of them, its keys
  /// and values included (ring attention).
  int64_t contextShards = 1;
  /// Bytes of the activation (or gradient) a stage (a shard of it) sends
  /// per slice.
  int64_t getMessageBytes(int64_t tokens) const {
    return tokens * microBatch * hidden * dtypeBytes / sequenceShards /
           contextShards;
  }
};

/// The vocabulary shards of a model partitioned with Vocabulary
/// Parallelism, as far as costs are concerned: every device holds
/// `paddedVocab / devices` rows of each.
struct VocabProfile : ActivationShape {
  bool input = false;
  bool output = false;
  int algorithm = 0;
  bool tied = false;
  int64_t devices = 1;
  int64_t paddedVocab = 0;
  /// Learned positions, held by the input shard's root.
  int64_t positions = 0;
  /// Tensor-parallel shards per device: a device's rows split again over
  /// them (Vocabulary Parallelism over pp x tp; runtime getTableShard).
  int64_t tensorParallel = 1;
  std::string inputName, outputName;

  /// The shards of `model` (none for the baseline).
  static VocabProfile get(ModelOp model, int64_t tensorParallel = 1);
  /// The rows one tensor-parallel shard of a device holds (padding too).
  int64_t getShardRows() const {
    int64_t rows = paddedVocab / devices;
    return (rows + tensorParallel - 1) / tensorParallel;
  }
  /// FLOPs one device spends on pass `kind` of its shard for `tokens`
  /// tokens of the microbatch (Yeung et al., 2024 §4): S the
  /// logits (and, in Algorithm 2, softmax' W), S2 the sum of exponentials,
  /// T the input gradient (not in Algorithm 2) and the weight gradient;
  /// IF and IB a lookup and a scatter (one add per element).
  double getPassFlops(PassKind kind, int64_t tokens) const;
  /// Parameters one device holds for its shards (the input table's rows
  /// only once when tied), without the positions.
  int64_t getShardParams() const;
  /// Bytes a device keeps from S to T: its fp32 logits and the
  /// broadcast X.
  double getKeptBytes(int64_t tokens) const;
  /// Bytes collective `id` moves per device over the pipeline.
  double getCollectiveBytes(const sched::CollectiveId &id,
                            int64_t tokens) const;
  /// Bytes it then all-reduces over a device's tensor-parallel shards:
  /// what the pipeline reduced (the statistics; the gradients, on the
  /// root), none for a broadcast.
  double getShardGroupBytes(const sched::CollectiveId &id,
                            int64_t tokens) const;
};

class CostModel {
public:
  enum class Kind { Unit, Explicit, Analytic, Measured };

  /// Parses `unit`, a hardware name, or `KIND=cost,...,comm=cost`. On
  /// failure `error` names the offending entry.
  static std::optional<CostModel> parse(llvm::StringRef spec,
                                        std::string &error);

  Kind getKind() const { return kind; }
  /// The hardware of an analytic model, null otherwise.
  const HardwareProfile *getHardware() const {
    return hardware ? &*hardware : nullptr;
  }
  /// "s" for analytic and measured models (seconds), "unit" otherwise.
  llvm::StringRef getTimeUnit() const {
    return kind == Kind::Analytic || kind == Kind::Measured ? "s" : "unit";
  }
  /// For a measured model: why it cannot cost these stages' passes (a
  /// profile of another partitioning), or "" if it can.
  std::string checkCoverage(llvm::ArrayRef<StageProfile> stages,
                            llvm::ArrayRef<PassKind> passes) const;
  const std::string &getSpec() const { return spec; }
  /// A measured profile's optimizer step on pipeline device `device`,
  /// seconds; nullopt where it has none.
  std::optional<double> getMeasuredOptimizer(int64_t device) const {
    auto it = measuredOptimizer.find(device);
    if (it == measuredOptimizer.end())
      return std::nullopt;
    return it->second;
  }
  /// A measured profile's timings of a stage's forward and backward over
  /// slices (`sluice-run --profile-slices`): (tokens, context, seconds).
  const std::vector<std::array<double, 3>> &
  getSliceSamples(const std::string &stage) const;

  /// Duration of pass `kind` of a stage over `tokens` tokens after
  /// `prefix`, on a device with `chunks` chunks, microbatches cut into
  /// `slices` slices.
  double getComputeTime(const StageProfile &stage, PassKind pass,
                        int64_t tokens, int64_t prefix, int chunks,
                        int slices) const;
  /// Duration of sending `bytes` to a pipeline neighbour over `link`.
  /// Explicit costs' `a2a=S` (0 otherwise): every expert all-to-all the
  /// runtime makes takes S seconds -- per sparse layer three in F (the
  /// counts, the copies out and back) and two in B (the gradients out and
  /// back), with --ep (PipelineCosts::getExpertParallelTime).
  double getAllToAllTime() const { return allToAll; }
  double getTransferTime(int64_t bytes,
                         LinkKind link = LinkKind::network) const;
  /// Duration of pass `kind` of a vocabulary shard on one device, for
  /// `tokens` tokens (microbatches cut into `slices` slices).
  double getVocabComputeTime(const VocabProfile &vocab, PassKind kind,
                             int64_t tokens, int slices) const;
  /// Duration of a collective moving `bytes` per device over `devices`
  /// devices on `link` (ring algorithms: about twice the bytes cross each
  /// link for an all-reduce, once for a broadcast or reduce). Only the
  /// analytic models price links; the unit and explicit ones charge `comm`
  /// for a collective, measured profiles nothing.
  double getCollectiveTime(double bytes, bool allReduce, int64_t devices,
                           LinkKind link = LinkKind::network) const;
  /// Ranks per node: the hardware's GPUs per node over the GPUs a device
  /// stands for (`v100x8`: 1); 1 for non-analytic models.
  int64_t getNodeDevices() const;

  /// `GPU:calibrate=PROFILE.json`: an analytic model whose efficiency is
  /// set, per model, so that it predicts the profile's whole-model pass
  /// time (calibrateEfficiency). The profile's path ("" if none).
  const std::string &getCalibrationPath() const { return calibrationPath; }
  /// The efficiency the hardware is priced at (calibrateEfficiency's).
  void setEfficiency(double efficiency) { hardware->efficiency = efficiency; }
  /// The efficiency at which this analytic model's passes of the whole of
  /// `model` (every transformer layer, the embedding and the output layer,
  /// F, B and W, on one of the profile's tensor-parallel shards) take as
  /// long per token as the calibration profile's passes of all its stages
  /// did. Nullopt with `error` where no efficiency up to 1 does (a profile
  /// faster than the GPU's peak: another GPU's, or another model's).
  std::optional<double> calibrateEfficiency(ModelOp model,
                                            std::string &error) const;
  /// The link of the groups of ranks `first + g * groupStride + i * stride`
  /// (i < count, g < groups): the node's when each group fits in one node.
  LinkKind getGroupLink(int64_t first, int64_t stride, int64_t count,
                        int64_t groupStride, int64_t groups) const;

private:
  /// parse()'s `F=1,B=1,...` form and its sluice-run --profile form: false
  /// with `error` set if the text is not one.
  bool readExplicitCosts(llvm::StringRef spec, std::string &error);
  bool readProfile(llvm::StringRef path, std::string &error);

  Kind kind = Kind::Unit;
  std::string spec;
  /// Per-device-per-microbatch cost of each PassKind (unit and explicit).
  std::array<double, sched::kNumPassKinds> perPass{};
  double comm = 0;
  /// Explicit costs' `a2a`: each expert all-to-all call's seconds.
  double allToAll = 0;
  /// By value: `v100x8` scales a data sheet's profile.
  std::optional<HardwareProfile> hardware;
  /// GPUs one device stands for (`NAMExG`).
  int64_t deviceGpus = 1;
  /// Measured: stage name -> pass -> seconds per token, and the number of
  /// layers each measured stage held.
  std::map<std::string, std::map<std::string, double>> measured;
  std::map<std::string, int64_t> measuredLayers;
  std::map<std::string, std::vector<std::array<double, 3>>> sliceSamples;
  double getMeasured(const std::string &stage, PassKind pass) const;
  /// Calibration: the profile, its summed seconds per token over every
  /// pass of every stage, and the tensor-parallel shards it ran on.
  std::string calibrationPath;
  double calibrationSecondsPerToken = 0;
  int64_t calibrationTensorParallel = 1;
  /// A profile's tensor-parallel shards (`tensor_parallel`, 1 if absent).
  int64_t measuredTensorParallel = 1;
  /// A profile's optimizer step per pipeline device, seconds
  /// (`optimizer_seconds`; absent in profiles before it was measured).
  std::map<int64_t, double> measuredOptimizer;
};


/// What one kind of traffic of a mesh crosses: for the report.
struct LinkUse {
  /// "pipeline", "vocabulary", "tensor-parallel" or "data-parallel".
  std::string traffic;
  /// Devices of one group (2 for pipeline neighbours).
  int64_t groupSize = 0;
  LinkKind link = LinkKind::network;
};

/// Everything the schedule and simulate passes need to cost one pipeline,
/// computed once: durations, transfers, activation memory and parameters.
class PipelineCosts {
public:
  /// The costs of one shard of one replica of the pipeline on `mesh`.
  PipelineCosts(ModelOp model, const sched::Pipeline &pipeline,
                const CostModel &costs, MeshShape mesh = {});

  double getComputeTime(const sched::Work &work) const {
    if (sched::isVocabPass(work.kind))
      return vocabCompute[size_t(work.kind) * pipeline.slices + work.slice];
    return compute[getIndex(work)];
  }
  double getCollectiveTime(const sched::CollectiveId &id) const;
  double getTransferTime(const sched::Work &work) const {
    return transfer[work.slice];
  }
  /// Activations an F allocates, in units of one microbatch's activations
  /// of 1/p of the transformer layers.
  double getActivationUnits(const sched::Work &work) const;
  double getActivationBytes(const sched::Work &work) const;
  /// The key/value state a token-sliced microbatch keeps on a stage
  /// (included in getActivationBytes when the microbatch is one slice).
  double getKeyValueStateBytes(int stage) const;
  /// Weights, gradients and optimizer state a device (one shard) holds,
  /// as the runtime allocates them for the model's precision and the
  /// mesh's ZeRO stage (getParameterStateBytes, TrainingState.h), with
  /// ZeRO-2/3's transient state of its largest layer.
  int64_t getParameterBytes(int device) const;
  /// The parameters one shard of `device` holds of its largest layer (a
  /// transformer layer, less the experts of other members; an embedding
  /// or output layer; its rows of a vocabulary shard).
  int64_t getLargestLayerParameters(int device) const;
  /// Of those, the optimizer's (Adam's moments, and under ZeRO-1 the
  /// replica's part of the summed gradients).
  int64_t getOptimizerBytes(int device) const;
  /// The area a B that recomputes writes its forward state into: the
  /// runtime allocates one per device, for one microbatch of its largest
  /// recomputing stage (what that stage's F drops: all but its input under
  /// full recomputation, the attention output, its statistics and the
  /// MLP's activation under selective); 0 without recomputation.
  double getRecomputeAreaBytes(int device) const;
  /// What `device` holds besides its activations: the training state and
  /// the recomputation area. Its peak memory is this plus the simulated
  /// peak of activations.
  double getFixedBytes(int device) const {
    return double(getParameterBytes(device)) + getRecomputeAreaBytes(device) +
           getContextExchangeBytes(device);
  }
  /// Context parallelism's ring buffers on `device` (the runtime's
  /// TransformerScratch::context): two blocks of the rank's keys and
  /// values of the whole sequence and two fp32 accumulators of their
  /// gradients, of the largest layer; 0 without cp.
  double getContextExchangeBytes(int device) const;
  /// The ring's time in a pass of `work` beyond its 1/cp of the compute:
  /// per transformer layer F passes the rank's keys and values of the
  /// prefix to cp - 1 ranks beside the compute, B does so again (twice
  /// when it recomputes) and passes their fp32 gradients cp times, waited
  /// for; the part of the transfers beside the compute that outlasts it,
  /// plus the waited ones. 0 without cp.
  double getContextExchangeTime(const sched::Work &work) const;
  /// What one parameter's training state costs here.
  const rt::ParameterStateBytes &getStateBytes() const { return stateBytes; }
  /// Parameters one shard of `device` holds (its stages' and its rows of
  /// the vocabulary shards).
  int64_t getDeviceParameters(int device) const;
  /// Time of the optimizer step on `device` (analytic costs only, else 0):
  /// Adam is memory-bound, reading the fp32 weights, gradients and both
  /// moments and writing the weights and the moments (28 bytes per
  /// parameter) and, in a 16-bit model below ZeRO-3, the weights' working
  /// copy, at the hardware's memory bandwidth. ZeRO 1 to 3 update the
  /// replica's part; 1 and 2 then all-gather the working weights (3
  /// gathers them where they are used: getParameterGatherTime).
  double getOptimizerTime(int device) const;
  /// FLOPs of one training step of one replica (forward, input and weight
  /// gradients of the whole model: what MFU counts, without the work
  /// tensor-parallel shards repeat).
  double getStepFlops() const;
  /// The tensor-parallel all-reduces pass `work` waits for (included in
  /// getComputeTime): two per transformer layer in F, two in B or BW, two
  /// more when B recomputes the forward.
  double getTensorParallelTime(const sched::Work &work) const;
  /// Duration of the data-parallel all-reduce of the gradients of stage or
  /// vocabulary shard `name` (its shard's parameters over the replicas;
  /// under expert parallelism its experts' over the dp / ep replicas
  /// holding them); 0 without replicas. ZeRO-1 reduce-scatters instead;
  /// ZeRO-2 and 3 reduce-scatter each microbatch's gradients as its W
  /// computes them: m reduce-scatters a step.
  double getGradientSyncTime(llvm::StringRef name) const;
  /// ZeRO-3: one all-gather of stage `name`'s working weights over the
  /// replicas (as getGradientSyncTime splits the experts); 0 below ZeRO-3
  /// or without replicas. Re-sharding every pass, the runtime gathers
  /// them in each pass, each layer's beside the previous one's compute
  /// (getComputeTime includes the longer of the two, and the first
  /// layer's); per step, once beside the update (getOptimizerTime
  /// includes it).
  double getParameterGatherTime(llvm::StringRef name) const;
  /// ZeRO-3: the gathers of each stage a step makes: one per pass of each
  /// microbatch re-sharding every pass, one re-sharding per step.
  int64_t getParameterGathersPerStep() const;
  /// The expert-parallel all-to-alls pass `work` waits for (included in
  /// getComputeTime): each sparse layer's dispatch and return of its
  /// tokens' top_k copies in F and in B (F's again when B recomputes it).
  double getExpertParallelTime(const sched::Work &work) const;
  const MeshShape &getMesh() const { return mesh; }
  /// Which link each kind of traffic crosses.
  std::vector<LinkUse> getLinks() const;
  const std::vector<int64_t> &getSliceLengths() const { return lengths; }
  const StageProfile &getStage(int stage) const { return profiles[stage]; }
  llvm::ArrayRef<StageProfile> getStages() const { return profiles; }
  const CostModel &getCostModel() const { return costs; }
  const VocabProfile &getVocab() const { return vocab; }
  /// Why a calibrated model cannot price this model ("" if it can:
  /// CostModel::calibrateEfficiency).
  const std::string &getCalibrationError() const { return calibrationError; }

private:
  static constexpr size_t kKinds = sched::kNumPassKinds;
  /// A transformer stage's pass's place in compute, tensorParallel and
  /// expertParallel.
  size_t getIndex(const sched::Work &work) const {
    return (size_t(work.stage) * kKinds + size_t(work.kind)) *
               pipeline.slices +
           work.slice;
  }
  VocabProfile vocab;
  std::vector<double> vocabCompute;
  sched::Pipeline pipeline;
  CostModel costs;
  std::string calibrationError;
  std::vector<StageProfile> profiles;
  std::vector<int64_t> lengths, prefixes;
  std::vector<double> compute, transfer, tensorParallel, expertParallel,
      contextExchange;
  int64_t transformerLayers = 0;
  MeshShape mesh;
  LinkKind pipelineLink = LinkKind::network, tensorLink = LinkKind::network,
           dataLink = LinkKind::network, expertLink = LinkKind::network,
           contextLink = LinkKind::network;
  /// Whole-model forward FLOPs of one microbatch.
  double forwardFlops = 0;
  /// Parameters of each stage's shard, by name; of those, its sparse
  /// layers' experts (all of them: an expert-group member holds 1 / ep).
  std::map<std::string, int64_t, std::less<>> stageParams, stageExperts;
  /// Moving stage `name`'s parameters over the replicas (the experts
  /// over their own group): an all-reduce, or its half.
  double getReplicaCollectiveTime(llvm::StringRef name, bool allReduce) const;
  /// The state of `dense` parameters held by every replica and `experts`
  /// split over the expert group (ZeRO-1: each over its own group).
  int64_t getStateBytes(int64_t dense, int64_t experts, bool optimizer) const;
  /// A stage's expert parameters (whole) on one shard.
  int64_t getDeviceExperts(int device) const;
  rt::ParameterStateBytes stateBytes;
};

/// Token lengths of `slices` near-equal slices of `seqLen` tokens (the
/// first ones one token longer when it does not divide).
std::vector<int64_t> getUniformSlices(int64_t seqLen, int64_t slices);

} // namespace mlir::sluice

#endif // SLUICE_ANALYSIS_COSTMODEL_H
