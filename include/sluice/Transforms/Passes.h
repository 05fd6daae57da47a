//===- Passes.h - Sluice compiler passes ------------------------*- C++ -*-===//

#ifndef SLUICE_TRANSFORMS_PASSES_H
#define SLUICE_TRANSFORMS_PASSES_H

#include "sluice/SluiceOps.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

#include <memory>

namespace mlir::sluice {

#define GEN_PASS_DECL
#include "sluice/Transforms/Passes.h.inc"

/// Sets `seq_len` and `micro_batch` of `model` (zero keeps a value) and
/// retypes every activation to match. Emits an error on the model and fails
/// for a negative size.
LogicalResult setMicrobatchShape(ModelOp model, int64_t seqLen,
                                 int64_t microBatch);

#define GEN_PASS_REGISTRATION
#include "sluice/Transforms/Passes.h.inc"

} // namespace mlir::sluice

#endif // SLUICE_TRANSFORMS_PASSES_H
