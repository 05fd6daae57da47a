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

// LLVM's allocators poison and unpoison their slabs by hand when the code
// that inlines them is built with ASan; libMLIR.so is not, so memory this
// target's inlined allocator code poisoned is handed out by libMLIR's
// uninstrumented copy and every later write to it is reported. Manual
// poisoning is off; ASan still guards every heap block (malloc), stack
// and global.
extern "C" const char *__asan_default_options() {
  return "allow_user_poisoning=0";
}

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
