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
    Kernels &k = c.kernels;
    for (const Part &p : getParts(c)) {
      DevicePtr at = t.x + p.column;
      if (Whole w = getWhole(c, p); w.gathered) {
        gather(c, at, p, w);
        k.normForward(w.rows, p.gain, DevicePtr(), p.tokens, w.cols, true,
                      c.eps(), w.normed, p.xhat, p.rstd);
        k.copyStrided(at, w.normed + c.seams.getShardIndex() * p.cols,
                      {1, p.tokens, p.cols, 0, w.cols, 0, c.size.width});
        continue;
      }
      DevicePtr raw = c.views[Field::Q], normed = c.views[Field::Context];
      k.copyStrided(raw, at, {1, p.tokens, p.cols, 0, c.size.width, 0, p.cols});
      k.normForward(raw, p.gain, DevicePtr(), p.rows, p.dim, true, c.eps(),
                    normed, p.xhat, p.rstd);
      k.copyStrided(at, normed,
                    {1, p.tokens, p.cols, 0, p.cols, 0, c.size.width});
    }
  }

  /// Back through the norms: the projection's output gradient in place,
  /// the gains' gradients here (they need only what F kept).
  bool backward(Slot, const SlotContext &c,
                const SlotTensors &t) const override {
    Kernels &k = c.kernels;
    for (const Part &p : getParts(c)) {
      DevicePtr at = t.x + p.column;
      if (Whole w = getWhole(c, p); w.gathered) {
        gather(c, at, p, w);
        k.normParamGrads(w.rows, p.xhat, p.tokens, w.cols, p.dgain,
                         DevicePtr());
        k.fill(w.normed, 0.0, p.tokens * w.cols);
        k.normBackward(w.rows, p.xhat, p.rstd, p.gain, p.tokens, w.cols, true,
                       w.normed);
        k.copyStrided(at, w.normed + c.seams.getShardIndex() * p.cols,
                      {1, p.tokens, p.cols, 0, w.cols, 0, c.size.width});
        continue;
      }
      DevicePtr grad = t.temp, into = t.temp2;
      k.copyStrided(grad, at,
                    {1, p.tokens, p.cols, 0, c.size.width, 0, p.cols});
      k.normParamGrads(grad, p.xhat, p.rows, p.dim, p.dgain, DevicePtr());
      k.fill(into, 0.0, p.tokens * p.cols);
      k.normBackward(grad, p.xhat, p.rstd, p.gain, p.rows, p.dim, true, into);
      k.copyStrided(at, into,
                    {1, p.tokens, p.cols, 0, p.cols, 0, c.size.width});
    }
    return true;
  }

private:
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
