//===- SluiceOps.h - Sluice operations --------------------------*- C++ -*-===//

#ifndef SLUICE_SLUICEOPS_H
#define SLUICE_SLUICEOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "sluice/SluiceDialect.h"

#define GET_OP_CLASSES
#include "sluice/SluiceOps.h.inc"

namespace mlir::sluice {
/// The pipeline stages of `model` in chain order; empty at the model level.
SmallVector<StageOp> getStages(ModelOp model);
} // namespace mlir::sluice

#endif // SLUICE_SLUICEOPS_H
