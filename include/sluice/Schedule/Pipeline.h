//===- Pipeline.h - Pipeline problems and per-device programs ---*- C++ -*-===//
//
// The data the schedule generators, the verifier and the simulator share,
// free of IR: a pipeline (stages placed on devices, microbatches, token
// slices), units of work, and per-device instruction lists. The passes
// translate between these and the `sluice` program level.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_SCHEDULE_PIPELINE_H
#define SLUICE_SCHEDULE_PIPELINE_H

#include "sluice/SluiceDialect.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mlir::sluice::sched {

/// Where one pipeline stage runs: its device and which of the device's
/// chunks it is.
struct StagePlacement {
  int device = 0;
  int chunk = 0;
};

/// A training step to schedule: stages in chain order (the activation flows
/// from stage i to stage i + 1), each microbatch cut into token slices.
struct Pipeline {
  int devices = 1;
  int chunks = 1;
  int microbatches = 1;
  int slices = 1;
  /// B and W as separate passes (zero-bubble), or one BW pass.
  bool splitBackward = false;
  std::vector<StagePlacement> stages;

  int getNumStages() const { return static_cast<int>(stages.size()); }
  int getLastStage() const { return getNumStages() - 1; }
  /// The pass that carries the input gradient: B when split, else BW.
  PassKind getBackwardKind() const {
    return splitBackward ? PassKind::B : PassKind::BW;
  }
  int getDevice(int stage) const { return stages[stage].device; }
};

/// One pass of one stage for one microbatch slice.
struct Work {
  PassKind kind = PassKind::F;
  int32_t stage = 0;
  int32_t microbatch = 0;
  int32_t slice = 0;

  bool operator==(const Work &other) const {
    return kind == other.kind && stage == other.stage &&
           microbatch == other.microbatch && slice == other.slice;
  }
  bool operator!=(const Work &other) const { return !(*this == other); }
};

/// "F @3 mb 5 slice 0": how work is named in diagnostics and traces.
std::string toString(const Work &work);

/// Numbers every possible work unit of a pipeline densely, so that tables
/// keyed by work are vectors rather than hash maps (a 32-device, 128-
/// microbatch plan has hundreds of thousands of units).
class WorkIndex {
public:
  explicit WorkIndex(const Pipeline &pipeline)
      : stages(pipeline.getNumStages()), microbatches(pipeline.microbatches),
        slices(pipeline.slices) {}

  size_t size() const {
    return kNumKinds * size_t(stages) * microbatches * slices;
  }
  size_t operator()(const Work &work) const {
    return ((size_t(work.kind) * stages + work.stage) * microbatches +
            work.microbatch) *
               slices +
           work.slice;
  }

private:
  static constexpr size_t kNumKinds = 8;
  size_t stages, microbatches, slices;
};

/// The passes every stage runs for each microbatch slice.
llvm::SmallVector<PassKind, 3> getStagePasses(const Pipeline &pipeline);

/// What must finish before `work` may start: the previous stage's F (or the
/// next stage's input gradient), the same stage's earlier slice (forward)
/// or later slice (backward: causal attention), and B before W.
void getDependencies(const Pipeline &pipeline, const Work &work,
                     llvm::SmallVectorImpl<Work> &deps);

enum class InstrKind : uint8_t { Exec, Send, Recv };

/// One instruction of a device program. A send or receive names the work
/// whose result it carries; `peer` is the other device.
struct Instr {
  InstrKind kind = InstrKind::Exec;
  Work work;
  int32_t peer = -1;
};

/// One ordered instruction list per device.
struct Program {
  std::vector<std::vector<Instr>> devices;
};

/// Adds to per-device compute orders a send after every work whose result
/// another device consumes, and a receive right before its first consumer.
Program lowerToProgram(const Pipeline &pipeline,
                       llvm::ArrayRef<std::vector<Work>> orders);

} // namespace mlir::sluice::sched

#endif // SLUICE_SCHEDULE_PIPELINE_H
