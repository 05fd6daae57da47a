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
#include "ModelConfig.h"

#include <map>
#include <string>
#include <vector>

namespace sluice::rt {

enum class InitKind { Normal, Ones, Zeros };

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
  bool isShard() const { return validRows >= 0; }
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

/// The parameters layer `index` of `model` reads. A tied output layer
/// reads the embedding's table under its name. A sharded embedding or
/// output layer reads only what its stage runs (positions; the final
/// norm): its table belongs to the shards (getShardParameters).
std::vector<ParameterSpec> getLayerParameters(const ModelConfig &model,
                                              int index);

/// The row shard of the table `name` ([vocab, hidden]) that device `device`
/// of `devices` holds when the table is padded to `paddedVocab` rows.
ParameterSpec getTableShard(const std::string &name, int64_t vocab,
                            int64_t paddedVocab, int64_t hidden, int device,
                            int devices);

/// Every parameter the model has, each once.
std::vector<ParameterSpec> getModelParameters(const ModelConfig &model);

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

  /// Host copies of the flat buffers, for checkpoints and checks.
  enum class Tensor { Weights, Grads, Moment1, Moment2 };
  Status read(Tensor which, std::vector<float> &out) const;
  /// Replaces a flat buffer from the host (weights: the working copy too).
  Status write(Tensor which, const std::vector<float> &in);

private:
  const DeviceBuffer &buffer(Tensor which) const;
  /// Rewrites the working copy from the masters (mixed precision).
  void refreshWorkingCopy();

  Device *device = nullptr;
  Precision precision;
  std::vector<ParameterSpec> params;
  std::vector<int64_t> offsets;
  std::map<std::string, size_t> index;
  int64_t total = 0;
  DeviceBuffer weights, grads, moment1, moment2, working;
};

} // namespace sluice::rt

#endif // SLUICE_RUNTIME_PARAMETERS_H
