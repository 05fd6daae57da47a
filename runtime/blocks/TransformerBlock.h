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
  /// Selective recomputation: attention and activation.
  void recompute(const Layer &l, const Views &v, const SliceShape &s);
  /// B: the input gradient `dx` from the output gradient `dout`.
  void backward(const Layer &l, const Views &v, const SliceShape &s,
                DevicePtr dout, DevicePtr dx, DevicePtr work,
                DevicePtr features);
  /// W: the weight gradients, accumulated.
  void weight(const Layer &l, const Views &v, const SliceShape &s,
              DevicePtr work, DevicePtr features);

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

  /// The calls into the layer's features at `slot`.
  class Features;

  /// Rotary positions of q and k in the QKV projection's rows `x` (`width`
  /// apart), by each token's position in the sequence; `inverse`: the
  /// transpose (B).
  void rotate(const LayerConfig &c, const SliceShape &s, DevicePtr x,
              int64_t width, bool inverse);
  /// Calls fn(shape, token, lse, row) for each attention call of slice
  /// `s`: the shape, the first query's token row in the slice's tensors,
  /// the first log-sum-exp's index and the first key's row in the caches.
  /// One call for the whole slice, or under context parallelism one per
  /// sequence row and chunk, each chunk's queries at their positions.
  template <class Fn>
  void forEachAttention(const LayerConfig &c, const SliceShape &s, Fn fn);
  /// Context parallelism, F: this rank's keys and values of the slice
  /// (the QKV projection's rows `qkv`, `width` apart, from column `hd`),
  /// with every other rank's in one all-gather, into the microbatch's
  /// caches at their positions; `exchange` is the context scratch
  /// (TransformerScratch::context).
  void gatherIntoCaches(const LayerConfig &c, const SliceShape &s,
                        DevicePtr qkv, DevicePtr keys, DevicePtr values,
                        DevicePtr exchange);
  /// Context parallelism, B: the slice's key (or value) gradients summed
  /// over the ranks from each one's `cache`, this rank's tokens' into `to`
  /// (rows `stride` apart).
  void scatterFromCache(const SliceShape &s, DevicePtr cache, int64_t w,
                        DevicePtr to, int64_t stride, DevicePtr exchange);

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
