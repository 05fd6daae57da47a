//===- Shape.cpp - mla: multi-head latent attention -----------------------===//
//
// DeepSeek-V2's and V3's attention (Liu et al., 2024, "DeepSeek-V3
// Technical Report", section 2.1.1; DeepSeek-V2, section 2.1): the keys
// and values of every head come from one compressed latent per token, and
// so may the queries; each query and key head is a part without positions
// (head_dim - rope_head_dim) and a rotated part (rope_head_dim), the
// keys' rotated part one vector every head shares. With a = the
// attention's input (after its norm), per token:
//
//   c_q  = rms(a W_qa)                       [q_lora_rank]   (or none)
//   q    = c_q W_qb  (or a W_q)              heads x [nope | rope]
//   [c_kv | k_r] = a W_kva                   [kv_lora_rank | rope_head_dim]
//   kv   = rms(c_kv) W_kvb                   heads x [k nope | v]
//   k    = [k nope | rotate(k_r)] per head,  q's rope part rotated alike
//
// The feature owns the QKV projection and its rotation
// (Slot::QueryKeyValue): it writes the core's [q | k | v] (heads = kv
// heads, head_dim for q and k, v_head_dim for v), and the core attends,
// caches and projects the output as for any layer. Its parameters:
//
//   attn.q_a.weight        [hidden, q_lora_rank]          (with q_lora_rank)
//   attn.q_a_norm.weight   [q_lora_rank]
//   attn.q_b.weight        [q_lora_rank, heads x head_dim]
//   attn.q.weight          [hidden, heads x head_dim]     (without)
//   attn.kv_a.weight       [hidden, kv_lora_rank + rope_head_dim]
//   attn.kv_a_norm.weight  [kv_lora_rank]
//   attn.kv_b.weight       [kv_lora_rank, heads x (nope + v_head_dim)]
//
// Split over tensor-parallel shards by heads: the up-projections' columns
// (q_b or q, kv_b) are each shard's heads'; the down-projections and
// their norms are whole on every shard, which computes the same latents,
// and their gradients are each shard's heads' part, which the group sums
// (Reduce::Shards), as is the input's gradient.
//
//===----------------------------------------------------------------------===//

#include "sluice/Blocks/Feature.h"
#include "sluice/Blocks/Spec.h"

namespace sluice::blocks {
namespace {

class Mla final : public Feature {
public:
  Mla()
      : Feature({"mla", getSlotBit(Slot::QueryKeyValue), /*order=*/100,
                 /*field=*/nullptr, /*variants=*/3}) {}
  bool isEnabled(const LayerConfig &layer) const override {
    return layer.kvLoraRank > 0;
  }
  /// Every head its own key and value, heads of 6 (2 without positions,
  /// 4 rotated) with values of 4; variant 0 compresses the queries too,
  /// variant 1 projects them at once (DeepSeek-V2-Lite), variant 2 turns
  /// the rotated part in adjacent pairs (DeepSeek-V3's rope_interleave).
  void setEnabled(LayerConfig &layer, bool on, int variant) const override {
    if (!on) {
      layer.kvLoraRank = layer.qLoraRank = layer.ropeHeadDim = 0;
      layer.ropeInterleave = false;
      return;
    }
    layer.kvHeads = layer.heads;
    layer.headDim = 6;
    layer.vHeadDim = 4;
    layer.kvLoraRank = 6;
    layer.qLoraRank = variant == 1 ? 0 : 5;
    layer.ropeHeadDim = 4;
    layer.ropeInterleave = variant == 2;
  }

  std::string check(const LayerConfig &l, int64_t hidden) const override {
    auto text = [](int64_t v) { return std::to_string(v); };
    int64_t d = getHeadDim(l, hidden);
    if (l.kvHeads != l.heads)
      return "multi-head latent attention ('kv_lora_rank') gives every head "
             "its own key and value: 'kv_heads' = " +
             text(l.kvHeads) + " must equal 'heads' = " + text(l.heads);
    if (l.ropeHeadDim < 2 || l.ropeHeadDim % 2 != 0 || l.ropeHeadDim >= d)
      return "'rope_head_dim' = " + text(l.ropeHeadDim) +
             " must be even, at least 2 and below the head size " + text(d) +
             " (the rest of each query and key head has no positions)";
    if (!(l.rotary.theta > 0))
      return "multi-head latent attention rotates each head's last "
             "'rope_head_dim' = " +
             text(l.ropeHeadDim) + " dimensions: the layer needs 'rope_theta'";
    if (l.bias || l.qkvBias || l.qkNorm != "none")
      return std::string("'") +
             (l.qkNorm != "none" ? "qk_norm" : l.bias ? "bias" : "qkv_bias") +
             "' acts on the core's QKV projection, which multi-head latent "
             "attention ('kv_lora_rank') replaces";
    return "";
  }

  void addParameters(Slot, const LayerShape &shape,
                     std::vector<rt::ParameterSpec> &out) const override {
    const LayerConfig &l = shape.layer;
    int64_t h = shape.hidden(), heads = l.heads, d = l.headDim,
            kv = l.headDim - l.ropeHeadDim + l.getValueDim();
    int64_t local = heads / shape.shard.count, t = shape.shard.index;
    auto whole = [&](const char *name, std::vector<int64_t> dims,
                     rt::InitKind init, bool matmul) {
      out.push_back({shape.prefix + name, std::move(dims), init});
      out.back().reduce = rt::Reduce::Shards;
      out.back().matmul = matmul;
    };
    auto heads_ = [&](const char *name, int64_t in, int64_t perHead) {
      out.push_back(rt::makeParameter(shape.prefix + name, {in, heads * perHead},
                                      rt::InitKind::Normal, shape.shard,
                                      rt::Split::Columns,
                                      {{t * local * perHead, local * perHead}}));
      out.back().matmul = true;
    };
    if (l.qLoraRank > 0) {
      whole("attn.q_a.weight", {h, l.qLoraRank}, rt::InitKind::Normal, true);
      whole("attn.q_a_norm.weight", {l.qLoraRank}, rt::InitKind::Ones, false);
      heads_("attn.q_b.weight", l.qLoraRank, d);
    } else {
      heads_("attn.q.weight", h, d);
    }
    whole("attn.kv_a.weight", {h, l.kvLoraRank + l.ropeHeadDim},
          rt::InitKind::Normal, true);
    whole("attn.kv_a_norm.weight", {l.kvLoraRank}, rt::InitKind::Ones, false);
    heads_("attn.kv_b.weight", l.kvLoraRank, kv);
  }

  /// Forward: the query latent normalised and its norm's output (0; with
  /// q_lora_rank), the key/value latent's (1), their 1/rms (2, fp32).
  /// Weight: the gradients at q and at the key/value up-projection's
  /// output (3); at the query latent before and after its norm, at the
  /// down-projection's output [c_kv | k_r], at the key/value latent after
  /// its norm (4). All over the whole slice (the projection's input is
  /// gathered under sequence parallelism); heads are the shard's.
  void walkState(State state, Slot, const LayerShape &shape,
                 const rt::SliceShape &s, const RegionFn &fn) const override {
    const LayerConfig &l = shape.layer;
    int64_t rt = s.rows * s.tokens, qr = l.qLoraRank, kvr = l.kvLoraRank;
    if (state == State::Forward) {
      if (qr > 0)
        fn(0, 2 * rt * qr, rt::Storage::Activation);
      fn(1, 2 * rt * kvr, rt::Storage::Activation);
      fn(2, (qr > 0 ? rt : 0) + rt, rt::Storage::Fp32);
      return;
    }
    int64_t nope = l.headDim - l.ropeHeadDim;
    fn(3, rt * l.heads * (l.headDim + nope + l.getValueDim()),
       rt::Storage::Activation);
    fn(4, 2 * rt * qr + rt * (kvr + l.ropeHeadDim) + rt * kvr,
       rt::Storage::Activation);
  }

  /// F: the query latent before its norm, q, the key/value up-projection's
  /// output, the rotated parts gathered (the queries', the key's before
  /// and after); B: the rotated parts' gradients (the queries', the key's
  /// per head then summed), a column of ones for that sum, the key/value
  /// latent's gradient before its norm. The larger of the two.
  int64_t getScratchElements(const LayerShape &shape,
                             const rt::SliceShape &s) const override {
    const LayerConfig &l = shape.layer;
    int64_t rt = s.rows * s.tokens, heads = l.heads, dr = l.ropeHeadDim;
    int64_t nope = l.headDim - dr;
    int64_t forward = rt * std::max(l.qLoraRank, l.kvLoraRank) +
                      rt * heads * l.headDim +
                      rt * heads * (nope + l.getValueDim()) +
                      rt * heads * dr + 2 * rt * dr;
    int64_t backward =
        rt * heads * dr + heads * rt * dr + rt * dr + heads + rt * l.kvLoraRank;
    return std::max(forward, backward);
  }
};

} // namespace

SLUICE_DEFINE_FEATURE(mla, Mla)

} // namespace sluice::blocks
