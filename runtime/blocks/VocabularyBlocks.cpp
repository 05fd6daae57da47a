//===- VocabularyBlocks.cpp - The embedding's and output layer's passes ---===//

#include "VocabularyBlocks.h"

#include <algorithm>

namespace sluice::rt::block {

//===----------------------------------------------------------------------===//
// The embedding
//===----------------------------------------------------------------------===//

int64_t EmbeddingBlock::getPosition(const SliceShape &s, int64_t t) const {
  if (s.contextShards == 1)
    return s.offset + t;
  // A context-parallel rank's two chunks, each at its place in the slice.
  int64_t chunk = s.getChunkTokens();
  return s.getChunkOffset(seams.getContext().rank, int(t / chunk)) +
         t % chunk;
}

int64_t EmbeddingBlock::getRun(const SliceShape &s, int64_t t) const {
  int64_t run = s.tokens - t;
  if (s.contextShards > 1)
    run = std::min(run, s.getChunkTokens() - t % s.getChunkTokens());
  return run;
}

void EmbeddingBlock::addPositions(DevicePtr dst, DevicePtr positions,
                                  const SliceShape &s) {
  // This shard's tokens are flat indices [first, first + local) of the
  // slice's rows x tokens: a run of positions per row (and context-
  // parallel chunk) they touch.
  int64_t h = model.hidden, local = getLocalTokens(model, s);
  int64_t first =
      seams.isSequenceParallel() ? seams.getShardIndex() * local : 0;
  for (int64_t j = first; j < first + local;) {
    int64_t t = j % s.tokens;
    int64_t run = std::min(getRun(s, t), first + local - j);
    kernels.add(dst + (j - first) * h, positions + getPosition(s, t) * h,
                run * h);
    j += run;
  }
}

void EmbeddingBlock::addPositionGrads(DevicePtr positionGrads, DevicePtr grad,
                                      const SliceShape &s) {
  int64_t h = model.hidden;
  for (int64_t r = 0; r < s.rows; ++r)
    for (int64_t t = 0; t < s.tokens;) {
      int64_t run = getRun(s, t);
      kernels.add(positionGrads + getPosition(s, t) * h,
                  grad + (r * s.tokens + t) * h, run * h);
      t += run;
    }
}

void EmbeddingBlock::scale(DevicePtr x, int64_t n) {
  if (model.embeddingScale != 1.0)
    kernels.scale(x, float(model.embeddingScale), n);
}

void EmbeddingBlock::forward(const Layer &l, const Views &v,
                             const SliceShape &s, const TokenRows &batch,
                             DevicePtr input, DevicePtr out,
                             const Workspace &work) {
  const LayerConfig &c = *l.config;
  int64_t rt = s.rows * s.tokens, n = getLocalTokens(model, s),
          h = model.hidden;
  if (c.sharded) {
    // The input shard summed the token rows onto this device (Appendix
    // C; whole, this shard's tokens of them under sequence
    // parallelism); the learned positions, which it holds, are added
    // here.
    kernels.copy(out, seams.localTokens(input, n * h), n * h);
  } else if (rows.isSplit()) {
    // Vocabulary-parallel (Weitkamp, 2024, "Input Embedding"): each shard
    // looks up the tokens in its rows, zeros elsewhere, and the group's
    // sum is every token's row (under sequence parallelism, a
    // reduce-scatter of the lookups made in the output layer's norm
    // region); then the positions, which every shard holds whole.
    DevicePtr lookups = seams.isSequenceParallel()
                            ? work.outputScratch(rt * h, rt).first
                            : out;
    kernels.shardLookup(batch.tokensAt(s), batch.stride, s.rows,
                        s.tokens, l.w.table, rows.first, rows.count, h,
                        lookups);
    seams.reduceTokens(lookups, out, n * h);
  } else if (s.contextShards == 1 || !l.w.positions) {
    kernels.embeddingForward(batch.tokensAt(s), batch.stride, l.w.table,
                             l.w.positions, s.rows, s.tokens, s.offset, h,
                             out);
    scale(out, n * h);
    return;
  } else {
    // Under context parallelism the rank's two chunks sit apart in the
    // sequence: the lookup, then each chunk's positions.
    kernels.embeddingForward(batch.tokensAt(s), batch.stride, l.w.table,
                             DevicePtr(), s.rows, s.tokens, s.offset, h, out);
  }
  if (l.w.positions)
    addPositions(out, l.w.positions, s);
  scale(out, n * h);
}

void EmbeddingBlock::backward(const Layer &l, const Views &v,
                              const SliceShape &s, const TokenRows &batch,
                              DevicePtr grad, DevicePtr dx) {
  int64_t rt = s.rows * s.tokens, n = getLocalTokens(model, s),
          h = model.hidden;
  // Keep the gradient for W (whole: gathered under sequence parallelism,
  // the reduce-scatter's transpose); sharded, it also goes back to the
  // input shard's broadcast.
  kernels.copy(seams.localTokens(v[Field::EmbedGrad], n * h), grad, n * h);
  seams.gatherTokens(v[Field::EmbedGrad], n * h);
  // The output's scale, and a padding token's lookups giving its row
  // nothing (the positions get nothing from them either: no model has
  // both).
  scale(v[Field::EmbedGrad], rt * h);
  if (model.paddingToken >= 0)
    kernels.zeroTokenRows(batch.tokensAt(s), batch.stride, s.rows,
                          s.tokens, int32_t(model.paddingToken), h,
                          v[Field::EmbedGrad]);
  if (l.config->sharded && dx)
    kernels.copy(dx, v[Field::EmbedGrad], rt * h);
}

void EmbeddingBlock::weight(const Layer &l, const Views &v,
                            const SliceShape &s, const TokenRows &batch) {
  int64_t h = model.hidden;
  if (l.config->sharded) {
    // The table's gradient is the input shard's (IB); positions here.
    if (l.g.positions)
      addPositionGrads(l.g.positions, v[Field::EmbedGrad], s);
    return;
  }
  if (rows.isSplit()) {
    // The shard's rows of the table's gradient; the positions' whole
    // (alike on every shard: the gradient reaching them is).
    kernels.shardScatterAdd(batch.tokensAt(s), batch.stride, s.rows,
                            s.tokens, v[Field::EmbedGrad], rows.first,
                            rows.count, h, l.g.table);
    if (l.g.positions)
      addPositionGrads(l.g.positions, v[Field::EmbedGrad], s);
    return;
  }
  bool apart = s.contextShards > 1 && l.g.positions;
  kernels.embeddingBackward(batch.tokensAt(s), batch.stride,
                            v[Field::EmbedGrad], s.rows, s.tokens, s.offset,
                            h, l.g.table, apart ? DevicePtr() : l.g.positions);
  if (apart)
    addPositionGrads(l.g.positions, v[Field::EmbedGrad], s);
}

//===----------------------------------------------------------------------===//
// The output layer
//===----------------------------------------------------------------------===//

void OutputBlock::forward(const Layer &l, const Views &v, const SliceShape &s,
                          const TokenRows &batch, DevicePtr x, DevicePtr out,
                          const Workspace &work, DevicePtr loss) {
  const LayerConfig &c = *l.config;
  int64_t rt = s.rows * s.tokens, n = getLocalTokens(model, s),
          h = model.hidden;
  DevicePtr xhat = v[Field::OutXhat], rstd = v[Field::OutRstd];
  if (c.sharded) {
    // The final norm; the output shard takes its result, X (whole:
    // gathered under sequence parallelism).
    kernels.normForward(x, l.w.normW, l.w.normB, n, h, c.isRms(),
                        float(model.normEps), seams.localTokens(out, n * h),
                        xhat, rstd);
    seams.gatherTokens(out, n * h);
    return;
  }
  auto [normOut, statistic] = work.outputScratch(rt * h, rt);
  kernels.normForward(x, l.w.normW, l.w.normB, n, h, c.isRms(),
                      float(model.normEps), seams.localTokens(normOut, n * h),
                      xhat, rstd);
  seams.gatherTokens(normOut, n * h);
  if (rows.isSplit()) {
    shardForward(l, v, s, batch, normOut, statistic, loss);
    return;
  }
  DevicePtr logits = v[Field::OutLogits];
  kernels.gemm(false, true, rt, c.vocab, h, 1.0f, normOut, h, l.w.table, h,
               0.0f, logits, c.vocab);
  if (model.finalSoftcap > 0)
    kernels.softcap(logits, rt, c.vocab, c.vocab, float(model.finalSoftcap));
  kernels.crossEntropyForward(logits, batch.labelsAt(s),
                              batch.stride, s.rows, s.tokens, c.vocab,
                              v[Field::OutLse], loss);
}

void OutputBlock::backward(const Layer &l, const Views &v, const SliceShape &s,
                           const TokenRows &batch, DevicePtr grad, DevicePtr dx,
                           const Workspace &work, float lossScale) {
  const LayerConfig &c = *l.config;
  int64_t rt = s.rows * s.tokens, n = getLocalTokens(model, s),
          h = model.hidden;
  DevicePtr xhat = v[Field::OutXhat], rstd = v[Field::OutRstd];
  DevicePtr dnorm = v[Field::OutDNorm];
  if (c.sharded) {
    // The output shard's reduced gradient of X (this shard's tokens of it
    // under sequence parallelism), through the final norm.
    kernels.copy(dnorm, seams.localTokens(grad, n * h), n * h);
  } else if (rows.isSplit()) {
    auto [whole, statistic] = work.outputScratch(rt * h, rt);
    shardBackward(l, v, s, batch, statistic, whole, lossScale);
  } else {
    DevicePtr dlogits = v[Field::OutDLogits];
    kernels.crossEntropyBackward(v[Field::OutLogits], v[Field::OutLse],
                                 batch.labelsAt(s), batch.stride,
                                 s.rows, s.tokens, c.vocab, lossScale, dlogits);
    if (model.finalSoftcap > 0)
      kernels.softcapGrad(v[Field::OutLogits], dlogits, rt, c.vocab, c.vocab,
                          float(model.finalSoftcap));
    kernels.gemm(false, false, rt, h, c.vocab, 1.0f, dlogits, c.vocab,
                 l.w.table, h, 0.0f, dnorm, h);
  }
  kernels.fill(dx, 0.0, n * h);
  kernels.normBackward(dnorm, xhat, rstd, l.w.normW, n, h, c.isRms(), dx);
}

void OutputBlock::weight(const Layer &l, const Views &v, const SliceShape &s,
                         const Workspace &work) {
  const LayerConfig &c = *l.config;
  int64_t rt = s.rows * s.tokens, n = getLocalTokens(model, s),
          h = model.hidden;
  DevicePtr xhat = v[Field::OutXhat];
  if (!c.sharded) {
    DevicePtr normOut = work.outputScratch(rt * h, rt).first;
    kernels.normAffine(xhat, l.w.normW, l.w.normB, n, h,
                       seams.localTokens(normOut, n * h));
    seams.gatherTokens(normOut, n * h);
    // The shard's rows of the table's gradient (split: dlogits' columns
    // are the shard's share, ld its largest share).
    int64_t count = rows.isSplit() ? rows.count : c.vocab;
    if (count > 0)
      kernels.gemm(true, false, count, h, rt, 1.0f, v[Field::OutDLogits],
                   getShardVocabColumns(c), normOut, h, 1.0f, l.g.table, h);
  }
  kernels.normParamGrads(v[Field::OutDNorm], xhat, n, h, l.g.normW, l.g.normB);
}

// Megatron-LM's vocabulary-parallel cross-entropy (Weitkamp, 2024,
// "Cross-Entropy"), with the vocabulary paper's shard statistics (Yeung et
// al., 2024, section 4): shard t computes its logits Y_t = X W_t^T, the
// group agrees on each token's maximum and then on its sum of exponentials
// under it. The blog's third all-reduce, of the label's logit, is not
// needed: each shard adds the loss of the tokens whose label it holds, and
// the step sums the loss over the group once (Executor). So F has two
// all-reduces of one fp32 per token, B one of the norm output's gradient,
// W none.

void OutputBlock::shardForward(const Layer &l, const Views &v,
                               const SliceShape &s, const TokenRows &batch,
                               DevicePtr normOut, DevicePtr localMax,
                               DevicePtr loss) {
  const LayerConfig &c = *l.config;
  int64_t rt = s.rows * s.tokens, h = model.hidden;
  int64_t ld = getShardVocabColumns(c);
  DevicePtr logits = v[Field::OutLogits], max = v[Field::OutLse],
            sum = v[Field::OutSum];
  if (rows.count > 0)
    kernels.gemm(false, true, rt, rows.count, h, 1.0f, normOut, h, l.w.table,
                 h, 0.0f, logits, ld);
  if (model.finalSoftcap > 0)
    kernels.softcap(logits, rt, rows.count, ld, float(model.finalSoftcap));
  // The shard's maximum and sum of exp(Y - m) per token, one pass; then
  // the group's maximum M, the sum rescaled to it (the vocabulary paper's
  // equation 5, in place) and the group's sum S, the softmax's denominator.
  kernels.shardSoftmaxStatistics(logits, rt, rows.count, ld, nullptr,
                                 localMax, sum, nullptr);
  kernels.copy(max, localMax, rt);
  seams.reduceOverShards(max, rt, Reduction::Max);
  kernels.rescaleSum(sum, localMax, max, rt, sum);
  seams.reduceOverShards(sum, rt, Reduction::Sum);
  kernels.shardLoss(logits, batch.labelsAt(s), batch.stride, s.rows,
                    s.tokens, rows.first, rows.count, ld, max, sum, loss);
}

void OutputBlock::shardBackward(const Layer &l, const Views &v,
                                const SliceShape &s, const TokenRows &batch,
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
  kernels.shardSoftmaxStatistics(logits, rt, rows.count, ld, v[Field::OutLse],
                                 nullptr, localSum, dlogits);
  kernels.scaleRows(dlogits, localSum, v[Field::OutSum], rt, rows.count, ld);
  // (softmax - onehot(label)) * scale, the one-hot where the shard holds
  // the label.
  kernels.shardSoftmaxGrad(dlogits, batch.labelsAt(s), batch.stride,
                           s.rows, s.tokens, rows.first, rows.count, ld,
                           lossScale);
  if (model.finalSoftcap > 0)
    kernels.softcapGrad(logits, dlogits, rt, rows.count, ld,
                        float(model.finalSoftcap));
  // dX = G W_t is the shard's part of the norm output's gradient: summed
  // over the group before the (whole) norm's backward (reduce-scattered to
  // the shards' tokens under sequence parallelism, from `whole`).
  DevicePtr partial = seams.isSequenceParallel() ? whole : dnorm;
  if (rows.count > 0)
    kernels.gemm(false, false, rt, h, rows.count, 1.0f, dlogits, ld, l.w.table,
                 h, 0.0f, partial, h);
  else
    kernels.fill(partial, 0.0, rt * h);
  seams.reduceTokens(partial, dnorm, n * h);
}

} // namespace sluice::rt::block
