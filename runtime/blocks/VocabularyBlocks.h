//===- VocabularyBlocks.h - The embedding's and output layer's passes -*- C++ -*-===//
//
// F, B and W of a stage's vocabulary layers over one token slice: the
// embedding (a lookup, the learned positions, Gemma's scale) and the
// output layer (the final norm, the logits, the cross-entropy). Each comes
// whole, split by rows over the tensor-parallel group (Megatron-LM's
// vocabulary-parallel layers), or as the part of a Vocabulary Parallelism
// layer its stage keeps (the positions; the final norm) while the shards
// run as their own passes (runtime/model/Vocab.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_BLOCKS_VOCABULARYBLOCKS_H
#define SLUICE_RUNTIME_BLOCKS_VOCABULARYBLOCKS_H

#include "Block.h"

namespace sluice::rt::block {

/// The table rows [first, first + count) a shard holds; count < 0: all.
struct TableRows {
  int64_t first = 0, count = -1;
  bool isSplit() const { return count >= 0; }
};

class EmbeddingBlock {
public:
  EmbeddingBlock(const ModelConfig &model, Kernels &kernels,
                 const ShardSeams &seams)
      : model(model), kernels(kernels), seams(seams) {}
  void setRows(TableRows shardRows) { rows = shardRows; }

  /// F: the slice's token rows into `out` (this shard's tokens under
  /// sequence parallelism); `input`: a Vocabulary Parallelism input
  /// shard's sums, else unused.
  void forward(const Layer &l, const Views &v, const SliceShape &s,
               const TokenRows &batch, DevicePtr input, DevicePtr out,
               const Workspace &work);
  /// B: keeps the output gradient `grad` for W (and, sharded, hands it to
  /// the input shard through `dx`).
  void backward(const Layer &l, const Views &v, const SliceShape &s,
                const TokenRows &batch, DevicePtr grad, DevicePtr dx);
  /// W: the table's and the positions' gradients, accumulated.
  void weight(const Layer &l, const Views &v, const SliceShape &s,
              const TokenRows &batch);

private:
  /// The sequence position of the slice's t-th token on this rank (under
  /// context parallelism its chunks' places), and how many tokens from t
  /// on follow it in the sequence within the slice's row.
  int64_t getPosition(const SliceShape &s, int64_t t) const;
  int64_t getRun(const SliceShape &s, int64_t t) const;
  void addPositions(DevicePtr dst, DevicePtr positions, const SliceShape &s);
  void addPositionGrads(DevicePtr positionGrads, DevicePtr grad,
                        const SliceShape &s);
  void scale(DevicePtr x, int64_t n);

  const ModelConfig &model;
  Kernels &kernels;
  const ShardSeams &seams;
  TableRows rows;
};

class OutputBlock {
public:
  OutputBlock(const ModelConfig &model, Kernels &kernels,
              const ShardSeams &seams)
      : model(model), kernels(kernels), seams(seams) {}
  void setRows(TableRows shardRows) { rows = shardRows; }

  /// F: the final norm of `x`, then the logits and the slice's summed
  /// cross-entropy added to `loss`; sharded, the norm's output into `out`.
  void forward(const Layer &l, const Views &v, const SliceShape &s,
               const TokenRows &batch, DevicePtr x, DevicePtr out,
               const Workspace &work, DevicePtr loss);
  /// B: the gradient of the layer's input into `dx`, from `lossScale` per
  /// token (sharded: from the output shard's gradient `grad`).
  void backward(const Layer &l, const Views &v, const SliceShape &s,
                const TokenRows &batch, DevicePtr grad, DevicePtr dx,
                const Workspace &work, float lossScale);
  /// W: the table's and the final norm's gradients, accumulated.
  void weight(const Layer &l, const Views &v, const SliceShape &s,
              const Workspace &work);

private:
  void shardForward(const Layer &l, const Views &v, const SliceShape &s,
                    const TokenRows &batch, DevicePtr normOut,
                    DevicePtr localMax, DevicePtr loss);
  void shardBackward(const Layer &l, const Views &v, const SliceShape &s,
                     const TokenRows &batch, DevicePtr localSum,
                     DevicePtr whole, float lossScale);

  const ModelConfig &model;
  Kernels &kernels;
  const ShardSeams &seams;
  TableRows rows;
};

} // namespace sluice::rt::block

#endif // SLUICE_RUNTIME_BLOCKS_VOCABULARYBLOCKS_H
