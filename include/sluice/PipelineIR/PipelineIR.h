//===- PipelineIR.h - Between the program level and sched:: -----*- C++ -*-===//
//
// The schedule generators, verifier and simulator work on IR-free data
// (sluice/Schedule/Pipeline.h). These helpers read a partitioned model and
// a sluice.program into that form -- keeping the ops, so diagnostics point
// at them -- and write a generated program back as IR. Its own library
// (SluicePipelineIR), below both lib/Transforms and lib/Target, which
// both read programs: neither depends on the other through it.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_PIPELINEIR_PIPELINEIR_H
#define SLUICE_PIPELINEIR_PIPELINEIR_H

#include "sluice/Schedule/Pipeline.h"
#include "sluice/SluiceOps.h"

#include "mlir/IR/BuiltinOps.h"

namespace mlir::sluice {

/// The single sluice.model of `module`; emits an error otherwise.
FailureOr<ModelOp> getSingleModel(ModuleOp module);

/// The pipeline a partitioned, pass-split model describes, for
/// `microbatches` microbatches of `slices` slices, with its vocabulary
/// shards if it has them. Emits an error on the model if it has no stages
/// or its stages (or shards) have no passes.
FailureOr<sched::Pipeline> getPipeline(ModelOp model, int64_t microbatches,
                                       int64_t slices);

/// The symbols of a model's vocabulary shards ("" where it has none).
struct ShardNames {
  StringRef input, output;
};
ShardNames getShardNames(ModelOp model);

/// The partitioned model `program` was scheduled for.
FailureOr<ModelOp> getProgramModel(ProgramOp program);

/// A program read back from IR, with the op behind every instruction.
struct ProgramView {
  sched::Program program;
  std::vector<std::vector<Operation *>> ops;
  std::vector<DeviceOp> devices;

  /// The op behind an instruction reference (the device op for index -1).
  Operation *getOp(int device, int index) const {
    if (index >= 0)
      return ops[device][index];
    DeviceOp op = devices[device];
    return op.getOperation();
  }
};

/// Reads `program` (scheduled for `model`); emits an error at any
/// instruction naming a stage the model does not have.
FailureOr<ProgramView> readProgram(ProgramOp program, ModelOp model);

/// Creates `sluice.program @name` for `model` right after it.
ProgramOp writeProgram(ModelOp model, llvm::StringRef name,
                       ScheduleKind schedule, const sched::Pipeline &pipeline,
                       const sched::Program &program);

} // namespace mlir::sluice

#endif // SLUICE_PIPELINEIR_PIPELINEIR_H
