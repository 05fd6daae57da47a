//===- Compute.cpp - mla: multi-head latent attention ---------------------===//
//
// F, B and W of multi-head latent attention's projection (Shape.cpp), on
// the kernel list's GEMMs, norms, rotations and strided copies. F writes
// the core's [q | k | v] with each query and key head as [nope | rope],
// the rope part rotated: the same layout as transformers'
// DeepseekV3Attention, whose rope part (with rope_interleave) is first
// reordered from adjacent pairs to halves and then turned as any rotary
// part is -- which is what F does too. The keys' rope part is one vector
// per token, turned once and copied to every head; in B its gradient is
// the sum over the heads (one GEMM with a row of ones).
//
// The latents' norms take transformers' default epsilon, 1e-6, whatever
// the model's: DeepseekV3Attention builds them without the config's
// rms_norm_eps.
//
//===----------------------------------------------------------------------===//

#include "Slots.h"

namespace sluice::rt::block {
namespace {

constexpr float kLatentNormEps = 1e-6f;

class MlaCompute final : public FeatureCompute {
public:
  void forward(Slot, const SlotContext &c,
               const SlotTensors &t) const override {
    Kernels &k = c.kernels;
    Sizes z = getSizes(c);
    State st = getState(c, z);
    // Scratch: a latent before its norm, q, the key/value up-projection's
    // output, the rotated parts.
    DevicePtr latent = c.scratch, q = latent + z.rt * std::max(z.qr, z.kvr);
    DevicePtr kv = q + z.rt * z.qw, qRope = kv + z.rt * z.kvw;
    DevicePtr kRaw = qRope + z.rt * z.H * z.dr, kRope = kRaw + z.rt * z.dr;
    // The queries: from their latent, or at once.
    if (z.qr > 0) {
      k.gemm(false, false, z.rt, z.qr, z.h, 1.0f, t.x, z.h,
             c.weight("attn.q_a.weight"), z.qr, 0.0f, latent, z.qr);
      k.normForward(latent, c.weight("attn.q_a_norm.weight"), DevicePtr(),
                    z.rt, z.qr, true, kLatentNormEps, st.cq, st.xq, st.rq);
      k.gemm(false, false, z.rt, z.qw, z.qr, 1.0f, st.cq, z.qr,
             c.weight("attn.q_b.weight"), z.qw, 0.0f, q, z.qw);
    } else {
      k.gemm(false, false, z.rt, z.qw, z.h, 1.0f, t.x, z.h,
             c.weight("attn.q.weight"), z.qw, 0.0f, q, z.qw);
    }
    // The key/value latent and the shared rotated key: one map's two
    // column ranges.
    DevicePtr kva = c.weight("attn.kv_a.weight");
    int64_t lda = z.kvr + z.dr;
    k.gemm(false, false, z.rt, z.kvr, z.h, 1.0f, t.x, z.h, kva, lda, 0.0f,
           latent, z.kvr);
    k.gemm(false, false, z.rt, z.dr, z.h, 1.0f, t.x, z.h, kva + z.kvr, lda,
           0.0f, kRaw, z.dr);
    k.normForward(latent, c.weight("attn.kv_a_norm.weight"), DevicePtr(), z.rt,
                  z.kvr, true, kLatentNormEps, st.ckv, st.xkv, st.rkv);
    k.gemm(false, false, z.rt, z.kvw, z.kvr, 1.0f, st.ckv, z.kvr,
           c.weight("attn.kv_b.weight"), z.kvw, 0.0f, kv, z.kvw);
    // The rotated parts, gathered (pairs reordered to halves), turned.
    gatherRope(c, z, q + z.nope, z.H, z.d, qRope);
    gatherRope(c, z, kRaw, 1, z.dr, kRope);
    // (Each context-parallel chunk at its places in the sequence.)
    int rank = c.seams.getContext().rank;
    rotateAtPositions(k, c.s, rank, qRope, z.H, z.dr, z.H * z.dr,
                      c.layer.rotary, false);
    rotateAtPositions(k, c.s, rank, kRope, 1, z.dr, z.dr, c.layer.rotary,
                      false);
    // [q | k | v] as the core reads them.
    DevicePtr out = t.out, keys = out + z.H * z.d, values = keys + z.H * z.d;
    int64_t w = z.width;
    k.copyStrided(out, q, {z.rt, z.H, z.nope, z.qw, z.d, w, z.d});
    k.copyStrided(out + z.nope, qRope,
                  {z.rt, z.H, z.dr, z.H * z.dr, z.dr, w, z.d});
    k.copyStrided(keys, kv, {z.rt, z.H, z.nope, z.kvw, z.kvHead, w, z.d});
    k.copyStrided(keys + z.nope, kRope, {z.rt, z.H, z.dr, z.dr, 0, w, z.d});
    k.copyStrided(values, kv + z.nope,
                  {z.rt, z.H, z.dv, z.kvw, z.kvHead, w, z.dv});
  }

  /// `grad` the gradient at [q | k | v]; `out` receives the input's.
  bool backward(Slot, const SlotContext &c,
                const SlotTensors &t) const override {
    Kernels &k = c.kernels;
    Sizes z = getSizes(c);
    State st = getState(c, z);
    Grads g = getGrads(c, z);
    DevicePtr qRope = c.scratch, perHead = qRope + z.rt * z.H * z.dr;
    DevicePtr kRope = perHead + z.H * z.rt * z.dr, ones = kRope + z.rt * z.dr;
    DevicePtr dLatent = ones + z.H;
    DevicePtr dq = t.grad, dk = dq + z.H * z.d, dv = dk + z.H * z.d;
    int64_t w = z.width;
    // The queries' gradient in q's layout, its rotated part turned back.
    k.copyStrided(g.q, dq, {z.rt, z.H, z.nope, w, z.d, z.qw, z.d});
    k.copyStrided(qRope, dq + z.nope,
                  {z.rt, z.H, z.dr, w, z.d, z.H * z.dr, z.dr});
    int rank = c.seams.getContext().rank;
    rotateAtPositions(k, c.s, rank, qRope, z.H, z.dr, z.H * z.dr,
                      c.layer.rotary, true);
    scatterRope(c, z, qRope, z.H, g.q + z.nope, z.d);
    // The key/value up-projection's output gradient.
    k.copyStrided(g.kv, dk, {z.rt, z.H, z.nope, w, z.d, z.kvw, z.kvHead});
    k.copyStrided(g.kv + z.nope, dv,
                  {z.rt, z.H, z.dv, w, z.dv, z.kvw, z.kvHead});
    // The shared key's: every head's, head-major, summed by a GEMM with a
    // row of ones, turned back, into the down-projection's columns.
    k.copyStrided(perHead, dk + z.nope,
                  {z.H, z.rt, z.dr, z.d, w, z.rt * z.dr, z.dr});
    k.fill(ones, 1.0, z.H);
    k.gemm(false, false, 1, z.rt * z.dr, z.H, 1.0f, ones, z.H, perHead,
           z.rt * z.dr, 0.0f, kRope, z.rt * z.dr);
    rotateAtPositions(k, c.s, rank, kRope, 1, z.dr, z.dr, c.layer.rotary,
                      true);
    int64_t lda = z.kvr + z.dr;
    scatterRope(c, z, kRope, 1, g.kva + z.kvr, lda);
    // Back through the key/value latent and its norm.
    k.gemm(false, true, z.rt, z.kvr, z.kvw, 1.0f, g.kv, z.kvw,
           c.weight("attn.kv_b.weight"), z.kvw, 0.0f, g.ckv, z.kvr);
    k.fill(dLatent, 0.0, z.rt * z.kvr);
    k.normBackward(g.ckv, st.xkv, st.rkv, c.weight("attn.kv_a_norm.weight"),
                   z.rt, z.kvr, true, dLatent);
    k.copyStrided(g.kva, dLatent, {1, z.rt, z.kvr, 0, z.kvr, 0, lda});
    // The input's: through the queries' maps, then the key/value one.
    if (z.qr > 0) {
      k.gemm(false, true, z.rt, z.qr, z.qw, 1.0f, g.q, z.qw,
             c.weight("attn.q_b.weight"), z.qw, 0.0f, g.cq, z.qr);
      k.fill(g.qa, 0.0, z.rt * z.qr);
      k.normBackward(g.cq, st.xq, st.rq, c.weight("attn.q_a_norm.weight"),
                     z.rt, z.qr, true, g.qa);
      k.gemm(false, true, z.rt, z.h, z.qr, 1.0f, g.qa, z.qr,
             c.weight("attn.q_a.weight"), z.qr, 0.0f, t.out, z.h);
    } else {
      k.gemm(false, true, z.rt, z.h, z.qw, 1.0f, g.q, z.qw,
             c.weight("attn.q.weight"), z.qw, 0.0f, t.out, z.h);
    }
    k.gemm(false, true, z.rt, z.h, lda, 1.0f, g.kva, lda,
           c.weight("attn.kv_a.weight"), lda, 1.0f, t.out, z.h);
    return true;
  }

  /// `x` the input again.
  void weight(Slot, const SlotContext &c,
              const SlotTensors &t) const override {
    Kernels &k = c.kernels;
    Sizes z = getSizes(c);
    State st = getState(c, z);
    Grads g = getGrads(c, z);
    if (z.qr > 0) {
      k.gemm(true, false, z.h, z.qr, z.rt, 1.0f, t.x, z.h, g.qa, z.qr, 1.0f,
             c.grad("attn.q_a.weight"), z.qr);
      k.normParamGrads(g.cq, st.xq, z.rt, z.qr,
                       c.grad("attn.q_a_norm.weight"), DevicePtr());
      k.gemm(true, false, z.qr, z.qw, z.rt, 1.0f, st.cq, z.qr, g.q, z.qw, 1.0f,
             c.grad("attn.q_b.weight"), z.qw);
    } else {
      k.gemm(true, false, z.h, z.qw, z.rt, 1.0f, t.x, z.h, g.q, z.qw, 1.0f,
             c.grad("attn.q.weight"), z.qw);
    }
    int64_t lda = z.kvr + z.dr;
    k.gemm(true, false, z.h, lda, z.rt, 1.0f, t.x, z.h, g.kva, lda, 1.0f,
           c.grad("attn.kv_a.weight"), lda);
    k.normParamGrads(g.ckv, st.xkv, z.rt, z.kvr,
                     c.grad("attn.kv_a_norm.weight"), DevicePtr());
    k.gemm(true, false, z.kvr, z.kvw, z.rt, 1.0f, st.ckv, z.kvr, g.kv, z.kvw,
           1.0f, c.grad("attn.kv_b.weight"), z.kvw);
  }

private:
  /// The shard's heads H; a query/key head d = nope + dr, a value head dv;
  /// the latents qr (0: none) and kvr; q's width H d, the key/value
  /// up-projection's H (nope + dv) with kvHead per head; the core's
  /// [q | k | v] width.
  struct Sizes {
    int64_t rt, h, H, d, nope, dr, dv, qr, kvr, qw, kvHead, kvw, width;
  };
  static Sizes getSizes(const SlotContext &c) {
    const LayerConfig &l = c.layer;
    Sizes z;
    z.rt = c.size.rt;
    z.h = c.size.h;
    z.H = l.heads;
    z.d = l.headDim;
    z.dr = l.ropeHeadDim;
    z.nope = z.d - z.dr;
    z.dv = l.getValueDim();
    z.qr = l.qLoraRank;
    z.kvr = l.kvLoraRank;
    z.qw = z.H * z.d;
    z.kvHead = z.nope + z.dv;
    z.kvw = z.H * z.kvHead;
    z.width = c.size.width;
    return z;
  }

  /// F's state (Shape.cpp's regions 0-2): each latent normalised (x) and
  /// after its norm (c), and its 1/rms (r).
  struct State {
    DevicePtr xq, cq, xkv, ckv, rq, rkv;
  };
  static State getState(const SlotContext &c, const Sizes &z) {
    State s;
    if (z.qr > 0) {
      s.xq = c.region(0);
      s.cq = s.xq + z.rt * z.qr;
    }
    s.xkv = c.region(1);
    s.ckv = s.xkv + z.rt * z.kvr;
    DevicePtr r = c.region(2);
    s.rq = z.qr > 0 ? r : DevicePtr();
    s.rkv = z.qr > 0 ? r + z.rt : r;
    return s;
  }

  /// B's gradients W reads (regions 3-4): at q (its layout) and at the
  /// key/value up-projection's output; at the query latent before its
  /// norm (qa) and after (cq); at [c_kv | k_r] (kva) and at the key/value
  /// latent after its norm (ckv).
  struct Grads {
    DevicePtr q, kv, qa, cq, kva, ckv;
  };
  static Grads getGrads(const SlotContext &c, const Sizes &z) {
    Grads g;
    g.q = c.region(3);
    g.kv = g.q + z.rt * z.qw;
    DevicePtr at = c.region(4);
    if (z.qr > 0) {
      g.qa = at;
      g.cq = at + z.rt * z.qr;
      at = g.cq + z.rt * z.qr;
    }
    g.kva = at;
    g.ckv = at + z.rt * (z.kvr + z.dr);
    return g;
  }

  /// The rotated part of `heads` heads, `stride` apart in each of the
  /// slice's tokens' rows (`src`), gathered compact into `dst` [rt,
  /// heads, dr]; with rope_interleave, adjacent pairs reordered to halves
  /// (transformers' apply_rotary_pos_emb_interleave) on the way.
  static void gatherRope(const SlotContext &c, const Sizes &z, DevicePtr src,
                         int64_t heads, int64_t stride, DevicePtr dst) {
    if (!c.layer.ropeInterleave) {
      c.kernels.copyStrided(dst, src, {z.rt, heads, z.dr, heads * stride,
                                       stride, heads * z.dr, z.dr});
      return;
    }
    // Element 2i + p of a head goes to p dr/2 + i: rows of one element.
    int64_t half = z.dr / 2;
    for (int64_t p = 0; p < 2; ++p)
      c.kernels.copyStrided(dst + p * half, src + p,
                            {z.rt * heads, half, 1, stride, 2, z.dr, 1});
  }
  /// The inverse: compact `src` [rt, heads, dr] into the heads of `dst`,
  /// `stride` apart (pairs again with rope_interleave).
  static void scatterRope(const SlotContext &c, const Sizes &z, DevicePtr src,
                          int64_t heads, DevicePtr dst, int64_t stride) {
    if (!c.layer.ropeInterleave) {
      c.kernels.copyStrided(dst, src, {z.rt, heads, z.dr, heads * z.dr, z.dr,
                                       heads * stride, stride});
      return;
    }
    int64_t half = z.dr / 2;
    for (int64_t p = 0; p < 2; ++p)
      c.kernels.copyStrided(dst + p, src + p * half,
                            {z.rt * heads, half, 1, z.dr, 1, stride, 2});
  }
};

} // namespace

SLUICE_DEFINE_COMPUTE(mla, MlaCompute)

} // namespace sluice::rt::block
