//===- FuzzConfigImport.cpp - libFuzzer target: HF config import ----------===//
//
// Any bytes as a Hugging Face config.json: the importer must return a
// verified module or a diagnostic, never crash (issue 13). Diagnostics are
// swallowed; a crash, an ASan or a UBSan report is the finding.
//
//===----------------------------------------------------------------------===//

#include "sluice/Import/HFConfig.h"
#include "sluice/SluiceDialect.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  mlir::MLIRContext context;
  context.loadDialect<mlir::sluice::SluiceDialect>();
  mlir::ScopedDiagnosticHandler quiet(
      &context, [](mlir::Diagnostic &) { return mlir::success(); });
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::sluice::importHFConfig(text, "config.json", &context);
  // What the importer returns must verify: sluice-compile goes on with it.
  if (module && mlir::failed(mlir::verify(*module)))
    __builtin_trap();
  return 0;
}
