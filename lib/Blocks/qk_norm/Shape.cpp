//===- Shape.cpp - qk_norm: query and key norms ---------------------------===//
//
// RMS norms on the queries and keys after their projection, before the
// rotary positions, so the attention's scores stay bounded however large
// the projections grow (Dehghani et al., 2023; Wortsman et al., 2023):
//
//  * `qk_norm = heads` normalises each head over its head_dim, with one
//    gain of head_dim for the query heads and one for the key heads (Qwen3:
//    Yang et al., 2025; Gemma-3: Gemma Team, 2025). Every tensor-parallel
//    shard holds both gains whole; its gradient is its own heads' part,
//    which the group sums (Reduce::Shards).
//  * `qk_norm = projection` normalises the whole query and the whole key
//    projection, a gain per column (OLMo-2: OLMo Team, 2024). Split over
//    tensor-parallel shards, a row's statistic spans every shard's heads:
//    each shard gathers the group's parts, normalises the whole rows as one
//    process would (so the result is the unsplit one, bit for bit) and
//    keeps its own columns; B gathers the output gradient alike. The gains
//    are whole on every shard, each computing their whole gradient, so
//    nothing is summed. Replicated key/value heads (fewer than the shards)
//    would count a head once per replica in the statistic: refused.
//
//===----------------------------------------------------------------------===//

#include "sluice/Blocks/Feature.h"

namespace sluice::blocks {
namespace {

class QkNorm final : public Feature {
public:
  // After a bias on the projection.
  QkNorm()
      : Feature({"qk_norm", getSlotBit(Slot::Projections), /*order=*/30,
                 /*field=*/nullptr, /*variants=*/2}) {}
  bool isEnabled(const LayerConfig &layer) const override {
    return layer.qkNorm != "none";
  }
  /// Variant 0: per head; 1: over the whole projection.
  void setEnabled(LayerConfig &layer, bool on, int variant) const override {
    layer.qkNorm = !on ? "none" : variant == 0 ? "heads" : "projection";
  }

  std::string checkTensorParallel(const LayerConfig &l, int tp) const override {
    if (l.qkNorm != "projection" || l.kvHeads % tp == 0)
      return "";
    return "the key projection's norm (qk_norm = projection) spans its " +
           std::to_string(l.kvHeads) +
           " key/value heads, which do not divide among " + std::to_string(tp) +
           " tensor-parallel shards";
  }

  void addParameters(Slot, const LayerShape &shape,
                     std::vector<rt::ParameterSpec> &out) const override {
    const LayerConfig &l = shape.layer;
    bool heads = l.qkNorm == "heads";
    for (auto [name, columns] :
         {std::pair{"attn.q_norm.weight", l.heads * l.headDim},
          std::pair{"attn.k_norm.weight", l.kvHeads * l.headDim}}) {
      out.push_back({shape.prefix + name,
                     {heads ? l.headDim : columns},
                     rt::InitKind::Ones});
      out.back().reduce = heads ? rt::Reduce::Shards : rt::Reduce::None;
    }
  }

  /// The normalised queries and their 1/std (regions 0, 1), the keys'
  /// (2, 3): per head, or per token of the whole projection (the group's
  /// columns, under tensor parallelism).
  void walkState(State state, Slot, const LayerShape &shape,
                 const rt::SliceShape &s, const RegionFn &fn) const override {
    if (state != State::Forward)
      return;
    const LayerConfig &l = shape.layer;
    int64_t rt = s.rows * s.tokens;
    bool heads = l.qkNorm == "heads";
    int tp = heads ? 1 : std::max(1, shape.model.tensorShards);
    fn(0, rt * l.heads * l.headDim * tp, rt::Storage::Activation);
    fn(1, rt * (heads ? l.heads : 1), rt::Storage::Fp32);
    fn(2, rt * l.kvHeads * l.headDim * tp, rt::Storage::Activation);
    fn(3, rt * (heads ? l.kvHeads : 1), rt::Storage::Fp32);
  }

  /// Split projections: the group's parts as gathered, the whole rows and
  /// their normalised form, each as large as the whole query projection.
  int64_t getScratchElements(const LayerShape &shape,
                             const rt::SliceShape &s) const override {
    const LayerConfig &l = shape.layer;
    int tp = shape.model.tensorShards;
    if (l.qkNorm != "projection" || tp <= 1)
      return 0;
    return 3 * s.rows * s.tokens * l.heads * l.headDim * tp;
  }
};

} // namespace

SLUICE_DEFINE_FEATURE(qk_norm, QkNorm)

} // namespace sluice::blocks
