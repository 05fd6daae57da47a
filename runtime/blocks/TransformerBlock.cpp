//===- TransformerBlock.cpp - A decoder block's passes --------------------===//
//
// A decoder block, with the backward split into B (input gradients) and W
// (weight gradients) as zero-bubble schedules need. Its core, with the
// slots where block features run (sluice/Blocks/Feature.h; Slots.h):
//
//   a = [AttentionInput](x)                  a pre-norm, or x
//   [QueryKeyValue]: q k v from a, rotated, in place of the two lines
//   below (multi-head latent attention), or
//   [q k v] = [Projections](a Wqkv)          biases, query/key norms
//   ctx = attention(rotate(q), rotate(K), V)
//   x2 = x + [AttentionOutput](ctx Wo)       a bias, a sandwich norm
//   c = [FeedForwardInput](x2)               a pre-norm, or x2
//   [FeedForward]: y2 from c in place of the three lines below (a mixture
//   of experts), or
//   u, z = [FeedForwardHidden](c W1, c Wg)   biases
//   g = gelu(u), or act(z) * u when gated (SwiGLU, GeGLU)
//   out = x2 + [FeedForwardOutput](g W2)     a bias, a sandwich norm
//
// GPT-2's block is pre-norms and biases; Llama's pre-norms with grouped-
// query attention (K and V have fewer heads, each shared by a group of
// query heads), rotary positions and a gated feed-forward block; Gemma-2's
// adds sandwich norms, Qwen3's query/key norms; OLMo-2's has norms after
// each half only.
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
// Context parallelism (SliceShape::contextShards): a rank holds two chunks
// of each slice, one from each end (Megatron-LM's causal balance), and
// everything but attention is per token. Its key/value caches hold its own
// tokens only (ModelConfig::contextShards). Attention is ring attention
// (Liu et al., 2023, section 3): each rank's keys and values of the slice
// and every earlier one go around the ranks, and each rank folds what its
// queries see of every block into their context and log-sum-exp
// (attentionMerge; rotary positions, masks, windows and soft caps are the
// kernels', by position, so exact under the split). In B the blocks go
// around again with an fp32 accumulator of their gradients each, which
// every rank adds into and which ends at the block's owner.
//
//===----------------------------------------------------------------------===//

#include "TransformerBlock.h"

namespace sluice::rt::block {

/// The layer's features at each slot for one pass: F in their order, B in
/// the reverse, and what the core does at a slot no feature fills.
class TransformerBlock::Features {
public:
  Features(const TransformerBlock &block, const Layer &l, const Views &v,
           const SliceShape &s, DevicePtr scratch)
      : block(block), l(l), v(v), s(s),
        size(getSizes(block.model, *l.config, s)),
        scratch(l.features.size()) {
    if (!scratch)
      return;
    walkFeatureScratch(block.model, *l.config, s, block.precision,
                       [&](const blocks::Feature &f, int64_t at, int64_t) {
                         for (size_t i = 0; i < l.features.size(); ++i)
                           if (l.features[i].shape == &f)
                             this->scratch[i] = scratch.atByte(
                                 at, block.precision.activations);
                       });
  }

  void forward(Slot slot, const SlotTensors &t) const {
    for (size_t i = 0; i < l.features.size(); ++i)
      if (l.features[i].isAt(slot))
        l.features[i].compute->forward(slot, context(i), t);
  }
  /// B at an output slot: the gradient at the slot's input into `into`,
  /// from the one at its output, `grad`.
  void backwardOutput(Slot slot, DevicePtr grad, DevicePtr into,
                      int64_t count) const {
    bool written = false;
    SlotTensors t{};
    t.grad = grad;
    t.out = into;
    for (size_t i = l.features.size(); i-- > 0;)
      if (l.features[i].isAt(slot))
        written |= l.features[i].compute->backward(slot, context(i), t);
    if (!written)
      block.kernels.copy(into, grad, count);
  }
  void backward(Slot slot, const SlotTensors &t) const {
    for (size_t i = l.features.size(); i-- > 0;)
      if (l.features[i].isAt(slot))
        l.features[i].compute->backward(slot, context(i), t);
  }
  void weight(Slot slot, const SlotTensors &t) const {
    for (size_t i = 0; i < l.features.size(); ++i)
      if (l.features[i].isAt(slot))
        l.features[i].compute->weight(slot, context(i), t);
  }

  /// F at an input slot: `out` (this shard's tokens) receives the
  /// sublayer's input from `x`, after x += residual when one is given.
  /// Without a feature there, the input is `x` itself, which the state
  /// keeps in `keep` for W.
  void makeInput(Slot slot, DevicePtr x, DevicePtr residual, DevicePtr out,
                 DevicePtr keep) const {
    Kernels &k = block.kernels;
    if (int i = getInput(slot); i >= 0) {
      SlotTensors t{};
      t.x = x, t.residual = residual, t.out = out;
      l.features[i].compute->forward(slot, context(i), t);
      return;
    }
    int64_t count = size.n * size.h;
    if (residual)
      k.add(x, residual, count);
    k.copy(out, x, count);
    k.copy(keep, x, count);
  }
  /// B at an input slot: `out` = `residual` + the gradient through the
  /// slot from `grad`.
  void backwardInput(Slot slot, DevicePtr grad, DevicePtr residual,
                     DevicePtr out) const {
    if (int i = getInput(slot); i >= 0) {
      SlotTensors t{};
      t.grad = grad, t.residual = residual, t.out = out;
      l.features[i].compute->backward(slot, context(i), t);
      return;
    }
    int64_t count = size.n * size.h;
    block.kernels.copy(out, residual, count);
    block.kernels.add(out, grad, count);
  }
  /// W at an input slot: the sublayer's input again into `out`.
  void materialize(Slot slot, DevicePtr out, DevicePtr kept) const {
    if (int i = getInput(slot); i >= 0) {
      SlotTensors t{};
      t.out = out;
      l.features[i].compute->materialize(slot, context(i), t);
      return;
    }
    block.kernels.copy(out, kept, size.n * size.h);
  }

private:
  int getInput(Slot slot) const {
    for (size_t i = 0; i < l.features.size(); ++i)
      if (l.features[i].isAt(slot))
        return int(i);
    return -1;
  }
  SlotContext context(size_t i) const {
    return {block.model, *l.config,    s,          size,
            block.kernels, block.seams, v,          l.features[i],
            scratch[i],  block.balance};
  }

  const TransformerBlock &block;
  const Layer &l;
  const Views &v;
  const SliceShape &s;
  Sizes size;
  std::vector<DevicePtr> scratch;
};

DevicePtr SlotContext::weight(const std::string &name) const {
  for (const BoundParam &p : feature.params)
    if (p.name == name)
      return p.w;
  return {};
}

DevicePtr SlotContext::grad(const std::string &name) const {
  for (const BoundParam &p : feature.params)
    if (p.name == name)
      return p.g;
  return {};
}

DevicePtr SlotContext::master(const std::string &name) const {
  for (const BoundParam &p : feature.params)
    if (p.name == name)
      return p.master;
  return {};
}

void TransformerBlock::product(const Layer &l, Map map, Role roleA, Role roleB,
                               bool transA, bool transB, int64_t m, int64_t n,
                               int64_t k, DevicePtr a, int64_t lda, DevicePtr b,
                               int64_t ldb, float beta, DevicePtr c,
                               int64_t ldc) {
  if (!l.fp8) {
    kernels.gemm(transA, transB, m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  // A weight does not change within a step: the backend may quantize it
  // once a step rather than once a microbatch (Fp8Operand::steady).
  auto operand = [&](Role role) {
    return Fp8Operand{l.fp8 + getFp8Record(map, role) * kFp8RecordFloats,
                      role == Role::Grad ? Fp8Format::E5M2 : Fp8Format::E4M3,
                      role == Role::Weight};
  };
  kernels.gemmFp8(transA, transB, m, n, k, 1.0f, a, lda, operand(roleA), b, ldb,
                  operand(roleB), beta, c, ldc);
}

void TransformerBlock::rotate(const LayerConfig &c, const SliceShape &s,
                              DevicePtr x, int64_t width, bool inverse) {
  int rank = seams.getContext().rank;
  rotateAtPositions(kernels, s, rank, x, c.heads, c.headDim, width, c.rotary,
                    inverse);
  rotateAtPositions(kernels, s, rank, x + c.heads * c.headDim, c.kvHeads,
                    c.headDim, width, c.rotary, inverse);
}

namespace {
/// Ring attention's regions of the context scratch (TransformerScratch::
/// context): two key/value blocks (this rank's prefix of every row, keys
/// then values) and two fp32 accumulators of their gradients, for the
/// block in use and the one arriving; a chunk's log-sum-exps (fp32) and
/// context for one key block.
struct Ring {
  DevicePtr blocks[2], grads[2], lse, context;
  int64_t count; // a block's (and an accumulator's) elements
};

Ring carveRing(DevicePtr exchange, const Precision &precision,
               const LayerConfig &c, const SliceShape &s) {
  Arena arena(precision);
  Ring ring;
  int64_t span = s.getLocalOffset() + s.tokens, chunk = s.getChunkTokens();
  ring.count = s.rows * span * c.kvHeads * (c.headDim + c.getValueDim());
  for (DevicePtr &block : ring.blocks)
    block = exchange.atByte(arena.take(ring.count, Storage::Activation),
                            precision.activations);
  for (DevicePtr &grad : ring.grads)
    grad = exchange.atByte(arena.take(ring.count, Storage::Fp32),
                           kStatisticType);
  ring.lse = exchange.atByte(arena.take(c.heads * chunk, Storage::Fp32),
                             kStatisticType);
  ring.context = exchange.atByte(
      arena.take(chunk * c.heads * c.getValueDim(), Storage::Activation),
      precision.activations);
  return ring;
}

/// A cache's prefix of every row (rows `localSeq` apart) to or from a
/// packed block (rows `span` apart), `w` wide.
StridedCopy prefixRows(const SliceShape &s, int64_t localSeq, int64_t span,
                       int64_t w, bool intoBlock) {
  return intoBlock ? StridedCopy{s.rows, span, w, localSeq * w, w, span * w, w}
                   : StridedCopy{s.rows, span, w, span * w, w, localSeq * w, w};
}

/// The rank's prefix of a key cache and a value cache (or of their
/// gradients) into a packed block, keys then values, or back.
void movePrefix(Kernels &kernels, const SliceShape &s, int64_t localSeq,
                int64_t kvw, int64_t vw, DevicePtr block, DevicePtr keys,
                DevicePtr values, bool intoBlock) {
  int64_t span = s.getLocalOffset() + s.tokens, at = s.rows * span * kvw;
  StridedCopy k = prefixRows(s, localSeq, span, kvw, intoBlock),
              v = prefixRows(s, localSeq, span, vw, intoBlock);
  if (intoBlock) {
    kernels.copyStrided(block, keys, k);
    kernels.copyStrided(block + at, values, v);
  } else {
    kernels.copyStrided(keys, block, k);
    kernels.copyStrided(values, block + at, v);
  }
}
} // namespace

template <class Fn>
void TransformerBlock::forEachKeyBlock(const LayerConfig &c,
                                       const SliceShape &s, int holder,
                                       Fn fn) {
  const ContextGroup &group = seams.getContext();
  AttentionShape shape = getAttentionShape(model, c, s);
  int64_t chunk = s.getChunkTokens(), span = s.getLocalOffset() + s.tokens;
  shape.rows = 1;
  shape.tokens = chunk;
  shape.seqLen = span;
  // The prefix's slices (each one's tokens over all the ranks); without
  // the plan's list, the slice alone.
  std::vector<SliceShape> prefix;
  int64_t offset = 0;
  for (int64_t tokens : group.slices) {
    if (offset > s.offset)
      break;
    prefix.push_back({s.rows, tokens / s.contextShards, offset,
                      s.contextShards});
    offset += tokens;
  }
  if (group.slices.empty())
    prefix.push_back(s);
  for (int64_t r = 0; r < s.rows; ++r)
    for (int part = 0; part < 2; ++part) {
      shape.offset = s.getChunkOffset(group.rank, part);
      int64_t firstSeen = shape.getFirstKey(shape.offset),
              last = shape.offset + chunk - 1;
      for (const SliceShape &j : prefix)
        for (int keyPart = 0; keyPart < 2; ++keyPart) {
          AttentionShape block = shape;
          block.keyBegin = j.getChunkOffset(holder, keyPart);
          block.keyCount = j.getChunkTokens();
          if (block.keyBegin > last ||
              block.keyBegin + block.keyCount <= firstSeen)
            continue;
          fn(block, r, part,
             r * span + j.getLocalOffset() + keyPart * block.keyCount);
        }
    }
}

void TransformerBlock::attend(const LayerConfig &c, const SliceShape &s,
                              const Views &v, DevicePtr exchange) {
  if (s.contextShards > 1) {
    ringForward(c, s, v, exchange);
    return;
  }
  kernels.attentionForward(getAttentionShape(model, c, s), v[Field::Q],
                           v[Field::Keys], v[Field::Values], v[Field::Lse],
                           v[Field::Context]);
}

void TransformerBlock::ringForward(const LayerConfig &c, const SliceShape &s,
                                   const Views &v, DevicePtr exchange) {
  auto [rt, n, h, f, hd, kvw, width, vw, cw] = getSizes(model, c, s);
  const ContextGroup &group = seams.getContext();
  Ring ring = carveRing(exchange, precision, c, s);
  int64_t localSeq = model.seqLen / s.contextShards, chunk = s.getChunkTokens(),
          span = s.getLocalOffset() + s.tokens, values = s.rows * span * kvw;
  // This rank's block: its keys, then its values, of every row's prefix.
  movePrefix(kernels, s, localSeq, kvw, vw, ring.blocks[0], v[Field::Keys],
             v[Field::Values], true);
  // No key seen yet: log-sum-exp -inf, a zero context.
  kernels.fill(v[Field::Lse], -INFINITY, s.rows * c.heads * s.tokens);
  kernels.fill(v[Field::Context], 0.0, rt * cw);
  for (int step = 0; step < group.size; ++step) {
    // The block of the rank `step` places before this one.
    int holder = (group.rank - step + group.size) % group.size;
    DevicePtr block = ring.blocks[step % 2];
    std::function<void()> arrived;
    if (step + 1 < group.size)
      arrived = group.shift(block, ring.blocks[(step + 1) % 2], ring.count);
    forEachKeyBlock(c, s, holder,
                    [&, hd = hd, kvw = kvw, vw = vw, cw = cw](
                        const AttentionShape &shape, int64_t r, int part,
                        int64_t keyRow) {
                      int64_t token = r * s.tokens + part * chunk,
                              lse = (r * 2 + part) * c.heads * chunk;
                      kernels.attentionForward(
                          shape, v[Field::Q] + token * hd, block + keyRow * kvw,
                          block + values + keyRow * vw, ring.lse, ring.context);
                      kernels.attentionMerge(shape, v[Field::Lse] + lse,
                                             v[Field::Context] + token * cw,
                                             ring.lse, ring.context);
                    });
    if (arrived)
      arrived();
  }
}

void TransformerBlock::ringBackward(const LayerConfig &c, const SliceShape &s,
                                    const Views &v, DevicePtr dctx,
                                    DevicePtr dq, DevicePtr exchange) {
  auto [rt, n, h, f, hd, kvw, width, vw, cw] = getSizes(model, c, s);
  const ContextGroup &group = seams.getContext();
  Ring ring = carveRing(exchange, precision, c, s);
  int64_t localSeq = model.seqLen / s.contextShards, chunk = s.getChunkTokens(),
          span = s.getLocalOffset() + s.tokens, values = s.rows * span * kvw;
  movePrefix(kernels, s, localSeq, kvw, vw, ring.blocks[0], v[Field::Keys],
             v[Field::Values], true);
  // This rank's accumulator starts from its caches' gradients so far (the
  // later slices' parts) and comes back with every rank's part added.
  movePrefix(kernels, s, localSeq, kvw, vw, ring.grads[0], v[Field::DKeys],
             v[Field::DValues], true);
  kernels.fill(dq, 0.0, rt * hd);
  for (int step = 0; step < group.size; ++step) {
    int holder = (group.rank - step + group.size) % group.size;
    DevicePtr block = ring.blocks[step % 2], grads = ring.grads[step % 2];
    std::function<void()> arrived;
    if (step + 1 < group.size)
      arrived = group.shift(block, ring.blocks[(step + 1) % 2], ring.count);
    forEachKeyBlock(
        c, s, holder,
        [&, hd = hd, kvw = kvw, vw = vw, cw = cw](AttentionShape shape,
                                                  int64_t r, int part,
                                                  int64_t keyRow) {
          int64_t token = r * s.tokens + part * chunk,
                  lse = (r * 2 + part) * c.heads * chunk;
          shape.accumulateQueries = true;
          kernels.attentionBackward(
              shape, v[Field::Q] + token * hd, block + keyRow * kvw,
              block + values + keyRow * vw, v[Field::Context] + token * cw,
              v[Field::Lse] + lse, dctx + token * cw, dq + token * hd,
              grads + keyRow * kvw, grads + values + keyRow * vw);
        });
    if (arrived)
      arrived();
    // The block's gradients on to the next rank; after the last step,
    // every block's are home.
    group.shift(grads, ring.grads[(step + 1) % 2], ring.count)();
  }
  movePrefix(kernels, s, localSeq, kvw, vw, ring.grads[group.size % 2],
             v[Field::DKeys], v[Field::DValues], false);
}

void TransformerBlock::forward(const Layer &l, const Views &v,
                               const SliceShape &s, DevicePtr x, DevicePtr out,
                               DevicePtr work, DevicePtr featureWork,
                               bool again) {
  const LayerConfig &c = *l.config;
  auto [rt, n, h, f, hd, kvw, width, vw, cw] = getSizes(model, c, s);
  TransformerScratch t = getTransformerScratch(model, c, s);
  auto [a, qkv, x2, cn, exchange] =
      Workspace(work, precision, n * h)
          .scratch({t.norm, t.qkv, t.residual, t.norm2, t.context});
  Features at(*this, l, v, s, featureWork);
  // A rank's caches hold its own tokens (under context parallelism its
  // chunks of each slice, one after the other).
  int64_t localSeq = model.seqLen / s.contextShards;

  // The backward of later slices accumulates into this microbatch's key and
  // value gradients; they start at zero with its first slice.
  if (s.offset == 0 && !again) {
    kernels.fill(v[Field::DKeys], 0.0, s.rows * localSeq * kvw);
    kernels.fill(v[Field::DValues], 0.0, s.rows * localSeq * vw);
  }
  // The attention's input on this shard's tokens; under sequence
  // parallelism the group's all-gather (the blog's g, Korthikanti et
  // al.'s) makes the whole slice's input of the column-parallel projection.
  at.makeInput(Slot::AttentionInput, x, DevicePtr(),
               seams.localTokens(a, n * h), v[Field::AttnIn]);
  seams.gatherTokens(a, n * h);
  if (!l.coreProjection) {
    // A feature's projection in the core's place (multi-head latent
    // attention): q, k and v from the whole slice's input, rotated.
    SlotTensors projection{};
    projection.x = a, projection.out = qkv;
    at.forward(Slot::QueryKeyValue, projection);
  } else {
    product(l, Map::Qkv, Role::Input, Role::Weight, false, false, rt, width, h,
            a, h, l.w.qkvW, width, 0.0f, qkv, width);
  }
  SlotTensors projections{};
  projections.x = qkv;
  at.forward(Slot::Projections, projections);
  // Rotated by absolute position (offset + t), so the keys a later slice
  // reads from the state are the ones the whole sequence would have.
  if (c.rotary.theta > 0 && l.coreProjection)
    rotate(c, s, qkv, width, false);
  // Q to the state; K and V to the slice's rows of the microbatch's cache:
  // one strided copy each.
  kernels.copyStrided(v[Field::Q], qkv, {1, rt, hd, 0, width, 0, hd});
  kernels.copyStrided(v[Field::Keys] + s.getLocalOffset() * kvw, qkv + hd,
                      cacheRows(s, localSeq, kvw, width, true));
  kernels.copyStrided(v[Field::Values] + s.getLocalOffset() * vw,
                      qkv + hd + kvw, cacheRows(s, localSeq, vw, width, true));
  attend(c, s, v, exchange);
  // Row-parallel: each shard's heads give a partial sum (the blog's first
  // ALLREDUCE; reduce-scattered to the shards' tokens under sequence
  // parallelism, the partial sums then in `a`, which QKV has consumed).
  // A bias is added once, after it (AttentionOutput); `a` is free again.
  DevicePtr partial = seams.isSequenceParallel() ? a : x2;
  product(l, Map::Out, Role::Input, Role::Weight, false, false, rt, h, cw,
          v[Field::Context], cw, l.w.outW, h, 0.0f, partial, h);
  seams.reduceTokens(partial, x2, n * h);
  SlotTensors output{};
  output.x = x2, output.temp = a;
  at.forward(Slot::AttentionOutput, output);
  // x2 += x, then the feed-forward block's input (fused in a pre-norm).
  at.makeInput(Slot::FeedForwardInput, x2, x, seams.localTokens(cn, n * h),
               v[Field::MlpIn]);
  seams.gatherTokens(cn, n * h);
  partial = seams.isSequenceParallel() ? a : out;
  if (!l.coreFeedForward) {
    // A feature's feed-forward block in the core's place (a mixture of
    // experts): the same input, a partial sum per shard the same way.
    SlotTensors block{};
    block.x = cn, block.out = partial;
    at.forward(Slot::FeedForward, block);
  } else {
    feedForward(l, v, s, at, cn, partial);
  }
  seams.reduceTokens(partial, out, n * h);
  output.x = out;
  at.forward(Slot::FeedForwardOutput, output);
  kernels.add(out, x2, n * h);
}

void TransformerBlock::feedForward(const Layer &l, const Views &v,
                                   const SliceShape &s, const Features &at,
                                   DevicePtr cn, DevicePtr partial) {
  const LayerConfig &c = *l.config;
  auto [rt, n, h, f, hd, kvw, width, vw, cw] = getSizes(model, c, s);
  DevicePtr u = v[Field::Up], g = v[Field::Act], z = v[Field::Gate];
  product(l, Map::Up, Role::Input, Role::Weight, false, false, rt, f, h, cn, h,
          l.w.upW, f, 0.0f, u, f);
  if (c.isGated())
    product(l, Map::Gate, Role::Input, Role::Weight, false, false, rt, f, h, cn,
            h, l.w.gateW, f, 0.0f, z, f);
  SlotTensors hidden{};
  hidden.x = u, hidden.gate = c.isGated() ? z : DevicePtr();
  at.forward(Slot::FeedForwardHidden, hidden);
  if (c.isGated())
    kernels.gatedForward(activation(model, c), z, u, g, rt * f);
  else
    kernels.geluForward(activation(model, c), u, g, rt * f);
  product(l, Map::Down, Role::Input, Role::Weight, false, false, rt, h, f, g, f,
          l.w.downW, h, 0.0f, partial, h);
}

void TransformerBlock::recompute(const Layer &l, const Views &v,
                                 const SliceShape &s, DevicePtr work) {
  // The attention core from the kept Q and the microbatch's keys and
  // values (B runs slices in reverse, so every earlier slice's are still
  // there), and the MLP's activation from its kept pre-activations.
  const LayerConfig &c = *l.config;
  TransformerScratch t = getTransformerScratch(model, c, s);
  auto [norm, qkv, residual, norm2, exchange] =
      Workspace(work, precision, getLocalTokens(model, s) * model.hidden)
          .scratch({t.norm, t.qkv, t.residual, t.norm2, t.context});
  attend(c, s, v, exchange);
  int64_t n = s.rows * s.tokens * c.ffn;
  if (!l.coreFeedForward)
    return;
  if (c.isGated())
    kernels.gatedForward(activation(model, c), v[Field::Gate], v[Field::Up],
                         v[Field::Act], n);
  else
    kernels.geluForward(activation(model, c), v[Field::Up], v[Field::Act], n);
}

void TransformerBlock::backward(const Layer &l, const Views &v,
                                const SliceShape &s, DevicePtr dout,
                                DevicePtr dx, DevicePtr work,
                                DevicePtr featureWork, bool rowWeights) {
  const LayerConfig &c = *l.config;
  auto [rt, n, h, f, hd, kvw, width, vw, cw] = getSizes(model, c, s);
  TransformerScratch t = getTransformerScratch(model, c, s);
  auto [dg, dx2, dctx, dq, whole, exchange] =
      Workspace(work, precision, n * h)
          .scratch({t.dAct, t.dResidual, t.dContext, t.dQ, t.partial,
                    t.context});
  Features at(*this, l, v, s, featureWork);
  DevicePtr dy2 = v[Field::DY2], du = v[Field::DUp], dz = v[Field::DGate],
            dc = v[Field::DC], dy1 = v[Field::DY1], dqkv = v[Field::DQkv];
  // Under sequence parallelism each collective of F has its transpose
  // here: a reduce-scatter's is an all-gather (the output gradients of
  // the row-parallel projections, kept whole for W), an all-gather's a
  // reduce-scatter (the column-parallel projections' input gradients,
  // summed from `whole`).
  DevicePtr partial = seams.isSequenceParallel() ? whole : DevicePtr();

  // The down projection's output gradient: the block's, or through a
  // feature at its output (a sandwich norm).
  at.backwardOutput(Slot::FeedForwardOutput, dout,
                    seams.localTokens(dy2, n * h), n * h);
  seams.gatherTokens(dy2, n * h);
  DevicePtr dcWhole = partial ? partial : dc;
  if (!l.coreFeedForward) {
    SlotTensors block{};
    block.grad = dy2, block.out = dcWhole;
    at.backward(Slot::FeedForward, block);
  } else {
    product(l, Map::Down, Role::Grad, Role::Weight, false, true, rt, f, h, dy2,
            h, l.w.downW, h, 0.0f, dg, f);
    if (c.isGated())
      kernels.gatedBackward(activation(model, c), v[Field::Gate], v[Field::Up],
                            dg, dz, du, rt * f);
    else
      kernels.geluBackward(activation(model, c), v[Field::Up], dg, du, rt * f);
    product(l, Map::Up, Role::Grad, Role::Weight, false, true, rt, h, f, du, f,
            l.w.upW, f, 0.0f, dcWhole, h);
    if (c.isGated())
      product(l, Map::Gate, Role::Grad, Role::Weight, false, true, rt, h, f, dz,
              f, l.w.gateW, f, 1.0f, dcWhole, h);
  }
  // Column-parallel in F, so each shard's share of the width gives a part
  // of the feed-forward input's gradient: summed before the input's slot.
  // Meanwhile, in a BW pass, the down projection's weight gradient, which
  // reads neither the sum nor its input (Megatron-LM overlaps the input
  // gradient's reduce with a weight-gradient GEMM the same way).
  PendingCollective sum = seams.startReduceTokens(dcWhole, dc, n * h);
  if (rowWeights && l.coreFeedForward)
    downWeight(l, v, rt, f, h);
  sum.wait();
  at.backwardInput(Slot::FeedForwardInput, dc, dout, dx2);
  at.backwardOutput(Slot::AttentionOutput, dx2, seams.localTokens(dy1, n * h),
                    n * h);
  seams.gatherTokens(dy1, n * h);
  product(l, Map::Out, Role::Grad, Role::Weight, false, true, rt, cw, h, dy1, h,
          l.w.outW, h, 0.0f, dctx, cw);
  int64_t localSeq = model.seqLen / s.contextShards;
  if (s.contextShards > 1)
    ringBackward(c, s, v, dctx, dq, exchange);
  else
    kernels.attentionBackward(getAttentionShape(model, c, s), v[Field::Q],
                              v[Field::Keys], v[Field::Values],
                              v[Field::Context], v[Field::Lse], dctx, dq,
                              v[Field::DKeys], v[Field::DValues]);
  // Every later slice has added into this slice's key and value gradients
  // (under context parallelism every rank's queries' parts), so they are
  // complete: assemble the QKV projection's output gradient.
  kernels.copyStrided(dqkv, dq, {1, rt, hd, 0, hd, 0, width});
  kernels.copyStrided(dqkv + hd, v[Field::DKeys] + s.getLocalOffset() * kvw,
                      cacheRows(s, localSeq, kvw, width, false));
  kernels.copyStrided(dqkv + hd + kvw,
                      v[Field::DValues] + s.getLocalOffset() * vw,
                      cacheRows(s, localSeq, vw, width, false));
  // Back through the rotation: its gradient is its transpose.
  if (c.rotary.theta > 0 && l.coreProjection)
    rotate(c, s, dqkv, width, true);
  SlotTensors projections{};
  projections.x = dqkv, projections.temp = dq, projections.temp2 = dctx;
  at.backward(Slot::Projections, projections);
  DevicePtr daWhole = partial ? partial : v[Field::DA];
  if (!l.coreProjection) {
    SlotTensors projection{};
    projection.grad = dqkv, projection.out = daWhole;
    at.backward(Slot::QueryKeyValue, projection);
  } else {
    product(l, Map::Qkv, Role::Grad, Role::Weight, false, true, rt, h, width,
            dqkv, width, l.w.qkvW, width, 0.0f, daWhole, h);
  }
  // As the feed-forward input's: the attention output's weight gradient
  // beside the sum.
  sum = seams.startReduceTokens(daWhole, v[Field::DA], n * h);
  if (rowWeights)
    outWeight(l, v, rt, cw, h);
  sum.wait();
  at.backwardInput(Slot::AttentionInput, v[Field::DA], dx2, dx);
}

void TransformerBlock::outWeight(const Layer &l, const Views &v, int64_t rt,
                                 int64_t cw, int64_t h) {
  product(l, Map::Out, Role::Input, Role::Grad, true, false, cw, h, rt,
          v[Field::Context], cw, v[Field::DY1], h, 1.0f, l.g.outW, h);
}

void TransformerBlock::downWeight(const Layer &l, const Views &v, int64_t rt,
                                  int64_t f, int64_t h) {
  product(l, Map::Down, Role::Input, Role::Grad, true, false, f, h, rt,
          v[Field::Act], f, v[Field::DY2], h, 1.0f, l.g.downW, h);
}

void TransformerBlock::weight(const Layer &l, const Views &v,
                              const SliceShape &s, DevicePtr work,
                              DevicePtr featureWork, bool rowWeights) {
  const LayerConfig &c = *l.config;
  auto [rt, n, h, f, hd, kvw, width, vw, cw] = getSizes(model, c, s);
  bool sequence = seams.isSequenceParallel();
  auto [input, input2] = Workspace(work, precision, n * h)
                             .scratch({rt * h, sequence ? rt * h : 0});
  Features at(*this, l, v, s, featureWork);
  DevicePtr dqkv = v[Field::DQkv], dy1 = v[Field::DY1], du = v[Field::DUp],
            dz = v[Field::DGate], dy2 = v[Field::DY2];

  // The sublayers' inputs again (a pre-norm's output from its kept
  // normalised input); under sequence parallelism gathered again
  // (Megatron-LM re-gathers rather than keep the whole slice) -- both
  // gathers started at once, into two buffers, and the gradients that need
  // neither computed while they run.
  at.materialize(Slot::AttentionInput, seams.localTokens(input, n * h),
                 v[Field::AttnIn]);
  PendingCollective first = seams.startGatherTokens(input, n * h);
  PendingCollective second;
  if (sequence) {
    at.materialize(Slot::FeedForwardInput, seams.localTokens(input2, n * h),
                   v[Field::MlpIn]);
    second = seams.startGatherTokens(input2, n * h);
  }
  SlotTensors inputs{};
  inputs.grad = v[Field::DA];
  at.weight(Slot::AttentionInput, inputs);
  inputs.grad = v[Field::DC];
  at.weight(Slot::FeedForwardInput, inputs);
  if (!rowWeights)
    outWeight(l, v, rt, cw, h);
  SlotTensors output{};
  output.grad = dy1;
  at.weight(Slot::AttentionOutput, output);
  if (l.coreFeedForward && !rowWeights)
    downWeight(l, v, rt, f, h);
  output.grad = dy2;
  at.weight(Slot::FeedForwardOutput, output);

  first.wait();
  if (!l.coreProjection) {
    SlotTensors projection{};
    projection.x = input, projection.grad = dqkv;
    at.weight(Slot::QueryKeyValue, projection);
  } else {
    product(l, Map::Qkv, Role::Input, Role::Grad, true, false, h, width, rt,
            input, h, dqkv, width, 1.0f, l.g.qkvW, width);
  }
  SlotTensors projections{};
  projections.x = dqkv;
  at.weight(Slot::Projections, projections);
  if (sequence) {
    second.wait();
    input = input2;
  } else {
    at.materialize(Slot::FeedForwardInput, input, v[Field::MlpIn]);
  }
  if (!l.coreFeedForward) {
    SlotTensors block{};
    block.x = input, block.grad = dy2;
    at.weight(Slot::FeedForward, block);
    return;
  }
  product(l, Map::Up, Role::Input, Role::Grad, true, false, h, f, rt, input, h,
          du, f, 1.0f, l.g.upW, f);
  if (c.isGated())
    product(l, Map::Gate, Role::Input, Role::Grad, true, false, h, f, rt,
            input, h, dz, f, 1.0f, l.g.gateW, f);
  SlotTensors hidden{};
  hidden.x = du, hidden.gate = c.isGated() ? dz : DevicePtr();
  at.weight(Slot::FeedForwardHidden, hidden);
}

} // namespace sluice::rt::block
