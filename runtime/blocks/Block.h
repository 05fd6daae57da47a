//===- Block.h - What a stage's layer blocks share --------------*- C++ -*-===//
//
// The pieces every layer block of a stage (runtime/blocks) and the stage
// runner that sequences them (Stage.h) share: a layer's bound parameters
// and state views, the pass's workspace, a slice's sizes, and the seams of
// the tensor-parallel group (its all-reduces, or sequence parallelism's
// all-gathers and reduce-scatters).
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_BLOCKS_BLOCK_H
#define SLUICE_RUNTIME_BLOCKS_BLOCK_H

#include "Backend.h"
#include "sluice/Blocks/Layout.h"

#include <array>
#include <string>
#include <vector>
#include <functional>
#include <utility>

namespace sluice::rt {

/// A microbatch's tokens on the device (int32): row r's inputs are
/// tokens[r * stride + t] and its labels the next tokens,
/// tokens[r * stride + t + 1].
struct TokenRows {
  DevicePtr tokens;
  int64_t stride = 0;
  /// Under context parallelism (SliceShape::contextShards) a rank's rows
  /// hold its chunks of every slice, side by side, and their labels
  /// apart: a chunk's last label is the token after it in the sequence,
  /// which the rank does not hold. Null: each row is the sequence and its
  /// next token, the labels the tokens shifted by one.
  DevicePtr labels;
  /// The tokens and labels of slice `s` in each row (`stride` apart).
  DevicePtr tokensAt(const SliceShape &s) const {
    return tokens + s.getLocalOffset();
  }
  DevicePtr labelsAt(const SliceShape &s) const {
    return labels ? labels + s.getLocalOffset() : tokens + s.offset + 1;
  }
};

} // namespace sluice::rt

namespace sluice::rt::block {

/// Reduces `count` elements at `data` over the stage's tensor-parallel
/// group, in place, ordered on the stage's stream.
using GroupReduce =
    std::function<void(DevicePtr data, int64_t count, Reduction reduction)>;
/// A collective the group has started and the stage's stream does not
/// wait for yet: the pass enqueues work that does not read its data, then
/// wait() orders the stream after it. Waited once; one destroyed unwaited
/// waits then, so no collective is left behind.
class PendingCollective {
public:
  PendingCollective() = default;
  explicit PendingCollective(std::function<void()> finish)
      : finish(std::move(finish)) {}
  PendingCollective(PendingCollective &&other) noexcept
      : finish(std::move(other.finish)) {
    other.finish = nullptr;
  }
  PendingCollective &operator=(PendingCollective &&other) noexcept {
    if (this != &other) {
      wait();
      finish = std::move(other.finish);
      other.finish = nullptr;
    }
    return *this;
  }
  ~PendingCollective() { wait(); }
  void wait() {
    if (!finish)
      return;
    std::function<void()> f = std::move(finish);
    finish = nullptr;
    f();
  }

private:
  std::function<void()> finish;
};

/// The group's collectives: `reduce` as GroupReduce, done when it returns
/// (for work then enqueued on the stage's stream); started ones, which the
/// pass waits for before it reads their result (it may overlap them):
/// `startReduce`, the all-reduce sum of `count` elements of `data` in
/// place; under sequence parallelism `reduceScatter`, which sums the
/// group's `data` (count x group size elements) and leaves shard i's i-th
/// part of the sum in its `out`, and `allGather`, which fills every
/// shard's `data` (count x group size) with each shard's part, in place.
struct TensorGroup {
  GroupReduce reduce;
  std::function<PendingCollective(DevicePtr data, int64_t count)> startReduce;
  std::function<PendingCollective(DevicePtr data, DevicePtr out,
                                  int64_t count)>
      reduceScatter;
  std::function<PendingCollective(DevicePtr data, int64_t count)> allGather;
};
/// Expert parallelism's seams (docs/moe.md): the stage's member index in
/// its expert group (the replicas that split each sparse layer's
/// experts), and the group's calls, each done when it returns: the
/// all-to-all (sendCounts[q] elements of `send` to member q, in member
/// order; recvCounts[q] from member q into `recv`), reading and writing
/// `count` i32 between the device and the host after the stage stream's
/// work so far, `anyOf` (whether any member says true), and `fail`, which
/// keeps why a routing cannot run for the executor to end the step with
/// (the pass goes on, its collectives skipped by every member alike).
struct ExpertGroup {
  int member = 0, members = 1;
  std::function<void(DevicePtr send, const std::vector<int64_t> &sendCounts,
                     DevicePtr recv, const std::vector<int64_t> &recvCounts)>
      allToAll;
  std::function<void(DevicePtr from, int64_t count, int32_t *to)> read;
  std::function<void(const int32_t *from, int64_t count, DevicePtr to)> write;
  std::function<bool(bool)> anyOf;
  std::function<void(const std::string &why)> fail;
};
/// Context parallelism's seams (SliceShape::contextShards): the stage's
/// rank among the ranks its sequences split over, the plan's slices (each
/// one's tokens per row, over all the ranks: where an earlier slice's
/// chunks sit), and ring attention's step (Liu et al., 2023, section 3):
/// shift starts sending `count` elements of `send` to the next rank of
/// the ring and receiving the previous rank's into `recv`, and returns
/// what finishes both (ordered on the stage's stream), so that work
/// between the two overlaps the transfer; sum, in place, the group's sum
/// of `count` fp32 elements of `data` (the load-balancing statistics,
/// which span the sequence), done when it returns.
struct ContextGroup {
  int rank = 0, size = 1;
  std::vector<int64_t> slices;
  std::function<std::function<void()>(DevicePtr send, DevicePtr recv,
                                      int64_t count)>
      shift;
  std::function<void(DevicePtr data, int64_t count)> sum;
};
/// The parameters the block's core and the vocabulary layers read: the
/// output layer's final norm, the transformer block's projections, the
/// tables. A block feature's are its own (BoundFeature).
struct LayerParams {
  DevicePtr normW, normB, qkvW, outW, upW, gateW, downW, table, positions;
};

class FeatureCompute;

/// A block feature's parameter as bound for one layer, by its name within
/// the layer ("norm1.weight"): the weights the kernels read and the f32
/// gradient.
struct BoundParam {
  std::string name;
  /// The weights the kernels read, their gradient, and the fp32 masters
  /// (the same as `w` in an fp32 run).
  DevicePtr w, g, master;
};

/// One enabled feature of a layer: its shape part, its compute part
/// (Slots.h) and its parameters.
struct BoundFeature {
  const blocks::Feature *shape = nullptr;
  const FeatureCompute *compute = nullptr;
  std::vector<BoundParam> params;
  bool isAt(blocks::Slot slot) const {
    return shape->getSlots() & blocks::getSlotBit(slot);
  }
};

/// A transformer layer's linear maps and the tensors of their products,
/// which the fp8 precision scales each on its own.
enum class Map { Qkv, Out, Up, Gate, Down };
enum class Role { Input, Weight, Grad };
constexpr int64_t kFp8Maps = 5, kFp8Roles = 3;
/// Each map's weight, by its name within the layer (after `layers.N.`).
constexpr const char *kMapWeightNames[kFp8Maps] = {
    "attn.qkv.weight", "attn.out.weight", "mlp.up.weight", "mlp.gate.weight",
    "mlp.down.weight"};
constexpr const char *getMapWeightName(Map map) {
  return kMapWeightNames[int(map)];
}
/// The index of (map, role)'s record among a layer's kFp8RecordsPerLayer.
constexpr int64_t getFp8Record(Map map, Role role) {
  return int64_t(map) * kFp8Roles + int64_t(role);
}
constexpr int64_t kFp8RecordsPerLayer = kFp8Maps * kFp8Roles;

struct Layer {
  const LayerConfig *config;
  LayerParams w, g; // weights (working copy) and their gradients (f32)
  /// The layer's enabled block features, in getEnabledFeatures' order.
  std::vector<BoundFeature> features;
  /// Whether the core computes the feed-forward block (no feature at
  /// Slot::FeedForward replaces it).
  bool coreFeedForward = true;
  /// Whether the core computes the QKV projection and its rotation (no
  /// feature at Slot::QueryKeyValue replaces them).
  bool coreProjection = true;
  /// The fp8 precision's scaling records of a transformer layer
  /// (kFp8RecordsPerLayer x kFp8RecordFloats f32); null otherwise.
  DevicePtr fp8;
};
/// A sparse layer's part in the model's load-balancing loss (BalanceLoss;
/// the stage sets it per pass): F adds its routing's statistics to
/// `stats` (moeBalance; null: none, as in B's recomputation), B adds
/// `scale` x counts[e] to every token's gradient at router probability e
/// (moeRouteBackward; null: none). F adds them to `load` too, the
/// layer's over the step (the progress line's tokens per expert; null:
/// none).
struct Balance {
  DevicePtr stats, counts;
  float scale = 0;
  DevicePtr load;
};

/// One layer's tensors in the three kinds of state, by Layout.h field
/// (the core's and every registered feature's).
struct Views {
  std::vector<DevicePtr> at = std::vector<DevicePtr>(getFieldCount());
  DevicePtr operator[](Field f) const { return at[int(f)]; }
};

/// The stage's place in its tensor-parallel group.
class ShardSeams {
public:
  explicit ShardSeams(const ModelConfig &model) : model(model) {}
  void set(TensorGroup tensorGroup, int index) {
    group = std::move(tensorGroup);
    shardIndex = index;
  }
  int getShardIndex() const { return shardIndex; }

  void reduceOverShards(DevicePtr data, int64_t count,
                        Reduction reduction = Reduction::Sum) const {
    if (group.reduce)
      group.reduce(data, count, reduction);
  }
  /// Sequence parallelism's seams; without a token split (plain tensor
  /// parallelism, a whole stage) `count` covers the whole slice and they
  /// come down to the all-reduce or nothing. localTokens: this shard's
  /// `count` elements of a whole-slice buffer. reduceTokens: the group's
  /// partial sums `partial` (a row-parallel projection's output, or a
  /// column-parallel one's input gradient) reduced into this shard's
  /// `count` elements `out` (without a split, `partial` is `out`, summed in
  /// place). gatherTokens: every shard's part gathered into `whole`, whose
  /// own part (localTokens) the caller has written.
  bool isSequenceParallel() const { return model.sequenceShards > 1; }
  DevicePtr localTokens(DevicePtr whole, int64_t count) const {
    return isSequenceParallel() ? whole + shardIndex * count : whole;
  }
  void reduceTokens(DevicePtr partial, DevicePtr out, int64_t count) const {
    startReduceTokens(partial, out, count).wait();
  }
  /// reduceTokens, started: the caller waits before it reads `out` or
  /// writes `partial`.
  PendingCollective startReduceTokens(DevicePtr partial, DevicePtr out,
                                      int64_t count) const {
    if (isSequenceParallel())
      return group.reduceScatter(partial, out, count);
    if (group.startReduce)
      return group.startReduce(out, count);
    reduceOverShards(out, count);
    return PendingCollective();
  }
  void gatherTokens(DevicePtr whole, int64_t count) const {
    startGatherTokens(whole, count).wait();
  }
  /// Every shard's `count` elements gathered into `data` (count x group
  /// size), shard i's at data + i * count, which this shard has written:
  /// a tensor-parallel region's tensor whole on every shard, with or
  /// without sequence parallelism. Done when it returns.
  void gatherShards(DevicePtr data, int64_t count) const {
    if (group.allGather)
      group.allGather(data, count).wait();
  }
  int getShardCount() const { return std::max(1, model.tensorShards); }
  /// gatherTokens, started: the caller waits before it reads `whole`.
  PendingCollective startGatherTokens(DevicePtr whole, int64_t count) const {
    if (!isSequenceParallel())
      return PendingCollective();
    return group.allGather(whole, count);
  }

  /// The expert group (none: every expert here).
  void setExperts(ExpertGroup to) { expertGroup = std::move(to); }
  const ExpertGroup &getExperts() const { return expertGroup; }

  /// The context-parallel group (none: the whole sequence here).
  void setContext(ContextGroup to) { contextGroup = std::move(to); }
  const ContextGroup &getContext() const { return contextGroup; }

private:
  const ModelConfig &model;
  TensorGroup group;
  int shardIndex = 0;
  ExpertGroup expertGroup;
  ContextGroup contextGroup;
};

/// Attention over slice `s` of layer `c`, with the model's scale and cap.
inline AttentionShape getAttentionShape(const ModelConfig &model,
                                 const LayerConfig &c, const SliceShape &s) {
  AttentionShape shape{s.rows,    s.tokens,   s.offset,
                       model.seqLen, c.heads, c.headDim,
                       c.kvHeads, float(model.attentionScale),
                       float(model.attentionSoftcap), c.window};
  shape.valueDim = c.vHeadDim;
  return shape;
}

/// A transformer layer's sizes for one slice: rows x tokens, hidden, ffn,
/// the query heads' and the key heads' widths, the QKV projection's (q, k
/// and v side by side), the value heads' and the attention output's (their
/// v_head_dim where it differs from head_dim).
/// `n`: the tokens this shard holds outside the tensor-parallel regions
/// (rt, or rt / T under sequence parallelism).
struct Sizes {
  int64_t rt, n, h, f, hd, kvw, width, vw, cw;
};

inline Sizes getSizes(const ModelConfig &model, const LayerConfig &l,
               const SliceShape &s) {
  int64_t hd = l.heads * l.headDim, kvw = l.kvHeads * l.headDim,
          vw = l.kvHeads * l.getValueDim(), cw = l.heads * l.getValueDim();
  return {s.rows * s.tokens,
          getLocalTokens(model, s),
          model.hidden,
          l.ffn,
          hd,
          kvw,
          hd + kvw + vw,
          vw,
          cw};
}

/// Rotary positions of the slice's rows x tokens of `x` (`heads` heads of
/// `headDim`, tokens `stride` apart) at their places in the sequence: from
/// the slice's offset on, or under context parallelism each of rank
/// `rank`'s two chunks at its own (SliceShape::getChunkOffset).
inline void rotateAtPositions(Kernels &kernels, const SliceShape &s, int rank,
                              DevicePtr x, int64_t heads, int64_t headDim,
                              int64_t stride, const Rotary &rotary,
                              bool inverse) {
  if (s.contextShards == 1) {
    kernels.rotate(x, s.rows, s.tokens, s.offset, heads, headDim, stride,
                   rotary, inverse);
    return;
  }
  int64_t chunk = s.getChunkTokens();
  for (int64_t r = 0; r < s.rows; ++r)
    for (int part = 0; part < 2; ++part)
      kernels.rotate(x + (r * s.tokens + part * chunk) * stride, 1, chunk,
                     s.getChunkOffset(rank, part), heads, headDim, stride,
                     rotary, inverse);
}

inline GateActivation activation(const ModelConfig &m, const LayerConfig &l) {
  if (l.mlp == MlpType::SwiGlu)
    return GateActivation::Silu;
  return m.exactGelu ? GateActivation::GeluErf : GateActivation::Gelu;
}

/// A pass's workspace (Layout.h getWorkspaceBytes): two activations that
/// carry the pass from layer to layer, then one layer's scratch regions.
class Workspace {
public:
  Workspace(DevicePtr base, const Precision &precision, int64_t activation)
      : base(base), arena(precision) {
    ping[0] = region(arena, activation);
    ping[1] = region(arena, activation);
  }
  /// Scratch regions of these sizes, from the start of the scratch.
  template <size_t N>
  std::array<DevicePtr, N> scratch(const int64_t (&counts)[N]) const {
    Arena rest = arena;
    std::array<DevicePtr, N> out;
    for (size_t i = 0; i < N; ++i)
      out[i] = region(rest, counts[i]);
    return out;
  }
  /// The output layer's scratch (getScratchBytes): its norm output, then
  /// a per-token fp32 statistic.
  std::pair<DevicePtr, DevicePtr> outputScratch(int64_t normCount,
                                                int64_t tokens) const {
    Arena rest = arena;
    DevicePtr norm = region(rest, normCount);
    int64_t at = rest.take(tokens, Storage::Fp32);
    return {norm, base.atByte(at, kStatisticType)};
  }
  DevicePtr ping[2];

private:
  DevicePtr region(Arena &a, int64_t count) const {
    int64_t at = a.take(count, Storage::Activation);
    return base.atByte(at, a.getPrecision().activations);
  }
  DevicePtr base;
  Arena arena;
};

/// The slice's rows of a [rows, seqLen, width] cache against a
/// [rows, tokens, width] block `tokenStride` elements per token apart.
inline StridedCopy cacheRows(const SliceShape &s, int64_t seqLen, int64_t width,
                      int64_t tokenStride, bool intoCache) {
  StridedCopy c{s.rows, s.tokens, width, 0, 0, 0, 0};
  int64_t blockBatch = s.tokens * tokenStride, cacheBatch = seqLen * width;
  if (intoCache) {
    c.srcBatch = blockBatch, c.srcRow = tokenStride;
    c.dstBatch = cacheBatch, c.dstRow = width;
  } else {
    c.srcBatch = cacheBatch, c.srcRow = width;
    c.dstBatch = blockBatch, c.dstRow = tokenStride;
  }
  return c;
}

} // namespace sluice::rt::block

#endif // SLUICE_RUNTIME_BLOCKS_BLOCK_H
