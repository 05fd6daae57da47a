//===- TransformerBlock.h - A pre-norm decoder block's passes ---*- C++ -*-===//
//
// F, B and W of one transformer layer over one token slice
// (TransformerBlock.cpp says what it computes), on the views the stage
// runner carved for it and through the stage's tensor-parallel seams.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_BLOCKS_TRANSFORMERBLOCK_H
#define SLUICE_RUNTIME_BLOCKS_TRANSFORMERBLOCK_H

#include "Block.h"

namespace sluice::rt::block {

class TransformerBlock {
public:
  TransformerBlock(const ModelConfig &model, Kernels &kernels,
                   const Precision &precision, const ShardSeams &seams)
      : model(model), kernels(kernels), precision(precision), seams(seams) {}

  /// F; `again`: B's recomputation (the key/value gradients already
  /// accumulate later slices' parts, so they are not cleared).
  void forward(const Layer &l, const Views &v, const SliceShape &s,
               DevicePtr x, DevicePtr out, DevicePtr work, bool again);
  /// Selective recomputation: attention and activation.
  void recompute(const Layer &l, const Views &v, const SliceShape &s);
  /// B: the input gradient `dx` from the output gradient `dout`.
  void backward(const Layer &l, const Views &v, const SliceShape &s,
                DevicePtr dout, DevicePtr dx, DevicePtr work);
  /// W: the weight gradients, accumulated.
  void weight(const Layer &l, const Views &v, const SliceShape &s,
              DevicePtr work);

private:
  /// Qwen3's query/key norms, F and B.
  void normHeads(const Layer &l, const Views &v, const SliceShape &s,
                 DevicePtr qkv);
  void normHeadsBackward(const Layer &l, const Views &v, const SliceShape &s,
                         DevicePtr dqkv, DevicePtr grad, DevicePtr into);

  const ModelConfig &model;
  Kernels &kernels;
  Precision precision;
  const ShardSeams &seams;
};

} // namespace sluice::rt::block

#endif // SLUICE_RUNTIME_BLOCKS_TRANSFORMERBLOCK_H
