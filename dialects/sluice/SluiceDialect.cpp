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

/// The one check of Llama 3.1's scaling, the runtime's (rt::Rotary).
LogicalResult
RopeLlama3Attr::verify(function_ref<InFlightDiagnostic()> emitError,
                       APFloat factor, APFloat lowFreqFactor,
                       APFloat highFreqFactor,
                       int64_t originalMaxPositions) {
  ::sluice::rt::Rotary rotary{10000.0, factor.convertToDouble(),
                              lowFreqFactor.convertToDouble(),
                              highFreqFactor.convertToDouble(),
                              originalMaxPositions};
  // The runtime's words for the parameters, which are transformers'.
  if (std::string why = rotary.checkScaling(); !why.empty())
    return emitError() << "rope_llama3: " << why;
  return success();
}
