//===- SluiceDialect.cpp - Sluice dialect registration --------------------===//

#include "sluice/SluiceDialect.h"
#include "sluice/SluiceOps.h"

#include "sluice/PlanFormat/ModelConfig.h"

#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::sluice;

#include "sluice/SluiceDialect.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "sluice/SluiceAttrs.cpp.inc"

void SluiceDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "sluice/SluiceOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "sluice/SluiceAttrs.cpp.inc"
      >();
}

