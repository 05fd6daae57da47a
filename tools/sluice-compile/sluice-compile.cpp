//===- sluice-compile.cpp - The user's driver -----------------------------===//
//
// sluice-compile MODEL [--seq-len S] [--micro-batch B] [--emit model]
//                      [--summary] [--report FILE] [-o FILE]
//
// MODEL is a model-level .mlir file or a Hugging Face config.json. The
// driver's flags are documented in docs/sluice-compile.md.
//
//===----------------------------------------------------------------------===//

#include "sluice/Analysis/ModelSummary.h"
#include "sluice/Import/HFConfig.h"
#include "sluice/SluiceOps.h"
#include "sluice/Transforms/Passes.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::sluice;
namespace cl = llvm::cl;

namespace {
enum class EmitKind { None, Model };

cl::OptionCategory category("sluice-compile options");

cl::opt<std::string> modelPath(cl::Positional,
                               cl::desc("<model.mlir | config.json>"),
                               cl::Required, cl::cat(category));
cl::opt<int64_t> seqLen("seq-len", cl::desc("Override the sequence length"),
                        cl::init(0), cl::value_desc("S"), cl::cat(category));
cl::opt<int64_t> microBatch("micro-batch",
                            cl::desc("Override the micro-batch size"),
                            cl::init(0), cl::value_desc("B"),
                            cl::cat(category));
cl::opt<EmitKind> emit("emit", cl::desc("IR to print"),
                       cl::init(EmitKind::None),
                       cl::values(clEnumValN(EmitKind::Model, "model",
                                             "the model-level module")),
                       cl::cat(category));
cl::opt<bool> summary("summary",
                      cl::desc("Print parameters and FLOPs per layer kind"),
                      cl::cat(category));
cl::opt<std::string> reportPath("report",
                                cl::desc("Write the figures as JSON to FILE"),
                                cl::value_desc("FILE"), cl::cat(category));
cl::opt<std::string> outputPath("o", cl::desc("Output file for --emit"),
                                cl::value_desc("FILE"), cl::init("-"),
                                cl::cat(category));

/// Prints each diagnostic on one line, `location: severity: message`: users
/// grep and parse these, so they never span lines.
class OneLineDiagnostics {
public:
  explicit OneLineDiagnostics(MLIRContext *context)
      : handler(context, [](Diagnostic &diag) {
          print(diag);
          for (Diagnostic &note : diag.getNotes())
            print(note);
          return success();
        }) {}

private:
  static void print(Diagnostic &diag) {
    llvm::raw_ostream &os = llvm::errs();
    if (auto loc = dyn_cast<FileLineColLoc>(getFileLoc(diag.getLocation())))
      os << loc.getFilename().getValue() << ":" << loc.getLine() << ":"
         << loc.getColumn() << ": ";
    else
      os << "sluice-compile: ";
    switch (diag.getSeverity()) {
    case DiagnosticSeverity::Error:
      os << "error: ";
      break;
    case DiagnosticSeverity::Warning:
      os << "warning: ";
      break;
    case DiagnosticSeverity::Note:
      os << "note: ";
      break;
    case DiagnosticSeverity::Remark:
      os << "remark: ";
      break;
    }
    std::string message = diag.str();
    std::replace(message.begin(), message.end(), '\n', ' ');
    os << message << "\n";
  }

  /// The innermost file location of `loc` (through names and fusions).
  static Location getFileLoc(Location loc) {
    if (auto name = dyn_cast<NameLoc>(loc))
      return getFileLoc(name.getChildLoc());
    if (auto callSite = dyn_cast<CallSiteLoc>(loc))
      return getFileLoc(callSite.getCallee());
    if (auto fused = dyn_cast<FusedLoc>(loc))
      for (Location inner : fused.getLocations())
        if (isa<FileLineColLoc>(getFileLoc(inner)))
          return getFileLoc(inner);
    return loc;
  }

  ScopedDiagnosticHandler handler;
};

int fail(const llvm::Twine &message) {
  llvm::errs() << "sluice-compile: error: " << message << "\n";
  return 1;
}

/// Reads MODEL as a config.json or as MLIR, by extension.
OwningOpRef<ModuleOp> loadModel(StringRef path, MLIRContext *context) {
  std::string errorMessage;
  std::unique_ptr<llvm::MemoryBuffer> buffer =
      openInputFile(path, &errorMessage);
  if (!buffer) {
    fail(errorMessage);
    return nullptr;
  }
  if (llvm::sys::path::extension(path) == ".json")
    return importHFConfig(buffer->getBuffer(), path, context);

  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(buffer), llvm::SMLoc());
  return parseSourceFile<ModuleOp>(sourceMgr, context);
}
} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM initLLVM(argc, argv);
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(
      argc, argv,
      "sluice-compile: compile a transformer model for pipeline-parallel "
      "training\n");

  MLIRContext context;
  context.loadDialect<SluiceDialect>();
  // Users read the location and message; a dump of the op in generic form
  // would only bury them.
  context.printOpOnDiagnostic(false);
  OneLineDiagnostics diagnostics(&context);

  OwningOpRef<ModuleOp> module = loadModel(modelPath, &context);
  if (!module)
    return 1;
  auto models = llvm::to_vector(module->getOps<ModelOp>());
  if (models.size() != 1)
    return fail("'" + modelPath +
                "' must hold exactly one sluice.model, found " +
                llvm::Twine(models.size()));
  ModelOp model = models.front();

  if (seqLen < 0 || microBatch < 0)
    return fail(seqLen < 0 ? "--seq-len must be positive, got " +
                                 llvm::Twine(int64_t(seqLen))
                           : "--micro-batch must be positive, got " +
                                 llvm::Twine(int64_t(microBatch)));
  PassManager pm(&context);
  pm.addPass(createSetMicrobatchShape({seqLen, microBatch}));
  if (failed(pm.run(*module)))
    return 1;

  bool wantSummary = summary || !reportPath.empty() || emit == EmitKind::None;
  if (emit == EmitKind::Model) {
    std::string errorMessage;
    auto output = openOutputFile(outputPath, &errorMessage);
    if (!output)
      return fail("cannot write '" + outputPath + "': " + errorMessage);
    module->print(output->os());
    output->keep();
  }
  if (!wantSummary)
    return 0;

  ModelSummary figures = summarizeModel(model);
  // Asked for nothing at all: the summary is the most useful answer.
  if (summary || (emit == EmitKind::None && reportPath.empty()))
    printModelSummary(figures, llvm::outs());
  if (!reportPath.empty()) {
    // writeToOutput writes a temporary file and renames it: a reader never
    // sees half a report, and an old report survives a failed run.
    if (llvm::Error error =
            llvm::writeToOutput(reportPath, [&](llvm::raw_ostream &os) {
              os << llvm::formatv("{0:2}", toJSON(figures)) << "\n";
              return llvm::Error::success();
            }))
      return fail("cannot write '" + reportPath +
                  "': " + llvm::toString(std::move(error)));
  }
  return 0;
}
