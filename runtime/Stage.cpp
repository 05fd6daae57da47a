//===- Stage.cpp - The passes of one pipeline stage -----------------------===//
//
// A stage is a run of layers: the embedding (or its unsharded part), the
// transformer layers (runtime/blocks/TransformerBlock.cpp), the output
// layer (or its final norm). The runner carves every layer's state views
// for a slice and sequences the blocks' F, B and W over them; the
// embedding's and output layer's passes (whole, or split over the
// tensor-parallel shards) are here.
//
// Token slicing (TeraPipe, Seq1F1B): B runs a microbatch's slices in
// reverse, so that each slice's key/value gradients are complete (every
// later slice has added into them) when its own B reads them.
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
      precision(precision), recompute(recompute), seams(model),
      transformer(model, kernels, precision, seams) {
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
  seams.set(std::move(tensorGroup), index);
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
  int64_t first = isSequenceParallel() ? seams.getShardIndex() * local : 0;
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

using namespace block;

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
      transformer.forward(l, v, s, current, dst, workspace, again);
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
        transformer.recompute(resolved[k], views[k], s);
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
      transformer.backward(l, v, s, grad, dst, workspace);
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
      transformer.weight(l, v, s, workspace);
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
