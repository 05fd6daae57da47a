//===- FuzzFiles.h - What the file-reading fuzz targets share ---*- C++ -*-===//
//
// The runtime's loaders read paths, so the targets write each input to a
// file in a private directory first; the checkpoint and Hugging Face
// targets also need a model and its parameters on the CPU to load into.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_TEST_FUZZ_FUZZFILES_H
#define SLUICE_TEST_FUZZ_FUZZFILES_H

#include "CpuDevice.h"
#include "Parameters.h"

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>

namespace sluice::fuzz {

/// A directory of this process's, made once.
inline const std::string &getWorkDir() {
  static const std::string dir = [] {
    char pattern[] = "/tmp/sluice-fuzz.XXXXXX";
    const char *made = mkdtemp(pattern);
    return std::string(made ? made : "/tmp");
  }();
  return dir;
}

/// Writes `size` bytes to `name` in the work directory; its path.
inline std::string writeInput(const std::string &name, const uint8_t *data,
                              size_t size) {
  std::string path = getWorkDir() + "/" + name;
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char *>(data), std::streamsize(size));
  return path;
}

/// A Llama-shaped model of two tiny layers, as a plan would hold it.
inline rt::ModelConfig getTinyLlama() {
  rt::ModelConfig model;
  model.name = "fuzz";
  model.seqLen = 8;
  model.microBatch = 1;
  model.hidden = 16;
  rt::LayerConfig embedding, layer, output;
  embedding.kind = rt::LayerKind::Embedding;
  embedding.vocab = 20;
  layer.kind = rt::LayerKind::Transformer;
  layer.heads = 2;
  layer.kvHeads = 1;
  layer.headDim = 8;
  layer.ffn = 32;
  layer.norm = rt::NormType::RmsNorm;
  layer.mlp = rt::MlpType::SwiGlu;
  layer.rotary.theta = 10000.0;
  output.kind = rt::LayerKind::Output;
  output.vocab = 20;
  output.norm = rt::NormType::RmsNorm;
  output.tied = true;
  model.layers = {embedding, layer, layer, output};
  return model;
}

/// The model's parameters, allocated on the CPU (once per process).
inline rt::ParameterStore &getTinyParameters() {
  static rt::CpuDevice device;
  static std::unique_ptr<rt::ParameterStore> store = [] {
    auto params = std::make_unique<rt::ParameterStore>();
    rt::ModelConfig model = getTinyLlama();
    for (size_t layer = 0; layer < model.layers.size(); ++layer)
      for (rt::ParameterSpec &spec :
           rt::getLayerParameters(model, int(layer)))
        params->add(spec);
    if (!params->allocate(device, rt::Precision::fp32(), 1))
      std::abort();
    return params;
  }();
  return *store;
}

} // namespace sluice::fuzz

#endif // SLUICE_TEST_FUZZ_FUZZFILES_H
