//===- Compile.h - sluice-compile's session, as a library -------*- C++ -*-===//
//
// What sluice-compile does with its flags, apart from the flags: the tool
// parses its command line into a CompileRequest (plain values, no cl
// globals) and hands it here. A --search winner is applied to the request
// (CompileRequest::apply) and compiled by the same compileModel a user's
// flags reach, so the plan the search prints is the plan it writes.
//
// Errors are printed as sluice-compile prints them (`sluice-compile:
// error: ...`, one line) and the functions return failure or 1.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_DRIVER_COMPILE_H
#define SLUICE_DRIVER_COMPILE_H

#include "sluice/PlanFormat/TrainingState.h"
#include "sluice/Schedule/Schedules.h"
#include "sluice/Transforms/Passes.h"
#include "sluice/Transforms/Pipeline.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/OwningOpRef.h"

#include <optional>
#include <string>

namespace mlir::sluice {
class ModelOp;
struct PlanChoice;

namespace driver {

/// What -o and --emit write.
enum class EmitKind { None, Model, Program, Plan };

/// sluice-compile's flags as values. `...Given` records a flag the user
/// wrote (some defaults depend on whether a flag was given at all).
struct CompileRequest {
  std::string modelPath;
  int64_t seqLen = 0, microBatch = 0;
  /// --precision: bf16, fp8, fp32 or empty (the model's dtype).
  std::string precision;
  EmitKind emit = EmitKind::None;
  std::string outputPath = "-";
  std::string tracePath, svgPath, reportPath;
  bool summary = false, printPipeline = false;
  /// --expand-plan: a plan without repeat blocks (version 9's).
  bool expandPlan = false;

  // The pipeline (sluice-pipeline's options of the same names).
  int64_t pp = 0, dp = 1, zero = 0, tp = 1;
  /// --cp: context-parallel ranks each replica's sequences split over.
  int64_t cp = 1;
  /// --reshard: when ZeRO-3 drops the gathered weights.
  ::sluice::rt::Reshard reshard = ::sluice::rt::Reshard::EveryPass;
  bool reshardGiven = false;
  /// --ep: expert-parallel members of the dp replicas (1: none); and
  /// --expert-capacity (0: dropless).
  int64_t ep = 1;
  double expertCapacity = 0;
  /// --expert-bias-update: every sigmoid router's bias_update (0: none).
  double expertBiasUpdate = 0;
  bool sequenceParallel = false;
  /// --overlap-groups: dualpipev's pairs (false: its order unpaired).
  bool overlapGroups = true;
  int64_t microbatches = 0;
  bool microbatchesGiven = false;
  std::string scheduleName = "1f1b";
  int64_t virtualChunks = 0;
  std::string slices = "1";
  bool slicesGiven = false;
  SlicingMethod slicing = SlicingMethod::Uniform;
  double slicingEpsilon = 1e-4;
  int64_t slicingGranularity = 0;
  sched::Balance balance = sched::Balance::Auto;
  bool balanceGiven = false;
  VocabMode vocab = VocabMode::Baseline;
  bool vocabGiven = false;
  RecomputeKind recompute = RecomputeKind::none;
  std::string costs = "unit";

  /// Whether the request schedules a pipeline (--pp given).
  bool isScheduling() const { return pp != 0; }
  /// Sets the pipeline to a searched plan's choice, as its flags would.
  void apply(const PlanChoice &choice);
  /// The request as sluice-pipeline's options (the shape flags aside).
  void fillPipelineOptions(SluicePipelineOptions &options) const;
};

/// --search's own flags.
struct SearchRequest {
  int64_t gpus = 0;
  double gpuMemory = 0;
  /// Percent of the memory per GPU left free (the CUDA context, NCCL's
  /// buffers, the allocator's fragmentation): plans must fit in the rest.
  double memoryHeadroom = 5;
  int64_t globalBatch = 0;
  std::optional<int64_t> globalTokens;
  bool globalBatchGiven = false;
  int64_t top = 10;
};

/// The cluster flags that override an analytic --costs GPU's node
/// (`h100:gpus-per-node=4,...`); each set only where given.
struct ClusterOverrides {
  std::optional<double> gpusPerNode, nodeBandwidth, networkBandwidth,
      nodeLatency, networkLatency;
};

/// Prints `message` as sluice-compile's error; returns 1.
int fail(const llvm::Twine &message);

/// Folds the cluster overrides into request.costs; false (said) where
/// --costs names no GPU they could describe.
bool applyClusterOverrides(CompileRequest &request,
                           const ClusterOverrides &overrides);

/// The activation element type --precision asks for ("bf16", "f32", or ""
/// for the model's), or nullopt after an error.
std::optional<std::string> getDtype(const CompileRequest &request);

/// Checks the flags against each other (and, scheduling, against the
/// schedule) before any IR changes; false after an error.
bool checkRequest(const CompileRequest &request);

/// --print-pipeline: the sluice-opt command that replays the compile.
void printReplay(const CompileRequest &request, llvm::StringRef dtype);

/// Reads MODEL as a config.json or as MLIR, by extension.
OwningOpRef<ModuleOp> loadModel(llvm::StringRef path, MLIRContext *context);

/// Runs the shape pass alone (--seq-len, --micro-batch, --precision's
/// dtype): the summary describes the model as given, before partitioning.
LogicalResult setShape(ModuleOp module, const CompileRequest &request,
                       llvm::StringRef dtype);

/// The passes after parsing: the shape, then with --pp the pipeline; the
/// plan or IR written; the summary, slices and prediction printed. 0 on
/// success, 1 after an error.
int compileModel(ModuleOp module, ModelOp model, const CompileRequest &request,
                 llvm::StringRef dtype);

/// --search: the ranked table, then the winner compiled as its flags would
/// compile it.
int searchAndCompile(ModuleOp module, ModelOp model, CompileRequest &request,
                     const SearchRequest &search, llvm::StringRef dtype);

/// Prints each diagnostic on one line, `location: severity: message`:
/// users grep and parse these, so they never span lines.
class OneLineDiagnostics {
public:
  explicit OneLineDiagnostics(MLIRContext *context);

private:
  ScopedDiagnosticHandler handler;
};

} // namespace driver
} // namespace mlir::sluice

#endif // SLUICE_DRIVER_COMPILE_H
