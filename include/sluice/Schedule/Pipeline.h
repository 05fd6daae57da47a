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

#include "sluice/PlanFormat/Format.h"
#include "sluice/SluiceEnums.h"

#include "mlir/Support/LogicalResult.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

namespace mlir::sluice {
/// The plan format and the runtime's plain data (namespace ::sluice::rt).
namespace rt = ::sluice::rt;
} // namespace mlir::sluice

namespace mlir::sluice::sched {

/// Where one pipeline stage runs: its device and which of the device's
/// chunks it is.
struct StagePlacement {
  int device = 0;
  int chunk = 0;
};

struct Work;

/// Number of PassKind values, for tables indexed by kind.
constexpr size_t kNumPassKinds = getMaxEnumValForPassKind() + 1;

/// The passes of a vocabulary shard (S, S2, T, IF, IB). They run on every
/// device; a Work of these kinds names its device in `stage`.
bool isVocabPass(PassKind kind);

/// Which vocabulary shard a collective belongs to.
enum class ShardKind : uint8_t { Input, Output };

/// The vocabulary layers when they are sharded over all devices
/// (Yeung et al., 2024 §3-5); both absent for the baseline.
///
/// Per microbatch slice, the output shard runs passes and collectives
/// ("groups", numbered in order) on every device:
///   group 0: broadcast of X from the last stage's device (C0);
///   naive (3 barriers):  S, group 1 (max), S2, group 2 (sum), T,
///                        group 3 (reduce of dX), then the last stage's B;
///   Algorithm 1 (2):     S, group 1 (max, sum), T, group 2 (reduce of dX),
///                        then the last stage's B (§5.1: B after all T);
///   Algorithm 2 (1):     S, group 1 (max, sum, reduce of dX), then both T
///                        and the last stage's B (§5.1: T freely delayed).
/// The input shard runs IF, group 0 (reduce of the partial embeddings onto
/// the first stage's device, which then runs its F), and after that
/// stage's B, group 1 (broadcast of the gradient), then IB (Appendix C).
struct VocabLayers {
  bool input = false;
  bool output = false;
  /// 0: naive, 1: Algorithm 1, 2: Algorithm 2.
  int algorithm = 0;
  /// The interlaced baseline: every collective blocks all devices.
  bool synchronous = false;

  bool any() const { return input || output; }
  int getBarriers() const { return ::sluice::rt::getBarriers(algorithm); }
  /// The output shard's passes in order: S, [S2,] T.
  llvm::SmallVector<PassKind, 3> getOutputPasses() const;
  /// Collectives per microbatch slice of a shard (0 if it is absent).
  int getNumGroups(ShardKind shard) const;
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
  VocabLayers vocab;

  int getNumStages() const { return static_cast<int>(stages.size()); }
  int getLastStage() const { return getNumStages() - 1; }
  /// The pass that carries the input gradient: B when split, else BW.
  PassKind getBackwardKind() const {
    return splitBackward ? PassKind::B : PassKind::BW;
  }
  int getDevice(int stage) const { return stages[stage].device; }
  /// The device a work unit runs on: its stage's, or for a vocabulary
  /// pass, the device it names.
  int getWorkDevice(const Work &work) const;
  /// Where the input shard reduces to and the output shard broadcasts from.
  int getInputRoot() const { return getDevice(0); }
  int getOutputRoot() const { return getDevice(getLastStage()); }
};

/// One pass of one stage for one microbatch slice.
struct Work {
  PassKind kind = PassKind::F;
  int32_t stage = 0, microbatch = 0, slice = 0;

  bool operator==(const Work &other) const {
    return std::tie(kind, stage, microbatch, slice) ==
           std::tie(other.kind, other.stage, other.microbatch, other.slice);
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
  static constexpr size_t kNumKinds = kNumPassKinds;
  size_t stages, microbatches, slices;
};

/// One collective of a vocabulary shard for one microbatch slice.
struct CollectiveId {
  ShardKind shard = ShardKind::Output;
  int32_t group = 0, microbatch = 0, slice = 0;

  bool operator==(const CollectiveId &o) const {
    return std::tie(shard, group, microbatch, slice) ==
           std::tie(o.shard, o.group, o.microbatch, o.slice);
  }
  bool operator!=(const CollectiveId &o) const { return !(*this == o); }
};

/// "group 1 of the output shard, microbatch 3, slice 0".
std::string toString(const CollectiveId &id);

/// Numbers every collective of a pipeline densely.
class CollectiveIndex {
public:
  explicit CollectiveIndex(const Pipeline &pipeline)
      : microbatches(pipeline.microbatches), slices(pipeline.slices) {}
  size_t size() const { return kGroups * microbatches * slices; }
  size_t operator()(const CollectiveId &id) const {
    size_t group = (id.shard == ShardKind::Output ? 2 : 0) + id.group;
    return (group * microbatches + id.microbatch) * slices + id.slice;
  }

private:
  // Input: 2 groups; output: up to 4 (naive).
  static constexpr size_t kGroups = 6;
  size_t microbatches, slices;
};

/// Every collective the pipeline's vocabulary shards run, microbatch by
/// microbatch.
std::vector<CollectiveId> getCollectives(const Pipeline &pipeline);

/// The plan format's pass (Format.h) of the same name, and back: every
/// PassKind is spelled as the plan spells it (ScheduleTest checks that
/// each round-trips), so the collective rules exist once, in the plan
/// format, for the compiler and the runtime.
::sluice::rt::Pass toPlanPass(PassKind kind);
PassKind fromPlanPass(::sluice::rt::Pass pass);
/// What the plan format's collective rules need of `pipeline`.
::sluice::rt::VocabularyShape getVocabularyShape(const Pipeline &pipeline);

/// The passes every stage runs for each microbatch slice.
llvm::SmallVector<PassKind, 3> getStagePasses(const Pipeline &pipeline);

/// Every work unit the pipeline runs (each stage's passes and, with
/// sharded vocabulary layers, every device's shard passes), in no
/// particular order.
std::vector<Work> getAllWork(const Pipeline &pipeline);

/// Whether the pipeline has `work` (kind, stage or device, indices).
bool hasWork(const Pipeline &pipeline, const Work &work);

/// What must finish before `work` may start, point to point: the previous
/// stage's F (or the next stage's input gradient), the same stage's
/// earlier slice (forward) or later slice (backward: causal attention), B
/// before W, and a shard's earlier pass on the same device.
void getDependencies(const Pipeline &pipeline, const Work &work,
                     llvm::SmallVectorImpl<Work> &deps);

/// The collectives that must complete before `work` may start.
void getCollectiveInputs(const Pipeline &pipeline, const Work &work,
                         llvm::SmallVectorImpl<CollectiveId> &inputs);

/// The work on `device` whose results collective `id` carries: the device
/// issues the collective only after them.
void getCollectiveContributions(const Pipeline &pipeline,
                                const CollectiveId &id, int device,
                                llvm::SmallVectorImpl<Work> &contributions);

/// getDependencies plus, through each collective input, every device's
/// contributions to it: all the work `work` transitively waits for one
/// step back.
void getAllDependencies(const Pipeline &pipeline, const Work &work,
                        llvm::SmallVectorImpl<Work> &deps);

/// The next stage that consumes the result of `work` (F: the one after,
/// B or BW: the one before), or -1 if none does.
int getConsumerStage(const Pipeline &pipeline, const Work &work);

/// GradSync (a data-parallel gradient all-reduce) appears only in
/// simulations: schedules produce the other kinds, sluice-sync-gradients
/// adds it to the IR.
enum class InstrKind : uint8_t { Exec, Send, Recv, Collective, GradSync };

/// One instruction of a device program. A send or receive names the work
/// whose result it carries; `peer` is the other device. A collective names
/// its id; `blocking` ones (the interlaced baseline) stop the device until
/// every device has joined, the others run on the vocabulary stream and
/// only their consumers wait. A `paired` pass joins the pass after it
/// into one overlapped group: DualPipe's forward of one microbatch beside
/// the backward (B, or B and its W, or BW) of another, each one's expert
/// all-to-alls under the other's compute. The list holds every member's
/// receives before the group and their sends after it.
struct Instr {
  InstrKind kind = InstrKind::Exec;
  Work work;
  int32_t peer = -1;
  CollectiveId collective;
  bool blocking = false;
  bool paired = false;

  static Instr exec(const Work &work) { return {InstrKind::Exec, work}; }
  static Instr send(const Work &work, int to) {
    return {InstrKind::Send, work, to};
  }
  static Instr recv(const Work &work, int from) {
    return {InstrKind::Recv, work, from};
  }
  static Instr coll(const CollectiveId &id, bool blocking) {
    Instr instr;
    instr.kind = InstrKind::Collective;
    instr.collective = id;
    instr.blocking = blocking;
    return instr;
  }
};

/// One ordered instruction list per device.
struct Program {
  std::vector<std::vector<Instr>> devices;
};

/// Adds to per-device compute orders a send after every work whose result
/// another device consumes, a receive right before its first consumer, and
/// the vocabulary collectives: every device issues each shard's
/// collectives in one order (that of a dependency-respecting execution of
/// the orders; each shard has its own queue), each as early as its local
/// contributions allow (on the vocabulary stream) or, when blocking, where
/// the device meets the others. Fails, saying why, if the orders cannot
/// execute. `pairs[d][i]`, where given, joins order[d][i] to
/// order[d][i + 1] in an overlapped group (Instr::paired).
FailureOr<Program>
lowerToProgram(const Pipeline &pipeline,
               llvm::ArrayRef<std::vector<Work>> orders, std::string &error,
               llvm::ArrayRef<std::vector<char>> pairs = {});

} // namespace mlir::sluice::sched

#endif // SLUICE_SCHEDULE_PIPELINE_H
