//===- SluiceDialect.h - Sluice dialect -------------------------*- C++ -*-===//
//
// The `sluice` dialect and its attributes. Include SluiceOps.h for the ops.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_SLUICEDIALECT_H
#define SLUICE_SLUICEDIALECT_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Dialect.h"
#include "sluice/SluiceEnums.h"

#include "sluice/SluiceDialect.h.inc"

#define GET_ATTRDEF_CLASSES
#include "sluice/SluiceAttrs.h.inc"

#endif // SLUICE_SLUICEDIALECT_H
