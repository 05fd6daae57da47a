//===- HFConfig.h - Import a Hugging Face config.json -----------*- C++ -*-===//
//
// Turns a Hugging Face style `config.json` of any family the build
// registered (lib/Families/<family>/: Llama, Mistral, Qwen2, Gemma and
// Gemma-2, GPT-2) into a model-level `sluice.model`. Every key the
// family reads is validated; a missing or nonsensical key is an error that
// names it. Where Hugging Face itself defines a default for an absent key,
// the importer applies it and says so with a remark (docs/import.md lists
// them all).
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_IMPORT_HFCONFIG_H
#define SLUICE_IMPORT_HFCONFIG_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/StringRef.h"

namespace mlir::sluice {

/// Parses `json` (the contents of the file `filename`, used for locations
/// and for naming the model) and builds a module holding one `sluice.model`.
/// The sequence length is `max_position_embeddings` and the micro-batch 1;
/// callers override them afterwards. Errors are emitted as diagnostics on
/// `context` and yield a null module.
OwningOpRef<ModuleOp> importHFConfig(llvm::StringRef json,
                                     llvm::StringRef filename,
                                     MLIRContext *context);

} // namespace mlir::sluice

#endif // SLUICE_IMPORT_HFCONFIG_H
