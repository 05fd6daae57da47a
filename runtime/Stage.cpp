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
#include <array>
#include <tuple>

namespace sluice::rt {

StageRunner::StageRunner(const ModelConfig &model, std::vector<int> layers,
                         ParameterStore &store, Kernels &kernels,
                         const Precision &precision, Recompute recompute)
    : model(model), layers(std::move(layers)), kernels(kernels),
      precision(precision), recompute(recompute) {
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
      DevicePtr *w = nullptr, *g = nullptr;
      auto bind = [&](DevicePtr LayerParams::*field) {
        w = &(layer.w.*field);
        g = &(layer.g.*field);
      };
      if (n == "embed.tokens" || n == "lm_head.weight")
        bind(&LayerParams::table);
      else if (n == "embed.positions")
        bind(&LayerParams::positions);
      else if (ends("post_attn_norm.weight"))
        bind(&LayerParams::postAttnW);
      else if (ends("post_attn_norm.bias"))
        bind(&LayerParams::postAttnB);
      else if (ends("post_mlp_norm.weight"))
        bind(&LayerParams::postMlpW);
      else if (ends("post_mlp_norm.bias"))
        bind(&LayerParams::postMlpB);
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
  views.resize(resolved.size());
}

void StageRunner::setTensorParallel(TensorGroup tensorGroup, int index) {
  group = std::move(tensorGroup);
  shardIndex = index;
  // A vocabulary layer that splits (first or last in the stage): the
  // shard's rows; otherwise count -1, all of them.
  auto rowsOf = [&](int layer, bool present) -> std::pair<int64_t, int64_t> {
    const LayerConfig &l = model.layers[layer];
    if (!present || l.vocabShards < 2)
      return {0, -1};
    return getShardVocabRows(l.vocab, index, l.vocabShards);
  };
  std::tie(vocabFirst, vocabCount) = rowsOf(layers.front(), hasEmbedding());
  std::tie(outFirst, outCount) = rowsOf(layers.back(), hasOutput());
}

void StageRunner::addPositions(DevicePtr dst, DevicePtr positions,
                               const SliceShape &s) {
  // This shard's tokens are flat indices [first, first + local) of the
  // slice's rows x tokens: a run of positions per row they touch.
  int64_t h = model.hidden, local = getLocalTokens(model, s);
  int64_t first = isSequenceParallel() ? shardIndex * local : 0;
  for (int64_t j = first; j < first + local;) {
    int64_t t = j % s.tokens;
    int64_t run = std::min(s.tokens - t, first + local - j);
    kernels.add(dst + (j - first) * h, positions + (s.offset + t) * h, run * h);
    j += run;
  }
}

void StageRunner::addPositionGrads(DevicePtr positionGrads, DevicePtr grad,
                                   const SliceShape &s) {
  int64_t h = model.hidden;
  for (int64_t r = 0; r < s.rows; ++r)
    kernels.add(positionGrads + s.offset * h, grad + r * s.tokens * h,
                s.tokens * h);
}

void StageRunner::scaleEmbedding(DevicePtr x, int64_t n) {
  if (model.embeddingScale != 1.0)
    kernels.scale(x, float(model.embeddingScale), n);
}

bool StageRunner::hasEmbedding() const {
  return model.layers[layers.front()].kind == LayerKind::Embedding;
}

bool StageRunner::hasOutput() const {
  return model.layers[layers.back()].kind == LayerKind::Output;
}

int64_t StageRunner::getForwardStateBytes(const SliceShape &s) const {
  return rt::getForwardStateBytes(model, layers, s, precision, recompute);
}

int64_t StageRunner::getWeightStateBytes(const SliceShape &s) const {
  return rt::getWeightStateBytes(model, layers, s, precision);
}

int64_t StageRunner::getKeyValueBytes(int64_t rows) const {
  return rt::getKeyValueBytes(model, layers, rows, precision);
}

int64_t StageRunner::getWorkspaceBytes(const SliceShape &s) const {
  return rt::getWorkspaceBytes(model, layers, s, precision, recompute);
}

int64_t StageRunner::getRecomputedStateBytes(const SliceShape &s) const {
  return rt::getRecomputedStateBytes(model, layers, s, precision, recompute);
}

void StageRunner::carve(const SliceShape &s, DevicePtr forwardState,
                        DevicePtr weightState, DevicePtr keyValues,
                        DevicePtr recomputed) {
  // The same walks, in the same order, that size the buffers (Layout.h).
  Arena forward(precision), weight(precision), kv(precision), again(precision);
  auto into = [&](Views &v, DevicePtr base, Arena &arena) {
    return [&v, base, &arena](Field f, int64_t count, Storage storage) {
      int64_t at = arena.take(count, storage);
      v.at[int(f)] =
          base ? base.atByte(at, getType(storage, arena.getPrecision()))
               : DevicePtr();
    };
  };
  for (size_t k = 0; k < resolved.size(); ++k) {
    const LayerConfig &c = *resolved[k].config;
    Views &v = views[k];
    v = Views();
    auto kept = into(v, forwardState, forward);
    auto redone = into(v, recomputed, again);
    walkForwardState(model, c, s, [&](Field f, int64_t count, Storage storage) {
      if (isRecomputed(f, recompute))
        redone(f, count, storage);
      else
        kept(f, count, storage);
    });
    walkWeightState(model, c, s, into(v, weightState, weight));
    walkKeyValues(model, c, s.rows, into(v, keyValues, kv));
  }
}

//===----------------------------------------------------------------------===//
// Transformer layer
//===----------------------------------------------------------------------===//

namespace {
/// Attention over slice `s` of layer `c`, with the model's scale and cap.
AttentionShape getAttentionShape(const ModelConfig &model,
                                 const LayerConfig &c, const SliceShape &s) {
  return {s.rows,    s.tokens,   s.offset,
          model.seqLen, c.heads, c.headDim,
          c.kvHeads, float(model.attentionScale),
          float(model.attentionSoftcap), c.window};
}

/// A transformer layer's sizes for one slice: rows x tokens, hidden, ffn,
/// the query heads' and the key/value heads' widths, and the QKV
/// projection's (q, k and v side by side).
/// `n`: the tokens this shard holds outside the tensor-parallel regions
/// (rt, or rt / T under sequence parallelism).
struct Sizes {
  int64_t rt, n, h, f, hd, kvw, width;
};

Sizes getSizes(const ModelConfig &model, const LayerConfig &l,
               const SliceShape &s) {
  int64_t hd = l.heads * l.headDim, kvw = l.kvHeads * l.headDim;
  return {
      s.rows * s.tokens, getLocalTokens(model, s), model.hidden, l.ffn, hd, kvw,
      hd + 2 * kvw};
}

GateActivation activation(const ModelConfig &m, const LayerConfig &l) {
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
StridedCopy cacheRows(const SliceShape &s, int64_t seqLen, int64_t width,
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
} // namespace

void StageRunner::transformerForward(const Layer &l, const Views &v,
                                     const SliceShape &s, DevicePtr x,
                                     DevicePtr out, DevicePtr work,
                                     bool again) {
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
                      localTokens(a, n * h), v[Field::Xhat1], v[Field::Rstd1]);
  gatherTokens(a, n * h);
  kernels.gemm(false, false, rt, width, h, 1.0f, a, h, l.w.qkvW, width, 0.0f,
               qkv, width);
  if (l.w.qkvB)
    kernels.addRowVector(qkv, l.w.qkvB, rt, width);
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
  DevicePtr partial = isSequenceParallel() ? a : x2;
  kernels.gemm(false, false, rt, h, hd, 1.0f, v[Field::Context], hd, l.w.outW,
               h, 0.0f, partial, h);
  reduceTokens(partial, x2, n * h);
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
  kernels.add(x2, x, n * h);
  kernels.normForward(x2, l.w.norm2W, l.w.norm2B, n, h, rms,
                      float(model.normEps), localTokens(cn, n * h),
                      v[Field::Xhat2], v[Field::Rstd2]);
  gatherTokens(cn, n * h);
  DevicePtr u = v[Field::Up], g = v[Field::Act], z = v[Field::Gate];
  kernels.gemm(false, false, rt, f, h, 1.0f, cn, h, l.w.upW, f, 0.0f, u, f);
  if (l.w.upB)
    kernels.addRowVector(u, l.w.upB, rt, f);
  if (c.isGated()) {
    kernels.gemm(false, false, rt, f, h, 1.0f, cn, h, l.w.gateW, f, 0.0f, z, f);
    if (l.w.gateB)
      kernels.addRowVector(z, l.w.gateB, rt, f);
    kernels.gatedForward(activation(model, c), z, u, g, rt * f);
  } else {
    kernels.geluForward(activation(model, c), u, g, rt * f);
  }
  partial = isSequenceParallel() ? a : out;
  kernels.gemm(false, false, rt, h, f, 1.0f, g, f, l.w.downW, h, 0.0f, partial,
               h);
  reduceTokens(partial, out, n * h);
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

void StageRunner::recomputeLayer(const Layer &l, const Views &v,
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

void StageRunner::transformerBackward(const Layer &l, const Views &v,
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
  DevicePtr partial = isSequenceParallel() ? whole : DevicePtr();

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
                  l.g.postMlpB, localTokens(dy2, n * h));
  gatherTokens(dy2, n * h);
  kernels.gemm(false, true, rt, f, h, 1.0f, dy2, h, l.w.downW, h, 0.0f, dg, f);
  if (c.isGated())
    kernels.gatedBackward(activation(model, c), v[Field::Gate], v[Field::Up],
                          dg, dz, du, rt * f);
  else
    kernels.geluBackward(activation(model, c), v[Field::Up], dg, du, rt * f);
  DevicePtr dcWhole = partial ? partial : dc;
  kernels.gemm(false, true, rt, h, f, 1.0f, du, f, l.w.upW, f, 0.0f, dcWhole,
               h);
  if (c.isGated())
    kernels.gemm(false, true, rt, h, f, 1.0f, dz, f, l.w.gateW, f, 1.0f,
                 dcWhole, h);
  // Column-parallel in F, so each shard's share of the width gives a part
  // of the norm output's gradient: summed before the (whole) norm.
  reduceTokens(dcWhole, dc, n * h);
  kernels.copy(dx2, dout, n * h);
  kernels.normBackward(dc, v[Field::Xhat2], v[Field::Rstd2], l.w.norm2W, n, h,
                       rms, dx2);
  throughPostNorm(dx2, Field::Xhat3, Field::Rstd3, l.w.postAttnW,
                  l.g.postAttnW, l.g.postAttnB, localTokens(dy1, n * h));
  gatherTokens(dy1, n * h);
  kernels.gemm(false, true, rt, hd, h, 1.0f, dy1, h, l.w.outW, h, 0.0f, dctx,
               hd);
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
  DevicePtr daWhole = partial ? partial : v[Field::DA];
  kernels.gemm(false, true, rt, h, width, 1.0f, dqkv, width, l.w.qkvW, width,
               0.0f, daWhole, h);
  reduceTokens(daWhole, v[Field::DA], n * h);
  kernels.copy(dx, dx2, n * h);
  kernels.normBackward(v[Field::DA], v[Field::Xhat1], v[Field::Rstd1],
                       l.w.normW, n, h, rms, dx);
}

void StageRunner::transformerWeight(const Layer &l, const Views &v,
                                    const SliceShape &s, DevicePtr work) {
  const LayerConfig &c = *l.config;
  auto [rt, n, h, f, hd, kvw, width] = getSizes(model, c, s);
  auto [normOut] = Workspace(work, precision, n * h).scratch({rt * h});
  DevicePtr dqkv = v[Field::DQkv], dy1 = v[Field::DY1], du = v[Field::DUp],
            dz = v[Field::DGate], dy2 = v[Field::DY2];

  // The norms' outputs again from the kept normalised inputs; under
  // sequence parallelism gathered again (Megatron-LM re-gathers rather
  // than keep the whole slice), and the norms' weight gradients are this
  // shard's tokens' part (the executor sums them over the group).
  kernels.normAffine(v[Field::Xhat1], l.w.normW, l.w.normB, n, h,
                     localTokens(normOut, n * h));
  gatherTokens(normOut, n * h);
  kernels.gemm(true, false, h, width, rt, 1.0f, normOut, h, dqkv, width, 1.0f,
               l.g.qkvW, width);
  if (l.g.qkvB)
    kernels.accumulateColumnSums(dqkv, rt, width, l.g.qkvB);
  kernels.normParamGrads(v[Field::DA], v[Field::Xhat1], n, h, l.g.normW,
                         l.g.normB);
  kernels.gemm(true, false, hd, h, rt, 1.0f, v[Field::Context], hd, dy1, h,
               1.0f, l.g.outW, h);
  if (l.g.outB)
    kernels.accumulateColumnSums(dy1, rt, h, l.g.outB);
  kernels.normAffine(v[Field::Xhat2], l.w.norm2W, l.w.norm2B, n, h,
                     localTokens(normOut, n * h));
  gatherTokens(normOut, n * h);
  kernels.normParamGrads(v[Field::DC], v[Field::Xhat2], n, h, l.g.norm2W,
                         l.g.norm2B);
  kernels.gemm(true, false, h, f, rt, 1.0f, normOut, h, du, f, 1.0f, l.g.upW,
               f);
  if (l.g.upB)
    kernels.accumulateColumnSums(du, rt, f, l.g.upB);
  if (c.isGated()) {
    kernels.gemm(true, false, h, f, rt, 1.0f, normOut, h, dz, f, 1.0f,
                 l.g.gateW, f);
    if (l.g.gateB)
      kernels.accumulateColumnSums(dz, rt, f, l.g.gateB);
  }
  kernels.gemm(true, false, f, h, rt, 1.0f, v[Field::Act], f, dy2, h, 1.0f,
               l.g.downW, h);
  if (l.g.downB)
    kernels.accumulateColumnSums(dy2, rt, h, l.g.downB);
}

//===----------------------------------------------------------------------===//
// The output layer split over tensor-parallel shards
//===----------------------------------------------------------------------===//

// Megatron-LM's vocabulary-parallel cross-entropy (Weitkamp,
// 2024, "Cross-Entropy"), with the vocabulary paper's
// shard statistics (Yeung et al., 2024, section 4): shard t
// computes its logits Y_t = X W_t^T, the group agrees on each token's
// maximum and then on its sum of exponentials under it. The blog's third
// all-reduce, of the label's logit, is not needed: each shard adds the
// loss of the tokens whose label it holds, and the step sums the loss
// over the group once (Executor). So F has two all-reduces of one fp32
// per token, B one of the norm output's gradient, W none.

void StageRunner::outputShardForward(const Layer &l, const Views &v,
                                     const SliceShape &s,
                                     const TokenRows &batch, DevicePtr normOut,
                                     DevicePtr localMax, DevicePtr loss) {
  const LayerConfig &c = *l.config;
  int64_t rt = s.rows * s.tokens, h = model.hidden;
  int64_t ld = getShardVocabColumns(c);
  DevicePtr logits = v[Field::OutLogits], max = v[Field::OutLse],
            sum = v[Field::OutSum];
  if (outCount > 0)
    kernels.gemm(false, true, rt, outCount, h, 1.0f, normOut, h, l.w.table, h,
                 0.0f, logits, ld);
  if (model.finalSoftcap > 0)
    kernels.softcap(logits, rt, outCount, ld, float(model.finalSoftcap));
  // The shard's maximum and sum of exp(Y - m) per token, one pass; then
  // the group's maximum M, the sum rescaled to it (the vocabulary paper's
  // equation 5, in place) and the group's sum S, the softmax's denominator.
  kernels.shardSoftmaxStatistics(logits, rt, outCount, ld, nullptr, localMax,
                                 sum, nullptr);
  kernels.copy(max, localMax, rt);
  reduceOverShards(max, rt, Reduction::Max);
  kernels.rescaleSum(sum, localMax, max, rt, sum);
  reduceOverShards(sum, rt, Reduction::Sum);
  kernels.shardLoss(logits, batch.tokens + s.offset + 1, batch.stride, s.rows,
                    s.tokens, outFirst, outCount, ld, max, sum, loss);
}

void StageRunner::outputShardBackward(const Layer &l, const Views &v,
                                      const SliceShape &s,
                                      const TokenRows &batch,
                                      DevicePtr localSum, DevicePtr whole,
                                      float lossScale) {
  const LayerConfig &c = *l.config;
  int64_t rt = s.rows * s.tokens, h = model.hidden;
  int64_t n = getLocalTokens(model, s);
  int64_t ld = getShardVocabColumns(c);
  DevicePtr logits = v[Field::OutLogits], dlogits = v[Field::OutDLogits],
            dnorm = v[Field::OutDNorm];
  // The shard's columns of the softmax, exp(Y - M) / S: normalised by the
  // shard's own sum first, then rescaled by it over the group's.
  kernels.shardSoftmaxStatistics(logits, rt, outCount, ld, v[Field::OutLse],
                                 nullptr, localSum, dlogits);
  kernels.scaleRows(dlogits, localSum, v[Field::OutSum], rt, outCount, ld);
  // (softmax - onehot(label)) * scale, the one-hot where the shard holds
  // the label.
  kernels.shardSoftmaxGrad(dlogits, batch.tokens + s.offset + 1, batch.stride,
                           s.rows, s.tokens, outFirst, outCount, ld, lossScale);
  if (model.finalSoftcap > 0)
    kernels.softcapGrad(logits, dlogits, rt, outCount, ld,
                        float(model.finalSoftcap));
  // dX = G W_t is the shard's part of the norm output's gradient: summed
  // over the group before the (whole) norm's backward (reduce-scattered to
  // the shards' tokens under sequence parallelism, from `whole`).
  DevicePtr partial = isSequenceParallel() ? whole : dnorm;
  if (outCount > 0)
    kernels.gemm(false, false, rt, h, outCount, 1.0f, dlogits, ld, l.w.table, h,
                 0.0f, partial, h);
  else
    kernels.fill(partial, 0.0, rt * h);
  reduceTokens(partial, dnorm, n * h);
}

//===----------------------------------------------------------------------===//
// The stage: embedding, transformer layers, output layer
//===----------------------------------------------------------------------===//

void StageRunner::forward(const SliceShape &s, const TokenRows &batch,
                          DevicePtr input, DevicePtr output,
                          DevicePtr forwardState, DevicePtr keyValues,
                          DevicePtr workspace, DevicePtr loss) {
  DevicePtr area;
  if (recompute != Recompute::None) {
    // What B will recompute is made in the workspace and dropped.
    RecomputeArea at = getRecomputeArea(model, layers, s, precision);
    area = workspace.atByte(at.area, precision.activations);
  }
  if (recompute == Recompute::Full) {
    // The checkpoint: the stage's input (none for a whole embedding, which
    // B looks up from the tokens again).
    if (int64_t count = getCheckpointElements(model, layers, s);
        input && count > 0)
      kernels.copy(forwardState, input, count);
    forwardState = DevicePtr();
  }
  carve(s, forwardState, nullptr, keyValues, area);
  runForward(s, batch, input, output, workspace, loss, /*again=*/false);
}

void StageRunner::runForward(const SliceShape &s, const TokenRows &batch,
                             DevicePtr input, DevicePtr output,
                             DevicePtr workspace, DevicePtr loss, bool again) {
  int64_t rt = s.rows * s.tokens, n = getLocalTokens(model, s),
          h = model.hidden;
  Workspace work(workspace, precision, n * h);
  DevicePtr current = input;
  for (size_t i = 0; i < resolved.size(); ++i) {
    const Layer &l = resolved[i];
    const LayerConfig &c = *l.config;
    const Views &v = views[i];
    bool last = i + 1 == resolved.size();
    DevicePtr dst = last && output ? output : work.ping[i % 2];
    switch (c.kind) {
    case LayerKind::Embedding:
      if (c.sharded) {
        // The input shard summed the token rows onto this device (Appendix
        // C; whole, this shard's tokens of them under sequence
        // parallelism); the learned positions, which it holds, are added
        // here.
        kernels.copy(dst, localTokens(current, n * h), n * h);
        if (l.w.positions)
          addPositions(dst, l.w.positions, s);
        scaleEmbedding(dst, n * h);
        break;
      }
      if (vocabCount >= 0) {
        // Vocabulary-parallel (Weitkamp, 2024, "Input
        // Embedding"): each shard looks up the tokens in its rows, zeros
        // elsewhere, and the group's sum is every token's row (under
        // sequence parallelism, a reduce-scatter of the lookups made in
        // the output layer's norm region); then the positions, which every
        // shard holds whole.
        DevicePtr lookups =
            isSequenceParallel() ? work.outputScratch(rt * h, rt).first : dst;
        kernels.shardLookup(batch.tokens + s.offset, batch.stride, s.rows,
                            s.tokens, l.w.table, vocabFirst, vocabCount, h,
                            lookups);
        reduceTokens(lookups, dst, n * h);
        if (l.w.positions)
          addPositions(dst, l.w.positions, s);
        scaleEmbedding(dst, n * h);
        break;
      }
      kernels.embeddingForward(batch.tokens + s.offset, batch.stride, l.w.table,
                               l.w.positions, s.rows, s.tokens, s.offset, h,
                               dst);
      scaleEmbedding(dst, n * h);
      break;
    case LayerKind::Transformer:
      transformerForward(l, v, s, current, dst, workspace, again);
      break;
    case LayerKind::Output: {
      DevicePtr xhat = v[Field::OutXhat], rstd = v[Field::OutRstd];
      bool rms = c.isRms();
      if (c.sharded) {
        // The final norm; the output shard takes its result, X (whole:
        // gathered under sequence parallelism).
        kernels.normForward(current, l.w.normW, l.w.normB, n, h, rms,
                            float(model.normEps), localTokens(dst, n * h), xhat,
                            rstd);
        gatherTokens(dst, n * h);
        break;
      }
      auto [normOut, statistic] = work.outputScratch(rt * h, rt);
      DevicePtr logits = v[Field::OutLogits];
      kernels.normForward(current, l.w.normW, l.w.normB, n, h, rms,
                          float(model.normEps), localTokens(normOut, n * h),
                          xhat, rstd);
      gatherTokens(normOut, n * h);
      if (outCount >= 0) {
        outputShardForward(l, v, s, batch, normOut, statistic, loss);
        break;
      }
      kernels.gemm(false, true, rt, c.vocab, h, 1.0f, normOut, h, l.w.table, h,
                   0.0f, logits, c.vocab);
      if (model.finalSoftcap > 0)
        kernels.softcap(logits, rt, c.vocab, c.vocab, float(model.finalSoftcap));
      kernels.crossEntropyForward(logits, batch.tokens + s.offset + 1,
                                  batch.stride, s.rows, s.tokens, c.vocab,
                                  v[Field::OutLse], loss);
      break;
    }
    }
    current = dst;
  }
}

void StageRunner::backwardInput(const SliceShape &s, const TokenRows &batch,
                                DevicePtr outputGrad, DevicePtr inputGrad,
                                DevicePtr forwardState, DevicePtr weightState,
                                DevicePtr keyValues, DevicePtr workspace,
                                float lossScale, DevicePtr recomputedState) {
  int64_t rt = s.rows * s.tokens, h = model.hidden;
  if (recompute == Recompute::Full) {
    // F once more, from the checkpoint, into the recomputed state; its
    // loss is counted already.
    RecomputeArea at = getRecomputeArea(model, layers, s, precision);
    DevicePtr checkpoint = getCheckpointBytes(model, layers, s, precision) > 0
                               ? forwardState
                               : DevicePtr();
    carve(s, nullptr, nullptr, keyValues, recomputedState);
    runForward(s, batch, checkpoint, nullptr, workspace,
               workspace.atByte(at.loss, DType::F64), /*again=*/true);
    forwardState = DevicePtr();
  }
  carve(s, forwardState, weightState, keyValues, recomputedState);
  if (recompute == Recompute::Selective)
    for (size_t k = 0; k < resolved.size(); ++k)
      if (resolved[k].config->kind == LayerKind::Transformer)
        recomputeLayer(resolved[k], views[k], s);
  int64_t n = getLocalTokens(model, s);
  Workspace work(workspace, precision, n * h);
  DevicePtr grad = outputGrad;
  for (size_t k = resolved.size(); k-- > 0;) {
    const Layer &l = resolved[k];
    const LayerConfig &c = *l.config;
    const Views &v = views[k];
    DevicePtr dst = k == 0 ? inputGrad : work.ping[k % 2];
    switch (c.kind) {
    case LayerKind::Embedding:
      // Keep the gradient for W (whole: gathered under sequence
      // parallelism, the reduce-scatter's transpose); sharded, it also
      // goes back to the input shard's broadcast.
      kernels.copy(localTokens(v[Field::EmbedGrad], n * h), grad, n * h);
      gatherTokens(v[Field::EmbedGrad], n * h);
      // The output's scale, and a padding token's lookups giving its row
      // nothing (the positions get nothing from them either: no model has
      // both).
      scaleEmbedding(v[Field::EmbedGrad], rt * h);
      if (model.paddingToken >= 0)
        kernels.zeroTokenRows(batch.tokens + s.offset, batch.stride, s.rows,
                              s.tokens, int32_t(model.paddingToken), h,
                              v[Field::EmbedGrad]);
      if (c.sharded && inputGrad)
        kernels.copy(inputGrad, v[Field::EmbedGrad], rt * h);
      break;
    case LayerKind::Transformer:
      transformerBackward(l, v, s, grad, dst, workspace);
      break;
    case LayerKind::Output: {
      DevicePtr xhat = v[Field::OutXhat], rstd = v[Field::OutRstd];
      DevicePtr dnorm = v[Field::OutDNorm];
      if (c.sharded) {
        // The output shard's reduced gradient of X (this shard's tokens of
        // it under sequence parallelism), through the final norm.
        kernels.copy(dnorm, localTokens(grad, n * h), n * h);
        kernels.fill(dst, 0.0, n * h);
        kernels.normBackward(dnorm, xhat, rstd, l.w.normW, n, h,
                             c.isRms(), dst);
        break;
      }
      if (outCount >= 0) {
        auto [whole, statistic] = work.outputScratch(rt * h, rt);
        outputShardBackward(l, v, s, batch, statistic, whole, lossScale);
      } else {
        DevicePtr dlogits = v[Field::OutDLogits];
        kernels.crossEntropyBackward(
            v[Field::OutLogits], v[Field::OutLse], batch.tokens + s.offset + 1,
            batch.stride, s.rows, s.tokens, c.vocab, lossScale, dlogits);
        if (model.finalSoftcap > 0)
          kernels.softcapGrad(v[Field::OutLogits], dlogits, rt, c.vocab,
                              c.vocab, float(model.finalSoftcap));
        kernels.gemm(false, false, rt, h, c.vocab, 1.0f, dlogits, c.vocab,
                     l.w.table, h, 0.0f, dnorm, h);
      }
      kernels.fill(dst, 0.0, n * h);
      kernels.normBackward(dnorm, xhat, rstd, l.w.normW, n, h,
                           c.isRms(), dst);
      break;
    }
    }
    grad = dst;
  }
}

void StageRunner::backwardWeight(const SliceShape &s, const TokenRows &batch,
                                 DevicePtr forwardState, DevicePtr weightState,
                                 DevicePtr workspace,
                                 DevicePtr recomputedState) {
  int64_t rt = s.rows * s.tokens, n = getLocalTokens(model, s),
          h = model.hidden;
  Workspace work(workspace, precision, n * h);
  if (recompute == Recompute::Full)
    forwardState = DevicePtr();
  carve(s, forwardState, weightState, nullptr, recomputedState);
  for (size_t k = 0; k < resolved.size(); ++k) {
    const Layer &l = resolved[k];
    const LayerConfig &c = *l.config;
    const Views &v = views[k];
    switch (c.kind) {
    case LayerKind::Embedding:
      if (c.sharded) {
        // The table's gradient is the input shard's (IB); positions here.
        if (l.g.positions)
          addPositionGrads(l.g.positions, v[Field::EmbedGrad], s);
        break;
      }
      if (vocabCount >= 0) {
        // The shard's rows of the table's gradient; the positions' whole
        // (alike on every shard: the gradient reaching them is).
        kernels.shardScatterAdd(batch.tokens + s.offset, batch.stride, s.rows,
                                s.tokens, v[Field::EmbedGrad], vocabFirst,
                                vocabCount, h, l.g.table);
        if (l.g.positions)
          addPositionGrads(l.g.positions, v[Field::EmbedGrad], s);
        break;
      }
      kernels.embeddingBackward(batch.tokens + s.offset, batch.stride,
                                v[Field::EmbedGrad], s.rows, s.tokens, s.offset,
                                h, l.g.table, l.g.positions);
      break;
    case LayerKind::Transformer:
      transformerWeight(l, v, s, workspace);
      break;
    case LayerKind::Output: {
      DevicePtr xhat = v[Field::OutXhat];
      if (c.sharded) {
        kernels.normParamGrads(v[Field::OutDNorm], xhat, n, h, l.g.normW,
                               l.g.normB);
        break;
      }
      DevicePtr normOut = work.outputScratch(rt * h, rt).first;
      kernels.normAffine(xhat, l.w.normW, l.w.normB, n, h,
                         localTokens(normOut, n * h));
      gatherTokens(normOut, n * h);
      // The shard's rows of the table's gradient (split: dlogits' columns
      // are the shard's share, ld its largest share).
      int64_t rows = outCount >= 0 ? outCount : c.vocab;
      if (rows > 0)
        kernels.gemm(true, false, rows, h, rt, 1.0f, v[Field::OutDLogits],
                     getShardVocabColumns(c), normOut, h, 1.0f, l.g.table, h);
      kernels.normParamGrads(v[Field::OutDNorm], xhat, n, h, l.g.normW,
                             l.g.normB);
      break;
    }
    }
  }
}

} // namespace sluice::rt
