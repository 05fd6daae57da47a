//===- Vocab.h - The vocabulary shards of one device ------------*- C++ -*-===//
//
// Vocabulary Parallelism on one device (Yeung et al., 2024
// §3-5, Appendix C as DESIGN.md summarises it): the device's rows of the
// input and output tables, the shard passes (IF, IB; S, S2, T) and the
// collectives between them, with each microbatch slice's state from its
// first pass to its last.
//
// Collectives run on the device's vocabulary stream (§6.1: high priority,
// overlapping transformer compute): issued in plan order, each shard's
// collectives progress one at a time in that order, on their own
// communicator channel, so every rank makes the same calls in the same
// order however the shards interleave. A collective is a short sequence of
// steps -- Algorithm 1's barrier is an all-reduce of the maxima, the
// rescaling of equation 5, and an all-reduce of the sums -- which
// progress() advances without blocking. Streams are ordered by events: a
// collective's stream waits for the compute work issued before it, and a
// pass reading a collective's result waits for the event recorded after
// it. A blocking collective (the interlaced baseline) runs to completion
// where it is issued.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_VOCAB_H
#define SLUICE_RUNTIME_VOCAB_H

#include "Backend.h"
#include "CollectiveQueue.h"
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

/// The rows of the input (embedding) table that tensor-parallel shard
/// `shard` of `device` holds (the device's rows split over its plan.tp
/// shards); only meaningful when the plan shards the input layer.
ParameterSpec getInputShardSpec(const Plan &plan, int device, int shard = 0);
/// The rows of the LM head (the embedding table when tied) that shard
/// `shard` of `device` holds; only meaningful when the plan shards the
/// output layer.
ParameterSpec getOutputShardSpec(const Plan &plan, int device,
                                 int shard = 0);

class VocabularyShards {
public:
  /// One transfer inside a collective and what runs once it completes
  /// (Vocab.cpp's StepBuilder makes them).
  using Step = Communicator::ChainStep;

  /// Shard passes run on `device`'s compute stream, collectives and the
  /// steps inside them on its vocabulary stream. With tensor parallelism
  /// (plan.tp > 1) the vocabulary splits over pp x tp: this is shard
  /// `shardIndex` of `tensorGroup`, each collective over the pipeline
  /// (`comm`) is followed by one over `tensorGroup` where the shards' parts
  /// must be combined (the maxima and sums on every device, the reduced
  /// gradients on the roots), on channel 1 + shard (the stages' sums use
  /// channel 0).
  VocabularyShards(const Plan &plan, int deviceIndex, Device &device,
                   Communicator &comm, Communicator *tensorGroup = nullptr,
                   int shardIndex = 0);

  /// Resolves the shards' weights and gradients (after allocation).
  void bind(ParameterStore &store);

  /// Starts a step over these microbatches' token rows on the device (each
  /// row holds seq_len + 1 tokens: inputs, and labels one later).
  void beginStep(const std::vector<TokenRows> &batches, float lossScale);
  /// Waits for every collective issued this step and releases the state.
  Status finishStep();
  /// A collective of the step just finished, as seconds after `origin` on
  /// the vocabulary stream: from when its inputs were ready to when its
  /// result was (read once the device has finished the step).
  struct Span {
    Shard shard;
    int group, mb, slice;
    double start, end;
  };
  std::vector<Span> getSpans(Event &origin);

  // Where the stages next to the shards read and write.
  /// Input root: the summed lookups, the first stage's F input.
  Status getEmbedded(int mb, int slice, DevicePtr &out);
  /// Input root: where the first stage's backward puts its input gradient.
  Status getEmbeddingGrad(int mb, int slice, DevicePtr &out);
  /// Output root: where the last stage's F puts the normalised X.
  Status getLastOutput(int mb, int slice, DevicePtr &out);
  /// Output root: the reduced input gradient of the output layer.
  Status getOutputGrad(int mb, int slice, DevicePtr &out);
  /// A stage pass that consumed a shard's buffer is done with it.
  void release(Shard shard, int mb, int slice);

  /// Runs shard pass `pass`; T adds the shard's part of the summed
  /// cross-entropy to the f64 accumulator `loss`.
  Status run(Pass pass, int mb, int slice, DevicePtr loss);
  /// Issues collective `group` of `shard` after the compute work enqueued
  /// so far; a blocking one completes here.
  Status issue(Shard shard, int group, int mb, int slice, bool blocking);
  /// Orders `stream` after collective (shard, group) of (mb, slice),
  /// advancing the collectives until the host has issued all of it.
  Status waitFor(Shard shard, int group, int mb, int slice, Stream &stream);
  /// Advances the head collective of each shard's queue, never blocking.
  Status progress();
  /// What else to advance while waiting for a collective (the executor's
  /// sends and receives: a host-staged transport posts them only when
  /// advanced).
  void setProgressOthers(std::function<Status()> others) {
    collectives.setProgressOthers(std::move(others));
  }
  /// Seconds a wait for a collective may make no progress (--comm-timeout).
  void setTimeout(double seconds) { collectives.setTimeout(seconds); }

private:
  struct Slice {
    // Output shard (logits and statistics f32, the rest act).
    DeviceBuffer x, logits, probs, localMax, localSum, globalMax, globalSum,
        scaledSum, a, labelRows, dx;
    // Input shard.
    DeviceBuffer partial, grad;
    /// Uses still to come before the state can go (passes, collectives,
    /// the neighbouring stage's pass on a root).
    int pendingOutput = 0, pendingInput = 0;
  };
  Slice &state(int mb, int slice);
  SliceShape shape(int slice) const { return plan.getSliceShape(slice); }
  /// Allocates the buffers of (mb, slice) for one shard on first use.
  Status prepareOutput(Slice &st, const SliceShape &s);
  Status prepareInput(Slice &st, const SliceShape &s);
  std::vector<Step> buildSteps(Shard shard, int group, int mb, int slice);
  /// `buffer` of a slice's state, which is prepared first.
  Status getSliceBuffer(int mb, int slice, Shard shard,
                        DeviceBuffer Slice::*buffer, DevicePtr &out);
  void consume(Shard shard, int mb, int slice);

  const Plan &plan;
  int deviceIndex;
  Device &device;
  Kernels &kernels;       // shard passes, on the compute stream
  Kernels &streamKernels; // steps inside collectives, vocabulary stream
  Stream &compute, &vocabStream;
  Communicator &comm;
  Communicator *tensorGroup;
  int shardIndex;
  Precision precision;
  int64_t hidden;
  // The device's rows of each table: [first, first + count) real, padded
  // to `rows`.
  int64_t inFirst = 0, inCount = 0, inRows = 0;
  int64_t outFirst = 0, outCount = 0, outRows = 0;
  ParameterSpec inSpec, outSpec;
  DevicePtr inTable, inGrad, outTable, outGrad;

  const std::vector<TokenRows> *batches = nullptr;
  float lossScale = 1;
  std::map<std::pair<int, int>, Slice> slices;
  /// Orders the vocabulary stream after the compute work before a
  /// collective.
  std::unique_ptr<Event> ready;
  /// The collectives in issue order, one queue per shard kind.
  CollectiveQueue collectives;
};

} // namespace sluice::rt

#endif // SLUICE_RUNTIME_VOCAB_H
