//===- ModelSummary.h - Per-layer-kind parameter and FLOP summary -*- C++
//-*-===//
//
// The analysis behind `sluice-compile --summary`: per layer kind, parameters
// and forward FLOPs per token, and how the vocabulary layers compare with
// one transformer layer (Yeung et al., 2024 §1, Figure 2).
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_ANALYSIS_MODELSUMMARY_H
#define SLUICE_ANALYSIS_MODELSUMMARY_H

#include "sluice/SluiceOps.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <string>
#include <vector>

namespace mlir::sluice {

/// `count` consecutive layers of one kind with identical cost. `params` and
/// `flopsPerToken` are those of ONE such layer.
struct LayerGroup {
  std::string kind;
  int64_t count = 0;
  int64_t params = 0;
  double flopsPerToken = 0;
};

struct ModelSummary {
  std::string name;
  int64_t seqLen = 0;
  int64_t microBatch = 0;
  std::string dtype;
  std::vector<LayerGroup> layers;
  /// Unique parameters of the model (a tied table counted once).
  int64_t totalParams = 0;
  /// Those one token uses (less a mixture of experts' unchosen experts).
  int64_t activeParams = 0;
  /// The mixtures of experts' expert maps (every expert of every sparse
  /// layer), and the greatest common divisor of the sparse layers' expert
  /// counts (0: no sparse layer): the expert-parallel sizes the model
  /// takes are its divisors.
  int64_t expertParams = 0, expertsDivisor = 0;
  /// Vocabulary layers relative to the mean transformer layer; empty when
  /// the model has no transformer layer.
  std::optional<double> outputToTransformerParams, outputToTransformerFlops;
  std::optional<double> inputToTransformerParams, inputToTransformerFlops;
};

ModelSummary summarizeModel(ModelOp model);

/// Human-readable table.
void printModelSummary(const ModelSummary &summary, llvm::raw_ostream &os);

/// The `--report` JSON object (schema in docs/sluice-compile.md).
llvm::json::Value toJSON(const ModelSummary &summary);

} // namespace mlir::sluice

#endif // SLUICE_ANALYSIS_MODELSUMMARY_H
