//===- HuggingFace.cpp - Hugging Face model directories -------------------===//

#include "HuggingFace.h"

#include "Checkpoint.h"
#include "ConfigJson.h"
#include "CpuDevice.h"
#include "sluice/Families/Family.h"

#include "sluice/PlanFormat/Json.h"
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <map>
#include <functional>
#include <set>
#include <memory>
#include <sys/mman.h>
#include <sys/stat.h>
#include <tuple>
#include <unistd.h>

namespace sluice::rt {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

//===----------------------------------------------------------------------===//
// Safetensors files
//===----------------------------------------------------------------------===//

/// One tensor of a safetensors file: its element type, shape and bytes.
enum class ElementType { F32, BF16, F16, F64 };

struct TensorInfo {
  ElementType dtype = ElementType::F32;
  std::vector<int64_t> shape;
  const unsigned char *data = nullptr;
  int64_t elements = 0;
  std::string file;
};

/// bf16 is the top half of an fp32; fp16 is widened by hand (no library
/// in the runtime's dependencies converts it).
float halfToFloat(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16, exponent = (h >> 10) & 0x1f,
           mantissa = h & 0x3ff, bits;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000 | (mantissa << 13);
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    bits = sign;
  } else {
    // Subnormal: normalise.
    int shift = 0;
    while (!(mantissa & 0x400)) {
      mantissa <<= 1;
      ++shift;
    }
    bits = sign | (uint32_t(113 - shift) << 23) | ((mantissa & 0x3ff) << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

float readElement(const TensorInfo &t, int64_t i) {
  const unsigned char *p = t.data;
  switch (t.dtype) {
  case ElementType::F32: {
    float f;
    std::memcpy(&f, p + 4 * i, 4);
    return f;
  }
  case ElementType::BF16: {
    uint16_t h;
    std::memcpy(&h, p + 2 * i, 2);
    return bf16ToFloat(h);
  }
  case ElementType::F16: {
    uint16_t h;
    std::memcpy(&h, p + 2 * i, 2);
    return halfToFloat(h);
  }
  case ElementType::F64:
    break;
  }
  double d;
  std::memcpy(&d, p + 8 * i, 8);
  return float(d);
}

/// A safetensors dtype name's element type and size (0: not one loaded).
int64_t parseElementType(const std::string &name, ElementType &type) {
  struct Known {
    const char *name;
    ElementType type;
    int64_t bytes;
  };
  static const Known kKnown[] = {{"F32", ElementType::F32, 4},
                                 {"BF16", ElementType::BF16, 2},
                                 {"F16", ElementType::F16, 2},
                                 {"F64", ElementType::F64, 8}};
  for (const Known &k : kKnown)
    if (name == k.name) {
      type = k.type;
      return k.bytes;
    }
  return 0;
}

/// A safetensors file mapped into memory: an 8-byte little-endian header
/// length, the JSON header, then the tensors' bytes. Pages are read only
/// when touched.
class MappedFile {
public:
  ~MappedFile() {
    if (base)
      munmap(base, size);
  }

  Status open(const std::string &path, std::map<std::string, TensorInfo> &out) {
    int fd = ::open(path.c_str(), O_RDONLY);
    if (fd < 0)
      return Status::error("cannot read '" + path + "'");
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size < 8) {
      ::close(fd);
      return Status::error("'" + path + "' is not a safetensors file");
    }
    size = size_t(st.st_size);
    void *mapped = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    if (mapped == MAP_FAILED)
      return Status::error("cannot map '" + path + "'");
    base = static_cast<unsigned char *>(mapped);
    uint64_t headerBytes;
    std::memcpy(&headerBytes, base, 8);
    if (headerBytes > size - 8)
      return Status::error("'" + path +
                           "' is not a safetensors file (header length " +
                           std::to_string(headerBytes) + " past its end)");
    try {
      json header = parseJson(base + 8, base + 8 + headerBytes);
      return readHeader(path, header, base + 8 + headerBytes,
                        size - 8 - headerBytes, out);
    } catch (const json::exception &e) {
      return Status::error("'" + path +
                           "': bad safetensors header: " + e.what());
    }
  }

private:
  Status readHeader(const std::string &path, const json &header,
                    const unsigned char *data, uint64_t dataBytes,
                    std::map<std::string, TensorInfo> &out) {
    std::vector<std::tuple<uint64_t, uint64_t, std::string>> spans;
    for (const auto &[name, entry] : header.items()) {
      if (name == "__metadata__")
        continue;
      TensorInfo t;
      t.file = path;
      std::string dtype = entry.at("dtype").get<std::string>();
      t.shape = entry.at("shape").get<std::vector<int64_t>>();
      auto offsets = entry.at("data_offsets").get<std::vector<uint64_t>>();
      t.elements = 1;
      for (int64_t d : t.shape) {
        // Within the file's bytes at every step: no product wraps.
        if (d < 0 || (d > 0 && uint64_t(t.elements) > dataBytes / uint64_t(d)))
          return Status::error("'" + path + "': tensor " + name +
                               " has a shape the file cannot hold");
        t.elements *= d;
      }
      int64_t bytes = parseElementType(dtype, t.dtype);
      if (bytes == 0)
        return Status::error("'" + path + "': tensor " + name + " is " + dtype +
                             " (supported: F32, BF16, F16, F64)");
      if (offsets.size() != 2 || offsets[1] > dataBytes ||
          offsets[1] < offsets[0] ||
          offsets[1] - offsets[0] != uint64_t(t.elements * bytes))
        return Status::error("'" + path + "': tensor " + name +
                             " has data offsets that do not fit its shape");
      t.data = data + offsets[0];
      spans.push_back({offsets[0], offsets[1], name});
      out[name] = std::move(t);
    }
    // The safetensors format indexes the whole byte buffer, without holes
    // or overlaps: offsets shifted or overlapping would load other bytes.
    std::sort(spans.begin(), spans.end());
    uint64_t at = 0;
    for (const auto &[begin, end, name] : spans) {
      if (begin != at)
        return Status::error(
            "'" + path + "': tensor " + name + "'s data starts at byte " +
            std::to_string(begin) + ", where " +
            (begin < at ? "another tensor's still runs (overlapping)"
                        : "nothing has ended (a hole)") +
            ": its data offsets are wrong");
      at = end;
    }
    if (at != dataBytes)
      return Status::error("'" + path + "': its tensors' data ends at byte " +
                           std::to_string(at) + " of " +
                           std::to_string(dataBytes) + " (a hole at the end)");
    return Status::ok();
  }

  unsigned char *base = nullptr;
  size_t size = 0;
};

//===----------------------------------------------------------------------===//
// Naming: Sluice's parameters in Hugging Face's tensors
//===----------------------------------------------------------------------===//

using families::Piece;
using families::Source;

/// The family a directory's config.json names, and its model_type.
struct DirectoryFamily {
  const families::Family *family = nullptr;
  std::string modelType;
  const families::WeightNames &names() const {
    return family->getWeightNames(modelType);
  }
};

Status readFamily(const std::string &dir, DirectoryFamily &found,
                  std::string &text) {
  std::string path = dir + "/config.json";
  if (Status st = readFile(path, text); !st)
    return Status::error(
        "'" + dir + "' is not a Hugging Face model directory: " + st.message());
  try {
    json config = parseJson(text);
    found.modelType = config.value("model_type", "");
  } catch (const json::exception &e) {
    return Status::error("'" + path + "': " + e.what());
  }
  found.family = families::lookupFamily(found.modelType);
  if (!found.family)
    return Status::error("'" + path + "': model_type '" + found.modelType +
                         "' is not one whose weights sluice-run loads (" +
                         families::getSupportedModelTypes() +
                         "; docs/import.md)");
  return Status::ok();
}

/// Every tensor of the directory's safetensors files: one file, or the
/// files a sharded checkpoint's index names.
class TensorDirectory {
public:
  Status open(const std::string &dir) {
    std::vector<std::string> files;
    std::string index = dir + "/model.safetensors.index.json";
    if (fs::exists(index)) {
      std::string text;
      if (Status st = readFile(index, text); !st)
        return st;
      try {
        json weightMap = parseJson(text).at("weight_map");
        for (const auto &[tensor, file] : weightMap.items())
          if (std::find(files.begin(), files.end(), file) == files.end())
            files.push_back(file.get<std::string>());
      } catch (const json::exception &e) {
        return Status::error("'" + index + "': " + e.what());
      }
    } else if (fs::exists(dir + "/model.safetensors")) {
      files.push_back("model.safetensors");
    } else {
      return Status::error("'" + dir +
                           "' has neither model.safetensors nor "
                           "model.safetensors.index.json");
    }
    for (const std::string &file : files) {
      mapped.push_back(std::make_unique<MappedFile>());
      if (Status st = mapped.back()->open(dir + "/" + file, tensors); !st)
        return st;
    }
    return Status::ok();
  }

  const TensorInfo *find(const std::string &name) const {
    auto it = tensors.find(name);
    return it == tensors.end() ? nullptr : &it->second;
  }
  /// Every tensor's name, sorted.
  std::vector<std::string> getNames() const {
    std::vector<std::string> names;
    for (const auto &[name, info] : tensors)
      names.push_back(name);
    return names;
  }

private:
  std::vector<std::unique_ptr<MappedFile>> mapped;
  std::map<std::string, TensorInfo> tensors;
};

std::string formatShape(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

/// The prefix the directory's tensors carry: the family's, or none where
/// the family's checkpoints come both ways (GPT-2's, with and without
/// GPT2LMHeadModel's `transformer.`).
std::string findPrefix(const families::WeightNames &names,
                       const TensorDirectory &tensors) {
  if (!names.prefixOptional ||
      tensors.find(names.prefix + names.tokens + ".weight"))
    return names.prefix;
  return "";
}

/// Fills the elements of `spec` (its runs, in the whole tensor's
/// numbering) from the pieces of `src`.
Status fillParameter(const ParameterSpec &spec, const Source &src,
                     const TensorDirectory &tensors, const std::string &dir,
                     float *out) {
  std::vector<const TensorInfo *> infos;
  for (const Piece &p : src.pieces) {
    const TensorInfo *t = tensors.find(p.tensor);
    if (!t)
      return Status::error("'" + dir + "' has no tensor " + p.tensor +
                           " (for " + spec.name + ")");
    std::vector<int64_t> want = src.shapeOf(p);
    if (t->shape != want)
      return Status::error("'" + dir + "': tensor " + p.tensor + " is " +
                           formatShape(t->shape) + ", the model's " +
                           formatShape(want));
    infos.push_back(t);
  }
  for (const TensorRun &run : getRuns(spec))
    for (int64_t k = 0; k < run.count; ++k) {
      int64_t g = run.global + k, r = g / src.columns, c = g % src.columns;
      int64_t at = 0;
      const Piece &p = src.locate(r, c, at);
      float value = float(readElement(*infos[&p - src.pieces.data()], at));
      // A NaN or infinite weight trains to "diverged at step 1", whose
      // advice is the learning rate's: refused here, naming the file's
      // tensor and element.
      if (!std::isfinite(value))
        return Status::error("'" + dir + "': tensor " + p.tensor +
                             " holds " + (std::isnan(value) ? "NaN" : "an infinity") +
                             " at element " + std::to_string(at) +
                             ": the weights are damaged (or were saved from "
                             "a diverged run)");
      out[run.local + k] = value + src.offset;
    }
  return Status::ok();
}

/// Where parameter `name` comes from under `names`.
Status getSource(const families::WeightNames &names, const std::string &prefix,
                 const ModelConfig &model, const std::string &name,
                 Source &src) {
  std::string why;
  if (!families::getSource(names, prefix, model, name, src, why))
    return Status::error(why);
  return Status::ok();
}

/// A tensor the files hold that no parameter of the plan's model reads
/// would be dropped without a word (a Qwen2 directory's biases on a plan
/// compiled as Llama, a deeper model's layers): refused by name.
/// Checkpoints' buffers (rotary frequencies, GPT-2's causal masks) are not
/// weights.
Status checkEveryTensorRead(const std::string &dir,
                            const families::WeightNames &names,
                            const std::string &prefix,
                            const ModelConfig &model,
                            const TensorDirectory &tensors) {
  std::set<std::string> read;
  for (const ParameterSpec &spec : getModelParameters(getWholeModel(model))) {
    Source src;
    if (Status st = getSource(names, prefix, model, spec.name, src); !st)
      return st;
    for (const Piece &p : src.pieces)
      read.insert(p.tensor);
  }
  auto isBuffer = [](const std::string &name) {
    for (const char *suffix : {"rotary_emb.inv_freq", ".attn.bias",
                               ".attn.masked_bias"})
      if (name.size() >= std::strlen(suffix) &&
          name.compare(name.size() - std::strlen(suffix), std::string::npos,
                       suffix) == 0)
        return true;
    return false;
  };
  // A layer past the model's (DeepSeek-V3's multi-token prediction
  // module), where the family leaves such layers unread.
  int64_t layers = 0;
  for (const LayerConfig &l : model.layers)
    layers += l.kind == LayerKind::Transformer;
  auto isLaterLayer = [&](const std::string &name) {
    std::string head = prefix + names.layers;
    if (!names.laterLayersUnread || name.compare(0, head.size(), head) != 0)
      return false;
    size_t end = name.find('.', head.size());
    std::string index = name.substr(head.size(), end - head.size());
    return !index.empty() &&
           index.find_first_not_of("0123456789") == std::string::npos &&
           index.size() < 10 && std::stoll(index) >= layers;
  };
  for (const std::string &name : tensors.getNames())
    if (!read.count(name) && !isBuffer(name) && !isLaterLayer(name) &&
        !(name == "lm_head.weight" && model.layers.back().tied))
      return Status::error("'" + dir + "' holds " + name +
                           ", which no parameter of the plan's model reads: "
                           "compile the plan from this config.json");
  return Status::ok();
}

/// The directory's config.json held against the plan's model: every key
/// of the config the model describes (describeModel, what --save-hf
/// writes) that the directory's also states must say the same, so that
/// weights are not loaded into a model computing another function (a
/// layer_norm_epsilon of 0.5, relu for gelu_new, tied embeddings, 16
/// layers for the plan's 8 all loaded and trained). Keys that do not
/// change what the layers compute are not compared, nor keys the
/// directory leaves to transformers' defaults.
Status checkConfigAgainstPlan(const std::string &dir, const std::string &text,
                              const DirectoryFamily &theirs,
                              const ModelConfig &model) {
  const families::Family *family = nullptr;
  json want, have;
  std::string why;
  if (!families::describeModel(model, family, want, why))
    return Status::ok(); // the weights' own checks say what does not fit
  try {
    have = parseJson(text);
  } catch (const json::exception &e) {
    return Status::error("'" + dir + "/config.json': " + e.what());
  }
  static const std::set<std::string> kNotComputed = {
      "architectures", "torch_dtype",  "dtype",       "transformers_version",
      "pad_token_id",  "bos_token_id", "eos_token_id", "use_cache",
      "initializer_range", "max_position_embeddings", "n_ctx"};
  // transformers' synonyms for one activation (ACT2FN).
  auto activation = [](const json &v) {
    return v.is_string() && v.get<std::string>() == "swish" ? json("silu") : v;
  };
  std::function<bool(const json &, const json &)> same =
      [&](const json &a, const json &b) {
        if (a.is_number() && b.is_number()) {
          double x = a.get<double>(), y = b.get<double>();
          return std::fabs(x - y) <=
                 1e-6 * std::max(std::fabs(x), std::fabs(y));
        }
        if (a.is_object() && b.is_object()) {
          if (a.size() != b.size())
            return false;
          for (auto &[k, v] : a.items())
            if (!b.contains(k) || !same(v, b[k]))
              return false;
          return true;
        }
        return activation(a) == activation(b);
      };
  // An object (rope_scaling) is held against the plan's as the directory's
  // config reads and describes again (below), since one scaling has
  // several spellings (YaRN's attention factor stated, or made from
  // mscale and mscale_all_dim).
  auto mismatch = [&](const std::string &key, const json &value) {
    return Status::error("'" + dir + "/config.json' says " + key + " = " +
                         have[key].dump() + ", but the plan's model computes " +
                         value.dump() +
                         ": compile the plan from this config.json");
  };
  std::vector<std::string> objects;
  for (auto &[key, value] : want.items()) {
    if (kNotComputed.count(key) || !have.contains(key) ||
        same(have[key], value))
      continue;
    if (have[key].is_object() && value.is_object()) {
      objects.push_back(key);
      continue;
    }
    // transformers 5 writes head_dim null for "hidden / heads" (Mixtral's
    // config), as the importer reads it.
    if (key == "head_dim" && have[key].is_null())
      continue;
    // The plan's model is another family's (Mistral's without its
    // windows is Llama's).
    if (key == "model_type")
      return Status::error("'" + dir + "/config.json' describes a " +
                           have[key].dump() +
                           " model, but the plan's model is a " +
                           value.dump() +
                           " one: compile the plan from this config.json");
    return mismatch(key, value);
  }

  // The keys the directory leaves out take their defaults: transformers'
  // (GPT2Config's 12 layers for an absent n_layer), which the families'
  // readers apply as sluice-compile's importer does, or refuse where the
  // importer requires the key. So the directory is read as the importer
  // reads it, and what that model's config says is held against the plan
  // for each key the directory did not state, and for the objects above.
  JsonConfigKeys keys(have);
  families::ImportedModel imported;
  if (!theirs.family->readConfig(keys, theirs.modelType, imported))
    return Status::error("'" + dir + "/config.json': " + keys.getError());
  const families::Family *described = nullptr;
  json read;
  if (!families::describeModel(imported.model, described, read, why))
    return Status::ok(); // the weights' own checks say what does not fit
  for (const std::string &key : objects)
    if (!read.contains(key) || !same(read[key], want[key]))
      return mismatch(key, want[key]);
  for (auto &[key, value] : want.items()) {
    if (kNotComputed.count(key) || have.contains(key))
      continue;
    json taken = read.contains(key) ? read[key] : json();
    if (same(taken, value))
      continue;
    return Status::error("'" + dir + "/config.json' leaves " + key +
                         " out, which then reads as " + taken.dump() +
                         " (transformers' default), but the plan's model "
                         "computes " + value.dump() +
                         ": compile the plan from this config.json");
  }
  return Status::ok();
}

} // namespace

Status loadHuggingFace(const std::string &dir, const ModelConfig &model,
                       ParameterStore &params) {
  DirectoryFamily family;
  std::string config;
  if (Status st = readFamily(dir, family, config); !st)
    return st;
  // The weights' layout follows the family; the plan must compute it.
  if (std::string why = family.family->checkWeights(model, family.modelType);
      !why.empty())
    return Status::error("'" + dir + "/config.json' is " + why +
                         ": compile the plan from this config.json");
  if (Status st = checkConfigAgainstPlan(dir, config, family, model);
      !st)
    return st;
  TensorDirectory tensors;
  if (Status st = tensors.open(dir); !st)
    return st;
  const families::WeightNames &names = family.names();
  std::string prefix = findPrefix(names, tensors);
  if (Status st = checkEveryTensorRead(dir, names, prefix, model, tensors);
      !st)
    return st;
  std::vector<float> weights;
  if (Status st = params.read(ParameterStore::Tensor::Weights, weights); !st)
    return st;
  for (const ParameterSpec &spec : params.specs()) {
    Source src;
    if (Status st = getSource(names, prefix, model, spec.name, src); !st)
      return st;
    if (Status st = fillParameter(spec, src, tensors, dir,
                                  weights.data() + params.offset(spec.name));
        !st)
      return st;
  }
  return params.write(ParameterStore::Tensor::Weights, weights);
}

namespace {

/// The family and config.json transformers reads for `model`.
Status describeModel(const ModelConfig &model, DirectoryFamily &family,
                     std::string &text) {
  json config;
  std::string why;
  if (!families::describeModel(model, family.family, config, why))
    return Status::error(why);
  family.modelType = config.value("model_type", "");
  text = config.dump(2) + "\n";
  return Status::ok();
}

/// Writes `tensors` (name -> shape and fp32 values) as one safetensors
/// file, names sorted, the header padded to 8 bytes as the format's
/// writer does.
Status writeSafetensors(
    const std::string &path,
    const std::map<std::string,
                   std::pair<std::vector<int64_t>, std::vector<float>>>
        &tensors) {
  json header;
  header["__metadata__"] = {{"format", "pt"}};
  uint64_t offset = 0;
  for (const auto &[name, tensor] : tensors) {
    uint64_t bytes = tensor.second.size() * sizeof(float);
    header[name] = {{"dtype", "F32"},
                    {"shape", tensor.first},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  uint64_t length = text.size();
  std::string bytes(reinterpret_cast<const char *>(&length), 8);
  bytes += text;
  bytes.reserve(bytes.size() + offset);
  for (const auto &[name, tensor] : tensors)
    bytes.append(reinterpret_cast<const char *>(tensor.second.data()),
                 tensor.second.size() * sizeof(float));
  return writeFileAtomically(path, bytes);
}

/// Rank 0's half of saveHuggingFace: the gathered checkpoint, whole, as
/// Hugging Face tensors.
Status writeDirectory(const std::string &dir, const std::string &gather,
                      const std::string &sourceDir, const ModelConfig &model) {
  std::string config;
  DirectoryFamily family;
  if (Status st = sourceDir.empty() ? describeModel(model, family, config)
                                    : readFamily(sourceDir, family, config);
      !st)
    return st;
  ModelConfig whole = getWholeModel(model);
  CpuDevice device;
  ParameterStore store;
  for (const ParameterSpec &spec : getModelParameters(whole))
    store.add(spec);
  int64_t step = 0;
  if (Status st = store.allocate(device, Precision::fp32(), 0); !st)
    return st;
  if (Status st = loadCheckpoint(gather, -1, store, step); !st)
    return st;
  std::vector<float> weights;
  if (Status st = store.read(ParameterStore::Tensor::Weights, weights); !st)
    return st;
  std::map<std::string, std::pair<std::vector<int64_t>, std::vector<float>>>
      tensors;
  for (const ParameterSpec &spec : store.specs()) {
    Source src;
    if (Status st = getSource(family.names(), family.names().prefix, whole,
                              spec.name, src);
        !st)
      return st;
    const float *w = weights.data() + store.offset(spec.name);
    for (const Piece &p : src.pieces) {
      auto &[shape, values] = tensors[p.tensor];
      shape = src.shapeOf(p);
      int64_t rows = src.rowsOf(p);
      values.resize(rows * p.columns);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < p.columns; ++c)
          values[p.transposed ? c * rows + r : r * p.columns + c] =
              w[(p.row + r) * src.columns + p.column + c] - src.offset;
    }
  }
  if (Status st = writeSafetensors(dir + "/model.safetensors", tensors); !st)
    return st;
  return writeFileAtomically(dir + "/config.json", config);
}

} // namespace

Status saveHuggingFace(const std::string &dir, const std::string &sourceDir,
                       const ModelConfig &model, int64_t step,
                       ParameterStore &params, Communicator &comm,
                       const WrittenParameters &writes) {
  std::string gather = dir + "/.sluice-gather";
  if (Status st = saveCheckpoint(gather, step, params, comm,
                                 TrainingSettings(), /*keep=*/1, writes);
      !st)
    return st;
  Status st = Status::ok();
  if (comm.rank() == 0) {
    st = writeDirectory(dir, gather, sourceDir, model);
    std::error_code ec;
    fs::remove_all(gather, ec);
  }
  double failed = st ? 0.0 : 1.0;
  if (Status reduced = comm.allReduceMax(&failed, 1); !reduced)
    return reduced;
  if (!st)
    return st;
  if (failed > 0)
    return Status::error("rank 0 could not write the Hugging Face directory '" +
                         dir + "'");
  return Status::ok();
}

} // namespace sluice::rt
