//===- GradientNorm.h - Each parameter once in the global norm --*- C++ -*-===//
//
// The global gradient norm (clipping, the progress line) must count every
// parameter of the model once however a run splits it: over the
// pipeline's devices, the tensor-parallel shards (whose norms and shared
// key/value heads are alike on each), ZeRO-1's parts and the expert
// groups (each member its experts) -- so every
// partitioning reports the reference's norm. This decides, per rank, which
// blocks of its gradient buffer it sums and with what weight.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_EXECUTOR_GRADIENTNORM_H
#define SLUICE_RUNTIME_EXECUTOR_GRADIENTNORM_H

#include "TensorSums.h"

#include <vector>

namespace sluice::rt {

class GradientNormPlan {
public:
  /// Which copies this rank counts: a tied table held at both ends
  /// (`tiedGroup`, device indices) by the lower device; a tensor every
  /// shard holds whole (norms, the biases after row-parallel projections,
  /// unsharded tables) by shard 0; shared key/value heads by the first
  /// shard of their group. Under expert parallelism without ZeRO-1,
  /// everything but the expert maps weighs 1 / ep (the executor sums over
  /// the expert group).
  /// With ZeRO-1, `owned` are this replica's parts
  /// of the flat buffer, packed in that order.
  /// Allocates the sum on `device`.
  Status plan(const Plan &plan, const ParameterStore &parameters,
              int deviceIndex, int shardIndex,
              const std::vector<int> &tiedGroup,
              const std::vector<TensorGroupSums::ReplicatedKeyValues> &shared,
              const std::vector<IndexRange> *owned, Device &device);
  /// Enqueues this rank's weighted sum of squares of `grads` (the flat
  /// buffer, or ZeRO-1's packed parts) and reads it back.
  Status sumSquares(Device &device, DevicePtr grads, double &sum);

private:
  /// A strided block of the gradient buffer, counted `weight` times: a
  /// copy another rank counts is left out, or taken out (-1).
  struct Part {
    int64_t offset = 0, rows = 1, cols = 0, stride = 0;
    double weight = 1;
  };
  /// The same elements where ZeRO-1's parts hold them, row by row, whole
  /// rows in blocks.
  static std::vector<Part> pack(const std::vector<Part> &parts,
                                const std::vector<IndexRange> &owned);

  std::vector<Part> parts;
  DeviceBuffer sum;
};

} // namespace sluice::rt

#endif // SLUICE_RUNTIME_EXECUTOR_GRADIENTNORM_H
