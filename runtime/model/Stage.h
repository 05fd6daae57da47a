//===- Stage.h - The passes of one pipeline stage ---------------*- C++ -*-===//
//
// Runs F, B and W of one stage (a run of consecutive layers) for one
// microbatch slice. State that one pass leaves for a later one lives in
// caller-provided device memory laid out as Layout.h says: `forwardState`
// (F to B and W), `weightState` (B to W) and `keyValues` (a microbatch's
// keys and values, from its first slice's F to its first slice's B).
// Scratch memory is `workspace`, valid only during a call. Every kernel is
// enqueued on the stream of the Kernels the stage was given.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_STAGE_H
#define SLUICE_RUNTIME_STAGE_H

#include "Backend.h"
#include "Block.h"
#include "Parameters.h"
#include "TransformerBlock.h"
#include "VocabularyBlocks.h"
#include "sluice/Blocks/Layout.h"

#include <functional>
#include <string>
#include <vector>

namespace sluice::rt {

class StageRunner {
public:
  /// `layers` are indices into model.layers; `store` must hold their
  /// parameters (allocated). State buffers are carved as Layout.h says for
  /// `precision`.
  StageRunner(const ModelConfig &model, std::vector<int> layers,
              ParameterStore &store, Kernels &kernels,
              const Precision &precision,
              Recompute recompute = Recompute::None);

  /// The group's collectives (runtime/blocks/Block.h).
  using GroupReduce = block::GroupReduce;
  using TensorGroup = block::TensorGroup;
  /// Makes the stage shard `index` of a tensor-parallel group: the runner
  /// was given the shard's model (getTensorShardModel) and parameters, and
  /// `reduce` sums the partial results of its row-parallel projections in
  /// F and of its column-parallel ones' input gradients in B (Megatron-LM;
  /// Weitkamp, 2024, "Communication Overhead"). Unset
  /// (or empty): the layers are whole. A vocabulary layer that splits
  /// (LayerConfig::vocabShards) uses only the shard's rows of its table:
  /// the embedding sums its masked lookups over the group; the output
  /// layer takes the group's maximum and sum of its logits' exponentials,
  /// and each shard adds to the loss the tokens whose label it holds.
  /// Under sequence parallelism (the shard model's sequenceShards), the
  /// all-reduces become Korthikanti et al.'s all-gather before each
  /// column-parallel projection and reduce-scatter after each
  /// row-parallel one (and their transposes in B); W gathers the norms'
  /// outputs again; the norms' weight gradients are this shard's tokens'
  /// part, which the caller sums over the group before the update.
  /// Expert parallelism: the sparse layers' expert group.
  void setExperts(block::ExpertGroup group) {
    seams.setExperts(std::move(group));
  }
  /// Context parallelism: the ranks the slices' tokens split over.
  void setContext(block::ContextGroup group) {
    seams.setContext(std::move(group));
  }
  /// Called after each layer's weight gradients are written in W (and in
  /// BW), with the layer's index in the model: ZeRO-2 reduce-scatters
  /// them there (ParameterStore::setGradientGroups).
  void setAfterWeight(std::function<void(int)> hook) {
    afterWeight = std::move(hook);
  }
  /// Called before each layer's part of every pass (F, B and its
  /// recomputation, W), with the layer's index in the model and the
  /// index of the layer the pass runs next (-1: none): ZeRO-3 gathers the
  /// layer's working weights there and starts the next one's
  /// (ParameterStore::setWeightShards).
  void setBeforeLayer(std::function<void(int, int)> hook) {
    beforeLayer = std::move(hook);
  }
  void setTensorParallel(TensorGroup group, int index);
  void setTensorParallel(GroupReduce reduce, int index) {
    setTensorParallel(TensorGroup{std::move(reduce), {}, {}}, index);
  }

  bool hasEmbedding() const;
  bool hasOutput() const;
  const std::vector<int> &getLayers() const { return layers; }

  int64_t getForwardStateBytes(const SliceShape &s) const;
  int64_t getWeightStateBytes(const SliceShape &s) const;
  int64_t getKeyValueBytes(int64_t rows) const;
  int64_t getWorkspaceBytes(const SliceShape &s) const;
  /// With recomputation, the state B recomputes and W reads.
  int64_t getRecomputedStateBytes(const SliceShape &s) const;
  Recompute getRecompute() const { return recompute; }

  /// F. `input` is the previous stage's activation (null on the first
  /// stage); `output` receives this stage's (null on the last stage, which
  /// adds the slice's summed cross-entropy to the f64 `loss` on the device
  /// instead).
  void forward(const SliceShape &s, const TokenRows &batch, DevicePtr input,
               DevicePtr output, DevicePtr forwardState, DevicePtr keyValues,
               DevicePtr workspace, DevicePtr loss);

  /// B. `outputGrad` is the next stage's input gradient (null on the last
  /// stage, where the loss gradient is `lossScale` per token); `inputGrad`
  /// receives this stage's (null on the first stage). A recomputing stage
  /// first recomputes what F did not keep into `recomputedState`.
  /// `rowWeights`: B also accumulates the row-parallel projections' weight
  /// gradients (the attention output's and the down projection's), each
  /// while the tensor-parallel group sums an input gradient
  /// (TransformerBlock::backward); the W that follows (a BW pass) is told
  /// the same and skips them.
  void backwardInput(const SliceShape &s, const TokenRows &batch,
                     DevicePtr outputGrad, DevicePtr inputGrad,
                     DevicePtr forwardState, DevicePtr weightState,
                     DevicePtr keyValues, DevicePtr workspace, float lossScale,
                     DevicePtr recomputedState = {}, bool rowWeights = false);

  /// The logits (fp32, [rows x tokens, vocabulary]) the last forward of a
  /// stage ending in the whole output layer left in its forward state.
  DevicePtr getLogits() const { return views.back()[Field::OutLogits]; }

  /// The fp8 precision's scaling records of the stage's transformer layers
  /// (f32 elements; 0 in the other precisions).
  int64_t getFp8StateFloats() const;
  /// Binds `state` (getFp8StateFloats() f32 elements) and starts it as a
  /// run starts: no history, so the first step scales each call by its
  /// own amax. A later load (a checkpoint) may overwrite it.
  void bindFp8State(DevicePtr state);
  DevicePtr getFp8State() const { return fp8State; }
  /// The end of a step: a training step's amaxes become the next step's
  /// scales (Kernels::updateFp8Scales); an evaluation's are dropped.
  void finishStep(bool trained);

  /// The step's routing of the stage's sparse layers (f32: per layer with
  /// experts, its copies per expert then its probabilities' sums, as
  /// moeBalance adds them), which F adds to: its size, binding (null:
  /// none), clearing (at a step's start), and the layers' parts.
  int64_t getLoadFloats() const;
  void bindLoad(DevicePtr load);
  void clearLoad();
  /// (model layer index, its 2 x experts floats) per sparse layer.
  std::vector<std::pair<int, DevicePtr>> getLoads() const;

  /// W: accumulates the stage's weight gradients (`rowWeights`: but the
  /// row-parallel projections', which the B before it accumulated).
  void backwardWeight(const SliceShape &s, const TokenRows &batch,
                      DevicePtr forwardState, DevicePtr weightState,
                      DevicePtr workspace, DevicePtr recomputedState = {},
                      bool rowWeights = false);

private:
  using LayerParams = block::LayerParams;
  using Layer = block::Layer;
  using Views = block::Views;

  /// Carves every layer's views out of the state buffers (null buffers
  /// give null views); recomputed regions from `recomputed`.
  void carve(const SliceShape &s, DevicePtr forwardState, DevicePtr weightState,
             DevicePtr keyValues, DevicePtr recomputed);
  /// Where a pass's workspace holds the block features' scratch.
  DevicePtr getFeatureWork(const SliceShape &s, DevicePtr workspace) const;
  /// F's layers over the carved views; `again`: B's recomputation (the
  /// key/value gradients already accumulate later slices' parts).
  /// `balance`: where the sparse layers add their load-balancing
  /// statistics (null: nowhere).
  void runForward(const SliceShape &s, const TokenRows &batch, DevicePtr input,
                  DevicePtr output, DevicePtr workspace, DevicePtr loss,
                  bool again, DevicePtr balance = {});

  // The load-balancing loss (BalanceLoss) across stages: the statistics
  // of the sparse layers so far travel with the activation to the stage
  // that holds the model's last sparse layer, which keeps the
  // microbatch's in its key/value state, adds the loss after the last
  // slice, and sends the copies per expert back with the gradient.
  /// Whether this stage's input message carries earlier sparse layers'
  /// statistics (and its input gradient message gets the counts back).
  bool receivesBalance() const;
  /// Whether its output message carries them on (and its output gradient
  /// message brings the counts).
  bool sendsBalance() const;
  /// Whether it holds the model's last sparse layer.
  bool holdsBalance() const;
  /// The microbatch's statistics in the carved key/value state.
  DevicePtr getBalanceStats() const;
  /// A message's statistics (Layout.h getBalanceOffset).
  DevicePtr getMessageBalance(DevicePtr message, const SliceShape &s) const;
  /// F's statistics: the microbatch's (the stage holding the last sparse
  /// layer; zeroed by the first slice) or the output message's, with the
  /// input message's added; null when the stage has none.
  DevicePtr beginBalance(const SliceShape &s, DevicePtr input,
                         DevicePtr output);

  const ModelConfig &model;
  std::vector<int> layers;
  std::vector<Layer> resolved;
  std::function<void(int)> afterWeight;
  std::function<void(int, int)> beforeLayer;
  Kernels &kernels;
  Precision precision;
  Recompute recompute;
  /// Per layer, the views of the pass being run (kept to reuse its memory).
  std::vector<Views> views;
  DevicePtr fp8State;
  BalanceLoss balance;
  /// Per layer, its part of the bound load (null: a dense layer, or none).
  std::vector<DevicePtr> loads;
  DevicePtr load;
  block::ShardSeams seams;
  block::TransformerBlock transformer;
  block::EmbeddingBlock embeddingBlock;
  block::OutputBlock outputBlock;
};

} // namespace sluice::rt

#endif // SLUICE_RUNTIME_STAGE_H
