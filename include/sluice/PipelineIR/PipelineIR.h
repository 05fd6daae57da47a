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
/// Repeat blocks are run out: the program lists every run, and the op
/// behind an instruction of a block is its body's.
struct ProgramView {
  sched::Program program;
  std::vector<std::vector<Operation *>> ops;
  std::vector<DeviceOp> devices;
  /// A device's `sluice.repeat`: its instructions [begin, begin + length x
  /// count) are the body (ops [begin, begin + length)) run `count` times.
  struct Repeat {
    RepeatOp op;
    size_t begin = 0, length = 0;
    int64_t count = 0;
  };
  /// Per device, its repeat blocks in order.
  std::vector<std::vector<Repeat>> repeats;

  /// The op behind an instruction reference (the device op for index -1).
  Operation *getOp(int device, int index) const {
    if (index >= 0)
      return ops[device][index];
    DeviceOp op = devices[device];
    return op.getOperation();
  }
};

/// The most instructions readProgram runs a program's repeat blocks out
/// to, all devices together: far past any real schedule's (64 devices x
/// 2048 microbatches of a V shape hold 2 million), and small enough that
/// a hostile file cannot make the reader allocate without bound.
constexpr size_t kMaxReadInstructions = size_t(1) << 24;

/// Reads `program` (scheduled for `model`), its repeat blocks run out;
/// emits an error at any instruction naming a stage the model does not
/// have, or where the blocks run out past kMaxReadInstructions.
FailureOr<ProgramView> readProgram(ProgramOp program, ModelOp model);

/// Creates `sluice.program @name` for `model` right after it. With
/// `repeats`, each device's periodic stretches (sluice/PlanFormat/Repeats.h
/// finds them, at least 8 instructions saved) are written once, as
/// `sluice.repeat` blocks.
ProgramOp writeProgram(ModelOp model, llvm::StringRef name,
                       ScheduleKind schedule, const sched::Pipeline &pipeline,
                       const sched::Program &program, bool repeats = false);

/// Writes run `run` of `repeat`'s body at `builder`'s insertion point as
/// plain instructions: microbatches stepped, slots mapped `run` times.
/// Returns the new ops, in the body's order.
SmallVector<Operation *> cloneRun(OpBuilder &builder, RepeatOp repeat,
                                  int64_t run);

/// Replaces `repeat` by its runs written out.
void expandRepeat(RepeatOp repeat);

/// Moves the last run of `repeat` out of it, written out right after it
/// (the whole block where two runs are left).
void peelLastRun(RepeatOp repeat);

} // namespace mlir::sluice

#endif // SLUICE_PIPELINEIR_PIPELINEIR_H
