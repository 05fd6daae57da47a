//===- Compile.cpp - One compile, from a request to its files -------------===//
//
// A compile runs the registered sluice-pipeline in a PassManager (MLIR's
// pass-manager flags apply, so sluice-opt --sluice-pipeline replays it),
// then writes the plan or IR and prints the summary and prediction.
//
//===----------------------------------------------------------------------===//

#include "sluice/Driver/Compile.h"

#include "Report.h"

#include "sluice/Analysis/ModelSummary.h"
#include "sluice/Import/HFConfig.h"
#include "sluice/PipelineIR/PipelineIR.h"
#include "sluice/SluiceOps.h"
#include "sluice/Target/Export.h"
#include "sluice/Target/Plan.h"

#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Support/Timing.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>

using namespace mlir;
using namespace mlir::sluice;
using namespace mlir::sluice::driver;

namespace {
/// The innermost file location of `loc` (through names and fusions).
Location getFileLoc(Location loc) {
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

void printOneLine(Diagnostic &diag) {
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

/// A pass manager with the MLIR flags applied (--mlir-print-ir-*,
/// --mlir-timing, --mlir-pass-pipeline-crash-reproducer).
LogicalResult configure(PassManager &pm) {
  if (failed(applyPassManagerCLOptions(pm)))
    return failure();
  auto timing = std::make_unique<DefaultTimingManager>();
  applyDefaultTimingManagerCLOptions(*timing);
  if (timing->isEnabled())
    pm.enableTiming(std::move(timing));
  return success();
}

/// What the compile takes from the pipeline's simulation: the report,
/// trace and timeline the request asks for (the pipeline's passes write
/// none), and each device's peak memory (its parameters and optimizer
/// state as the report counts them, plus its peak activations), bytes --
/// the prediction states it, so that schedules are compared by what a
/// device holds, not by microbatches of differently sized stages.
std::function<LogicalResult(ScheduleFiles &)>
consumeForFiles(const ModelSummary &summary, const CompileRequest &request,
                std::vector<double> &peakMemoryBytes) {
  return [&summary, &request, &peakMemoryBytes](ScheduleFiles &files) {
    peakMemoryBytes.clear();
    for (int d = 0; d < files.pipeline.devices; ++d)
      peakMemoryBytes.push_back(
          files.costs.getFixedBytes(d) +
          files.simulation.devices[d].peakActivationBytes);
    if (request.reportPath.empty() && request.tracePath.empty() &&
        request.svgPath.empty())
      return success();
    files.report = request.reportPath;
    files.trace = request.tracePath;
    files.svg = request.svgPath;
    // The schedule report extends the model summary's report.
    files.reportExtras = std::move(*toJSON(summary).getAsObject());
    return writeScheduleFiles(files);
  };
}

/// The runtime plan of the module's one program (planning its buffers if
/// sluice-opt did not), written atomically to -o.
LogicalResult writePlan(ModuleOp module, const CompileRequest &request) {
  // Without --pp: a program compiled before (sluice-opt
  // --sluice-pipeline="... plan-buffers=true"), translated as it is.
  auto programs = llvm::to_vector(module.getOps<ProgramOp>());
  if (programs.size() != 1) {
    fail(request.isScheduling()
             ? "the compile made no program"
             : "--emit plan needs --pp, or a model with its compiled "
               "sluice.program");
    return failure();
  }
  ProgramOp program = programs.front();
  bool planned =
      llvm::all_of(program.getBody().getOps<DeviceOp>(),
                   [](DeviceOp device) { return bool(device.getBuffers()); });
  if (!planned && failed(planBuffers(program)))
    return failure();
  std::string text;
  llvm::raw_string_ostream os(text);
  if (failed(exportPlan(program, os,
                        /*fp8Gemms=*/request.precision == "fp8",
                        /*repeats=*/!request.expandPlan)))
    return failure();
  std::string error;
  if (request.outputPath == "-")
    llvm::outs() << text;
  else if (failed(writeFileAtomically(request.outputPath, text, error)))
    return fail(error), failure();
  return success();
}

/// The module's IR, as sluice-opt prints it (a replay compares the two
/// byte for byte).
LogicalResult writeIR(ModuleOp module, StringRef outputPath) {
  std::string errorMessage;
  auto output = openOutputFile(outputPath, &errorMessage);
  if (!output)
    return fail("cannot write '" + outputPath + "': " + errorMessage),
           failure();
  module.print(output->os());
  output->os() << "\n";
  output->keep();
  return success();
}
} // namespace

OneLineDiagnostics::OneLineDiagnostics(MLIRContext *context)
    : handler(context, [](Diagnostic &diag) {
        printOneLine(diag);
        for (Diagnostic &note : diag.getNotes())
          printOneLine(note);
        return success();
      }) {}

OwningOpRef<ModuleOp> driver::loadModel(StringRef path, MLIRContext *context) {
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

LogicalResult driver::setShape(ModuleOp module, const CompileRequest &request,
                               StringRef dtype) {
  if (request.expertBiasUpdate != 0) {
    // The balancing's speed on every sigmoid router (DeepSeek-V3's), as
    // the layers' `bias_update` says it in the IR and the plan.
    double gamma = request.expertBiasUpdate;
    if (!(gamma > 0) || !std::isfinite(gamma)) {
      fail("--expert-bias-update must be a positive number, got " +
           llvm::formatv("{0}", gamma).str());
      return failure();
    }
    int routers = 0;
    module.walk([&](TransformerLayerOp layer) {
      ::sluice::rt::LayerConfig spec = layer.getSpec();
      if (spec.experts == 0 || spec.router != "sigmoid")
        return;
      spec.biasUpdate = gamma;
      layer.setSpec(spec);
      ++routers;
    });
    if (routers == 0) {
      fail("--expert-bias-update moves the bias of sigmoid routers "
           "(DeepSeek-V3's), and this model has none; a softmax router "
           "balances by its load-balancing loss (aux_loss)");
      return failure();
    }
  }
  PassManager shape(module.getContext());
  if (failed(configure(shape)))
    return failure();
  shape.addPass(createSetMicrobatchShape(
      {request.seqLen, request.microBatch, dtype.str()}));
  return shape.run(module);
}

int driver::compileModel(ModuleOp module, ModelOp model,
                         const CompileRequest &request, StringRef dtype) {
  bool scheduling = request.isScheduling();
  // One compile, on this thread: a deep pipeline's program is hundreds of
  // thousands of ops, and the context's locks (attributes are uniqued for
  // each) and the verifier's thread pool cost more than two cores win
  // back. Restored for a caller that goes on (--search's threads are
  // done by now).
  MLIRContext *context = module.getContext();
  bool threaded = context->isMultithreadingEnabled();
  context->disableMultithreading();
  llvm::scope_exit restore([&] {
    if (threaded)
      context->enableMultithreading();
  });
  if (failed(setShape(module, request, dtype)))
    return 1;
  ModelSummary figures = summarizeModel(model);
  std::vector<double> peakMemoryBytes;
  if (scheduling) {
    PassManager pm(module.getContext());
    if (failed(configure(pm)))
      return 1;
    SluicePipelineOptions options;
    request.fillPipelineOptions(options);
    options.balance = chooseBalance(module, options);
    // The pipeline's sluice-simulate hands its simulation over: simulating
    // (and verifying) a second time for the files was a tenth of a deep
    // pipeline's compile.
    options.consumeSimulation =
        consumeForFiles(figures, request, peakMemoryBytes);
    buildSluicePipeline(pm, options);
    // The IR is verified once, after the pipeline, rather than after each
    // of its passes (sluice-opt keeps the verifier between passes, for
    // work on the passes): each verification walks every instruction.
    pm.enableVerifier(false);
    if (failed(pm.run(module)) || failed(verify(module)))
      return 1;
  }

  EmitKind emit = request.emit;
  bool toStdout = request.outputPath == "-";
  if (emit == EmitKind::Plan) {
    if (failed(writePlan(module, request)))
      return 1;
  } else if (emit != EmitKind::None || (scheduling && !toStdout)) {
    if (failed(writeIR(module, request.outputPath)))
      return 1;
  }

  // Asked for nothing on stdout (at most a --report file): the summary is
  // the most useful answer; with a schedule, the prediction.
  if (request.summary || (emit == EmitKind::None && toStdout && !scheduling))
    printModelSummary(figures, llvm::outs());
  // The chosen slices and the prediction, unless stdout carries the
  // emitted IR or plan: the same lines for -o plan.mlir and -o plan.json.
  bool stdoutTaken = emit != EmitKind::None && toStdout;
  if (scheduling && !stdoutTaken) {
    printSlices(model);
    printPrediction(*module.getOps<ProgramOp>().begin(), request.costs,
                    peakMemoryBytes);
  }
  if (!scheduling && !request.reportPath.empty()) {
    // writeFileAtomically writes a temporary file and renames it: a reader
    // never sees half a report, and an old report survives a failed run.
    std::string error;
    if (failed(writeFileAtomically(
            request.reportPath, llvm::formatv("{0:2}\n", toJSON(figures)).str(),
            error)))
      return fail(error);
    if (!stdoutTaken)
      llvm::outs() << "wrote the report " << request.reportPath << "\n";
  }
  return 0;
}
