//===- Shape.cpp - moe: a mixture of experts in the feed-forward's place --===//
//
// The sparse mixture-of-experts layer of Mixtral (Jiang et al., 2024,
// section 2.1), Qwen-MoE and OLMoE: a router W_r (hidden x experts) scores
// each token, a softmax over the experts and its top_k (renormalised over
// the k with norm_top_k) choose and weigh the token's experts, each expert
// a gated block of the layer's `mlp` kind and `ffn` width, and the block's
// output is the weighted sum of the k experts' outputs. Dropless: every
// token reaches its k experts (no capacity factor), as transformers
// computes these models.
//
// The feature owns the whole feed-forward block (Slot::FeedForward), so
// the core declares no up, gate or down map for its layers. Its parameters:
//
//   mlp.router.weight        [hidden, experts]
//   mlp.experts.gate.weight  [experts * hidden, ffn]   expert e's rows
//   mlp.experts.up.weight    [experts * hidden, ffn]   e * hidden ...
//   mlp.experts.down.weight  [experts * ffn, hidden]   e * ffn ...
//
// one tensor per map, the experts stacked, so the grouped GEMM finds expert
// e at a fixed stride. With `shared_ffn` (Qwen2-MoE), a shared expert every
// token passes through, scaled by sigmoid(c . w) per token:
//
//   mlp.shared.gate.weight   [hidden, shared_ffn]
//   mlp.shared.up.weight     [hidden, shared_ffn]
//   mlp.shared.down.weight   [shared_ffn, hidden]
//   mlp.shared_gate.weight   [hidden, 1]    (with `shared_gate`)
//
// DeepSeek-V3's router (`router` = sigmoid; Liu et al., 2024, "DeepSeek-V3
// Technical Report", section 2.1.2) scores each expert by its own sigmoid
// and chooses by score plus a per-expert bias that no gradient reaches:
//
//   mlp.router.bias          [experts]      zero until loaded or balanced
//
// which the auxiliary-loss-free balancing (`bias_update`) moves after each
// step (runtime/executor/ExpertBias.h). Split over tensor-parallel shards each expert is
// split as the core's block is (Megatron-LM's expert tensor parallelism):
// its gate and up maps by columns, its down map by rows, so each shard
// computes a partial sum of every expert's output that the group's
// reduction after the block completes. The router is whole on every shard
// and routes identically there (the same input, weights and kernel); its
// gradient is a partial sum per shard (the weights' gradients come from
// the shard's partial expert outputs, and the router's backward is linear
// in them), which the group sums (Reduce::Shards).
//
//===----------------------------------------------------------------------===//

#include "sluice/Blocks/ExpertCapacity.h"
#include "sluice/Blocks/Feature.h"

namespace sluice::blocks {
namespace {

/// Sums of a list of ranges.
int64_t getTotal(const std::vector<rt::IndexRange> &ranges) {
  int64_t n = 0;
  for (const rt::IndexRange &r : ranges)
    n += r.count;
  return n;
}

/// An expert map `name` of `whole` shape as this shard and expert-group
/// member hold it: its `rows` and `columns` (empty: all), a slice named
/// after both splits ("tp1of2.ep0of2") where either splits it, the whole
/// tensor otherwise.
rt::ParameterSpec getExpertSlice(const LayerShape &shape, const char *name,
                                 std::vector<int64_t> whole,
                                 std::vector<rt::IndexRange> rows,
                                 std::vector<rt::IndexRange> columns) {
  // (Not `matmul`: the experts' FLOPs are getForwardFlops', per copy.)
  rt::ParameterSpec spec{shape.prefix + name, whole, rt::InitKind::Normal};
  const rt::TensorShard &at = shape.shard;
  if (at.count <= 1 && at.experts <= 1)
    return spec;
  if (at.count > 1)
    spec.sliceName =
        "tp" + std::to_string(at.index) + "of" + std::to_string(at.count);
  spec.expertShare = at.experts > 1;
  if (at.experts > 1)
    spec.sliceName += std::string(spec.sliceName.empty() ? "" : ".") + "ep" +
                      std::to_string(at.expert) + "of" +
                      std::to_string(at.experts);
  spec.whole = whole;
  // A range list covering the whole dimension says "all" (the empty list).
  auto keep = [](std::vector<rt::IndexRange> &list, int64_t size) {
    if (list.size() == 1 && list[0].first == 0 && list[0].count == size)
      list.clear();
  };
  keep(rows, whole[0]);
  keep(columns, whole[1]);
  if (!rows.empty())
    spec.shape[0] = getTotal(rows);
  if (!columns.empty())
    spec.shape[1] = getTotal(columns);
  spec.rows = std::move(rows);
  spec.columns = std::move(columns);
  return spec;
}

class Moe final : public Feature {
public:
  Moe()
      : Feature({"moe", getSlotBit(Slot::FeedForward), /*order=*/100,
                 /*field=*/nullptr, /*variants=*/4, /*identityAtInit=*/false,
                 /*differenceStep=*/2e-3}) {}
  bool isEnabled(const LayerConfig &layer) const override {
    return layer.experts > 0;
  }
  /// Four experts, two per token; variant 1 renormalises their weights,
  /// variant 2 adds a shared expert half the experts' width; variant 3 is
  /// DeepSeek-V3's: eight experts in four groups, two per token from the
  /// two best groups by sigmoid scores, renormalised and scaled, and an
  /// ungated shared expert.
  void setEnabled(LayerConfig &layer, bool on, int variant) const override {
    bool deepSeek = on && variant == 3;
    layer.experts = on ? (deepSeek ? 8 : 4) : 0;
    layer.topK = on ? 2 : 0;
    layer.normTopK = on && (variant == 1 || deepSeek);
    layer.sharedFfn = on && (variant == 2 || deepSeek) ? layer.ffn / 2 : 0;
    layer.router = deepSeek ? "sigmoid" : "softmax";
    layer.expertGroups = deepSeek ? 4 : 0;
    layer.topGroups = deepSeek ? 2 : 0;
    layer.routedScale = deepSeek ? 2.5 : 1.0;
    layer.sharedGate = !deepSeek;
  }

  std::string check(const LayerConfig &l, int64_t) const override {
    if (l.topK < 1 || l.topK > l.experts)
      return "'top_k' = " + std::to_string(l.topK) +
             " must be between 1 and 'experts' = " + std::to_string(l.experts);
    if (std::string why = checkRouting(l); !why.empty())
      return why;
    if (!l.isGated())
      return "a mixture of experts' experts are gated blocks ('mlp' = swiglu "
             "or geglu); this layer's 'mlp' is gelu";
    if (l.bias)
      return "'bias' with 'experts': the experts' maps have no biases (no "
             "family Sluice reads has them)";
    return "";
  }

  /// DeepSeek's router: the groups, the scale, the bias and its update.
  static std::string checkRouting(const LayerConfig &l) {
    auto text = [](int64_t v) { return std::to_string(v); };
    if (l.expertGroups == 0 && l.topGroups != 0)
      return "'top_groups' = " + text(l.topGroups) +
             " limits routing to groups, but the layer has no "
             "'expert_groups'";
    if (l.expertGroups != 0) {
      if (l.expertGroups > moe::kMaxExpertGroups || l.experts % l.expertGroups != 0)
        return "'expert_groups' = " + text(l.expertGroups) +
               " must divide 'experts' = " + text(l.experts) +
               " and be at most " + text(moe::kMaxExpertGroups);
      if (l.topGroups < 1 || l.topGroups > l.expertGroups)
        return "'top_groups' = " + text(l.topGroups) +
               " must be between 1 and 'expert_groups' = " +
               text(l.expertGroups);
      if (l.topGroups * (l.experts / l.expertGroups) < l.topK)
        return "'top_groups' = " + text(l.topGroups) + " groups of " +
               text(l.experts / l.expertGroups) +
               " experts hold fewer than 'top_k' = " + text(l.topK);
    }
    if (!(l.routedScale > 0))
      return "'routed_scale' must be positive, got " +
             std::to_string(l.routedScale);
    if (l.biasUpdate != 0 && l.router != "sigmoid")
      return "'bias_update' moves the bias of a sigmoid router; this layer's "
             "'router' is " +
             l.router;
    if (l.auxLoss != 0 && l.router != "softmax")
      return "'aux_loss' is the softmax router's load-balancing loss "
             "(transformers' load_balancing_loss_func); a sigmoid router "
             "balances by 'bias_update'";
    if (!l.sharedGate && l.sharedFfn == 0)
      return "'shared_gate' = false, but the layer has no shared expert "
             "('shared_ffn')";
    return "";
  }

  std::string checkTensorParallel(const LayerConfig &l, int tp) const override {
    if (l.sharedFfn % tp == 0)
      return "";
    return "the shared expert's width " + std::to_string(l.sharedFfn) +
           " ('shared_ffn') is not divisible by " + std::to_string(tp) +
           " tensor-parallel shards";
  }

  void addParameters(Slot, const LayerShape &shape,
                     std::vector<rt::ParameterSpec> &out) const override {
    const LayerConfig &l = shape.layer;
    int64_t h = shape.hidden(), e = l.experts, f = l.ffn;
    out.push_back({shape.prefix + "mlp.router.weight", {h, e}});
    out.back().reduce = rt::Reduce::Shards;
    out.back().matmul = true;
    // The choice's bias: no gradient reaches it (its gradient stays zero,
    // so Adam leaves it; a vector, so no weight decay), the balancing rule
    // moves it.
    if (l.router == "sigmoid")
      out.push_back({shape.prefix + "mlp.router.bias", {e},
                     rt::InitKind::Zeros});
    // This member's experts (expert parallelism: its share of them, whole)
    // and every one's share on this shard: its columns of the gate and up
    // maps, its rows of the down map.
    int64_t local = e / shape.shard.experts,
            first = int64_t(shape.shard.expert) * local;
    std::vector<rt::IndexRange> rows;
    for (const rt::IndexRange &r : shape.split.ffn)
      for (int64_t x = first; x < first + local; ++x)
        rows.push_back({x * f + r.first, r.count});
    for (const char *name : {"mlp.experts.gate.weight", "mlp.experts.up.weight"})
      out.push_back(getExpertSlice(shape, name, {e * h, f},
                                   {{first * h, local * h}}, shape.split.ffn));
    out.push_back(getExpertSlice(shape, "mlp.experts.down.weight", {e * f, h},
                                 rows, {}));
    if (l.sharedFfn == 0)
      return;
    // The shared expert split as the core's block is; its gate whole on
    // every shard, its gradient a partial sum per shard as the router's.
    int64_t fs = l.sharedFfn / shape.shard.count;
    std::vector<rt::IndexRange> part = {{shape.shard.index * fs, fs}};
    for (const char *name : {"mlp.shared.gate.weight", "mlp.shared.up.weight"})
      out.push_back(rt::makeParameter(shape.prefix + name, {h, l.sharedFfn},
                                      rt::InitKind::Normal, shape.shard,
                                      rt::Split::Columns, part));
    for (rt::ParameterSpec *p : {&out[out.size() - 2], &out.back()})
      p->matmul = true;
    out.push_back(rt::makeParameter(shape.prefix + "mlp.shared.down.weight",
                                    {l.sharedFfn, h}, rt::InitKind::Normal,
                                    shape.shard, rt::Split::Rows, part));
    out.back().matmul = true;
    if (!l.sharedGate)
      return;
    out.push_back({shape.prefix + "mlp.shared_gate.weight", {h, 1}});
    out.back().reduce = rt::Reduce::Shards;
    out.back().matmul = true;
  }

  /// Forward (region ids are shared by both states, so each its own):
  /// the routing (0, fp32 storage): the router's probabilities, the
  /// copies' weights, then as i32 each copy's expert, the copies sorted by
  /// expert, their inverse and each expert's first row; the experts' up
  /// and gate pre-activations and activation (1); their outputs (2),
  /// which the weights' gradient reads. Weight: the up and gate
  /// pre-activations' gradients (3), the experts' output gradients (4),
  /// the router logits' gradient (5). With a shared expert, its gate's
  /// values follow the routing (0); its pre-activations, activation and
  /// output are forward region 6, and the pre-activations' and the output's
  /// gradients and the gate's logit gradient weight region 7 (without
  /// `shared_gate` neither gate value nor its gradient).
  ///
  /// Under expert parallelism the experts compute on the rows their
  /// member receives (getExpertRows: R), so regions 1, 3 and 4 hold R
  /// rows, region 1 the received input rows after the activation (W reads
  /// them), and the routing ends with the dispatch's counts
  /// (getDispatchInts). Region 2 stays the copies' outputs, returned.
  void walkState(State state, Slot, const LayerShape &shape,
                 const rt::SliceShape &s, const RegionFn &fn) const override {
    const LayerConfig &l = shape.layer;
    int members = shape.model.expertShards;
    int64_t rt = s.rows * s.tokens, copies = rt * l.topK, h = shape.hidden();
    int64_t rows =
        moe::getExpertRows(rt, l, members, shape.model.expertCapacity);
    int64_t fs = l.sharedFfn, gate = moe::hasSharedGate(l) ? rt : 0;
    if (state == State::Forward) {
      fn(0,
         rt * l.experts + 4 * copies + l.experts + 1 + gate +
             moe::getDispatchInts(l, members),
         rt::Storage::Fp32);
      fn(1, 3 * rows * l.ffn + (members > 1 ? rows * h : 0),
         rt::Storage::Activation);
      fn(2, copies * h, rt::Storage::Activation);
      if (fs)
        fn(6, 3 * rt * fs + rt * h, rt::Storage::Activation);
      return;
    }
    fn(3, 2 * rows * l.ffn, rt::Storage::Activation);
    fn(4, rows * h, rt::Storage::Activation);
    fn(5, rt * l.experts, rt::Storage::Activation);
    if (fs)
      fn(7, 2 * rt * fs + rt * h + gate, rt::Storage::Activation);
  }

  /// F: the router's fp32 logits (and the shared gate's) and the permuted
  /// input; B: the copies' fp32 weight gradients and the logits' (and the
  /// shared gate's), the permuted input's gradient, the activation's (and
  /// the shared expert's). fp32 counts as two activation elements, and the
  /// fp32 parts come first, so each stays 4-byte aligned. Under expert
  /// parallelism also the copies' output gradients before they leave, the
  /// all-to-all's source-ordered rows and the experts' rows in expert
  /// order (F their outputs, B their input gradients), and the
  /// activation's gradient over the received rows.
  int64_t getScratchElements(const LayerShape &shape,
                             const rt::SliceShape &s) const override {
    const LayerConfig &l = shape.layer;
    int members = shape.model.expertShards;
    int64_t rt = s.rows * s.tokens, copies = rt * l.topK, h = shape.hidden();
    int64_t fixed = 2 * copies + 2 * rt * l.experts + 2 * rt + rt * l.sharedFfn;
    if (members <= 1)
      return fixed + copies * h + copies * l.ffn;
    int64_t rows =
        moe::getExpertRows(rt, l, members, shape.model.expertCapacity);
    return fixed + 2 * copies * h + 2 * rows * h + rows * l.ffn;
  }

  /// The experts a token is not routed to: experts - top_k of them.
  int64_t getInactiveParameters(const LayerShape &shape) const override {
    const LayerConfig &l = shape.layer;
    return (l.experts - l.topK) * 3 * shape.hidden() * l.ffn;
  }

  /// The experts' maps on each token's k copies (gate, up and down); the
  /// router is a declared linear map, which the cost model counts itself.
  double getForwardFlops(const LayerShape &shape, int64_t tokens,
                         int64_t) const override {
    const LayerConfig &l = shape.layer;
    // (The shared expert's maps are declared linear maps.)
    return 2.0 * double(tokens) * double(l.topK) * 3.0 *
           double(shape.hidden()) * double(l.ffn);
  }
};

} // namespace

SLUICE_DEFINE_FEATURE(moe, Moe)

} // namespace sluice::blocks
