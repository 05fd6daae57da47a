//===- SluiceEnums.h - The dialect's plain enums ----------------*- C++ -*-===//
//
// PassKind, PlacementKind, RecomputeKind, ... and their string conversions
// (stringifyPassKind, symbolizePassKind), generated from SluiceEnums.td.
// Headers of LLVM's ADT and Support only: the IR-free libraries
// (lib/Schedule) include this, never SluiceDialect.h, and link
// SluiceEnums, which links no MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_SLUICEENUMS_H
#define SLUICE_SLUICEENUMS_H

// FailureOr, for the generated (uninstantiated) FieldParser templates;
// a header of LLVM types only.
#include "mlir/Support/LLVM.h"

#include "llvm/ADT/DenseMapInfo.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <optional>

#include "sluice/SluiceEnums.h.inc"

#endif // SLUICE_SLUICEENUMS_H
