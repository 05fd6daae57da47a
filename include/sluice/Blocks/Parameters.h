//===- Parameters.h - A model's parameters, declared ------------*- C++ -*-===//
//
// Every parameter of a model by its global name (`layers.3.attn.qkv.weight`,
// `embed.tokens`, ...), with its shape, its initialisation, how a
// tensor-parallel shard holds it and what the shard's group sums of its
// gradient. The transformer block's core declares its projections; each
// block feature declares its own (sluice/Blocks/Feature.h). The runtime
// allocates and binds these (runtime/model/Parameters.h), the cost model counts
// them (lib/Analysis/LayerCost.cpp), checkpoints and Hugging Face
// directories name tensors by them.
//
// Plain C++: the compiler and the runtime both link it.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_BLOCKS_PARAMETERS_H
#define SLUICE_BLOCKS_PARAMETERS_H

#include "sluice/PlanFormat/ModelConfig.h"

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

/// What a tensor-parallel group does with a parameter's gradient before
/// the update, the parameter being whole on every shard:
///  * None: each shard's gradient is the whole gradient already (or the
///    parameter is sliced: each slice's is its own);
///  * Tokens: under sequence parallelism each shard's gradient is its own
///    tokens' part (the norms outside the tensor-parallel regions:
///    Megatron-LM's `sequence_parallel` parameters), so the group sums it;
///  * Shards: each shard's gradient is its own heads' part whatever the
///    split (a gain every head shares: Qwen3's query/key norms), so the
///    group sums it always.
enum class Reduce { None, Tokens, Shards };

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
  /// How a slice's files are named apart ("tp1of2", "ep0of2").
  std::string sliceName;
  /// An expert map's share of an expert-group member (expert parallelism:
  /// its experts only; the replicas holding the same experts sum its
  /// gradient).
  bool expertShare = false;
  /// What the tensor-parallel group sums of its gradient.
  Reduce reduce = Reduce::None;
  /// A linear map's weight: each token multiplies it once in F (2 FLOPs
  /// per element), which is what the cost model counts.
  bool matmul = false;

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

/// One of `count` tensor-parallel shards, on member `expert` of an expert
/// group of `experts` (expert parallelism: a sparse layer's member holds
/// experts [expert E / experts, (expert + 1) E / experts) of its E).
struct TensorShard {
  int index = 0, count = 1;
  int expert = 0, experts = 1;
};

/// How a tensor-parallel shard holds a tensor.
enum class Split {
  Whole,   // every shard all of it
  Columns, // column-parallel: output features (a vector's elements)
  Rows,    // row-parallel: input features
};

/// `name` of `whole` shape, as shard `shard` holds it: all of it (Whole,
/// or one shard), or the `parts` of its columns or rows.
ParameterSpec makeParameter(const std::string &name,
                            const std::vector<int64_t> &whole, InitKind init,
                            TensorShard shard, Split split = Split::Whole,
                            const std::vector<IndexRange> &parts = {});

/// A transformer layer's column parts on a shard (checkTensorParallel
/// holds): its query heads' columns, the key/value heads they read (the
/// same ones on every shard of a group when the layer has fewer heads than
/// shards), and its share of the feed-forward width. Every part of the QKV
/// projection ([q | k | v] side by side), the query columns alone, and
/// the attention output's rows (its heads' values, v_head_dim each).
struct CoreSplit {
  std::vector<IndexRange> qkv, queries, keys, context, ffn;
};
CoreSplit getCoreSplit(const LayerConfig &layer, TensorShard shard);

/// The parameters layer `index` of `model` reads. A tied output layer
/// reads the embedding's table under its name. A sharded embedding or
/// output layer reads only what its stage runs (positions; the final
/// norm): its table belongs to the shards (getTableShard). With tensor
/// parallelism, a transformer layer's shard holds slices: the QKV, up and
/// gate projections by columns (getCoreSplit), the attention output and
/// down projections by rows; each feature's as it declares.
std::vector<ParameterSpec> getLayerParameters(const ModelConfig &model,
                                              int index,
                                              TensorShard shard = {});

/// The prefix of layer `index`'s parameters' names: "layers.N." for the
/// N-th transformer layer, "" for the vocabulary layers.
std::string getLayerPrefix(const ModelConfig &model, int index);

/// A transformer layer of `model` (whole), `prefix` ("layers.3.") before
/// each name: the core's projections and every enabled feature's, in the
/// order of the block's slots.
std::vector<ParameterSpec> getTransformerParameters(const ModelConfig &model,
                                                    const LayerConfig &layer,
                                                    const std::string &prefix,
                                                    TensorShard shard = {});

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

} // namespace sluice::rt

#endif // SLUICE_BLOCKS_PARAMETERS_H
