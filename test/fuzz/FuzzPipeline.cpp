//===- FuzzPipeline.cpp - libFuzzer target: parse, verify, passes ---------===//
//
// Any bytes as sluice IR: what parses and verifies goes through one of four
// pass pipelines (the first byte picks it), which must end in a result or
// a diagnostic, never a crash (issue 13: a verified `reduce` once made
// --sluice-reorder-softmax-barriers segfault). A pipeline that succeeds
// must leave verified IR, and a program with planned buffers must export.
//
//===----------------------------------------------------------------------===//

#include "sluice/SluiceDialect.h"
#include "sluice/SluiceOps.h"
#include "sluice/Target/Plan.h"
#include "sluice/Transforms/Passes.h"
#include "sluice/Transforms/Pipeline.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <cstddef>
#include <cstdint>

using namespace mlir;

namespace {
/// The pipelines, in sluice-opt's textual form: the whole compile, the
/// vocabulary rewrite, token slicing, and the program-level passes.
constexpr const char *kPipelines[] = {
    "sluice-pipeline{pp=2 microbatches=12 schedule=zb-h1 vocab=vocab-2 "
    "plan-buffers=true repeats=true}",
    "sluice-partition-stages{pp=2},sluice-partition-vocab{mode=vocab},"
    "sluice-reorder-softmax-barriers{algorithm=2},sluice-split-passes",
    "sluice-partition-stages{pp=2},sluice-slice-tokens{slices=2 "
    "method=seq1f1b},sluice-split-passes,sluice-schedule{schedule=seq1f1b "
    "microbatches=2}",
    "sluice-verify-schedule,sluice-simulate,sluice-plan-buffers",
};
constexpr size_t kNumPipelines = sizeof(kPipelines) / sizeof(*kPipelines);

struct Registered {
  Registered() {
    mlir::sluice::registerSluicePasses();
    mlir::sluice::registerSluicePipeline();
  }
};
} // namespace

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
  static Registered registered;
  if (size == 0)
    return 0;
  const char *pipeline = kPipelines[data[0] % kNumPipelines];
  llvm::StringRef text(reinterpret_cast<const char *>(data + 1), size - 1);

  DialectRegistry registry;
  registry.insert<mlir::sluice::SluiceDialect>();
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  ScopedDiagnosticHandler quiet(&context,
                                [](Diagnostic &) { return success(); });
  // As the tools read files: a null-terminated copy, which MLIR's lexer
  // relies on (it looks one past the end).
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(text, "fuzz.mlir"), llvm::SMLoc());
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, &context);
  if (!module || failed(verify(*module)))
    return 0;
  PassManager pm(&context);
  if (failed(parsePassPipeline(pipeline, pm)))
    __builtin_trap(); // the pipelines above are well-formed
  if (failed(pm.run(*module)))
    return 0;
  if (failed(verify(*module)))
    __builtin_trap();
  std::string plan;
  llvm::raw_string_ostream os(plan);
  for (auto program : module->getOps<mlir::sluice::ProgramOp>()) {
    bool planned = true;
    for (auto device : program.getBody().getOps<mlir::sluice::DeviceOp>())
      planned &= device->hasAttr("buffers");
    if (planned)
      (void)mlir::sluice::exportPlan(program, os);
  }
  return 0;
}
