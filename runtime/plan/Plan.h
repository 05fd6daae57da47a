//===- Plan.h - A loaded, validated plan ------------------------*- C++ -*-===//
//
// The plan file (docs/plan-format.md) parsed into plain data and checked
// once, whole, before anything runs: version, model features this runtime
// implements, stages, every instruction's fields, buffer indices and sizes
// (against the runtime's own layout), and that every receive has exactly
// one matching send. The executor's hot loop then only dispatches.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_PLAN_H
#define SLUICE_RUNTIME_PLAN_H

#include "sluice/PlanFormat/Format.h"
#include "sluice/Blocks/Layout.h"
#include "sluice/PlanFormat/ModelConfig.h"
#include "sluice/PlanFormat/TrainingState.h"
#include "Status.h"

#include <string>
#include <vector>

namespace sluice::rt {

struct Instruction {
  Op op = Op::Exec;
  Pass pass = Pass::F;
  // A stage's pass names the stage; a shard pass or collective its shard.
  int32_t stage = 0, mb = 0, slice = 0;
  Shard shard = Shard::None;
  // exec: buffer slots (-1: none).
  int32_t state = -1, wstate = -1, kv = -1, in = -1, out = -1;
  // A recomputing stage's B and W: the recomputed state (version 5).
  int32_t rstate = -1;
  // send/recv.
  int32_t peer = -1, buffer = -1;
  int64_t key = -1;
  // collective: which of the shard's collectives, and whether it blocks
  // the device (interlaced) instead of running on the vocabulary stream.
  int32_t group = -1;
  bool blocking = false;
  /// exec: runs beside the exec after it, one overlapped group (optional
  /// key "paired"; a runtime that ignores it runs the passes one after
  /// the other, the same computation).
  bool paired = false;
};

/// One vocabulary shard: every device holds rows [d * rows, (d + 1) * rows)
/// of the padded table, rows = paddedVocab / devices; rows past `vocab`
/// are padding that never takes part.
struct ShardPlan {
  bool present = false;
  std::string name;
  int64_t vocab = 0;
  int64_t paddedVocab = 0;
  int root = 0;
};

/// The vocabulary layers sharded over all devices (Yeung et
/// al., 2024; docs/vocabulary.md).
struct VocabularyPlan {
  ShardPlan input, output;
  /// The output shard's form: 0 naive (S, S2, T), 1 or 2 (S, T).
  int algorithm = 0;
  int barriers = 0;
  bool synchronous = false;

  bool any() const { return input.present || output.present; }
};

struct DeviceProgram {
  int device = 0;
  std::vector<int64_t> buffers; // bytes per slot
  std::vector<Instruction> instructions;
};

struct StagePlan {
  std::string name;
  int device = 0;
  int chunk = 0;
  std::vector<int> layers;
  /// What its B recomputes (version 5; Layout.h).
  Recompute recompute = Recompute::None;
};

struct Plan {
  /// The file's format version (kPlanVersion or older).
  int version = kPlanVersion;
  /// Element types the buffers were sized for (version 3; fp32 before).
  Precision precision;
  ModelConfig model;
  /// What one tensor-parallel shard of a device runs (getTensorShardModel;
  /// the model itself when tp is 1): the buffers are sized for it.
  ModelConfig shardModel;
  std::string schedule;
  int devices = 0;
  /// The mesh (version 4): each of the `devices` pipeline devices is
  /// split over tp tensor-parallel shards and replicated dp times; ranks
  /// = devices * tp * dp. `microbatches` is per replica.
  int tp = 1, dp = 1;
  /// Context parallelism: each replica's sequences split over cp ranks
  /// (SliceShape::contextShards); ranks = devices * tp * dp * cp, and a
  /// device's gradients are summed over its dp * cp ranks.
  int cp = 1;
  /// Megatron-LM's sequence parallelism over the tp shards
  /// (ModelConfig::sequenceShards of shardModel).
  bool sequenceParallel = false;
  /// ZeRO stage: 1 shards the optimizer state over the dp replicas
  /// (gradients reduce-scattered, each replica updates its part, the
  /// weights all-gathered); 0: every replica holds all of it.
  int zero = 0;
  /// ZeRO-3: when the gathered weights are dropped (after every pass, or
  /// at the update).
  Reshard reshard = Reshard::EveryPass;
  /// Expert parallelism: each sparse layer's experts split over ep
  /// consecutive replicas at one context rank (an expert group;
  /// shardModel.expertShards); divides dp. `expertCapacity`: what a member's experts compute on, as
  /// a multiple of the balanced share (0: dropless; ModelConfig's).
  int ep = 1;
  double expertCapacity = 0;
  int microbatches = 0;
  std::vector<int64_t> slices; // token lengths
  bool splitBackward = false;
  std::vector<StagePlan> stages;
  VocabularyPlan vocabulary;
  std::vector<DeviceProgram> programs;

  SliceShape getSliceShape(int slice) const;
  /// What the collective rules (Format.h) need of this plan.
  VocabularyShape getVocabularyShape() const;
  /// The collectives (shard, group) an exec must see completed first.
  std::optional<CollectiveRef> getCollectiveInput(const Instruction &exec) const;
  /// Whether exec `pass` of stage `stage` (-1: a shard pass of `shard`) on
  /// `device` carries a part of collective (shard, group).
  bool contributes(CollectiveRef ref, int device, Pass pass, int stage,
                   Shard execShard) const;
  int getLastStage() const { return int(stages.size()) - 1; }
  /// Ranks the plan runs on.
  int getRanks() const { return devices * tp * dp * cp; }
  /// The ranks that sum a device's gradients (and share ZeRO's shards):
  /// its replicas' context-parallel ranks.
  int getGradientRanks() const { return dp * cp; }
  /// The ranks that hold a member's experts and sum their gradients (and
  /// share their ZeRO shards): every ep-th replica's context-parallel
  /// ranks (an expert group is ep replicas at one context rank).
  int getExpertReplicas() const { return dp / ep * cp; }
  /// Sequences one optimizer step trains on: every replica's microbatches.
  int64_t getSequencesPerStep() const {
    return int64_t(microbatches) * dp * model.microBatch;
  }
  int64_t getTokensPerStep() const {
    return getSequencesPerStep() * model.seqLen;
  }
  /// Runs the plan in `run` instead of the precision it was compiled for;
  /// an error when a buffer is too small for it (fp32 in a bf16 plan).
  Status setPrecision(const Precision &run);
  /// "exec F of stage 2, microbatch 3, slice 0": for messages naming one.
  std::string describe(const Instruction &instr) const;
};

/// Reads and validates a plan file. The error names the file and what is
/// wrong with it.
Status loadPlan(const std::string &path, Plan &plan);
/// The same from text (for tests); `origin` names it in errors.
Status parsePlan(const std::string &text, const std::string &origin,
                 Plan &plan);

} // namespace sluice::rt

#endif // SLUICE_RUNTIME_PLAN_H
