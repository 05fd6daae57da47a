//===- Family.h - A Hugging Face model family's adapter ---------*- C++ -*-===//
//
// Everything Sluice knows about one Hugging Face model family, in one
// place (lib/Families/<family>/): the `config.json` keys it reads into the
// block spec (rt::ModelConfig, include/sluice/PlanFormat/ModelConfig.h),
// the config it writes back for a spec, the names of its weight tensors and
// their conventions (GPT-2's Conv1D layout, Gemma's 1 + w norm gains).
//
// The importer (lib/Import) and the runtime's Hugging Face directories
// (runtime/io/HuggingFace.cpp) both ask the registry (getFamilies) rather than
// knowing a family: a new family is a new folder under lib/Families, which
// the build finds and registers (lib/Families/CMakeLists.txt).
//
// Plain C++ with nlohmann-json and no LLVM or MLIR, so the runtime links it
// as it links the plan format.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_FAMILIES_FAMILY_H
#define SLUICE_FAMILIES_FAMILY_H

#include "sluice/PlanFormat/ModelConfig.h"

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace sluice::families {

using rt::LayerConfig;
using rt::ModelConfig;

//===----------------------------------------------------------------------===//
// Reading config.json
//===----------------------------------------------------------------------===//

/// The keys of one config.json as a family reads them. The importer
/// implements it over its JSON parser and reports each problem at the
/// key's line and column; every accessor that returns false has reported
/// why, and the reader stops (one problem to act on).
class ConfigKeys {
public:
  using Names = std::vector<std::string>;
  virtual ~ConfigKeys() = default;

  /// A positive integer under the first of `names` present (aliases must
  /// agree); `foundKey`, when given, receives the key it came from.
  virtual bool optionalSize(const Names &names, std::optional<int64_t> &out,
                            std::string *foundKey = nullptr) const = 0;
  /// optionalSize, an error naming the first key when all are absent.
  virtual bool requireSize(const Names &names, int64_t &out,
                           std::string *foundKey = nullptr) const = 0;
  virtual bool optionalString(const Names &names,
                              std::optional<std::string> &out,
                              std::string *foundKey = nullptr) const = 0;
  /// A positive number under `key`; under `parent`.`key` when a parent is
  /// given (an absent parent: no value).
  virtual bool optionalPositive(const std::string &key,
                                std::optional<double> &out,
                                const std::string &parent = "") const = 0;
  virtual bool optionalBool(const std::string &key,
                            std::optional<bool> &out) const = 0;

  /// Whether `key` is present with a non-null value; present as null.
  virtual bool has(const std::string &key) const = 0;
  virtual bool isNull(const std::string &key) const = 0;
  /// Whether `key` holds an object.
  virtual bool isObject(const std::string &key) const = 0;
  /// `key`'s integer value, if it is one (no report).
  virtual std::optional<int64_t> getInteger(const std::string &key) const = 0;
  /// `key`'s numeric value, if it is a number (no report).
  virtual std::optional<double> getNumber(const std::string &key) const = 0;
  /// `key`'s value as a list of integers, if it is one (no report).
  virtual std::optional<std::vector<int64_t>>
  getIntegers(const std::string &key) const = 0;
  /// `parent`.`key`'s value, if the parent is an object and the value has
  /// the type (no report).
  virtual std::optional<std::string>
  getNestedString(const std::string &parent, const std::string &key) const = 0;
  virtual std::optional<double>
  getNestedNumber(const std::string &parent, const std::string &key) const = 0;
  virtual std::optional<int64_t>
  getNestedInteger(const std::string &parent, const std::string &key) const = 0;
  /// `key`'s value as a list of strings, if it is one (no report).
  virtual std::optional<std::vector<std::string>>
  getStrings(const std::string &key) const = 0;
  /// `key`'s value as the file spells it, for messages.
  virtual std::string format(const std::string &key) const = 0;

  /// Reports at `key`: an error (the caller then returns false), a remark.
  virtual void error(const std::string &key, const std::string &message) = 0;
  virtual void remark(const std::string &key, const std::string &message) = 0;

  /// Says which default replaced an absent key: nothing is guessed
  /// silently.
  void remarkDefault(const std::string &key, const std::string &value,
                     const std::string &why) {
    remark(key, "key '" + key + "' is absent; using " + value + " (" + why +
                    ")");
  }
  /// Records what the config computes and the block spec does not
  /// (ModelConfig::unmodelled): the costs hold, sluice-run refuses to train
  /// it. The importer warns once, at the first such key.
  virtual void unmodelled(const std::string &key, const std::string &what) = 0;
};

/// What a config.json describes: the block spec, and the element type its
/// `torch_dtype` names ("bfloat16", "float16", "float32").
struct ImportedModel {
  ModelConfig model;
  std::string dtype;
};

//===----------------------------------------------------------------------===//
// Weights
//===----------------------------------------------------------------------===//

/// Columns [column, column + columns) of a Sluice tensor -- of its rows
/// [row, row + rows), or of all of them when `rows` is 0 -- come from a
/// Hugging Face tensor, stored [rows, columns] or, transposed (nn.Linear's
/// [out, in]), [columns, rows]. Row blocks stack a mixture of experts'
/// per-expert tensors into one Sluice tensor.
struct Piece {
  std::string tensor;
  int64_t column = 0, columns = 0;
  bool transposed = false;
  int64_t row = 0, rows = 0;
};

/// A Sluice parameter (runtime/model/Parameters.cpp's names) as a [rows,
/// columns] matrix (a vector: one row) and the pieces its columns come
/// from, left to right.
struct Source {
  int64_t rows = 1, columns = 0;
  std::vector<Piece> pieces;
  /// Sluice's value is the stored one plus this (Gemma's norm gains:
  /// transformers computes x * (1 + w) in fp32, Sluice x * w').
  float offset = 0.0f;

  /// The rows piece `p` covers.
  int64_t rowsOf(const Piece &p) const { return p.rows ? p.rows : rows; }
  std::vector<int64_t> shapeOf(const Piece &p) const {
    if (p.transposed)
      return {p.columns, rowsOf(p)};
    if (rows == 1)
      return {p.columns};
    return {rowsOf(p), p.columns};
  }
  /// The piece element (r, c) comes from and its index in that tensor's
  /// storage.
  const Piece &locate(int64_t r, int64_t c, int64_t &at) const {
    // Row blocks (experts) are equal and in order: start at r's.
    size_t i = pieces[0].rows > 0 ? size_t(r / pieces[0].rows) : 0;
    while (c >= pieces[i].column + pieces[i].columns ||
           (pieces[i].rows &&
            (r < pieces[i].row || r >= pieces[i].row + pieces[i].rows)))
      ++i;
    const Piece &p = pieces[i];
    int64_t lr = r - p.row, lc = c - p.column;
    at = p.transposed ? lc * rowsOf(p) + lr : lr * p.columns + lc;
    return p;
  }
};

/// A family's tensor names, as data: what differs between GPT-2's and
/// Llama's layouts. The naming engine (getSource) applies them.
struct WeightNames {
  /// The model's prefix when written ("model."), and whether reading also
  /// accepts the tensors without it (GPT-2 checkpoints with and without
  /// GPT2LMHeadModel's `transformer.`).
  std::string prefix;
  bool prefixOptional = false;
  /// Under the prefix: the token and position tables, the final norm, the
  /// transformer layers ("layers." + index + ".").
  std::string tokens, positions, finalNorm, layers;
  /// A layer's tensors: each Sluice parameter's name within the layer,
  /// without `.weight` or `.bias` ("norm1", "attn.out", "post_attn_norm";
  /// sluice/Blocks/Parameters.h and the block features declare them), to
  /// the Hugging Face module's ("input_layernorm", "self_attn.o_proj"). A
  /// parameter the map does not name has no counterpart.
  std::map<std::string, std::string> modules;
  /// A layer's tensors named whole, suffix and all, where `modules`'
  /// module + suffix cannot name them ("mlp.router.bias" to DeepSeek-V3's
  /// "mlp.gate.e_score_correction_bias"); before `modules`.
  std::map<std::string, std::string> tensors;
  /// The query, key and value projections that Sluice's attn.qkv joins
  /// side by side ("": `modules` maps attn.qkv to one fused module, GPT-2's
  /// c_attn).
  std::string q, k, v;
  /// Whether tensors of layers past the model's are left unread (DeepSeek-
  /// V3's multi-token prediction module, its layer 61, which transformers'
  /// model leaves out too); otherwise such a tensor is refused.
  bool laterLayersUnread = false;
  /// nn.Linear's [out, in] (transposed) rather than Conv1D's [in, out].
  bool linearTransposed = true;
  /// The norms' gains are stored as w where the model computes 1 + w.
  bool normOffset = false;
};

/// Where parameter `name` of `model` comes from under `names`, with
/// `prefix` as the model's prefix; false and `why` when it has no
/// counterpart.
bool getSource(const WeightNames &names, const std::string &prefix,
               const ModelConfig &model, const std::string &name,
               Source &src, std::string &why);

/// Hugging Face's name of `tensor` in transformer layer `index` (`tensor`
/// with its `.weight` or `.bias`).
std::string getLayerTensor(const WeightNames &names,
                           const std::string &prefix, int64_t index,
                           const std::string &tensor);

//===----------------------------------------------------------------------===//
// The adapter
//===----------------------------------------------------------------------===//

/// Whether a family writes the config of a block spec (Family::claim).
enum class Claim { No, Yes, Refused };

class Family {
public:
  virtual ~Family() = default;

  /// The family's name ("llama") and the model_type values it reads.
  virtual const char *getName() const = 0;
  virtual std::vector<std::string> getModelTypes() const = 0;

  /// Reads `config` (model_type `modelType`, one of getModelTypes()) into
  /// `out`; false once a problem is reported.
  virtual bool readConfig(ConfigKeys &config, const std::string &modelType,
                          ImportedModel &out) const = 0;

  /// Whether this family's config describes `model`, whose transformer
  /// layers all have `block`'s shape: Yes, No, or Refused with `why` (the
  /// spec is nearly this family's but has what its config cannot say).
  virtual Claim claim(const ModelConfig &model, const LayerConfig &block,
                      std::string &why) const = 0;
  /// The config.json transformers reads for a claimed `model`.
  virtual nlohmann::json describe(const ModelConfig &model,
                                  const LayerConfig &block) const = 0;

  /// The block spec's fields (BlockFields.def's keys, as
  /// blocks::getStatedKeys names them: rope_theta, rope_scaling,
  /// post_norms, a choice as "key = name", ...) that `modelType`'s config
  /// can say. The registry gives a spec to
  /// the family whose claim it is and whose config can say every field it
  /// states, and refuses one with a field none can say by that field's
  /// name; so a new block feature changes only the family that uses it.
  virtual std::vector<std::string>
  getFields(const std::string &modelType) const = 0;
  /// Those every `modelType` model states: its checkpoints' layout has
  /// them (Gemma-2's sandwich norms).
  virtual std::vector<std::string>
  getRequiredFields(const std::string &modelType) const {
    return {};
  }

  /// Whether `modelType` models scale their embeddings by sqrt(hidden)
  /// (Gemma's).
  virtual bool scalesEmbeddings(const std::string &modelType) const {
    return false;
  }

  /// The tensor names of `modelType`'s checkpoints.
  virtual const WeightNames &getWeightNames(const std::string &modelType) const = 0;
  /// Why `model` cannot take `modelType`'s weights (its block computes
  /// something else), or "": by default, it scales its embeddings as the
  /// family's models do, and its block states every field they have and
  /// none they cannot (checkFields).
  virtual std::string checkWeights(const ModelConfig &model,
                                   const std::string &modelType) const;
};

/// Every family the build found (lib/Families/*/), by name.
const std::vector<const Family *> &getFamilies();
/// The family that reads `modelType`, or null.
const Family *lookupFamily(const std::string &modelType);
/// Every model_type the families read, sorted, comma-separated.
std::string getSupportedModelTypes();

/// The family whose config describes `model` and the config itself (the
/// model_type it names is `modelType`); false and `why` otherwise.
bool describeModel(const ModelConfig &model, const Family *&family,
                   nlohmann::json &config, std::string &why);

/// Why `model`'s transformer layers do not state the fields a
/// `modelType` model of `family` has, or state one it cannot, or "".
std::string checkFields(const Family &family, const std::string &modelType,
                        const ModelConfig &model);

/// The transformer layer `index` of `model`, or null; their count.
const LayerConfig *getTransformerLayer(const ModelConfig &model,
                                       int64_t index);
int64_t countTransformerLayers(const ModelConfig &model);

} // namespace sluice::families

#endif // SLUICE_FAMILIES_FAMILY_H
