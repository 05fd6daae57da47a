//===- Plan.h - The runtime plan file ---------------------------*- C++ -*-===//
//
// Translation from the program level to the versioned JSON plan that
// sluice-run executes (docs/plan-format.md).
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_TARGET_PLAN_H
#define SLUICE_TARGET_PLAN_H

#include "sluice/PlanFormat/DType.h"
#include "sluice/PlanFormat/ModelConfig.h"
#include "sluice/SluiceOps.h"

#include "llvm/Support/raw_ostream.h"

#include <vector>

namespace mlir::sluice {

/// The runtime's plain data types (namespace ::sluice::rt); the plan
/// version is the plan format's rt::kPlanVersion.
namespace rt = ::sluice::rt;

/// The model section of a plan: the model's layers in chain order. With
/// sharded vocabulary layers (sluice-partition-vocab) the embedding and
/// output layer are rebuilt from the shards and marked `sharded`.
rt::ModelConfig getModelConfig(ModelOp model);

/// The element types a plan of `model` runs in, from its `dtype`: bf16
/// activations with fp32 masters (bf16), or fp32 throughout (f32). Any
/// other dtype is an error at the model: the runtime trains in these two.
FailureOr<rt::Precision> getPrecision(ModelOp model);

/// Per stage, the indices into getModelConfig's layers that it runs: a
/// stage's layer ops in order, plus, with sharded vocabulary layers, the
/// embedding (its positions) on the first stage; the last stage's final
/// norm is the output layer's index.
std::vector<std::vector<int>> getStageLayerIndices(ModelOp model);

/// The token length of each slice the program cuts a microbatch into.
std::vector<int64_t> getSliceLengths(ProgramOp program, ModelOp model);

/// Writes the plan of `program` (whose buffers are planned) to `os`.
/// `fp8Gemms`: the plan's transformer GEMMs take FP8 operands (precision
/// "fp8"; the model's dtype must be bf16, whose storage it keeps).
/// `repeats`: state each device's periodic stretches once, as repeat
/// blocks (plan version 9; sluice/PlanFormat/Repeats.h); false writes
/// every instruction, for a reader or an editor of the file.
LogicalResult exportPlan(ProgramOp program, llvm::raw_ostream &os,
                         bool fp8Gemms = false, bool repeats = true);

} // namespace mlir::sluice

#endif // SLUICE_TARGET_PLAN_H
