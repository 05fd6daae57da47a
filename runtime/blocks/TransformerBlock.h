//===- TransformerBlock.h - A decoder block's passes ------------*- C++ -*-===//
//
// F, B and W of one transformer layer over one token slice
// (TransformerBlock.cpp says what it computes), on the views the stage
// runner carved for it and through the stage's tensor-parallel seams. The
// block's core is the projections, attention and the feed-forward block;
// its features (norms, biases, query/key norms) run at its slots
// (Slots.h), and the block names none of them.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_BLOCKS_TRANSFORMERBLOCK_H
#define SLUICE_RUNTIME_BLOCKS_TRANSFORMERBLOCK_H

#include "Slots.h"

namespace sluice::rt::block {

class TransformerBlock {
public:
  TransformerBlock(const ModelConfig &model, Kernels &kernels,
                   const Precision &precision, const ShardSeams &seams)
      : model(model), kernels(kernels), precision(precision), seams(seams) {}

  /// F; `again`: B's recomputation (the key/value gradients already
  /// accumulate later slices' parts, so they are not cleared). `features`:
  /// where the pass's workspace holds the features' scratch
  /// (getFeatureScratchOffset).
  void forward(const Layer &l, const Views &v, const SliceShape &s,
               DevicePtr x, DevicePtr out, DevicePtr work, DevicePtr features,
               bool again);
  /// Selective recomputation: attention and activation (`work`: the
  /// pass's workspace, whose context scratch ring attention uses).
  void recompute(const Layer &l, const Views &v, const SliceShape &s,
                 DevicePtr work);
  /// B: the input gradient `dx` from the output gradient `dout`.
  /// `rowWeights`: also the row-parallel projections' weight gradients
  /// (attention output, down), each computed while the group sums the
  /// input gradient of the column-parallel projections before it.
  void backward(const Layer &l, const Views &v, const SliceShape &s,
                DevicePtr dout, DevicePtr dx, DevicePtr work,
                DevicePtr features, bool rowWeights = false);
  /// W: the weight gradients, accumulated (`rowWeights`: but those B
  /// accumulated).
  void weight(const Layer &l, const Views &v, const SliceShape &s,
              DevicePtr work, DevicePtr features, bool rowWeights = false);

  /// The load-balancing loss's part in the passes that follow (the stage
  /// sets it for each F and B of a sparse layer; none by default).
  void setBalance(Balance to) { balance = to; }

private:
  /// A linear map's product: gemm, or with the layer's fp8 records
  /// (Layer::fp8) gemmFp8 with A's and B's tensors' records.
  void product(const Layer &l, Map map, Role roleA, Role roleB, bool transA,
               bool transB, int64_t m, int64_t n, int64_t k, DevicePtr a,
               int64_t lda, DevicePtr b, int64_t ldb, float beta, DevicePtr c,
               int64_t ldc);

  /// The row-parallel projections' weight gradients, accumulated: the
  /// attention output's (context^T dy1) and the down projection's
  /// (activation^T dy2), over rt tokens.
  void outWeight(const Layer &l, const Views &v, int64_t rt, int64_t cw,
                 int64_t h);
  void downWeight(const Layer &l, const Views &v, int64_t rt, int64_t f,
                  int64_t h);

  /// The calls into the layer's features at `slot`.
  class Features;

  /// Rotary positions of q and k in the QKV projection's rows `x` (`width`
  /// apart), by each token's position in the sequence; `inverse`: the
  /// transpose (B).
  void rotate(const LayerConfig &c, const SliceShape &s, DevicePtr x,
              int64_t width, bool inverse);
  /// The attention core of slice `s`: its context and log-sum-exps from
  /// its Q and the microbatch's key/value caches; under context
  /// parallelism by ring attention (ringForward).
  void attend(const LayerConfig &c, const SliceShape &s, const Views &v,
              DevicePtr exchange);
  /// Ring attention (Liu et al., 2023, section 3), F: this rank's keys and
  /// values of the prefix (every slice up to s) pass around the context
  /// ranks; each rank folds every block's part its chunks' queries see
  /// into their context and log-sum-exps (attentionMerge), the next
  /// block's transfer overlapping the current block's compute.
  /// `exchange`: the context scratch (TransformerScratch::context).
  void ringForward(const LayerConfig &c, const SliceShape &s, const Views &v,
                   DevicePtr exchange);
  /// B: the same blocks around the ring, each with an fp32 accumulator of
  /// its key and value gradients that every rank adds its queries' parts
  /// into and that returns to the block's owner, then into its caches'
  /// gradients; dq, summed over the blocks, into `dq`.
  void ringBackward(const LayerConfig &c, const SliceShape &s, const Views &v,
                    DevicePtr dctx, DevicePtr dq, DevicePtr exchange);
  /// Calls fn(shape, row, part, keyRow) for each key block of rank
  /// `holder`'s prefix some query of this rank's chunk `part` of sequence
  /// row `row` may see: the key block's shape for that chunk's queries and
  /// its first key's row in the packed block (rows s.getLocalOffset() +
  /// s.tokens apart). A block wholly in the chunk's future, or before its
  /// window, is skipped.
  template <class Fn>
  void forEachKeyBlock(const LayerConfig &c, const SliceShape &s, int holder,
                       Fn fn);

  /// F of the core's feed-forward block: `partial` (this shard's part of
  /// the down projection's output) from its input `cn`.
  void feedForward(const Layer &l, const Views &v, const SliceShape &s,
                   const Features &at, DevicePtr cn, DevicePtr partial);

  const ModelConfig &model;
  Kernels &kernels;
  Precision precision;
  const ShardSeams &seams;
  Balance balance;
};

} // namespace sluice::rt::block

#endif // SLUICE_RUNTIME_BLOCKS_TRANSFORMERBLOCK_H
