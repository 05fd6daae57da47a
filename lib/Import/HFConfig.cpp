//===- HFConfig.cpp - Import a Hugging Face config.json -------------------===//
//
// The importer's half of the model families (include/sluice/Families):
// it parses the JSON, hands the keys to the family that reads the config's
// `model_type` (lib/Families/<family>/), reports each problem the family
// finds at the key's line and column, and builds the block spec the family
// returns as a `sluice.model`. It knows no family itself.
//
//===----------------------------------------------------------------------===//

#include "sluice/Import/HFConfig.h"
#include "sluice/Families/Family.h"
#include "sluice/PlanFormat/JsonDepth.h"
#include "sluice/PlanFormat/ModelConfig.h"
#include "sluice/SluiceOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"

#include <cmath>
#include <tuple>

using namespace mlir;
using namespace mlir::sluice;

namespace {

/// Reads typed values out of the top-level JSON object, reporting each
/// problem at the key's position in the file.
class ConfigReader {
public:
  ConfigReader(const llvm::json::Object &object, StringRef text,
               StringRef filename, MLIRContext *context)
      : object(object), text(text), filename(filename), context(context) {}

  /// Where `"key"` is written in the file; the file's start if absent.
  Location loc(StringRef key) const {
    size_t offset = text.find(("\"" + key + "\"").str());
    if (offset == StringRef::npos)
      offset = std::min(text.find('{'), text.size());
    StringRef before = text.take_front(offset);
    unsigned line = 1 + before.count('\n');
    size_t lineStart = before.rfind('\n');
    unsigned column =
        offset - (lineStart == StringRef::npos ? 0 : lineStart + 1) + 1;
    return FileLineColLoc::get(context, filename, line, column);
  }

  InFlightDiagnostic error(StringRef key) const { return emitError(loc(key)); }

  /// The first of `names` present with a non-null value (aliases must
  /// agree). Sets `found` to the key it came from.
  FailureOr<const llvm::json::Value *> find(ArrayRef<StringRef> names,
                                            StringRef &found) const {
    const llvm::json::Value *result = nullptr;
    for (StringRef name : names) {
      const llvm::json::Value *value = object.get(name);
      if (!value || value->kind() == llvm::json::Value::Null)
        continue;
      if (result && *result != *value) {
        error(name) << "keys '" << found << "' = " << formatJSON(*result)
                    << " and '" << name << "' = " << formatJSON(*value)
                    << " disagree";
        return failure();
      }
      if (!result) {
        result = value;
        found = name;
      }
    }
    return result;
  }

  /// find() from the first of `names`; `key` (and `foundKey`, when given)
  /// receives the key the value came from.
  FailureOr<const llvm::json::Value *>
  lookup(ArrayRef<StringRef> names, StringRef &key, StringRef *foundKey) const {
    key = names.front();
    FailureOr<const llvm::json::Value *> value = find(names, key);
    if (foundKey)
      *foundKey = key;
    return value;
  }

  /// A positive integer under one of `names`, or nullopt if absent.
  /// `foundKey`, when given, receives the key the value came from.
  FailureOr<std::optional<int64_t>>
  optionalSize(ArrayRef<StringRef> names, StringRef *foundKey = nullptr) const {
    StringRef key;
    FailureOr<const llvm::json::Value *> value = lookup(names, key, foundKey);
    if (failed(value))
      return failure();
    if (!*value)
      return std::optional<int64_t>();
    std::optional<int64_t> size = (*value)->getAsInteger();
    if (!size || *size < 1) {
      error(key) << "key '" << key << "' must be a positive integer, got "
                 << formatJSON(**value);
      return failure();
    }
    return size;
  }

  FailureOr<int64_t> requireSize(ArrayRef<StringRef> names,
                                 StringRef *foundKey = nullptr) const {
    FailureOr<std::optional<int64_t>> size = optionalSize(names, foundKey);
    if (failed(size))
      return failure();
    if (!*size) {
      InFlightDiagnostic diag = error(names.front());
      diag << "missing required key '" << names.front() << "'";
      for (StringRef alias : names.drop_front())
        diag << " (or '" << alias << "')";
      return failure();
    }
    return **size;
  }

  FailureOr<std::optional<std::string>>
  optionalString(ArrayRef<StringRef> names,
                 StringRef *foundKey = nullptr) const {
    StringRef key;
    FailureOr<const llvm::json::Value *> value = lookup(names, key, foundKey);
    if (failed(value))
      return failure();
    if (!*value)
      return std::optional<std::string>();
    std::optional<StringRef> string = (*value)->getAsString();
    if (!string) {
      error(key) << "key '" << key << "' must be a string, got "
                 << formatJSON(**value);
      return failure();
    }
    return std::optional<std::string>(string->str());
  }

  /// A positive number under `key`, or nullopt if absent.
  FailureOr<std::optional<double>> optionalPositive(StringRef key) const {
    StringRef found;
    FailureOr<const llvm::json::Value *> value = find({key}, found);
    if (failed(value))
      return failure();
    if (!*value)
      return std::optional<double>();
    std::optional<double> number = (*value)->getAsNumber();
    if (!number || !(*number > 0)) {
      error(key) << "key '" << key << "' must be a positive number, got "
                 << formatJSON(**value);
      return failure();
    }
    return number;
  }

  /// A positive number under `key` of the object `parent`, or nullopt if
  /// either is absent.
  FailureOr<std::optional<double>> optionalPositive(StringRef key,
                                                    StringRef parent) const {
    const llvm::json::Object *inner = getObject(parent);
    const llvm::json::Value *value = inner ? inner->get(key) : nullptr;
    if (!value || value->kind() == llvm::json::Value::Null)
      return std::optional<double>();
    std::optional<double> number = value->getAsNumber();
    if (!number || !(*number > 0)) {
      error(parent) << "key '" << parent << "." << key
                    << "' must be a positive number, got "
                    << formatJSON(*value);
      return failure();
    }
    return number;
  }

  /// The string under `key` of the object `parent`, if both exist.
  std::optional<std::string> nestedString(StringRef parent,
                                          StringRef key) const {
    const llvm::json::Object *inner = getObject(parent);
    if (!inner)
      return std::nullopt;
    if (std::optional<StringRef> s = inner->getString(key))
      return s->str();
    return std::nullopt;
  }

  const llvm::json::Object *getObject(StringRef key) const {
    const llvm::json::Value *value = object.get(key);
    return value ? value->getAsObject() : nullptr;
  }

  const llvm::json::Value *get(StringRef key) const { return object.get(key); }

  /// Whether `key` is present with a non-null value.
  bool has(StringRef key) const {
    const llvm::json::Value *value = object.get(key);
    return value && value->kind() != llvm::json::Value::Null;
  }

  FailureOr<std::optional<bool>> optionalBool(StringRef key) const {
    StringRef found;
    FailureOr<const llvm::json::Value *> value = find({key}, found);
    if (failed(value))
      return failure();
    // One return of one local: GCC 12 warns (-Wmaybe-uninitialized) on
    // an empty optional built in the return.
    std::optional<bool> flag;
    if (!*value)
      return flag;
    flag = (*value)->getAsBoolean();
    if (!flag) {
      error(key) << "key '" << key << "' must be true or false, got "
                 << formatJSON(**value);
      return failure();
    }
    return flag;
  }

  /// A remark at `key`.
  InFlightDiagnostic remark(StringRef key) const {
    return emitRemark(loc(key));
  }

  static std::string formatJSON(const llvm::json::Value &value) {
    return llvm::formatv("{0}", value).str();
  }

private:
  const llvm::json::Object &object;
  StringRef text;
  StringRef filename;
  MLIRContext *context;
};

/// The model's symbol: `_name_or_path`'s last component, else the file's
/// stem (its directory's name for the usual `config.json`), reduced to
/// characters a bare MLIR symbol may hold.
std::string getModelName(std::optional<std::string> nameOrPath,
                         StringRef filename) {
  std::string raw;
  if (nameOrPath && !nameOrPath->empty())
    raw = llvm::sys::path::filename(StringRef(*nameOrPath).rtrim("/")).str();
  if (raw.empty()) {
    raw = llvm::sys::path::stem(filename).str();
    StringRef parent =
        llvm::sys::path::filename(llvm::sys::path::parent_path(filename));
    if (raw == "config" && !parent.empty() && parent != ".")
      raw = parent.str();
  }
  std::string name;
  for (char c : raw)
    name.push_back(llvm::isAlnum(c) ? llvm::toLower(c) : '_');
  if (name.empty() || llvm::isDigit(name.front()))
    name.insert(0, "model_");
  return name;
}

namespace families = ::sluice::families;
namespace rt = ::sluice::rt;

/// The keys as a family reads them (families::ConfigKeys), over the
/// ConfigReader: each problem a family finds is a diagnostic at its key.
class FamilyKeys final : public families::ConfigKeys {
public:
  explicit FamilyKeys(const ConfigReader &reader) : reader(reader) {}

  bool optionalSize(const Names &names, std::optional<int64_t> &out,
                    std::string *foundKey) const override {
    SmallVector<StringRef> refs(names.begin(), names.end());
    StringRef found;
    FailureOr<std::optional<int64_t>> value =
        reader.optionalSize(refs, &found);
    if (failed(value))
      return false;
    out = *value;
    if (foundKey)
      *foundKey = found.str();
    return true;
  }

  bool requireSize(const Names &names, int64_t &out,
                   std::string *foundKey) const override {
    SmallVector<StringRef> refs(names.begin(), names.end());
    StringRef found;
    FailureOr<int64_t> value = reader.requireSize(refs, &found);
    if (failed(value))
      return false;
    out = *value;
    if (foundKey)
      *foundKey = found.str();
    return true;
  }

  bool optionalString(const Names &names, std::optional<std::string> &out,
                      std::string *foundKey) const override {
    SmallVector<StringRef> refs(names.begin(), names.end());
    StringRef found;
    FailureOr<std::optional<std::string>> value =
        reader.optionalString(refs, &found);
    if (foundKey)
      *foundKey = found.str();
    if (failed(value))
      return false;
    out = *value;
    return true;
  }

  bool optionalPositive(const std::string &key, std::optional<double> &out,
                        const std::string &parent) const override {
    FailureOr<std::optional<double>> value =
        parent.empty() ? reader.optionalPositive(key)
                       : reader.optionalPositive(key, parent);
    if (failed(value))
      return false;
    out = *value;
    return true;
  }

  bool optionalBool(const std::string &key,
                    std::optional<bool> &out) const override {
    FailureOr<std::optional<bool>> value = reader.optionalBool(key);
    if (failed(value))
      return false;
    out = *value;
    return true;
  }

  bool has(const std::string &key) const override { return reader.has(key); }
  bool isNull(const std::string &key) const override {
    const llvm::json::Value *value = reader.get(key);
    return value && value->kind() == llvm::json::Value::Null;
  }
  bool isObject(const std::string &key) const override {
    return reader.getObject(key) != nullptr;
  }
  std::optional<int64_t> getInteger(const std::string &key) const override {
    const llvm::json::Value *value = reader.get(key);
    return value ? value->getAsInteger() : std::nullopt;
  }
  std::optional<std::vector<int64_t>>
  getIntegers(const std::string &key) const override {
    const llvm::json::Value *value = reader.get(key);
    const llvm::json::Array *array = value ? value->getAsArray() : nullptr;
    if (!array)
      return std::nullopt;
    std::vector<int64_t> out;
    for (const llvm::json::Value &item : *array) {
      std::optional<int64_t> n = item.getAsInteger();
      if (!n)
        return std::nullopt;
      out.push_back(*n);
    }
    return out;
  }
  std::optional<double> getNumber(const std::string &key) const override {
    const llvm::json::Value *value = reader.get(key);
    return value ? value->getAsNumber() : std::nullopt;
  }
  std::optional<std::string>
  getNestedString(const std::string &parent,
                  const std::string &key) const override {
    return reader.nestedString(parent, key);
  }
  std::optional<double> getNestedNumber(const std::string &parent,
                                        const std::string &key) const override {
    const llvm::json::Object *object = reader.getObject(parent);
    return object ? object->getNumber(key) : std::nullopt;
  }
  std::optional<int64_t>
  getNestedInteger(const std::string &parent,
                   const std::string &key) const override {
    const llvm::json::Object *object = reader.getObject(parent);
    return object ? object->getInteger(key) : std::nullopt;
  }
  std::optional<std::vector<std::string>>
  getStrings(const std::string &key) const override {
    const llvm::json::Value *value = reader.get(key);
    const llvm::json::Array *array = value ? value->getAsArray() : nullptr;
    if (!array)
      return std::nullopt;
    std::vector<std::string> strings;
    for (const llvm::json::Value &item : *array) {
      std::optional<llvm::StringRef> text = item.getAsString();
      if (!text)
        return std::nullopt;
      strings.push_back(text->str());
    }
    return strings;
  }
  std::string format(const std::string &key) const override {
    const llvm::json::Value *value = reader.get(key);
    return value ? ConfigReader::formatJSON(*value) : "null";
  }

  void error(const std::string &key, const std::string &message) override {
    reader.error(key) << message;
  }
  void remark(const std::string &key, const std::string &message) override {
    reader.remark(key) << message;
  }
  void unmodelled(const std::string &key, const std::string &what) override {
    whatIsUnmodelled.push_back(key + ": " + what);
    if (!firstUnmodelled)
      firstUnmodelled = reader.loc(key);
  }

  /// One warning for all that is not modelled, at the first key:
  /// sluice-compile's costs hold, sluice-run refuses to train the model.
  const std::vector<std::string> &warnUnmodelled() const {
    if (firstUnmodelled)
      emitWarning(*firstUnmodelled)
          << "not modelled (the costs hold; sluice-run refuses to train this "
             "model): "
          << llvm::join(whatIsUnmodelled, "; ");
    return whatIsUnmodelled;
  }

private:
  const ConfigReader &reader;
  std::vector<std::string> whatIsUnmodelled;
  std::optional<Location> firstUnmodelled;
};

/// The block spec the config's family reads, named after the model; a
/// diagnostic and failure otherwise.
FailureOr<families::ImportedModel> readConfig(const ConfigReader &reader,
                                              StringRef filename) {
  auto modelType = reader.optionalString({"model_type"});
  if (failed(modelType))
    return failure();
  std::string supported = families::getSupportedModelTypes();
  if (!*modelType) {
    reader.error("model_type")
        << "missing required key 'model_type' (supported: " << supported
        << ")";
    return failure();
  }
  const families::Family *family = families::lookupFamily(**modelType);
  if (!family) {
    reader.error("model_type")
        << "key 'model_type' = \"" << **modelType
        << "\" is not supported (supported: " << supported << ")";
    return failure();
  }
  FamilyKeys keys(reader);
  families::ImportedModel imported;
  if (!family->readConfig(keys, **modelType, imported))
    return failure();
  imported.model.unmodelled = keys.warnUnmodelled();
  auto nameOrPath = reader.optionalString({"_name_or_path"});
  if (failed(nameOrPath))
    return failure();
  imported.model.name = getModelName(*nameOrPath, filename);
  return imported;
}

NormKind toDialect(rt::NormType norm) {
  return norm == rt::NormType::RmsNorm ? NormKind::rmsnorm
                                       : NormKind::layernorm;
}

/// The `sluice.model` of a block spec: its model-level numerics, then the
/// embedding, the transformer layers and the output layer, each named after
/// the Hugging Face module it stands for so that a later diagnostic points
/// at something the user recognises.
void buildModel(OpBuilder &builder, Location fileLoc,
                const families::ImportedModel &imported) {
  MLIRContext *context = builder.getContext();
  const rt::ModelConfig &spec = imported.model;
  Type dtype = llvm::StringSwitch<Type>(imported.dtype)
                   .Case("bfloat16", builder.getBF16Type())
                   .Case("float16", builder.getF16Type())
                   .Default(builder.getF32Type());
  auto size = [&](int64_t value) { return builder.getI64IntegerAttr(value); };
  auto unit = [&](bool set) { return set ? builder.getUnitAttr() : UnitAttr(); };
  auto model = ModelOp::create(builder, fileLoc, spec.name,
                               /*seq_len=*/spec.seqLen,
                               /*micro_batch=*/spec.microBatch, dtype);
  builder.createBlock(&model.getBody());
  model.setNormEps(spec.normEps);
  model.setExactGelu(spec.exactGelu);
  if (spec.embeddingScale != 1.0)
    model.setEmbeddingScale(spec.embeddingScale);
  if (spec.paddingToken >= 0)
    model.setPaddingToken(spec.paddingToken);
  if (spec.maxPositions > 0)
    model.setMaxPositions(spec.maxPositions);
  if (spec.attentionScale > 0)
    model.setAttentionScale(spec.attentionScale);
  if (spec.attentionSoftcap > 0)
    model.setAttentionSoftcap(spec.attentionSoftcap);
  if (spec.finalSoftcap > 0)
    model.setFinalSoftcap(spec.finalSoftcap);
  if (!spec.unmodelled.empty()) {
    SmallVector<StringRef> what(spec.unmodelled.begin(),
                                spec.unmodelled.end());
    model.setUnmodelledAttr(builder.getStrArrayAttr(what));
  }

  auto named = [&](const Twine &name) {
    return NameLoc::get(builder.getStringAttr(name), fileLoc);
  };
  auto activation = RankedTensorType::get(
      {spec.microBatch, spec.seqLen, spec.hidden}, dtype);
  const rt::LayerConfig &embedding = spec.layers.front();
  Value x = EmbeddingOp::create(
      builder, named("embed_tokens"), activation, size(embedding.vocab),
      embedding.positions > 0 ? size(embedding.positions) : IntegerAttr(),
      /*shards=*/IntegerAttr());
  int64_t index = 0;
  for (const rt::LayerConfig &t : spec.layers) {
    if (t.kind != rt::LayerKind::Transformer)
      continue;
    // The spec as the family read it; the IR states head_dim only where
    // it is not hidden / heads.
    rt::LayerConfig layer = t;
    if (layer.heads * layer.headDim == spec.hidden)
      layer.headDim = 0;
    x = TransformerLayerOp::create(builder, named("layers." + Twine(index++)),
                                   activation, x, layer,
                                   /*shards=*/IntegerAttr());
  }
  const rt::LayerConfig &output = spec.layers.back();
  Value loss = OutputLayerOp::create(
      builder, named("lm_head"),
      RankedTensorType::get({}, builder.getF32Type()), x, size(output.vocab),
      NormKindAttr::get(context, toDialect(output.norm)), unit(output.tied),
      /*shards=*/IntegerAttr());
  ReturnOp::create(builder, fileLoc, loss);
}
} // namespace

OwningOpRef<ModuleOp> mlir::sluice::importHFConfig(StringRef json,
                                                   StringRef filename,
                                                   MLIRContext *context) {
  context->loadDialect<SluiceDialect>();
  Location fileLoc = FileLineColLoc::get(context, filename, 1, 1);

  std::string deep;
  if (!::sluice::checkJsonDepth(json.str(), deep)) {
    emitError(fileLoc) << "invalid JSON: the config " << deep;
    return nullptr;
  }
  llvm::Expected<llvm::json::Value> parsed = llvm::json::parse(json);
  if (!parsed) {
    // llvm::json reports "[line:col, byte=N]: message", its column counted
    // after consuming the offending character: that is the character's
    // 1-based column, the convention of diagnostics.
    std::string message = llvm::toString(parsed.takeError());
    unsigned line = 1, column = 1;
    StringRef rest = message;
    if (rest.consume_front("[")) {
      rest.consumeInteger(10, line);
      rest.consume_front(":");
      rest.consumeInteger(10, column);
      rest = rest.drop_until([](char c) { return c == ']'; });
      rest.consume_front("]: ");
    }
    emitError(FileLineColLoc::get(context, filename, line, column))
        << "invalid JSON: " << rest;
    return nullptr;
  }
  const llvm::json::Object *object = parsed->getAsObject();
  if (!object) {
    emitError(fileLoc) << "config must be a JSON object, got "
                       << ConfigReader::formatJSON(*parsed);
    return nullptr;
  }

  ConfigReader reader(*object, json, filename, context);
  FailureOr<families::ImportedModel> imported = readConfig(reader, filename);
  if (failed(imported))
    return nullptr;

  OpBuilder builder(context);
  OwningOpRef<ModuleOp> module = ModuleOp::create(fileLoc);
  builder.setInsertionPointToEnd(module->getBody());
  buildModel(builder, fileLoc, *imported);
  if (failed(verify(*module)))
    return nullptr;
  return module;
}
