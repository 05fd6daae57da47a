//===- Parameters.h - Weights, gradients and optimizer state ----*- C++ -*-===//
//
// The parameters of the layers a device runs, named by their global
// identity in the model (`layers.3.attn.qkv.weight`, `embed.tokens`, ...;
// declared by sluice/Blocks/Parameters.h), in device memory.
// Initialisation depends only on the seed, the name and the element index,
// so every partitioning of a model starts from the same weights -- what
// makes a pipelined run comparable with the single-device reference.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_PARAMETERS_H
#define SLUICE_RUNTIME_PARAMETERS_H

#include "Backend.h"
#include "sluice/Blocks/Parameters.h"
#include "sluice/PlanFormat/ModelConfig.h"
#include "sluice/PlanFormat/TrainingState.h"

#include <map>
#include <string>
#include <vector>

namespace sluice::rt {

/// A device's parameters, in flat device buffers: the fp32 master
/// weights, their gradients and both Adam moments; a mixed-precision run
/// adds the weights' working copy in the activation type, which the
/// kernels read and the optimizer rewrites after each update (fp32 runs
/// read the masters).
class ParameterStore {
public:
  /// Adds a parameter; adding the same name again (a tied table) is a no-op.
  void add(const ParameterSpec &spec);
  /// Places every parameter in the flat buffers (offset(), the total);
  /// allocate does it when not done yet.
  void layout();
  /// Allocates everything on `device` and initialises the weights from
  /// `seed` (drawn on the host, uploaded once).
  Status allocate(Device &device, const Precision &precision, uint64_t seed);

  /// The weights the kernels read (the working copy when mixed).
  DevicePtr weight(const std::string &name) const;
  DevicePtr master(const std::string &name) const;
  DevicePtr grad(const std::string &name) const;
  bool contains(const std::string &name) const {
    return index.count(name) != 0;
  }
  const std::vector<ParameterSpec> &specs() const { return params; }
  /// Element offset of `name` in the flat buffers.
  int64_t offset(const std::string &name) const;
  int64_t getTotalElements() const { return total; }

  /// The whole flat buffers (on the CPU backend, host memory). Under a
  /// gradient window, getGrads() is the whole-gradient copy kept for
  /// checks (keepWholeGradients; null without).
  DevicePtr getMasters() const { return weights.get(); }
  DevicePtr getGrads() const {
    return windowSize ? whole.get() : grads.get();
  }

  /// ZeRO-2 (Rajbhandari et al., 2020, section 5.2; before allocate):
  /// the gradients of each group -- a layer's parameters, or layers that
  /// share a tied table -- share one window the size of the largest
  /// group, laid out in the order given, since the group's gradients are
  /// reduce-scattered into the replica's part as soon as its W has
  /// computed them (GradientSync.h ZeroOne::reduceScatterGroup). So the
  /// full-size gradient exists for one group at a time. Every parameter
  /// belongs to exactly one group.
  /// A vector's gradients (a norm's gain, a bias) stay whole, outside the
  /// window, and are reduce-scattered once a step (ZeroOne::
  /// reduceScatterVectors): some features take them in B (post_norms,
  /// qk_norm: from what F kept), where other layers' W would clear or
  /// scatter a shared window's part before this layer's W.
  Status setGradientGroups(const std::vector<std::vector<std::string>> &groups);
  /// Whether `name`'s gradients are kept whole beside the window, and
  /// where (getVectorGradients() + getVectorOffset).
  bool isVectorGradient(const std::string &name) const {
    return vectorAt.count(name) != 0;
  }
  int64_t getVectorOffset(const std::string &name) const {
    return vectorAt.at(name);
  }
  DevicePtr getVectorGradients() const { return vectorGrads.get(); }
  /// Also a whole-size gradient buffer (getGrads) that the replicas'
  /// parts are gathered into for --dump-grads and --check-against.
  void keepWholeGradients() { wholeKept = true; }
  /// ZeRO-3 (Rajbhandari et al., 2020, section 5.3; after
  /// setGradientGroups, before allocate): the fp32 weights are kept as
  /// this replica's parts, the flat ranges `owned` packed in order as the
  /// moments are (shardMoments), and the kernels read each group's
  /// working weights from a slot the group's all-gather fills
  /// (ZeroOne::gatherGroup): re-sharding every pass, two slots of the
  /// largest group's size, group g in slot g mod 2 (the layer in use and
  /// the next); per step, a slot per group (the device's whole working
  /// copy). A slot remembers the group it holds until the weights change.
  Status setWeightShards(const std::vector<IndexRange> &owned,
                         Reshard reshard);
  bool isWeightSharded() const { return shardWeights; }
  /// Group `group`'s slot (its parameters at their window offsets, in
  /// the working type), whether it holds the group's current weights, and
  /// marking it so.
  DevicePtr getWeightSlot(size_t group) const;
  bool isGathered(size_t group) const;
  void setGathered(size_t group);
  /// Whether groups `a` and `b` share a slot (one's gather would
  /// overwrite the other's weights).
  bool shareSlot(size_t a, size_t b) const {
    return reshard == Reshard::Step ? a == b : a % 2 == b % 2;
  }
  /// The slots no longer hold current weights (an update, a write).
  void dropGathered();
  /// The window (null without groups) and where `name` sits in it.
  DevicePtr getGradientWindow() const {
    return windowSize ? grads.get() : DevicePtr();
  }
  int64_t getWindowOffset(const std::string &name) const {
    return windowAt.at(name);
  }

  void zeroGrads();
  void adamStep(const AdamConfig &config, int64_t step);

  /// ZeRO-1 (Megatron-LM's distributed optimizer): keeps Adam's moments
  /// only for the flat ranges `owned` (disjoint), packed in that
  /// order, and carries their values over. Empty `owned`: the whole
  /// moments again, the owned parts in their places and the rest zero,
  /// for the caller to gather from the other replicas. Sharding moments
  /// that are sharded already is an error.
  Status shardMoments(const std::vector<IndexRange> &owned);
  /// The same before allocate: the moments start as the ranges `owned`
  /// (zero), never whole -- the peak of a run's start is its steady
  /// state's (a checkpoint loads into them after gathering them whole).
  Status setMomentShards(const std::vector<IndexRange> &owned);
  const std::vector<IndexRange> &getMomentRanges() const { return ranges; }
  /// With sharded moments: Adam over the owned ranges only, their summed
  /// gradients packed in `packedGrads` in the same order.
  void adamStep(const AdamConfig &config, int64_t step, DevicePtr packedGrads);
  /// The flat master weights' working copy (mixed precision; else null),
  /// and the moments' buffers (packed when sharded).
  DevicePtr getWorking() const { return working.get(); }
  DevicePtr getMoment(int which) const {
    return which == 1 ? moment1.get() : moment2.get();
  }

  /// One parameter's fp32 master weights to the host, and back (the
  /// working copy too): for a value a rule outside Adam moves (the
  /// router's bias).
  Status readMaster(const std::string &name, std::vector<float> &out) const;
  Status writeMaster(const std::string &name, const std::vector<float> &in);

  /// Host copies of the flat buffers, for checkpoints and checks.
  enum class Tensor { Weights, Grads, Moment1, Moment2 };
  Status read(Tensor which, std::vector<float> &out) const;
  /// Replaces a flat buffer from the host (weights: the working copy too).
  Status write(Tensor which, const std::vector<float> &in);

  /// Whether AdamW's weight decay applies to `spec`: to matrices and
  /// tables, not to norms' gains or biases (vectors).
  static bool isDecayed(const ParameterSpec &spec) {
    return spec.shape.size() >= 2;
  }

private:
  const DeviceBuffer &buffer(Tensor which) const;
  /// The initial values of flat elements [first, first + count) (laid
  /// out), drawn from `seed` into `out`.
  void drawInitialValues(uint64_t seed, int64_t first, int64_t count,
                         float *out) const;
  bool isPacked(Tensor which) const;
  /// Adam over flat elements [first, first + count) whose moments sit at
  /// `moments` and gradients at `gradsAt`, split where the weight decay
  /// switches on or off.
  void adamRange(const AdamConfig &config, int64_t step, int64_t first,
                 int64_t count, DevicePtr gradsAt, int64_t moments);
  /// Rewrites the working copy from the masters (mixed precision).
  void refreshWorkingCopy();

  Device *device = nullptr;
  Precision precision;
  std::vector<ParameterSpec> params;
  std::vector<int64_t> offsets;
  std::map<std::string, size_t> index;
  int64_t total = 0;
  DeviceBuffer weights, grads, moment1, moment2, working;
  /// The flat ranges the moments hold (empty: all of them).
  std::vector<IndexRange> ranges;
  /// Consecutive flat ranges alike under the weight decay, in order.
  std::vector<std::pair<IndexRange, bool>> decaySegments;
  /// The gradient window (setGradientGroups): each parameter's place in
  /// it, its size (0: no window, gradients whole), the whole copy.
  std::map<std::string, int64_t> windowAt;
  std::map<std::string, size_t> groupOf;
  std::vector<int64_t> groupSizes;
  /// The vectors' whole gradients beside the window, and their places.
  std::map<std::string, int64_t> vectorAt;
  int64_t vectorSize = 0;
  DeviceBuffer vectorGrads;
  /// ZeRO-3 (setWeightShards): the weights packed as the moments are; the
  /// slots, each group's slot's offset in them, and which group each slot
  /// holds (-1: none current).
  bool shardWeights = false;
  Reshard reshard = Reshard::EveryPass;
  DeviceBuffer slots;
  std::vector<int64_t> slotAt;
  std::vector<int64_t> held;
  int64_t windowSize = 0;
  bool wholeKept = false;
  DeviceBuffer whole;
};

} // namespace sluice::rt

#endif // SLUICE_RUNTIME_PARAMETERS_H
