//===- Feature.h - Block features: the shape part and the registry -*- C++
//-*-===//
//
// A block feature is what a transformer block adds to its core (the
// projections, attention and the feed-forward block): the norms before and
// after each half, norms of the queries and keys, biases. Each is a folder
// under lib/Blocks, found by the build as the families are (lib/Blocks/
// CMakeLists.txt), with
//
//  * a shape part, this interface, which the compiler and the runtime both
//    link: when a layer has the feature, its rules, its parameters (with
//    their tensor-parallel split and what the group sums of their
//    gradients), the state regions it keeps between passes, its scratch
//    and its FLOPs -- the cost model, the buffer layout and the parameter
//    store all read these, none knows a feature;
//  * a compute part (runtime/blocks/Slots.h), which the runtime links: its
//    F, B and W at the named slots of the block below.
//
// The block's slots, in the order F reaches them:
//
//   AttentionInput     x -> a, what the QKV projection reads (a norm; at
//                      most one feature: without one, a = x)
//   QueryKeyValue      a -> q k v, rotated: the whole projection and the
//                      rotation in place of the core's (multi-head latent
//                      attention; at most one feature: without one, the
//                      core's a Wqkv, the line below and the rotation)
//   Projections        q k v = a Wqkv, before the rotation (biases, norms)
//   AttentionOutput    y = ctx Wo, before x2 = x + y (a bias, a post-norm)
//   FeedForwardInput   x2 -> c, what the up and gate projections read
//   FeedForward        c -> y2, the whole feed-forward block in place of
//                      the core's (a mixture of experts; at most one
//                      feature: without one, the core's maps below)
//   FeedForwardHidden  u = c W1, z = c Wg, before the activation (biases)
//   FeedForwardOutput  y2 = g W2, before out = x2 + y2 (a bias, a post-norm)
//
// A feature registered by registerFeature (a test's, a plug-in's) is
// enabled on a layer by naming it in the spec's `features`; the built-in
// ones read their own field (BlockFields.def).
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_BLOCKS_FEATURE_H
#define SLUICE_BLOCKS_FEATURE_H

#include "sluice/Blocks/Parameters.h"
#include "sluice/Blocks/Regions.h"

#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

namespace sluice::blocks {

using rt::LayerConfig;
using rt::ModelConfig;

enum class Slot : uint8_t {
  AttentionInput,
  QueryKeyValue,
  Projections,
  AttentionOutput,
  FeedForwardInput,
  FeedForward,
  FeedForwardHidden,
  FeedForwardOutput,
};
constexpr int kSlots = 8;
constexpr unsigned getSlotBit(Slot slot) { return 1u << unsigned(slot); }
constexpr unsigned getSlotBits(std::initializer_list<Slot> slots) {
  unsigned bits = 0;
  for (Slot slot : slots)
    bits |= getSlotBit(slot);
  return bits;
}
/// The two slots that make a sublayer's input.
inline bool isInputSlot(Slot slot) {
  return slot == Slot::AttentionInput || slot == Slot::FeedForwardInput;
}

/// One transformer layer as a feature's shape part sees it. Declaring
/// parameters: the whole layer, its name prefix, the shard that holds them
/// and the core's split of it. Walking regions and sizing scratch: the
/// shard's layer and model (getTensorShardModel; model.tensorShards and
/// model.sequenceShards say how it is split), no prefix, the shard {0, 1}.
struct LayerShape {
  const ModelConfig &model;
  const LayerConfig &layer;
  std::string prefix;
  rt::TensorShard shard;
  rt::CoreSplit split;
  int64_t hidden() const { return model.hidden; }
};

/// The state a pass leaves for later ones: Forward (F to B and W), Weight
/// (B to W).
enum class State { Forward, Weight };
/// Called with a region's id among the feature's own, one numbering for
/// both states (0 to
/// kFeatureRegions - 1), its element count and its storage.
using RegionFn = std::function<void(int, int64_t, rt::Storage)>;
constexpr int kFeatureRegions = 8;

/// What a feature declares about itself, given to Feature's constructor.
struct FeatureInfo {
  /// Its name: its folder's, and what `features` names it by.
  const char *name;
  /// The slots it computes at (getSlotBits).
  unsigned slots;
  /// Where it runs among the features of a slot: lower first in F, last
  /// in B.
  int order = 100;
  /// For a feature that is one boolean field of the spec
  /// (BlockFields.def), that field, which isEnabled and setEnabled read
  /// and write; null: the feature is on when `features` names it.
  bool LayerConfig::*field = nullptr;
  /// The forms it comes in (biases: on every map or the QKV projection's
  /// only), each of which the conformance suite checks.
  int variants = 1;
  /// Whether its parameters at their initial values (zero biases, unit
  /// scales) make it the identity: then the block with them computes what
  /// the block without the feature does, which the conformance suite
  /// checks. A norm is the identity at no parameters.
  bool identityAtInit = false;
  /// The step of the conformance suite's finite differences. A router's
  /// top-k changes its choice where a perturbed logit crosses a near-tie,
  /// a jump no derivative has: a routing feature takes a step below the
  /// gaps between its test model's logits.
  double differenceStep = 2e-2;
};

class Feature {
public:
  explicit Feature(const FeatureInfo &info) : info(info) {}
  virtual ~Feature() = default;

  const char *getName() const { return info.name; }
  unsigned getSlots() const { return info.slots; }
  int getOrder() const { return info.order; }
  int getVariants() const { return info.variants; }
  bool isIdentityAtInit() const { return info.identityAtInit; }
  double getDifferenceStep() const { return info.differenceStep; }

  /// Whether `layer` has the feature: by default its field's value, or
  /// whether `features` names it; a feature with another kind of field
  /// (a choice among forms) reads it.
  virtual bool isEnabled(const LayerConfig &layer) const;
  /// Turns the feature on (its `variant`-th form) or off in `layer`: by
  /// default through its field or `features`.
  virtual void setEnabled(LayerConfig &layer, bool on, int variant = 0) const;

  /// Why a layer with the feature, in a model of width `hidden`, cannot
  /// be computed, or "".
  virtual std::string check(const LayerConfig &layer, int64_t hidden) const {
    return "";
  }
  /// Why the layer cannot be split over `tp` tensor-parallel shards, or "".
  virtual std::string checkTensorParallel(const LayerConfig &layer,
                                          int tp) const {
    return "";
  }

  /// Its parameters at `slot`, full names (shape.prefix + its own), as
  /// shape.shard holds them.
  virtual void addParameters(Slot slot, const LayerShape &shape,
                             std::vector<rt::ParameterSpec> &out) const {}
  /// Its regions of `state` at `slot` for slice `s`, in layout order.
  virtual void walkState(State state, Slot slot, const LayerShape &shape,
                         const rt::SliceShape &s, const RegionFn &fn) const {}
  /// Scratch, in activation elements, its F, B or W needs beyond the
  /// core's (the pass's workspace holds it after the core's scratch).
  virtual int64_t getScratchElements(const LayerShape &shape,
                                     const rt::SliceShape &s) const {
    return 0;
  }
  /// Of its parameters (shape's whole layer), those a token does not use:
  /// a mixture of experts' unchosen experts, which the model's count of
  /// active parameters leaves out.
  virtual int64_t getInactiveParameters(const LayerShape &shape) const {
    return 0;
  }
  /// Forward FLOPs of `tokens` tokens after `prefix` of context beyond its
  /// linear maps' (which the cost model counts from the parameters it
  /// declares with `matmul`). Norms, biases and other O(hidden) work per
  /// token are left out, as the core's are (Narayanan et al., 2021).
  virtual double getForwardFlops(const LayerShape &shape, int64_t tokens,
                                 int64_t prefix) const {
    return 0;
  }

private:
  FeatureInfo info;
};

/// A norm of the layer's kind over the hidden size at each of a feature's
/// two slots (pre_norms, post_norms): `names` are their parameters' names
/// after the layer's prefix, the earlier slot's first (addHiddenNorm), and
/// their forward state regions 0-1 and 2-3 (walkHiddenNormState).
class HiddenNormPair : public Feature {
public:
  HiddenNormPair(const FeatureInfo &info, const char *first, const char *second)
      : Feature(info), names{first, second} {}
  void addParameters(Slot slot, const LayerShape &shape,
                     std::vector<rt::ParameterSpec> &out) const override;
  void walkState(State state, Slot slot, const LayerShape &shape,
                 const rt::SliceShape &s, const RegionFn &fn) const override;

  /// The norm's name at `slot` (after the layer's prefix) and its first
  /// state region: what its compute part finds it by.
  const char *getNormName(Slot slot) const { return names[getIndex(slot)]; }
  int getStateBase(Slot slot) const { return 2 * getIndex(slot); }

private:
  /// 0 at the earlier of the feature's slots, 1 at the later.
  int getIndex(Slot slot) const;
  const char *names[2];
};

/// Every feature: those the build found (lib/Blocks/*/), then those
/// registered since, in order.
const std::vector<const Feature *> &getFeatures();
/// Adds `feature` (kept by reference; a name taken already is ignored).
void registerFeature(const Feature &feature);
/// The feature named `name`, or null; every name, comma-separated.
const Feature *lookupFeature(const std::string &name);
std::string getFeatureNames();
/// Its index in getFeatures().
int getFeatureIndex(const Feature &feature);
/// The features `layer` has, by getOrder (then registration).
std::vector<const Feature *> getEnabledFeatures(const LayerConfig &layer);
/// Those of them at `slot`.
std::vector<const Feature *> getEnabledFeatures(const LayerConfig &layer,
                                                Slot slot);

/// The layer `index` of `model` (a transformer layer) as features see it,
/// on tensor-parallel shard `shard`.
LayerShape getLayerShape(const ModelConfig &model, const LayerConfig &layer,
                         const std::string &prefix, rt::TensorShard shard);

/// A norm of the layer's kind over the hidden size, named `name`
/// ("layers.0.norm1"): its gain (and, for LayerNorm, its bias). It runs on
/// each shard's tokens under sequence parallelism, so the group sums its
/// gradients (Reduce::Tokens).
void addHiddenNorm(const LayerShape &shape, const std::string &name,
                   std::vector<rt::ParameterSpec> &out);
/// Such a norm's forward state on this shard's tokens: its normalised
/// input as region `base`, 1/std as region `base + 1`.
void walkHiddenNormState(int base, const LayerShape &shape,
                         const rt::SliceShape &s, const RegionFn &fn);

/// Whether `layer` computes the core's feed-forward block (up, gate and
/// down maps around the activation): false when a feature at
/// Slot::FeedForward replaces it.
bool hasCoreFeedForward(const LayerConfig &layer);
/// Whether `layer` computes the core's QKV projection and rotation: false
/// when a feature at Slot::QueryKeyValue replaces them.
bool hasCoreProjection(const LayerConfig &layer);

/// Why `model` cannot be split over `tp` tensor-parallel shards, or "":
/// every transformer layer's query heads and feed-forward width divide by
/// tp, its key/value heads divide by tp or divide tp (then each shard
/// holds the one head its query heads share, replicated: Weitkamp, 2024,
/// "Grouped/Multi-Query Attention"), each feature's rules hold, and the
/// vocabulary layers leave every shard rows.
std::string checkTensorParallel(const ModelConfig &model, int tp);
/// The same for one transformer layer: the core's rules, then its
/// features'.
std::string checkLayerTensorParallel(const LayerConfig &layer, int tp);

} // namespace sluice::blocks

/// Defines getFeature_NAME(), which the build's feature list calls (one
/// per folder under lib/Blocks), returning the one CLASS.
#define SLUICE_DEFINE_FEATURE(NAME, CLASS)                                     \
  const ::sluice::blocks::Feature &getFeature_##NAME() {                       \
    static const CLASS feature;                                                \
    return feature;                                                            \
  }

#endif // SLUICE_BLOCKS_FEATURE_H
