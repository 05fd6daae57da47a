//===- Parameters.h - Weights, gradients and optimizer state ----*- C++ -*-===//
//
// The parameters of the layers a device runs, named by their global
// identity in the model (`layers.3.attn.qkv.weight`, `embed.tokens`, ...).
// Initialisation depends only on the seed, the name and the element index,
// so every partitioning of a model starts from the same weights -- what
// makes a pipelined run comparable with the single-device reference.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_PARAMETERS_H
#define SLUICE_RUNTIME_PARAMETERS_H

#include "Backend.h"
#include "sluice/PlanFormat/ModelConfig.h"

#include <map>
#include <string>
#include <vector>

namespace sluice::rt {

enum class InitKind { Normal, Ones, Zeros };

/// Consecutive indices [first, first + count) of a dimension.
struct IndexRange {
  int64_t first = 0, count = 0;
};

/// Consecutive elements of a tensor and where they sit in the whole
/// tensor it is part of (flat, row-major indices).
struct TensorRun {
  int64_t local = 0, global = 0, count = 0;
};

struct ParameterSpec {
  std::string name;
  std::vector<int64_t> shape;
  InitKind init = InitKind::Normal;
  /// A row shard of a larger table (the vocabulary shards): these rows are
  /// the table's rows [firstRow, firstRow + shape[0]); only the first
  /// `validRows` exist in the model, the rest is padding held at zero.
  /// Initialisation and checkpoints use the table's row numbers.
  int64_t firstRow = 0;
  int64_t validRows = -1; // -1: every row
  /// A tensor-parallel slice (Megatron-LM's column- and row-parallel
  /// layers): these elements are the whole tensor's rows `rows` (a
  /// vector's elements) crossed with its columns `columns`, each list in
  /// the order stored here; an empty list is every index. `whole` is the
  /// whole tensor's shape (empty: not a slice). Initialisation,
  /// checkpoints and gradient checks use the whole tensor's indices.
  std::vector<IndexRange> rows, columns;
  std::vector<int64_t> whole;
  /// How a slice's files are named apart ("tp1of2").
  std::string sliceName;
  bool isShard() const { return validRows >= 0; }
  bool isSlice() const { return !whole.empty(); }
  int64_t getValidRows() const { return validRows < 0 ? shape[0] : validRows; }
  int64_t getRowSize() const {
    int64_t n = 1;
    for (size_t i = 1; i < shape.size(); ++i)
      n *= shape[i];
    return n;
  }
  int64_t size() const {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    return n;
  }
};

/// Where `spec`'s real elements sit in the whole tensor, by local
/// position: one run for a whole tensor or a vocabulary shard (its padding
/// rows are in none), one per row and column range of a slice.
std::vector<TensorRun> getRuns(const ParameterSpec &spec);
/// Elements of the whole tensor `spec` is part of (-1 for a vocabulary
/// shard, whose table's size it does not know).
int64_t getWholeElements(const ParameterSpec &spec);

/// One of `count` tensor-parallel shards.
struct TensorShard {
  int index = 0, count = 1;
};

/// The parameters layer `index` of `model` reads. A tied output layer
/// reads the embedding's table under its name. A sharded embedding or
/// output layer reads only what its stage runs (positions; the final
/// norm): its table belongs to the shards (getShardParameters). With
/// tensor parallelism, a transformer layer's shard holds slices: the QKV,
/// up and gate projections by columns (its query heads, its key/value
/// heads -- the same ones on every shard of a group when the layer has
/// fewer than shards -- and its share of the feed-forward width), the
/// attention output and down projections by rows; norms and the biases
/// added after those two are whole on every shard.
std::vector<ParameterSpec> getLayerParameters(const ModelConfig &model,
                                              int index,
                                              TensorShard shard = {});

/// Whether parameter `name` is a norm's weight or bias: under sequence
/// parallelism each tensor-parallel shard computes its gradient from its
/// own tokens only, so the group sums it before the update (what
/// Megatron-LM marks `sequence_parallel`). The biases after the
/// row-parallel projections are not: their gradients come from the
/// gathered whole-slice output gradients.
bool isTokenSummed(const std::string &name);
/// Whether parameter `name` is a query/key norm's gain (Qwen3): whole on
/// every tensor-parallel shard, but each shard's gradient comes from its
/// own heads only, so the group sums it before the update, with or
/// without sequence parallelism.
bool isHeadSummed(const std::string &name);

/// The row shard of the table `name` ([vocab, hidden]) that device `device`
/// of `devices` holds when the table is padded to `paddedVocab` rows; with
/// tensor parallelism, tensor-parallel shard `shard` of that device holds
/// its part of those rows (ceil(rows / count) each, within the device's
/// rows: Vocabulary Parallelism over pp x tp).
ParameterSpec getTableShard(const std::string &name, int64_t vocab,
                            int64_t paddedVocab, int64_t hidden, int device,
                            int devices, TensorShard shard = {});

/// Every parameter the model has, each once.
std::vector<ParameterSpec> getModelParameters(const ModelConfig &model);

/// The model unsharded (no vocabulary shards, tensor-parallel slices or
/// sequence shards): every parameter whole, as Hugging Face holds it.
ModelConfig getWholeModel(const ModelConfig &model);

/// A device's parameters, in flat device buffers: the fp32 master
/// weights, their gradients and both Adam moments; a mixed-precision run
/// adds the weights' working copy in the activation type, which the
/// kernels read and the optimizer rewrites after each update (fp32 runs
/// read the masters).
class ParameterStore {
public:
  /// Adds a parameter; adding the same name again (a tied table) is a no-op.
  void add(const ParameterSpec &spec);
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

  /// The whole flat buffers (on the CPU backend, host memory).
  DevicePtr getMasters() const { return weights.get(); }
  DevicePtr getGrads() const { return grads.get(); }

  void zeroGrads();
  void adamStep(const AdamConfig &config, int64_t step);

  /// ZeRO-1 (Megatron-LM's distributed optimizer): keeps Adam's moments
  /// only for the flat ranges `owned` (disjoint), packed in that
  /// order, and carries their values over. Empty `owned`: the whole
  /// moments again, the owned parts in their places and the rest zero,
  /// for the caller to gather from the other replicas. Sharding moments
  /// that are sharded already is an error.
  Status shardMoments(const std::vector<IndexRange> &owned);
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
};

} // namespace sluice::rt

#endif // SLUICE_RUNTIME_PARAMETERS_H
