//===- TransformerBlock.cpp - A pre-norm decoder block's passes -----------===//
//
// A pre-norm decoder block, with the backward split into B (input
// gradients) and W (weight gradients) as zero-bubble schedules need:
//
//   a = norm1(x); [q k v] = a Wqkv + bqkv; ctx = attention(q, K, V)
//   x2 = x + ctx Wo + bo; c = norm2(x2); u = c W1 + b1; g = gelu(u)
//   out = x2 + g W2 + b2
//
// Llama and Gemma variants: grouped-query attention (K and V have fewer
// heads, each shared by a group of query heads), rotary positions (q and k
// turned by their absolute position before attention), gated feed-forward
// blocks, where z = c Wg + bg and g = act(z) * u with act SiLU (SwiGLU) or
// GELU (GeGLU), Gemma-2's sandwich norms, sliding-window attention, Qwen3's
// query/key norms (each head of q and k RMS-normalised before the
// rotation).
//
// Under the fp8 precision every linear map's three products (F's x W, B's
// dy W^T, W's x^T dy) take FP8 operands, each tensor with its own scaling
// record (Kernels::gemmFp8): x and W in E4M3, dy in E5M2, as Transformer
// Engine's linear layers do. Norms, attention, activations and the
// vocabulary layers stay in bf16/fp32.
//
// Token slicing (TeraPipe, Seq1F1B): a slice's queries attend to the keys
// and values of every earlier slice of the same microbatch, kept in the
// key/value state; in B, a slice adds its key/value gradients into that
// state, and a slice's own K/V gradients are complete once every later
// slice's B has run -- which is why backward runs in reverse slice order.
//
//===----------------------------------------------------------------------===//

#include "TransformerBlock.h"

namespace sluice::rt::block {

void TransformerBlock::product(const Layer &l, Map map, Role roleA, Role roleB,
                               bool transA, bool transB, int64_t m, int64_t n,
                               int64_t k, DevicePtr a, int64_t lda, DevicePtr b,
                               int64_t ldb, float beta, DevicePtr c,
                               int64_t ldc) {
  if (!l.fp8) {
    kernels.gemm(transA, transB, m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  auto operand = [&](Role role) {
    return Fp8Operand{l.fp8 + getFp8Record(map, role) * kFp8RecordFloats,
                      role == Role::Grad ? Fp8Format::E5M2 : Fp8Format::E4M3};
  };
  kernels.gemmFp8(transA, transB, m, n, k, 1.0f, a, lda, operand(roleA), b, ldb,
                  operand(roleB), beta, c, ldc);
}

void TransformerBlock::forward(const Layer &l, const Views &v,
                               const SliceShape &s, DevicePtr x, DevicePtr out,
                               DevicePtr work, bool again) {
  const LayerConfig &c = *l.config;
  auto [rt, n, h, f, hd, kvw, width] = getSizes(model, c, s);
  bool rms = c.isRms();
  TransformerScratch t = getTransformerScratch(model, c, s);
  auto [a, qkv, x2, cn] = Workspace(work, precision, n * h)
                              .scratch({t.norm, t.qkv, t.residual, t.norm2});
  DevicePtr keys = v[Field::Keys], values = v[Field::Values];

  // The backward of later slices accumulates into this microbatch's key and
  // value gradients; they start at zero with its first slice.
  if (s.offset == 0 && !again) {
    int64_t cache = s.rows * model.seqLen * kvw;
    kernels.fill(v[Field::DKeys], 0.0, cache);
    kernels.fill(v[Field::DValues], 0.0, cache);
  }
  // The norm on this shard's tokens; under sequence parallelism the
  // group's all-gather (the blog's g, Korthikanti et al.'s) makes the
  // whole slice's input of the column-parallel projection.
  kernels.normForward(x, l.w.normW, l.w.normB, n, h, rms, float(model.normEps),
                      seams.localTokens(a, n * h), v[Field::Xhat1], v[Field::Rstd1]);
  seams.gatherTokens(a, n * h);
  product(l, Map::Qkv, Role::Input, Role::Weight, false, false, rt, width, h, a,
          h, l.w.qkvW, width, 0.0f, qkv, width);
  if (l.w.qkvB)
    kernels.addRowVector(qkv, l.w.qkvB, rt, width);
  if (c.qkNorm)
    normHeads(l, v, s, qkv);
  if (c.rotary.theta > 0) {
    // Rotated by absolute position (offset + t), so the keys a later slice
    // reads from the state are the ones the whole sequence would have.
    kernels.rotate(qkv, s.rows, s.tokens, s.offset, c.heads, c.headDim, width,
                   c.rotary, false);
    kernels.rotate(qkv + hd, s.rows, s.tokens, s.offset, c.kvHeads, c.headDim,
                   width, c.rotary, false);
  }
  // Q to the state; K and V to the slice's rows of the microbatch's cache:
  // one strided copy each.
  kernels.copyStrided(v[Field::Q], qkv, {1, rt, hd, 0, width, 0, hd});
  int64_t at = s.offset * kvw;
  kernels.copyStrided(keys + at, qkv + hd,
                      cacheRows(s, model.seqLen, kvw, width, true));
  kernels.copyStrided(values + at, qkv + hd + kvw,
                      cacheRows(s, model.seqLen, kvw, width, true));
  AttentionShape shape = getAttentionShape(model, c, s);
  kernels.attentionForward(shape, v[Field::Q], keys, values, v[Field::Lse],
                           v[Field::Context]);
  // Row-parallel: each shard's heads give a partial sum (the blog's first
  // ALLREDUCE; reduce-scattered to the shards' tokens under sequence
  // parallelism, the partial sums then in `a`, which QKV has consumed);
  // the whole bias is added once, after it.
  DevicePtr partial = seams.isSequenceParallel() ? a : x2;
  product(l, Map::Out, Role::Input, Role::Weight, false, false, rt, h, hd,
          v[Field::Context], hd, l.w.outW, h, 0.0f, partial, h);
  seams.reduceTokens(partial, x2, n * h);
  if (l.w.outB)
    kernels.addRowVector(x2, l.w.outB, n, h);
  // Gemma-2's sandwich norm on the attention's output, before the residual
  // add; `a` is free again (QKV and the reduction have consumed it).
  if (c.postNorms) {
    kernels.normForward(x2, l.w.postAttnW, l.w.postAttnB, n, h, rms,
                        float(model.normEps), a, v[Field::Xhat3],
                        v[Field::Rstd3]);
    kernels.copy(x2, a, n * h);
  }
  kernels.addNormForward(x2, x, l.w.norm2W, l.w.norm2B, n, h, rms,
                         float(model.normEps), seams.localTokens(cn, n * h),
                         v[Field::Xhat2], v[Field::Rstd2]);
  seams.gatherTokens(cn, n * h);
  DevicePtr u = v[Field::Up], g = v[Field::Act], z = v[Field::Gate];
  product(l, Map::Up, Role::Input, Role::Weight, false, false, rt, f, h, cn, h,
          l.w.upW, f, 0.0f, u, f);
  if (l.w.upB)
    kernels.addRowVector(u, l.w.upB, rt, f);
  if (c.isGated()) {
    product(l, Map::Gate, Role::Input, Role::Weight, false, false, rt, f, h, cn,
            h, l.w.gateW, f, 0.0f, z, f);
    if (l.w.gateB)
      kernels.addRowVector(z, l.w.gateB, rt, f);
    kernels.gatedForward(activation(model, c), z, u, g, rt * f);
  } else {
    kernels.geluForward(activation(model, c), u, g, rt * f);
  }
  partial = seams.isSequenceParallel() ? a : out;
  product(l, Map::Down, Role::Input, Role::Weight, false, false, rt, h, f, g, f,
          l.w.downW, h, 0.0f, partial, h);
  seams.reduceTokens(partial, out, n * h);
  if (l.w.downB)
    kernels.addRowVector(out, l.w.downB, n, h);
  if (c.postNorms) {
    kernels.normForward(out, l.w.postMlpW, l.w.postMlpB, n, h, rms,
                        float(model.normEps), a, v[Field::Xhat4],
                        v[Field::Rstd4]);
    kernels.copy(out, a, n * h);
  }
  kernels.add(out, x2, n * h);
}

/// The query and key parts of `qkv` (rows x tokens rows of `width`), each
/// head normalised in place (Qwen3). A norm reads and writes contiguous
/// rows, so each part goes through the state's Q (free until the rotated
/// queries land there) and Context (free until attention writes it) --
/// no scratch of its own.
void TransformerBlock::normHeads(const Layer &l, const Views &v,
                                 const SliceShape &s, DevicePtr qkv) {
  const LayerConfig &c = *l.config;
  auto [rt, n, h, f, hd, kvw, width] = getSizes(model, c, s);
  DevicePtr raw = v[Field::Q], normed = v[Field::Context];
  struct Part {
    int64_t column, heads;
    DevicePtr gain;
    Field xhat, rstd;
  };
  for (const Part &p :
       {Part{0, c.heads, l.w.qNormW, Field::QXhat, Field::QRstd},
        Part{hd, c.kvHeads, l.w.kNormW, Field::KXhat, Field::KRstd}}) {
    int64_t cols = p.heads * c.headDim;
    kernels.copyStrided(raw, qkv + p.column, {1, rt, cols, 0, width, 0, cols});
    kernels.normForward(raw, p.gain, DevicePtr(), rt * p.heads, c.headDim,
                        /*rms=*/true, float(model.normEps), normed, v[p.xhat],
                        v[p.rstd]);
    kernels.copyStrided(qkv + p.column, normed,
                        {1, rt, cols, 0, cols, 0, width});
  }
}

/// Back through normHeads: `dqkv`'s query and key parts become the
/// projection's output gradients, the gains' gradients are added here (they
/// need only what F kept). `grad` and `into` are scratch of rows x tokens x
/// heads x head_dim.
void TransformerBlock::normHeadsBackward(const Layer &l, const Views &v,
                                         const SliceShape &s, DevicePtr dqkv,
                                         DevicePtr grad, DevicePtr into) {
  const LayerConfig &c = *l.config;
  auto [rt, n, h, f, hd, kvw, width] = getSizes(model, c, s);
  struct Part {
    int64_t column, heads;
    DevicePtr gain, dgain;
    Field xhat, rstd;
  };
  for (const Part &p :
       {Part{0, c.heads, l.w.qNormW, l.g.qNormW, Field::QXhat, Field::QRstd},
        Part{hd, c.kvHeads, l.w.kNormW, l.g.kNormW, Field::KXhat,
             Field::KRstd}}) {
    int64_t cols = p.heads * c.headDim, rows = rt * p.heads;
    kernels.copyStrided(grad, dqkv + p.column,
                        {1, rt, cols, 0, width, 0, cols});
    kernels.normParamGrads(grad, v[p.xhat], rows, c.headDim, p.dgain,
                           DevicePtr());
    kernels.fill(into, 0.0, rt * cols);
    kernels.normBackward(grad, v[p.xhat], v[p.rstd], p.gain, rows, c.headDim,
                         /*rms=*/true, into);
    kernels.copyStrided(dqkv + p.column, into,
                        {1, rt, cols, 0, cols, 0, width});
  }
}

void TransformerBlock::recompute(const Layer &l, const Views &v,
                                 const SliceShape &s) {
  // The attention core from the kept Q and the microbatch's keys and
  // values (B runs slices in reverse, so every earlier slice's are still
  // there), and the MLP's activation from its kept pre-activations.
  const LayerConfig &c = *l.config;
  AttentionShape shape = getAttentionShape(model, c, s);
  kernels.attentionForward(shape, v[Field::Q], v[Field::Keys], v[Field::Values],
                           v[Field::Lse], v[Field::Context]);
  int64_t n = s.rows * s.tokens * c.ffn;
  if (c.isGated())
    kernels.gatedForward(activation(model, c), v[Field::Gate], v[Field::Up],
                         v[Field::Act], n);
  else
    kernels.geluForward(activation(model, c), v[Field::Up], v[Field::Act], n);
}

void TransformerBlock::backward(const Layer &l, const Views &v,
                                const SliceShape &s, DevicePtr dout,
                                DevicePtr dx, DevicePtr work) {
  const LayerConfig &c = *l.config;
  auto [rt, n, h, f, hd, kvw, width] = getSizes(model, c, s);
  bool rms = c.isRms();
  TransformerScratch t = getTransformerScratch(model, c, s);
  auto [dg, dx2, dctx, dq, whole] =
      Workspace(work, precision, n * h)
          .scratch({t.dAct, t.dResidual, t.dContext, t.dQ, t.partial});
  DevicePtr dy2 = v[Field::DY2], du = v[Field::DUp], dz = v[Field::DGate],
            dc = v[Field::DC], dy1 = v[Field::DY1], dqkv = v[Field::DQkv];
  // Under sequence parallelism each collective of F has its transpose
  // here: a reduce-scatter's is an all-gather (the output gradients of
  // the row-parallel projections, kept whole for W), an all-gather's a
  // reduce-scatter (the column-parallel projections' input gradients,
  // summed from `whole`).
  DevicePtr partial = seams.isSequenceParallel() ? whole : DevicePtr();

  // Through a sandwich norm (Gemma-2) to the block's output, its
  // parameters' gradients here (they need nothing W keeps); else the
  // residual's gradient is the block's.
  // (C++17 lambdas cannot capture structured bindings: copies.)
  const int64_t tokens = n, hidden = h;
  auto throughPostNorm = [&](DevicePtr grad, Field xhat, Field rstd,
                             DevicePtr gamma, DevicePtr dgamma,
                             DevicePtr dbeta, DevicePtr into) {
    if (!c.postNorms) {
      kernels.copy(into, grad, tokens * hidden);
      return;
    }
    kernels.fill(into, 0.0, tokens * hidden);
    kernels.normBackward(grad, v[xhat], v[rstd], gamma, tokens, hidden, rms,
                         into);
    kernels.normParamGrads(grad, v[xhat], tokens, hidden, dgamma, dbeta);
  };
  throughPostNorm(dout, Field::Xhat4, Field::Rstd4, l.w.postMlpW, l.g.postMlpW,
                  l.g.postMlpB, seams.localTokens(dy2, n * h));
  seams.gatherTokens(dy2, n * h);
  product(l, Map::Down, Role::Grad, Role::Weight, false, true, rt, f, h, dy2, h,
          l.w.downW, h, 0.0f, dg, f);
  if (c.isGated())
    kernels.gatedBackward(activation(model, c), v[Field::Gate], v[Field::Up],
                          dg, dz, du, rt * f);
  else
    kernels.geluBackward(activation(model, c), v[Field::Up], dg, du, rt * f);
  DevicePtr dcWhole = partial ? partial : dc;
  product(l, Map::Up, Role::Grad, Role::Weight, false, true, rt, h, f, du, f,
          l.w.upW, f, 0.0f, dcWhole, h);
  if (c.isGated())
    product(l, Map::Gate, Role::Grad, Role::Weight, false, true, rt, h, f, dz,
            f, l.w.gateW, f, 1.0f, dcWhole, h);
  // Column-parallel in F, so each shard's share of the width gives a part
  // of the norm output's gradient: summed before the (whole) norm.
  seams.reduceTokens(dcWhole, dc, n * h);
  kernels.normBackwardAdd(dc, v[Field::Xhat2], v[Field::Rstd2], l.w.norm2W, n,
                          h, rms, dout, dx2);
  throughPostNorm(dx2, Field::Xhat3, Field::Rstd3, l.w.postAttnW,
                  l.g.postAttnW, l.g.postAttnB, seams.localTokens(dy1, n * h));
  seams.gatherTokens(dy1, n * h);
  product(l, Map::Out, Role::Grad, Role::Weight, false, true, rt, hd, h, dy1, h,
          l.w.outW, h, 0.0f, dctx, hd);
  AttentionShape shape = getAttentionShape(model, c, s);
  kernels.attentionBackward(shape, v[Field::Q], v[Field::Keys],
                            v[Field::Values], v[Field::Context], v[Field::Lse],
                            dctx, dq, v[Field::DKeys], v[Field::DValues]);
  // Every later slice has added into this slice's key and value gradients,
  // so they are complete: assemble the QKV projection's output gradient.
  kernels.copyStrided(dqkv, dq, {1, rt, hd, 0, hd, 0, width});
  int64_t at = s.offset * kvw;
  kernels.copyStrided(dqkv + hd, v[Field::DKeys] + at,
                      cacheRows(s, model.seqLen, kvw, width, false));
  kernels.copyStrided(dqkv + hd + kvw, v[Field::DValues] + at,
                      cacheRows(s, model.seqLen, kvw, width, false));
  if (c.rotary.theta > 0) {
    // Back through the rotation: its gradient is its transpose.
    kernels.rotate(dqkv, s.rows, s.tokens, s.offset, c.heads, c.headDim, width,
                   c.rotary, true);
    kernels.rotate(dqkv + hd, s.rows, s.tokens, s.offset, c.kvHeads, c.headDim,
                   width, c.rotary, true);
  }
  if (c.qkNorm)
    normHeadsBackward(l, v, s, dqkv, dq, dctx);
  DevicePtr daWhole = partial ? partial : v[Field::DA];
  product(l, Map::Qkv, Role::Grad, Role::Weight, false, true, rt, h, width,
          dqkv, width, l.w.qkvW, width, 0.0f, daWhole, h);
  seams.reduceTokens(daWhole, v[Field::DA], n * h);
  kernels.normBackwardAdd(v[Field::DA], v[Field::Xhat1], v[Field::Rstd1],
                          l.w.normW, n, h, rms, dx2, dx);
}

void TransformerBlock::weight(const Layer &l, const Views &v,
                              const SliceShape &s, DevicePtr work) {
  const LayerConfig &c = *l.config;
  auto [rt, n, h, f, hd, kvw, width] = getSizes(model, c, s);
  bool sequence = seams.isSequenceParallel();
  auto [normOut, normOut2] = Workspace(work, precision, n * h)
                                 .scratch({rt * h, sequence ? rt * h : 0});
  DevicePtr dqkv = v[Field::DQkv], dy1 = v[Field::DY1], du = v[Field::DUp],
            dz = v[Field::DGate], dy2 = v[Field::DY2];

  // The norms' outputs again from the kept normalised inputs; under
  // sequence parallelism gathered again (Megatron-LM re-gathers rather
  // than keep the whole slice) -- both gathers started at once, into two
  // buffers, and the gradients that need neither computed while they run
  // -- and the norms' weight gradients are this shard's tokens' part (the
  // executor sums them over the group).
  kernels.normAffine(v[Field::Xhat1], l.w.normW, l.w.normB, n, h,
                     seams.localTokens(normOut, n * h));
  PendingCollective first = seams.startGatherTokens(normOut, n * h);
  PendingCollective second;
  if (sequence) {
    kernels.normAffine(v[Field::Xhat2], l.w.norm2W, l.w.norm2B, n, h,
                       seams.localTokens(normOut2, n * h));
    second = seams.startGatherTokens(normOut2, n * h);
  }
  kernels.normParamGrads(v[Field::DA], v[Field::Xhat1], n, h, l.g.normW,
                         l.g.normB);
  kernels.normParamGrads(v[Field::DC], v[Field::Xhat2], n, h, l.g.norm2W,
                         l.g.norm2B);
  product(l, Map::Out, Role::Input, Role::Grad, true, false, hd, h, rt,
          v[Field::Context], hd, dy1, h, 1.0f, l.g.outW, h);
  if (l.g.outB)
    kernels.accumulateColumnSums(dy1, rt, h, l.g.outB);
  product(l, Map::Down, Role::Input, Role::Grad, true, false, f, h, rt,
          v[Field::Act], f, dy2, h, 1.0f, l.g.downW, h);
  if (l.g.downB)
    kernels.accumulateColumnSums(dy2, rt, h, l.g.downB);

  first.wait();
  product(l, Map::Qkv, Role::Input, Role::Grad, true, false, h, width, rt,
          normOut, h, dqkv, width, 1.0f, l.g.qkvW, width);
  if (l.g.qkvB)
    kernels.accumulateColumnSums(dqkv, rt, width, l.g.qkvB);
  if (sequence) {
    second.wait();
    normOut = normOut2;
  } else {
    kernels.normAffine(v[Field::Xhat2], l.w.norm2W, l.w.norm2B, n, h, normOut);
  }
  product(l, Map::Up, Role::Input, Role::Grad, true, false, h, f, rt, normOut,
          h, du, f, 1.0f, l.g.upW, f);
  if (l.g.upB)
    kernels.accumulateColumnSums(du, rt, f, l.g.upB);
  if (c.isGated()) {
    product(l, Map::Gate, Role::Input, Role::Grad, true, false, h, f, rt,
            normOut, h, dz, f, 1.0f, l.g.gateW, f);
    if (l.g.gateB)
      kernels.accumulateColumnSums(dz, rt, f, l.g.gateB);
  }
}

} // namespace sluice::rt::block
