//===- Vocab.h - The vocabulary shards of one device ------------*- C++ -*-===//
//
// Vocabulary Parallelism on one device (papers/vocabulary-parallelism.txt
// §3-5, Appendix C as DESIGN.md summarises it): the device's rows of the
// input and output tables, the shard passes (IF, IB; S, S2, T) and the
// collectives between them, with each microbatch slice's state from its
// first pass to its last.
//
// Collectives run on a per-shard "vocabulary stream": issued in plan order,
// each shard's collectives progress one at a time in that order, on their
// own communicator channel, so every rank makes the same MPI calls in the
// same order however the shards interleave. A collective is a short
// sequence of steps -- Algorithm 1's barrier is an all-reduce of the
// maxima, the rescaling of equation 5, and an all-reduce of the sums --
// which progress() advances without blocking. A blocking collective (the
// interlaced baseline) runs to completion where it is issued.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_VOCAB_H
#define SLUICE_RUNTIME_VOCAB_H

#include "Backend.h"
#include "Parameters.h"
#include "Plan.h"
#include "Stage.h"

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <tuple>
#include <vector>

namespace sluice::rt {

/// The rows of the input (embedding) table that `device` holds; only
/// meaningful when the plan shards the input layer.
ParameterSpec getInputShardSpec(const Plan &plan, int device);
/// The rows of the LM head (the embedding table when tied) that `device`
/// holds; only meaningful when the plan shards the output layer.
ParameterSpec getOutputShardSpec(const Plan &plan, int device);

class VocabularyShards {
public:
  VocabularyShards(const Plan &plan, int device, Kernels &kernels,
                   Communicator &comm);

  /// Resolves the shards' weights and gradients (after allocation).
  void bind(ParameterStore &store);

  /// Starts a step over these microbatches' token rows (each row holds
  /// seq_len + 1 tokens: inputs, and labels one later).
  void beginStep(const std::vector<std::vector<int32_t>> &batches,
                 float lossScale);
  /// Waits for every collective issued this step and releases the state.
  void finishStep();

  // Where the stages next to the shards read and write.
  /// Input root: the summed lookups, the first stage's F input.
  float *getEmbedded(int mb, int slice);
  /// Input root: where the first stage's backward puts its input gradient.
  float *getEmbeddingGrad(int mb, int slice);
  /// Output root: where the last stage's F puts the normalised X.
  float *getLastOutput(int mb, int slice);
  /// Output root: the reduced input gradient of the output layer.
  float *getOutputGrad(int mb, int slice);
  /// A stage pass that consumed a shard's buffer is done with it.
  void release(Shard shard, int mb, int slice);

  /// Runs shard pass `pass`; T adds the shard's part of the summed
  /// cross-entropy to `lossSum`.
  void run(Pass pass, int mb, int slice, double &lossSum);
  /// Issues collective `group` of `shard`; a blocking one completes here.
  void issue(Shard shard, int group, int mb, int slice, bool blocking);
  bool isComplete(Shard shard, int group, int mb, int slice) const;
  /// Advances the head collective of each shard's queue, never blocking.
  void progress();

private:
  struct Slice {
    // Output shard.
    std::vector<float> x, logits, probs, localMax, localSum, globalMax,
        globalSum, scaledSum, a, labelRows, dx;
    // Input shard.
    std::vector<float> partial, grad;
    /// Uses still to come before the state can go (passes, collectives,
    /// the neighbouring stage's pass on a root).
    int pendingOutput = 0, pendingInput = 0;
  };
  struct Step {
    std::function<std::unique_ptr<Request>()> start;
    std::function<void()> after;
  };
  struct Collective {
    Shard shard;
    int group, mb, slice;
    std::vector<Step> steps;
    size_t next = 0;
    std::unique_ptr<Request> pending;
  };

  Slice &state(int mb, int slice);
  SliceShape shape(int slice) const { return plan.getSliceShape(slice); }
  /// Allocates the buffers of (mb, slice) for one shard on first use.
  void prepareOutput(Slice &st, const SliceShape &s);
  void prepareInput(Slice &st, const SliceShape &s);
  std::vector<Step> buildSteps(Shard shard, int group, int mb, int slice);
  void finished(Shard shard, int mb, int slice);
  void consume(Shard shard, int mb, int slice);

  const Plan &plan;
  int device;
  Kernels &kernels;
  Communicator &comm;
  int64_t hidden;
  // The device's rows of each table: [first, first + count) real, padded
  // to `rows`.
  int64_t inFirst = 0, inCount = 0, inRows = 0;
  int64_t outFirst = 0, outCount = 0, outRows = 0;
  ParameterSpec inSpec, outSpec;
  float *inTable = nullptr, *inGrad = nullptr;
  float *outTable = nullptr, *outGrad = nullptr;

  const std::vector<std::vector<int32_t>> *batches = nullptr;
  float lossScale = 1;
  std::map<std::pair<int, int>, Slice> slices;
  std::deque<Collective> queues[2];
  std::set<std::tuple<int, int, int, int>> completed;
};

} // namespace sluice::rt

#endif // SLUICE_RUNTIME_VOCAB_H
