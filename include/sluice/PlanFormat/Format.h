//===- Format.h - The plan file's vocabulary and rules ----------*- C++ -*-===//
//
// What the compiler and the runtime must agree on beyond the layout
// (sluice/Blocks/Layout.h) and the model (ModelConfig.h): the plan version, the names the
// file spells passes, ops, shards and recomputation with, the barrier count
// of each softmax algorithm, and which collectives a pass waits for and
// which passes contribute to each. The compiler's schedule library
// (lib/Schedule) and the runtime's loader (runtime/Plan.cpp) both call
// these; neither keeps a copy.
//
// Plain C++17: no LLVM, no MLIR, no exceptions (the runtime-only build for
// GPU machines links it as is). docs/plan-format.md is the prose form.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_PLANFORMAT_FORMAT_H
#define SLUICE_PLANFORMAT_FORMAT_H

#include "sluice/PlanFormat/ModelConfig.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace sluice::rt {

/// What a stage recomputes in its backward pass instead of keeping it from
/// F (activation recomputation: Li, LLM Systems;
/// Megatron-LM's `--recompute-granularity`):
///  * None: F keeps its whole forward state until B and W;
///  * Selective: F keeps the norms' and the projections' tensors (what the
///    matmuls made: Xhat, Q, the MLP's pre-activations) and drops the
///    attention's output and statistics and the MLP's activation; B
///    recomputes them (the attention core and an elementwise function,
///    Korthikanti et al.'s selective recomputation) into the recomputed
///    state, which lives until W;
///  * Full: F keeps only the stage's input (the checkpoint); B runs the
///    stage's F again from it into the recomputed state.
enum class Recompute : uint8_t { None, Selective, Full };

/// The version the compiler writes and the newest the runtime reads; the
/// runtime reads every older one. 2: vocabulary shards and collectives;
/// 3: element types, typed buffer regions, log-sum-exp attention state;
/// 4: the device mesh and grad_sync; 5: recomputing stages and their
/// recomputed state; 6: a layer's rotary scaling (rope_scaling), which an
/// older runtime would ignore and so train another model; 7: a layer's
/// attention window (window), for the same reason -- before it the model's
/// sliding_window only ever held windows no shorter than the sequence;
/// 8: a layer's fields are the block spec's table (BlockFields.def): a
/// flag became a choice of forms, pre_norms and features are new,
/// rope_scaling may be linear, and a key the table does not have is
/// refused -- an older runtime would ignore the new keys and train another
/// model; 9: repeat blocks in a device's instructions (Repeats.h), which
/// an older runtime would refuse as instructions without an op.
constexpr int kPlanVersion = 9;

/// The largest size of any one dimension Sluice takes (tokens a sequence,
/// hidden size, feed-forward size, vocabulary, heads): 2^20, past every
/// released model's, and small enough that the products of a layer's sizes
/// and the counts of a step stay far inside 64 bits. The dialect's
/// verifiers and the plan reader both hold files to it.
constexpr int64_t kMaxDimension = int64_t(1) << 20;
/// The largest vocabulary: 2^24 tokens.
constexpr int64_t kMaxVocab = int64_t(1) << 24;

/// A pass of a stage (F, B, W, BW) or of a vocabulary shard (S, S2, T: the
/// output shard's; IF, IB: the input shard's).
enum class Pass : uint8_t { F, B, W, BW, S, S2, T, IF, IB };
constexpr int kNumPasses = 9;
/// GradSync: start averaging a stage's (or shard's) gradients over the
/// data-parallel replicas (plan version 4).
enum class Op : uint8_t { Exec, Send, Recv, Collective, GradSync };
constexpr int kNumOps = 5;

/// One pass of an overlapped group: an exec marked "paired" and the
/// execs it joins (docs/plan-format.md), in program order.
struct GroupPass {
  Pass pass = Pass::F;
  int32_t stage = 0, mb = 0, slice = 0;
};
/// Why `count` passes at `group` are not an overlapped group -- one F
/// beside the backward (B, B then its own W, or BW) of another
/// microbatch, which the two lanes run interleaved -- or "" if they are.
/// The compiler's verifier and the runtime's validator both ask this.
std::string checkOverlappedGroup(const GroupPass *group, size_t count);
/// A vocabulary shard; also its collectives' communication channel.
enum class Shard : int8_t { None = -1, Input = 0, Output = 1 };

inline bool isShardPass(Pass pass) { return pass >= Pass::S; }
/// The shard a shard pass belongs to (None for a stage's pass).
Shard getPassShard(Pass pass);

/// The file's spellings: "F", "BW", "IB"; "exec", "grad_sync"; "input",
/// "output"; "none", "selective", "full"; "embedding", "transformer". parse* is their inverse (nullopt
/// for a name the format does not have), *Names the choices for messages
/// ("F, B, W, ...").
const char *passName(Pass pass);
std::optional<Pass> parsePass(std::string_view name);
std::string passNames();
const char *opName(Op op);
std::optional<Op> parseOp(std::string_view name);
std::string opNames();
const char *shardName(Shard shard);
std::optional<Shard> parseShard(std::string_view name);
const char *recomputeName(Recompute recompute);
std::optional<Recompute> parseRecompute(std::string_view name);
const char *layerKindName(LayerKind kind);

/// The communication barriers the output shard's softmax crosses per
/// microbatch: 3 naive (algorithm 0), 2 with Algorithm 1, 1 with
/// Algorithm 2 (Yeung et al., 2024 §4, Figure 6).
int getBarriers(int algorithm);
/// The passes a shard runs per microbatch slice: the input shard IF and
/// IB, the output shard S, S2, T (naive) or S, T (Algorithms 1 and 2).
int getNumShardPasses(Shard shard, int algorithm);

/// What the collective rules need of a pipeline: which vocabulary layers
/// are sharded, the softmax algorithm, where the shards meet the stages,
/// and whether the backward is split.
struct VocabularyShape {
  bool input = false;
  bool output = false;
  int algorithm = 0;
  /// The device of stage 0 (the input shard reduces there) and of the
  /// last stage (the output shard broadcasts from there).
  int inputRoot = 0, outputRoot = 0;
  int lastStage = 0;
  bool splitBackward = false;

  /// Collectives per microbatch slice: input 2, output 1 + barriers (0
  /// for an absent shard).
  int getNumGroups(Shard shard) const;
};

/// One collective of a shard for one microbatch slice: its `group`-th.
struct CollectiveRef {
  Shard shard;
  int group;
  bool operator==(const CollectiveRef &o) const {
    return shard == o.shard && group == o.group;
  }
};

/// The collective pass `pass` must see completed first, if any (a pass
/// waits for one at most; §5.1 and Appendix C): the first stage's F the
/// input shard's gathered activation, the last stage's backward the output
/// shard's last barrier, each shard pass the collective before it.
/// `execShard` is None for a stage's pass (of stage `stage`), the shard
/// for a shard pass.
std::optional<CollectiveRef> getCollectiveInput(const VocabularyShape &shape,
                                                Pass pass, Shard execShard,
                                                int stage);

/// The pass whose results one device adds to a collective: a shard pass on
/// every device (`device` -1), or a stage's pass on the device that holds
/// the stage.
struct Contributor {
  Pass pass;
  /// None: stage `stage`'s pass; otherwise a pass of this shard.
  Shard shard;
  int stage;
  /// The only device that contributes, or -1 for every device.
  int device;
};
/// Who contributes to collective `ref`; nullopt for a group the shard
/// does not have.
std::optional<Contributor> getContributor(const VocabularyShape &shape,
                                          CollectiveRef ref);
/// Whether exec `pass` (of stage `stage`, or a shard pass of `execShard`)
/// on `device` contributes to collective `ref`.
bool contributes(const VocabularyShape &shape, CollectiveRef ref, int device,
                 Pass pass, int stage, Shard execShard);

} // namespace sluice::rt

#endif // SLUICE_PLANFORMAT_FORMAT_H
