//===- Compute.cpp - qk_norm: query and key norms -------------------------===//
//
// The query and key parts of the projection's output, each normalised in
// place: per head (rows x heads rows of head_dim), or per token over the
// whole projection. A norm reads and writes contiguous rows, so each part
// goes through the layer's Q (free until the rotated queries land there)
// and Context (free until attention writes it) regions -- or, split over
// tensor-parallel shards, through the feature's scratch, where the group's
// parts are gathered into whole rows (Shape.cpp says why).
//
//===----------------------------------------------------------------------===//

#include "Slots.h"

namespace sluice::rt::block {
namespace {

class QkNormCompute final : public FeatureCompute {
public:
  void forward(Slot, const SlotContext &c,
               const SlotTensors &t) const override {
    for (const Part &p : getParts(c))
      applyByRows(c, p, t.x, c.views[Field::Q], c.views[Field::Context],
                  [&](DevicePtr in, DevicePtr out, int64_t rows, int64_t dim) {
                    c.kernels.normForward(in, p.gain, DevicePtr(), rows, dim,
                                          true, c.eps(), out, p.xhat, p.rstd);
                  });
  }

  /// Back through the norms: the projection's output gradient in place,
  /// the gains' gradients here (they need only what F kept).
  bool backward(Slot, const SlotContext &c,
                const SlotTensors &t) const override {
    Kernels &k = c.kernels;
    for (const Part &p : getParts(c))
      applyByRows(
          c, p, t.x, t.temp, t.temp2,
          [&](DevicePtr in, DevicePtr out, int64_t rows, int64_t dim) {
            k.normParamGrads(in, p.xhat, rows, dim, p.dgain, DevicePtr());
            k.fill(out, 0.0, rows * dim);
            k.normBackward(in, p.xhat, p.rstd, p.gain, rows, dim, true, out);
          });
    return true;
  }

private:
  struct Part;
  /// Applies `op(in, out, rows, dim)` to part `p` of the projection's
  /// output `x` (or its gradient) as the norm's contiguous rows, and puts
  /// `out` back in its place: split over shards, on the group's gathered
  /// whole rows (the feature's scratch), keeping this shard's columns;
  /// else on this shard's rows, copied into `in` with `out` beside it.
  template <typename Op>
  static void applyByRows(const SlotContext &c, const Part &p, DevicePtr x,
                          DevicePtr in, DevicePtr out, Op op) {
    Kernels &k = c.kernels;
    DevicePtr at = x + p.column;
    if (Whole w = getWhole(c, p); w.gathered) {
      gather(c, at, p, w);
      op(w.rows, w.normed, p.tokens, w.cols);
      k.copyStrided(at, w.normed + c.seams.getShardIndex() * p.cols,
                    {1, p.tokens, p.cols, 0, w.cols, 0, c.size.width});
      return;
    }
    k.copyStrided(in, at, {1, p.tokens, p.cols, 0, c.size.width, 0, p.cols});
    op(in, out, p.rows, p.dim);
    k.copyStrided(at, out, {1, p.tokens, p.cols, 0, p.cols, 0, c.size.width});
  }

  /// The query or key part of the projection: its first column and
  /// width, the norm's rows and their size, its gain and its regions.
  struct Part {
    int64_t column, cols, tokens, rows, dim;
    DevicePtr gain, dgain, xhat, rstd;
  };
  static std::vector<Part> getParts(const SlotContext &c) {
    const LayerConfig &l = c.layer;
    bool heads = l.qkNorm == "heads";
    int64_t rt = c.size.rt;
    auto part = [&](int64_t column, int64_t count, const char *gain,
                    int region) {
      int64_t cols = count * l.headDim;
      return Part{column,
                  cols,
                  rt,
                  heads ? rt * count : rt,
                  heads ? l.headDim : cols,
                  c.weight(gain),
                  c.grad(gain),
                  c.region(region),
                  c.region(region + 1)};
    };
    return {part(0, l.heads, "attn.q_norm.weight", 0),
            part(c.size.hd, l.kvHeads, "attn.k_norm.weight", 2)};
  }

  /// A projection norm split over shards: the gathered parts, the whole
  /// rows and their normalised form (the feature's scratch).
  struct Whole {
    bool gathered = false;
    int64_t cols = 0;
    DevicePtr parts, rows, normed;
  };
  static Whole getWhole(const SlotContext &c, const Part &p) {
    int tp = c.seams.getShardCount();
    if (c.layer.qkNorm != "projection" || tp <= 1)
      return {};
    int64_t most = c.size.rt * c.size.hd * tp;
    return {true, p.cols * tp, c.scratch, c.scratch + most,
            c.scratch + 2 * most};
  }
  /// The group's parts of `at` (this shard's columns of the projection)
  /// into whole rows.
  static void gather(const SlotContext &c, DevicePtr at, const Part &p,
                     const Whole &w) {
    int tp = c.seams.getShardCount();
    int64_t part = p.tokens * p.cols;
    c.kernels.copyStrided(w.parts + c.seams.getShardIndex() * part, at,
                          {1, p.tokens, p.cols, 0, c.size.width, 0, p.cols});
    c.seams.gatherShards(w.parts, part);
    c.kernels.copyStrided(w.rows, w.parts,
                          {tp, p.tokens, p.cols, part, p.cols, p.cols, w.cols});
  }
};

} // namespace

SLUICE_DEFINE_COMPUTE(qk_norm, QkNormCompute)

} // namespace sluice::rt::block
