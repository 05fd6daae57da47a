//===- ModelConfig.h - The model a plan trains ------------------*- C++ -*-===//
//
// The model section of a plan file, as plain data. Header-only and free of
// MLIR: the runtime reads it from the plan, and the compiler fills it when
// it writes the plan.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_MODELCONFIG_H
#define SLUICE_RUNTIME_MODELCONFIG_H

#include <cstdint>
#include <string>
#include <vector>

namespace sluice::rt {

enum class LayerKind { Embedding, Transformer, Output };

struct LayerConfig {
  LayerKind kind = LayerKind::Transformer;
  // Embedding: token table rows; learned position rows (0: none).
  // Output: LM head rows.
  int64_t vocab = 0;
  int64_t positions = 0;
  // Transformer.
  int64_t heads = 0;
  int64_t kvHeads = 0;
  int64_t headDim = 0;
  int64_t ffn = 0;
  bool bias = false;
  // Rotary positions' frequency base; 0: none.
  double ropeTheta = 0;
  // "layernorm" or "rmsnorm" (transformer and output); "gelu", "swiglu" or
  // "geglu" (transformer).
  std::string norm = "layernorm";
  std::string mlp = "gelu";
  /// A gated feed-forward block (SwiGLU, GeGLU): a third, gate matrix.
  bool isGated() const { return mlp == "swiglu" || mlp == "geglu"; }
  // Output: the LM head is the embedding table.
  bool tied = false;
  // Embedding and output: the layer is sharded along the vocabulary over
  // every device (Vocabulary Parallelism). Its stage then runs only what
  // is not sharded -- the embedding's positions, the output layer's final
  // norm -- and the shards run as their own passes.
  bool sharded = false;
};

struct ModelConfig {
  std::string name;
  int64_t seqLen = 0;
  int64_t microBatch = 1;
  int64_t hidden = 0;
  /// Embedding, transformer layers, output layer, in chain order.
  std::vector<LayerConfig> layers;
};

} // namespace sluice::rt

#endif // SLUICE_RUNTIME_MODELCONFIG_H
