//===- HuggingFace.h - Hugging Face model directories -----------*- C++ -*-===//
//
// Reads and writes the weights of a Hugging Face model directory --
// config.json and safetensors files, one or sharded with an index -- for
// the families whose computation the runtime matches exactly (GPT-2,
// Llama, Mistral; docs/import.md). Loading maps every parameter of a
// device, element by element in the whole tensor's numbering, onto the
// Hugging Face tensors it comes from (transposed where transformers'
// nn.Linear stores [out, in], and the query, key and value maps side by
// side in Sluice's fused QKV), reading the files through a memory map:
// each rank touches only the bytes of its own tensors and rows.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_HUGGINGFACE_H
#define SLUICE_RUNTIME_HUGGINGFACE_H

#include "Checkpoint.h"
#include "Parameters.h"
#include "Status.h"

#include <string>

namespace sluice::rt {

class Communicator;

/// Replaces the weights of `params` with those of the model directory
/// `dir`. The error names the directory, the tensor and what is wrong
/// (a missing tensor, a shape that is not `model`'s).
Status loadHuggingFace(const std::string &dir, const ModelConfig &model,
                       ParameterStore &params);

/// Writes `model`'s weights as a Hugging Face directory `dir`: config.json
/// (`sourceDir`'s, when the run loaded one, else one made from the model)
/// and model.safetensors in fp32. The ranks of one replica call it
/// together; their parameters are gathered through a checkpoint in
/// `dir`/.sluice-gather, which rank 0 reads whole (the whole model in its
/// host memory) and then removes.
Status saveHuggingFace(const std::string &dir, const std::string &sourceDir,
                       const ModelConfig &model, int64_t step,
                       ParameterStore &params, Communicator &comm,
                       const WrittenParameters &writes = nullptr);

} // namespace sluice::rt

#endif // SLUICE_RUNTIME_HUGGINGFACE_H
