//===- HuggingFace.cpp - Hugging Face model directories -------------------===//

#include "HuggingFace.h"

#include "Checkpoint.h"
#include "CpuDevice.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <map>
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
    uint32_t bits = uint32_t(h) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
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
      json header = json::parse(base + 8, base + 8 + headerBytes);
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

/// Gemma names its tensors as Llama does; its norms store w where the
/// model computes with 1 + w (Source::offset). Gemma-2 has four norms per
/// layer: its post_attention_layernorm is the attention's sandwich norm,
/// pre_feedforward_layernorm the second input norm.
enum class Family { Gpt2, Llama, Gemma, Gemma2 };

bool isGemma(Family f) { return f == Family::Gemma || f == Family::Gemma2; }

/// Columns [column, column + columns) of a Sluice tensor come from a
/// Hugging Face tensor, stored [rows, columns] or, transposed (nn.Linear's
/// [out, in]), [columns, rows].
struct Piece {
  std::string tensor;
  int64_t column = 0, columns = 0;
  bool transposed = false;
};

/// A Sluice parameter as a [rows, columns] matrix (a vector: one row) and
/// the pieces its columns come from, left to right.
struct Source {
  int64_t rows = 1, columns = 0;
  std::vector<Piece> pieces;
  /// Sluice's value is the stored one plus this (Gemma's norm gains:
  /// transformers computes x * (1 + w) in fp32, Sluice x * w').
  float offset = 0.0f;

  std::vector<int64_t> shapeOf(const Piece &p) const {
    if (p.transposed)
      return {p.columns, rows};
    if (rows == 1)
      return {p.columns};
    return {rows, p.columns};
  }
};

const LayerConfig *transformerLayer(const ModelConfig &model, int64_t index) {
  int64_t seen = 0;
  for (const LayerConfig &l : model.layers)
    if (l.kind == LayerKind::Transformer && seen++ == index)
      return &l;
  return nullptr;
}

int64_t countTransformerLayers(const ModelConfig &model) {
  return std::count_if(
      model.layers.begin(), model.layers.end(),
      [](const LayerConfig &l) { return l.kind == LayerKind::Transformer; });
}

/// Maps Sluice's parameter names (Parameters.cpp) to a family's tensors.
class Naming {
public:
  Naming(Family family, std::string prefix, const ModelConfig &model)
      : family(family), prefix(std::move(prefix)), model(model) {}

  /// Where parameter `name` comes from, or an error naming it.
  Status getSource(const std::string &name, Source &src) const {
    int64_t h = model.hidden;
    const LayerConfig &embedding = model.layers.front();
    const LayerConfig &output = model.layers.back();
    // One Hugging Face tensor, [rows, hidden] (a vector: one row).
    auto whole = [&](const std::string &tensor, int64_t rows) {
      src.rows = rows;
      src.columns = h;
      src.pieces = {{tensor, 0, h, false}};
      return Status::ok();
    };
    bool gpt2 = family == Family::Gpt2;
    if (name == "embed.tokens")
      return whole(prefix + (gpt2 ? "wte.weight" : "embed_tokens.weight"),
                   embedding.vocab);
    if (name == "embed.positions")
      return whole(prefix + "wpe.weight", embedding.positions);
    if (name == "lm_head.weight")
      return whole("lm_head.weight", output.vocab);
    if (name.rfind("final_norm.", 0) == 0) {
      src.offset = isGemma(family) ? 1.0f : 0.0f;
      return whole(prefix + (gpt2 ? "ln_f." : "norm.") + name.substr(11), 1);
    }
    int64_t index = -1;
    size_t dot = std::string::npos;
    if (name.rfind("layers.", 0) == 0) {
      dot = name.find('.', 7);
      index = std::stoll(name.substr(7, dot - 7));
    }
    const LayerConfig *layer =
        index >= 0 ? transformerLayer(model, index) : nullptr;
    if (!layer)
      return Status::error("parameter " + name +
                           " has no Hugging Face counterpart");
    return getLayerSource(*layer, index, name.substr(dot + 1), src);
  }

  /// Hugging Face's name of `tensor` in transformer layer `index`.
  std::string getLayerTensor(int64_t index, const std::string &tensor) const {
    return prefix + (family == Family::Gpt2 ? "h." : "layers.") +
           std::to_string(index) + "." + tensor;
  }

  /// A name that exists only if the files hold more layers than the model.
  std::string getLayerProbe(int64_t index) const {
    return getLayerTensor(index, family == Family::Gpt2
                                     ? "ln_1.weight"
                                     : "input_layernorm.weight");
  }

private:
  Status getLayerSource(const LayerConfig &l, int64_t index,
                        const std::string &field, Source &src) const {
    int64_t h = model.hidden, hd = l.heads * l.headDim,
            kv = l.kvHeads * l.headDim;
    bool weight =
        field.size() > 7 && field.compare(field.size() - 7, 7, ".weight") == 0;
    std::string kind = field.substr(0, field.rfind('.'));
    std::string suffix = weight ? ".weight" : ".bias";
    bool gpt2 = family == Family::Gpt2;
    std::string at =
        prefix + (gpt2 ? "h." : "layers.") + std::to_string(index) + ".";
    // A linear map [in, out]: transformers' nn.Linear stores [out, in],
    // GPT-2's Conv1D [in, out]; a bias is a vector of `out`.
    auto linear = [&](int64_t in,
                      std::vector<std::pair<std::string, int64_t>> parts) {
      src.rows = weight ? in : 1;
      src.columns = 0;
      src.pieces.clear();
      for (auto &[tensor, width] : parts) {
        src.pieces.push_back(
            {at + tensor + suffix, src.columns, width, weight && !gpt2});
        src.columns += width;
      }
    };
    bool gemma2 = family == Family::Gemma2;
    if (kind == "norm1" || kind == "norm2" ||
        (gemma2 && (kind == "post_attn_norm" || kind == "post_mlp_norm"))) {
      std::string tensor =
          gpt2                     ? (kind == "norm1" ? "ln_1" : "ln_2")
          : kind == "norm1"        ? "input_layernorm"
          : kind == "post_attn_norm" ? "post_attention_layernorm"
          : kind == "post_mlp_norm"  ? "post_feedforward_layernorm"
          : gemma2                 ? "pre_feedforward_layernorm"
                                   : "post_attention_layernorm";
      src.rows = 1;
      src.columns = h;
      src.pieces = {{at + tensor + suffix, 0, h, false}};
      src.offset = isGemma(family) && weight ? 1.0f : 0.0f;
    } else if (kind == "attn.qkv") {
      if (gpt2)
        linear(h, {{"attn.c_attn", hd + 2 * kv}});
      else
        linear(h, {{"self_attn.q_proj", hd},
                   {"self_attn.k_proj", kv},
                   {"self_attn.v_proj", kv}});
    } else if (kind == "attn.out") {
      linear(hd, {{gpt2 ? "attn.c_proj" : "self_attn.o_proj", h}});
    } else if (kind == "mlp.gate" && !gpt2) {
      linear(h, {{"mlp.gate_proj", l.ffn}});
    } else if (kind == "mlp.up") {
      linear(h, {{gpt2 ? "mlp.c_fc" : "mlp.up_proj", l.ffn}});
    } else if (kind == "mlp.down") {
      linear(l.ffn, {{gpt2 ? "mlp.c_proj" : "mlp.down_proj", h}});
    } else {
      return Status::error("parameter layers." + std::to_string(index) + "." +
                           field + " has no Hugging Face counterpart");
    }
    return Status::ok();
  }

  Family family;
  std::string prefix;
  const ModelConfig &model;
};

/// The family config.json names; Gemma's are refused (their norms and
/// embedding scale are not computed: docs/import.md).
Status readFamily(const std::string &dir, Family &family, std::string &text) {
  std::string path = dir + "/config.json";
  if (Status st = readFile(path, text); !st)
    return Status::error(
        "'" + dir + "' is not a Hugging Face model directory: " + st.message());
  std::string type;
  try {
    json config = json::parse(text);
    type = config.value("model_type", "");
  } catch (const json::exception &e) {
    return Status::error("'" + path + "': " + e.what());
  }
  if (type == "gpt2") {
    family = Family::Gpt2;
  } else if (type == "llama" || type == "mistral" || type == "qwen2") {
    // Qwen2's names are Llama's (its q/k/v biases the same names'
    // .bias).
    family = Family::Llama;
  } else if (type == "gemma") {
    family = Family::Gemma;
  } else if (type == "gemma2") {
    family = Family::Gemma2;
  } else {
    return Status::error("'" + path + "': model_type '" + type +
                         "' is not one whose weights sluice-run loads "
                         "(gpt2, llama, mistral, qwen2, gemma, gemma2; "
                         "docs/import.md)");
  }
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
        json weightMap = json::parse(text).at("weight_map");
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

/// GPT-2 checkpoints come with and without GPT2LMHeadModel's
/// `transformer.` prefix; Llama's always under `model.`.
std::string findPrefix(Family family, const TensorDirectory &tensors) {
  if (family != Family::Gpt2)
    return "model.";
  return tensors.find("transformer.wte.weight") ? "transformer." : "";
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
      size_t i = 0;
      while (c >= src.pieces[i].column + src.pieces[i].columns)
        ++i;
      const Piece &p = src.pieces[i];
      int64_t local = c - p.column;
      int64_t at = p.transposed ? local * src.rows + r : r * p.columns + local;
      out[run.local + k] = float(readElement(*infos[i], at)) + src.offset;
    }
  return Status::ok();
}

} // namespace

Status loadHuggingFace(const std::string &dir, const ModelConfig &model,
                       ParameterStore &params) {
  Family family;
  std::string config;
  if (Status st = readFamily(dir, family, config); !st)
    return st;
  // The weights' layout follows the family; the plan must compute it.
  const LayerConfig *first = transformerLayer(model, 0);
  bool sandwich = first && first->postNorms;
  if (isGemma(family) != (model.embeddingScale != 1.0) ||
      (family == Family::Gemma2) != sandwich)
    return Status::error(
        "'" + dir + "/config.json' is " +
        (family == Family::Gemma2  ? "a Gemma-2 model"
         : family == Family::Gemma ? "a Gemma model"
                                   : "not a Gemma model") +
        ", but the plan's model " +
        (model.embeddingScale != 1.0 ? "scales its embeddings"
                                     : "does not scale its embeddings") +
        (sandwich ? " and has sandwich norms" : "") +
        ": compile the plan from this config.json");
  TensorDirectory tensors;
  if (Status st = tensors.open(dir); !st)
    return st;
  Naming naming(family, findPrefix(family, tensors), model);
  int64_t layers = countTransformerLayers(model);
  if (tensors.find(naming.getLayerProbe(layers)))
    return Status::error("'" + dir + "' holds more than the model's " +
                         std::to_string(layers) + " layers");
  // Biases the files hold and the plan's layers lack would be dropped
  // without a word (a Qwen2 directory on a plan compiled as Llama).
  if (family != Family::Gpt2 && first)
    for (auto [tensor, has] :
         {std::pair{"self_attn.q_proj.bias", first->hasQkvBias()},
          std::pair{"self_attn.o_proj.bias", first->bias},
          std::pair{"mlp.down_proj.bias", first->bias}}) {
      std::string name = naming.getLayerTensor(0, tensor);
      if (!has && tensors.find(name))
        return Status::error("'" + dir + "' holds " + name +
                             ", a bias the plan's model does not have: "
                             "compile the plan from this config.json");
    }
  std::vector<float> weights;
  if (Status st = params.read(ParameterStore::Tensor::Weights, weights); !st)
    return st;
  for (const ParameterSpec &spec : params.specs()) {
    Source src;
    if (Status st = naming.getSource(spec.name, src); !st)
      return st;
    if (Status st = fillParameter(spec, src, tensors, dir,
                                  weights.data() + params.offset(spec.name));
        !st)
      return st;
  }
  return params.write(ParameterStore::Tensor::Weights, weights);
}

namespace {

/// The first transformer layer, once every other is checked to have its
/// shape: a Hugging Face config says one shape for all layers.
Status getUniformBlock(const ModelConfig &model, const LayerConfig *&block) {
  const LayerConfig *t = transformerLayer(model, 0);
  if (!t)
    return Status::error("model '" + model.name + "' has no transformer layer");
  for (const LayerConfig &l : model.layers)
    if (l.kind == LayerKind::Transformer &&
        (l.heads != t->heads || l.kvHeads != t->kvHeads ||
         l.headDim != t->headDim || l.ffn != t->ffn || l.mlp != t->mlp ||
         l.norm != t->norm || l.bias != t->bias ||
         l.qkvBias != t->qkvBias || l.rotary != t->rotary))
      return Status::error("model '" + model.name +
                           "' has layers of different shapes: no Hugging "
                           "Face config describes it");
  block = t;
  return Status::ok();
}

/// Which Hugging Face family computes a model whose layers all have the
/// block `t`: one of the flags, and the attention window its config says.
struct FamilyShape {
  bool gpt2 = false, llama = false, gemma = false;
  bool mistral = false, gemma2 = false;
  int64_t window = 0;
};

/// The attention windows as a family's config says them: Mistral's on
/// every layer, Gemma-2's on its even layers, each the same size.
Status classifyWindows(const ModelConfig &model, const LayerConfig &t,
                       FamilyShape &shape) {
  std::vector<int64_t> windows;
  for (const LayerConfig &l : model.layers)
    if (l.kind == LayerKind::Transformer)
      windows.push_back(l.window);
  int64_t window = *std::max_element(windows.begin(), windows.end());
  bool everyLayer = true, evenLayers = true;
  for (size_t i = 0; i < windows.size(); ++i) {
    everyLayer = everyLayer && windows[i] == window;
    evenLayers = evenLayers && windows[i] == (i % 2 == 0 ? window : 0);
  }
  shape.gemma2 = shape.gemma && t.postNorms;
  shape.mistral = shape.llama && window > 0;
  shape.window = window;
  if (window > 0 &&
      !(shape.gemma2 ? evenLayers : shape.mistral && everyLayer))
    return Status::error(
        "model '" + model.name + "' has attention windows (layer 0's " +
        std::to_string(t.window) +
        ") that no Hugging Face family's config says: Mistral's are on "
        "every layer, Gemma-2's on its even layers, each the same size");
  if (shape.mistral && (t.qkvBias || t.rotary.isScaled()))
    return Status::error("model '" + model.name +
                         "' has attention windows and " +
                         (t.qkvBias ? "query, key and value biases"
                                    : "Llama 3.1's rotary scaling") +
                         ": no Hugging Face family computes both");
  return Status::ok();
}

Status classifyFamily(const ModelConfig &model, const LayerConfig &t,
                      FamilyShape &shape) {
  const LayerConfig &embedding = model.layers.front();
  const LayerConfig &output = model.layers.back();
  bool scaled = model.embeddingScale != 1.0;
  bool rotary = embedding.positions == 0 && t.isRms() && t.rotary.theta > 0 &&
                output.isRms() && !t.bias;
  shape.gpt2 = embedding.positions > 0 && !t.isRms() &&
               t.mlp == MlpType::Gelu && t.bias && t.rotary.theta == 0 &&
               t.kvHeads == t.heads && t.heads * t.headDim == model.hidden &&
               !scaled && !t.postNorms;
  shape.llama =
      rotary && t.mlp == MlpType::SwiGlu && !scaled && !t.postNorms;
  shape.gemma = rotary && t.mlp == MlpType::GeGlu &&
                float(model.embeddingScale) ==
                    float(std::sqrt(double(model.hidden)));
  if (shape.llama && t.qkvBias && t.heads * t.headDim != model.hidden)
    return Status::error("model '" + model.name +
                         "' has query, key and value biases (Qwen2's block) "
                         "but heads x head_dim differs from the hidden size, "
                         "which Qwen2's config cannot say");
  if (t.qkvBias && !shape.llama)
    return Status::error("model '" + model.name +
                         "' has query, key and value biases (Qwen2's block) "
                         "but is not Llama-shaped: no Hugging Face family "
                         "computes it");
  if (t.rotary.isScaled() && !shape.llama)
    return Status::error("model '" + model.name +
                         "' scales its rotary frequencies (Llama 3.1's "
                         "rope_scaling) but is not Llama-shaped: no Hugging "
                         "Face family computes it");
  if (Status st = classifyWindows(model, t, shape); !st)
    return st;
  if (!shape.gpt2 && !shape.llama && !shape.gemma)
    return Status::error(
        "model '" + model.name +
        "' is neither GPT-2-shaped (learned positions, LayerNorm, GELU, "
        "biases), Llama-shaped (rotary positions, RMSNorm, SwiGLU) nor "
        "Gemma-shaped (Llama's with GeGLU and embeddings scaled by "
        "sqrt(hidden)): no Hugging Face family computes it");
  return Status::ok();
}

json describeGpt2(const ModelConfig &model, const LayerConfig &t) {
  const LayerConfig &embedding = model.layers.front();
  return {{"architectures", {"GPT2LMHeadModel"}},
          {"model_type", "gpt2"},
          {"n_embd", model.hidden},
          {"n_layer", countTransformerLayers(model)},
          {"n_head", t.heads},
          {"n_inner", t.ffn},
          {"n_positions", embedding.positions},
          {"n_ctx", embedding.positions},
          {"vocab_size", embedding.vocab},
          {"activation_function", model.exactGelu ? "gelu" : "gelu_new"},
          {"layer_norm_epsilon", model.normEps},
          {"tie_word_embeddings", model.layers.back().tied}};
}

/// Gemma-2's settings, each as Gemma2Config would default it otherwise;
/// without a window, one as long as the sequence (full attention is the
/// same).
void addGemma2Settings(const ModelConfig &model, const LayerConfig &t,
                       int64_t window, json &c) {
  // An integer where it is one: transformers 5 refuses a float here.
  double scalar = model.attentionScale > 0
                      ? 1.0 / (model.attentionScale * model.attentionScale)
                      : double(t.headDim);
  double whole = std::round(scalar);
  c["query_pre_attn_scalar"] =
      std::fabs(scalar - whole) <= 1e-6 * std::max(1.0, whole)
          ? json(int64_t(whole))
          : json(scalar);
  c["attn_logit_softcapping"] = model.attentionSoftcap > 0
                                    ? json(model.attentionSoftcap)
                                    : json(nullptr);
  c["final_logit_softcapping"] =
      model.finalSoftcap > 0 ? json(model.finalSoftcap) : json(nullptr);
  c["sliding_window"] = window > 0 ? window : model.seqLen;
}

/// The rotary families' config: what Llama's, Qwen2's, Mistral's and
/// Gemma's share, then each one's own.
json describeRotary(const ModelConfig &model, const LayerConfig &t,
                    const FamilyShape &shape) {
  json c = {{"hidden_size", model.hidden},
            {"num_hidden_layers", countTransformerLayers(model)},
            {"num_attention_heads", t.heads},
            {"num_key_value_heads", t.kvHeads},
            {"head_dim", t.headDim},
            {"intermediate_size", t.ffn},
            {"max_position_embeddings", model.seqLen},
            {"vocab_size", model.layers.front().vocab},
            {"rms_norm_eps", model.normEps},
            {"rope_theta", t.rotary.theta},
            {"tie_word_embeddings", model.layers.back().tied}};
  if (shape.llama && t.qkvBias) {
    // Qwen2's block: Llama's with query, key and value biases. Its
    // config has no head_dim (hidden / heads).
    c["architectures"] = {"Qwen2ForCausalLM"};
    c["model_type"] = "qwen2";
    c["hidden_act"] = "silu";
    c["use_sliding_window"] = false;
    c.erase("head_dim");
  } else if (shape.mistral) {
    // Mistral's block is Llama's with every layer's attention windowed.
    c["architectures"] = {"MistralForCausalLM"};
    c["model_type"] = "mistral";
    c["hidden_act"] = "silu";
    c["sliding_window"] = shape.window;
  } else if (shape.llama) {
    c["architectures"] = {"LlamaForCausalLM"};
    c["model_type"] = "llama";
    c["hidden_act"] = "silu";
    c["attention_bias"] = t.bias;
    c["mlp_bias"] = t.bias;
  } else {
    c["architectures"] = {shape.gemma2 ? "Gemma2ForCausalLM"
                                       : "GemmaForCausalLM"};
    c["model_type"] = shape.gemma2 ? "gemma2" : "gemma";
    c["hidden_activation"] = model.exactGelu ? "gelu" : "gelu_pytorch_tanh";
  }
  if (t.rotary.isScaled()) {
    // Llama 3.1's scaling; the context it extends to is what
    // transformers checks the original one against.
    const Rotary &r = t.rotary;
    c["rope_scaling"] = {
        {"rope_type", "llama3"},
        {"factor", r.factor},
        {"low_freq_factor", r.lowFreqFactor},
        {"high_freq_factor", r.highFreqFactor},
        {"original_max_position_embeddings", r.originalPositions}};
    c["max_position_embeddings"] = std::max(
        model.seqLen,
        int64_t(std::llround(double(r.originalPositions) * r.factor)));
  }
  if (shape.gemma2)
    addGemma2Settings(model, t, shape.window, c);
  return c;
}

/// The family and config.json transformers reads for `model`.
Status describeModel(const ModelConfig &model, Family &family,
                     std::string &text) {
  const LayerConfig *t = nullptr;
  if (Status st = getUniformBlock(model, t); !st)
    return st;
  FamilyShape shape;
  if (Status st = classifyFamily(model, *t, shape); !st)
    return st;
  family = shape.gpt2     ? Family::Gpt2
           : shape.gemma2 ? Family::Gemma2
           : shape.gemma  ? Family::Gemma
                          : Family::Llama;
  json c = shape.gpt2 ? describeGpt2(model, *t)
                      : describeRotary(model, *t, shape);
  // nn.Embedding's padding_idx; a null keeps Llama's from defaulting.
  if (!shape.gpt2)
    c["pad_token_id"] = model.paddingToken >= 0 ? json(model.paddingToken)
                                                : json(nullptr);
  c["torch_dtype"] = "float32";
  text = c.dump(2) + "\n";
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
  Family family;
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
  Naming naming(family, family == Family::Gpt2 ? "transformer." : "model.",
                whole);
  std::map<std::string, std::pair<std::vector<int64_t>, std::vector<float>>>
      tensors;
  for (const ParameterSpec &spec : store.specs()) {
    Source src;
    if (Status st = naming.getSource(spec.name, src); !st)
      return st;
    const float *w = weights.data() + store.offset(spec.name);
    for (const Piece &p : src.pieces) {
      auto &[shape, values] = tensors[p.tensor];
      shape = src.shapeOf(p);
      values.resize(src.rows * p.columns);
      for (int64_t r = 0; r < src.rows; ++r)
        for (int64_t c = 0; c < p.columns; ++c)
          values[p.transposed ? c * src.rows + r : r * p.columns + c] =
              w[r * src.columns + p.column + c] - src.offset;
    }
  }
  if (Status st = writeSafetensors(dir + "/model.safetensors", tensors); !st)
    return st;
  return writeFileAtomically(dir + "/config.json", config);
}

} // namespace

Status saveHuggingFace(const std::string &dir, const std::string &sourceDir,
                       const ModelConfig &model, int64_t step,
                       ParameterStore &params, Communicator &comm) {
  std::string gather = dir + "/.sluice-gather";
  if (Status st = saveCheckpoint(gather, step, params, comm, TrainingSettings()); !st)
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
