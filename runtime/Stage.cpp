//===- Stage.cpp - The passes of one pipeline stage -----------------------===//
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
// turned by their absolute position before attention), and gated
// feed-forward blocks, where z = c Wg + bg and g = act(z) * u with act
// SiLU (SwiGLU) or GELU (GeGLU).
//
// Token slicing (TeraPipe, Seq1F1B): a slice's queries attend to the keys
// and values of every earlier slice of the same microbatch, kept in the
// key/value state; in B, a slice adds its key/value gradients into that
// state, and a slice's own K/V gradients are complete once every later
// slice's B has run -- which is why backward runs in reverse slice order.
//
//===----------------------------------------------------------------------===//

#include "Stage.h"

#include <algorithm>

namespace sluice::rt {

StageRunner::StageRunner(const ModelConfig &model, std::vector<int> layers,
                         ParameterStore &store, Kernels &kernels)
    : model(model), layers(std::move(layers)), kernels(kernels) {
  for (int index : this->layers) {
    Layer layer;
    layer.config = &model.layers[index];
    for (const ParameterSpec &spec : getLayerParameters(model, index)) {
      const std::string &n = spec.name;
      auto ends = [&](const char *suffix) {
        std::string s(suffix);
        return n.size() >= s.size() &&
               n.compare(n.size() - s.size(), s.size(), s) == 0;
      };
      float **w = nullptr, **g = nullptr;
      auto bind = [&](float *LayerParams::*field) {
        w = &(layer.w.*field);
        g = &(layer.g.*field);
      };
      if (n == "embed.tokens" || n == "lm_head.weight")
        bind(&LayerParams::table);
      else if (n == "embed.positions")
        bind(&LayerParams::positions);
      else if (ends("norm1.weight") || n == "final_norm.weight")
        bind(&LayerParams::normW);
      else if (ends("norm1.bias") || n == "final_norm.bias")
        bind(&LayerParams::normB);
      else if (ends("norm2.weight"))
        bind(&LayerParams::norm2W);
      else if (ends("norm2.bias"))
        bind(&LayerParams::norm2B);
      else if (ends("attn.qkv.weight"))
        bind(&LayerParams::qkvW);
      else if (ends("attn.qkv.bias"))
        bind(&LayerParams::qkvB);
      else if (ends("attn.out.weight"))
        bind(&LayerParams::outW);
      else if (ends("attn.out.bias"))
        bind(&LayerParams::outB);
      else if (ends("mlp.gate.weight"))
        bind(&LayerParams::gateW);
      else if (ends("mlp.gate.bias"))
        bind(&LayerParams::gateB);
      else if (ends("mlp.up.weight"))
        bind(&LayerParams::upW);
      else if (ends("mlp.up.bias"))
        bind(&LayerParams::upB);
      else if (ends("mlp.down.weight"))
        bind(&LayerParams::downW);
      else if (ends("mlp.down.bias"))
        bind(&LayerParams::downB);
      if (w) {
        *w = store.weight(n);
        *g = store.grad(n);
      }
    }
    resolved.push_back(layer);
  }
}

bool StageRunner::hasEmbedding() const {
  return model.layers[layers.front()].kind == LayerKind::Embedding;
}

bool StageRunner::hasOutput() const {
  return model.layers[layers.back()].kind == LayerKind::Output;
}

int64_t StageRunner::getForwardStateFloats(const SliceShape &s) const {
  int64_t total = 0;
  for (int index : layers)
    total += rt::getForwardStateFloats(model, model.layers[index], s);
  return total;
}

int64_t StageRunner::getWeightStateFloats(const SliceShape &s) const {
  int64_t total = 0;
  for (int index : layers)
    total += rt::getWeightStateFloats(model, model.layers[index], s);
  return total;
}

int64_t StageRunner::getKeyValueFloats(int64_t rows) const {
  int64_t total = 0;
  for (int index : layers)
    total += rt::getKeyValueFloats(model, model.layers[index], rows);
  return total;
}

int64_t StageRunner::getWorkspaceFloats(const SliceShape &s) const {
  return rt::getWorkspaceFloats(model, layers, s);
}

//===----------------------------------------------------------------------===//
// Transformer layer
//===----------------------------------------------------------------------===//

namespace {
/// Views of a transformer layer's slices of the three kinds of state.
struct TransformerViews {
  float *xhat1, *rstd1, *q, *probs, *ctx, *xhat2, *rstd2, *u, *g, *z;
  float *dqkv, *da, *dy1, *dc, *du, *dy2, *dz;
  float *keys, *values, *dkeys, *dvalues;
};

/// A transformer layer's sizes for one slice: rows x tokens, hidden, ffn,
/// the query heads' and the key/value heads' widths, and the QKV
/// projection's (q, k and v side by side).
struct Sizes {
  int64_t rt, h, f, hd, kvw, width;
};

Sizes getSizes(const ModelConfig &model, const LayerConfig &l,
               const SliceShape &s) {
  int64_t hd = l.heads * l.headDim, kvw = l.kvHeads * l.headDim;
  return {s.rows * s.tokens, model.hidden, l.ffn, hd, kvw, hd + 2 * kvw};
}

GateActivation activation(const LayerConfig &l) {
  return l.mlp == "swiglu" ? GateActivation::Silu : GateActivation::Gelu;
}

TransformerViews view(const ModelConfig &model, const LayerConfig &l,
                      const SliceShape &s, const float *state,
                      const float *wstate, const float *kv) {
  auto [rt, h, f, hd, kvw, width] = getSizes(model, l, s);
  TransformerViews v{};
  float *p = const_cast<float *>(state);
  if (p) {
    v.xhat1 = p, p += rt * h;
    v.rstd1 = p, p += rt;
    v.q = p, p += rt * hd;
    v.probs = p, p += s.rows * l.heads * s.tokens * (s.offset + s.tokens);
    v.ctx = p, p += rt * hd;
    v.xhat2 = p, p += rt * h;
    v.rstd2 = p, p += rt;
    v.u = p, p += rt * f;
    v.g = p, p += rt * f;
    v.z = l.isGated() ? p : nullptr;
  }
  p = const_cast<float *>(wstate);
  if (p) {
    v.dqkv = p, p += rt * width;
    v.da = p, p += rt * h;
    v.dy1 = p, p += rt * h;
    v.dc = p, p += rt * h;
    v.du = p, p += rt * f;
    v.dy2 = p, p += rt * h;
    v.dz = l.isGated() ? p : nullptr;
  }
  p = const_cast<float *>(kv);
  if (p) {
    int64_t cache = s.rows * model.seqLen * kvw;
    v.keys = p, v.values = p + cache, v.dkeys = p + 2 * cache,
    v.dvalues = p + 3 * cache;
  }
  return v;
}
} // namespace

void StageRunner::transformerForward(const Layer &l, const SliceShape &s,
                                     const float *x, float *out, float *state,
                                     float *kvState, float *work) {
  const LayerConfig &c = *l.config;
  auto [rt, h, f, hd, kvw, width] = getSizes(model, c, s);
  bool rms = c.norm == "rmsnorm";
  TransformerViews v = view(model, c, s, state, nullptr, kvState);
  float *a = work, *qkv = a + rt * h, *x2 = qkv + rt * width, *cn = x2 + rt * h;

  // The backward of later slices accumulates into this microbatch's key and
  // value gradients; they start at zero with its first slice.
  if (s.offset == 0) {
    int64_t cache = s.rows * model.seqLen * kvw;
    kernels.fill(v.dkeys, 0.0f, cache);
    kernels.fill(v.dvalues, 0.0f, cache);
  }
  kernels.normForward(x, l.w.normW, l.w.normB, rt, h, rms, a, v.xhat1, v.rstd1);
  kernels.gemm(false, false, rt, width, h, 1.0f, a, h, l.w.qkvW, width, 0.0f,
               qkv, width);
  if (l.w.qkvB)
    kernels.addRowVector(qkv, l.w.qkvB, rt, width);
  if (c.ropeTheta > 0) {
    // Rotated by absolute position (offset + t), so the keys a later slice
    // reads from the state are the ones the whole sequence would have.
    kernels.rotate(qkv, s.rows, s.tokens, s.offset, c.heads, c.headDim, width,
                   c.ropeTheta, false);
    kernels.rotate(qkv + hd, s.rows, s.tokens, s.offset, c.kvHeads, c.headDim,
                   width, c.ropeTheta, false);
  }
  for (int64_t r = 0; r < s.rows; ++r)
    for (int64_t i = 0; i < s.tokens; ++i) {
      const float *row = qkv + (r * s.tokens + i) * width;
      int64_t pos = r * model.seqLen + s.offset + i;
      kernels.copy(v.q + (r * s.tokens + i) * hd, row, hd);
      kernels.copy(v.keys + pos * kvw, row + hd, kvw);
      kernels.copy(v.values + pos * kvw, row + hd + kvw, kvw);
    }
  AttentionShape shape{s.rows,  s.tokens,  s.offset, model.seqLen,
                       c.heads, c.headDim, c.kvHeads};
  kernels.attentionForward(shape, v.q, v.keys, v.values, v.probs, v.ctx);
  kernels.gemm(false, false, rt, h, hd, 1.0f, v.ctx, hd, l.w.outW, h, 0.0f, x2,
               h);
  if (l.w.outB)
    kernels.addRowVector(x2, l.w.outB, rt, h);
  kernels.add(x2, x, rt * h);
  kernels.normForward(x2, l.w.norm2W, l.w.norm2B, rt, h, rms, cn, v.xhat2,
                      v.rstd2);
  kernels.gemm(false, false, rt, f, h, 1.0f, cn, h, l.w.upW, f, 0.0f, v.u, f);
  if (l.w.upB)
    kernels.addRowVector(v.u, l.w.upB, rt, f);
  if (c.isGated()) {
    kernels.gemm(false, false, rt, f, h, 1.0f, cn, h, l.w.gateW, f, 0.0f, v.z,
                 f);
    if (l.w.gateB)
      kernels.addRowVector(v.z, l.w.gateB, rt, f);
    kernels.gatedForward(activation(c), v.z, v.u, v.g, rt * f);
  } else {
    kernels.geluForward(v.u, v.g, rt * f);
  }
  kernels.gemm(false, false, rt, h, f, 1.0f, v.g, f, l.w.downW, h, 0.0f, out,
               h);
  if (l.w.downB)
    kernels.addRowVector(out, l.w.downB, rt, h);
  kernels.add(out, x2, rt * h);
}

void StageRunner::transformerBackward(const Layer &l, const SliceShape &s,
                                      const float *dout, float *dx,
                                      const float *state, float *wstate,
                                      float *kvState, float *work) {
  const LayerConfig &c = *l.config;
  auto [rt, h, f, hd, kvw, width] = getSizes(model, c, s);
  bool rms = c.norm == "rmsnorm";
  TransformerViews v = view(model, c, s, state, wstate, kvState);
  float *dg = work, *dx2 = dg + rt * f, *dctx = dx2 + rt * h,
        *dq = dctx + rt * hd;

  kernels.copy(v.dy2, dout, rt * h);
  kernels.gemm(false, true, rt, f, h, 1.0f, v.dy2, h, l.w.downW, h, 0.0f, dg,
               f);
  if (c.isGated())
    kernels.gatedBackward(activation(c), v.z, v.u, dg, v.dz, v.du, rt * f);
  else
    kernels.geluBackward(v.u, dg, v.du, rt * f);
  kernels.gemm(false, true, rt, h, f, 1.0f, v.du, f, l.w.upW, f, 0.0f, v.dc, h);
  if (c.isGated())
    kernels.gemm(false, true, rt, h, f, 1.0f, v.dz, f, l.w.gateW, f, 1.0f, v.dc,
                 h);
  kernels.copy(dx2, dout, rt * h);
  kernels.normBackward(v.dc, v.xhat2, v.rstd2, l.w.norm2W, rt, h, rms, dx2);
  kernels.copy(v.dy1, dx2, rt * h);
  kernels.gemm(false, true, rt, hd, h, 1.0f, v.dy1, h, l.w.outW, h, 0.0f, dctx,
               hd);
  AttentionShape shape{s.rows,  s.tokens,  s.offset, model.seqLen,
                       c.heads, c.headDim, c.kvHeads};
  kernels.attentionBackward(shape, v.q, v.keys, v.values, v.probs, dctx, dq,
                            v.dkeys, v.dvalues);
  // Every later slice has added into this slice's key and value gradients,
  // so they are complete: assemble the QKV projection's output gradient.
  for (int64_t r = 0; r < s.rows; ++r)
    for (int64_t i = 0; i < s.tokens; ++i) {
      float *row = v.dqkv + (r * s.tokens + i) * width;
      int64_t pos = r * model.seqLen + s.offset + i;
      kernels.copy(row, dq + (r * s.tokens + i) * hd, hd);
      kernels.copy(row + hd, v.dkeys + pos * kvw, kvw);
      kernels.copy(row + hd + kvw, v.dvalues + pos * kvw, kvw);
    }
  if (c.ropeTheta > 0) {
    // Back through the rotation: its gradient is its transpose.
    kernels.rotate(v.dqkv, s.rows, s.tokens, s.offset, c.heads, c.headDim,
                   width, c.ropeTheta, true);
    kernels.rotate(v.dqkv + hd, s.rows, s.tokens, s.offset, c.kvHeads,
                   c.headDim, width, c.ropeTheta, true);
  }
  kernels.gemm(false, true, rt, h, width, 1.0f, v.dqkv, width, l.w.qkvW, width,
               0.0f, v.da, h);
  kernels.copy(dx, dx2, rt * h);
  kernels.normBackward(v.da, v.xhat1, v.rstd1, l.w.normW, rt, h, rms, dx);
}

void StageRunner::transformerWeight(const Layer &l, const SliceShape &s,
                                    const float *state, const float *wstate,
                                    float *work) {
  const LayerConfig &c = *l.config;
  auto [rt, h, f, hd, kvw, width] = getSizes(model, c, s);
  TransformerViews v = view(model, c, s, state, wstate, nullptr);
  float *normOut = work;

  kernels.normAffine(v.xhat1, l.w.normW, l.w.normB, rt, h, normOut);
  kernels.gemm(true, false, h, width, rt, 1.0f, normOut, h, v.dqkv, width, 1.0f,
               l.g.qkvW, width);
  if (l.g.qkvB)
    kernels.accumulateColumnSums(v.dqkv, rt, width, l.g.qkvB);
  kernels.normParamGrads(v.da, v.xhat1, rt, h, l.g.normW, l.g.normB);
  kernels.gemm(true, false, hd, h, rt, 1.0f, v.ctx, hd, v.dy1, h, 1.0f,
               l.g.outW, h);
  if (l.g.outB)
    kernels.accumulateColumnSums(v.dy1, rt, h, l.g.outB);
  kernels.normAffine(v.xhat2, l.w.norm2W, l.w.norm2B, rt, h, normOut);
  kernels.normParamGrads(v.dc, v.xhat2, rt, h, l.g.norm2W, l.g.norm2B);
  kernels.gemm(true, false, h, f, rt, 1.0f, normOut, h, v.du, f, 1.0f, l.g.upW,
               f);
  if (l.g.upB)
    kernels.accumulateColumnSums(v.du, rt, f, l.g.upB);
  if (c.isGated()) {
    kernels.gemm(true, false, h, f, rt, 1.0f, normOut, h, v.dz, f, 1.0f,
                 l.g.gateW, f);
    if (l.g.gateB)
      kernels.accumulateColumnSums(v.dz, rt, f, l.g.gateB);
  }
  kernels.gemm(true, false, f, h, rt, 1.0f, v.g, f, v.dy2, h, 1.0f, l.g.downW,
               h);
  if (l.g.downB)
    kernels.accumulateColumnSums(v.dy2, rt, h, l.g.downB);
}

//===----------------------------------------------------------------------===//
// The stage: embedding, transformer layers, output layer
//===----------------------------------------------------------------------===//

void StageRunner::forward(const SliceShape &s, const TokenRows &batch,
                          const float *input, float *output,
                          float *forwardState, float *keyValues,
                          float *workspace, double *loss) {
  int64_t rt = s.rows * s.tokens, h = model.hidden;
  float *ping[2] = {workspace, workspace + rt * h};
  float *scratch = workspace + 2 * rt * h;
  const float *current = input;
  float *state = forwardState, *kv = keyValues;
  for (size_t i = 0; i < resolved.size(); ++i) {
    const Layer &l = resolved[i];
    const LayerConfig &c = *l.config;
    bool last = i + 1 == resolved.size();
    float *dst = last && output ? output : ping[i % 2];
    switch (c.kind) {
    case LayerKind::Embedding:
      if (c.sharded) {
        // The input shard summed the token rows onto this device (Appendix
        // C); the learned positions, which it holds, are added here.
        kernels.copy(dst, current, rt * h);
        if (l.w.positions)
          for (int64_t r = 0; r < s.rows; ++r)
            kernels.add(dst + r * s.tokens * h, l.w.positions + s.offset * h,
                        s.tokens * h);
        break;
      }
      kernels.embeddingForward(batch.tokens + s.offset, batch.stride, l.w.table,
                               l.w.positions, s.rows, s.tokens, s.offset, h,
                               dst);
      break;
    case LayerKind::Transformer:
      transformerForward(l, s, current, dst, state, kv, scratch);
      break;
    case LayerKind::Output: {
      float *xhat = state, *rstd = xhat + rt * h, *probs = rstd + rt;
      if (c.sharded) {
        // The final norm; the output shard takes its result, X.
        kernels.normForward(current, l.w.normW, l.w.normB, rt, h,
                            c.norm == "rmsnorm", dst, xhat, rstd);
        break;
      }
      float *normOut = scratch;
      kernels.normForward(current, l.w.normW, l.w.normB, rt, h,
                          c.norm == "rmsnorm", normOut, xhat, rstd);
      kernels.gemm(false, true, rt, c.vocab, h, 1.0f, normOut, h, l.w.table, h,
                   0.0f, probs, c.vocab);
      *loss +=
          kernels.crossEntropyForward(probs, batch.tokens + s.offset + 1,
                                      batch.stride, s.rows, s.tokens, c.vocab);
      break;
    }
    }
    current = dst;
    state += rt::getForwardStateFloats(model, c, s);
    kv += rt::getKeyValueFloats(model, c, s.rows);
  }
}

void StageRunner::backwardInput(const SliceShape &s, const TokenRows &batch,
                                const float *outputGrad, float *inputGrad,
                                const float *forwardState, float *weightState,
                                float *keyValues, float *workspace,
                                float lossScale) {
  int64_t rt = s.rows * s.tokens, h = model.hidden;
  float *ping[2] = {workspace, workspace + rt * h};
  float *scratch = workspace + 2 * rt * h;
  // Offsets of each layer's state, walked backwards.
  std::vector<int64_t> stateAt, wstateAt, kvAt;
  int64_t so = 0, wo = 0, ko = 0;
  for (const Layer &l : resolved) {
    stateAt.push_back(so);
    wstateAt.push_back(wo);
    kvAt.push_back(ko);
    so += rt::getForwardStateFloats(model, *l.config, s);
    wo += rt::getWeightStateFloats(model, *l.config, s);
    ko += rt::getKeyValueFloats(model, *l.config, s.rows);
  }
  const float *grad = outputGrad;
  for (size_t k = resolved.size(); k-- > 0;) {
    const Layer &l = resolved[k];
    const LayerConfig &c = *l.config;
    float *dst = k == 0 ? inputGrad : ping[k % 2];
    const float *state = forwardState + stateAt[k];
    float *wstate = weightState + wstateAt[k];
    switch (c.kind) {
    case LayerKind::Embedding:
      // Keep the gradient for W; sharded, it also goes back to the input
      // shard's broadcast.
      kernels.copy(wstate, grad, rt * h);
      if (c.sharded && inputGrad)
        kernels.copy(inputGrad, grad, rt * h);
      break;
    case LayerKind::Transformer:
      transformerBackward(l, s, grad, dst, state, wstate, keyValues + kvAt[k],
                          scratch);
      break;
    case LayerKind::Output: {
      const float *xhat = state, *rstd = xhat + rt * h, *probs = rstd + rt;
      if (c.sharded) {
        // The output shard's reduced gradient of X, through the final norm.
        float *dnorm = wstate;
        kernels.copy(dnorm, grad, rt * h);
        kernels.fill(dst, 0.0f, rt * h);
        kernels.normBackward(dnorm, xhat, rstd, l.w.normW, rt, h,
                             c.norm == "rmsnorm", dst);
        break;
      }
      float *dlogits = wstate, *dnorm = dlogits + rt * c.vocab;
      kernels.crossEntropyBackward(probs, batch.tokens + s.offset + 1,
                                   batch.stride, s.rows, s.tokens, c.vocab,
                                   lossScale, dlogits);
      kernels.gemm(false, false, rt, h, c.vocab, 1.0f, dlogits, c.vocab,
                   l.w.table, h, 0.0f, dnorm, h);
      kernels.fill(dst, 0.0f, rt * h);
      kernels.normBackward(dnorm, xhat, rstd, l.w.normW, rt, h,
                           c.norm == "rmsnorm", dst);
      break;
    }
    }
    grad = dst;
  }
}

void StageRunner::backwardWeight(const SliceShape &s, const TokenRows &batch,
                                 const float *forwardState,
                                 const float *weightState, float *workspace) {
  int64_t rt = s.rows * s.tokens, h = model.hidden;
  float *scratch = workspace + 2 * rt * h;
  const float *state = forwardState, *wstate = weightState;
  for (const Layer &l : resolved) {
    const LayerConfig &c = *l.config;
    switch (c.kind) {
    case LayerKind::Embedding:
      if (c.sharded) {
        // The table's gradient is the input shard's (IB); positions here.
        if (l.g.positions)
          for (int64_t r = 0; r < s.rows; ++r)
            kernels.add(l.g.positions + s.offset * h, wstate + r * s.tokens * h,
                        s.tokens * h);
        break;
      }
      kernels.embeddingBackward(batch.tokens + s.offset, batch.stride, wstate,
                                s.rows, s.tokens, s.offset, h, l.g.table,
                                l.g.positions);
      break;
    case LayerKind::Transformer:
      transformerWeight(l, s, state, wstate, scratch);
      break;
    case LayerKind::Output: {
      const float *xhat = state;
      if (c.sharded) {
        kernels.normParamGrads(wstate, xhat, rt, h, l.g.normW, l.g.normB);
        break;
      }
      const float *dlogits = wstate, *dnorm = dlogits + rt * c.vocab;
      kernels.normAffine(xhat, l.w.normW, l.w.normB, rt, h, scratch);
      kernels.gemm(true, false, c.vocab, h, rt, 1.0f, dlogits, c.vocab, scratch,
                   h, 1.0f, l.g.table, h);
      kernels.normParamGrads(dnorm, xhat, rt, h, l.g.normW, l.g.normB);
      break;
    }
    }
    state += rt::getForwardStateFloats(model, c, s);
    wstate += rt::getWeightStateFloats(model, c, s);
  }
}

} // namespace sluice::rt
