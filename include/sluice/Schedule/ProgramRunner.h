//===- ProgramRunner.h - Issue device programs in order ---------*- C++ -*-===//
//
// The one engine that runs per-device programs the way the runtime issues
// them: each device goes through its list in order; a receive waits until
// its send has been issued, a pass until the collectives it reads have
// completed, a blocking collective (the interlaced baseline) until it has
// completed. A collective completes once every device has joined it and
// every collective of its shard issued before it has completed: a shard's
// collectives run in one queue, in the order the devices issue them.
//
// What running means is the observer's: the simulator (lib/Analysis)
// attaches times and memory to each step, the verifier (Verifier.cpp) only
// asks where the devices stop, which is a deadlock when it is not the end.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_SCHEDULE_PROGRAMRUNNER_H
#define SLUICE_SCHEDULE_PROGRAMRUNNER_H

#include "sluice/Schedule/Pipeline.h"

#include "llvm/ADT/DenseSet.h"

#include <optional>
#include <vector>

namespace mlir::sluice::sched {

/// What the runner reports, in the order it happens. Every method is
/// optional.
class ProgramObserver {
public:
  virtual ~ProgramObserver() = default;
  /// `device` reaches collective `instr` and adds its part.
  virtual void joined(int device, const Instr &instr) {}
  /// Every device has joined `id` and its shard's earlier collectives
  /// have completed: it completes.
  virtual void completed(const CollectiveId &id) {}
  /// `device` goes past blocking collective `instr`, which has completed.
  virtual void passedBlocking(int device, const Instr &instr) {}
  /// `device` issues send `instr`.
  virtual void sent(int device, const Instr &instr) {}
  /// `device` runs pass `instr`: the collectives it reads have completed.
  virtual void executed(int device, const Instr &instr) {}
};

/// Where the devices stopped.
class ProgramRun {
public:
  ProgramRun(const Pipeline &pipeline, const Program &program);

  /// Whether every device ran its whole list.
  bool finished() const;
  /// The first instruction `device` did not run (its list's size if it
  /// ran them all).
  size_t getNext(int device) const { return next[device]; }
  /// The collective `device` stopped at, or whose completion the pass it
  /// stopped at waits for; nothing if it stopped at a receive or ran all.
  const std::optional<CollectiveId> &getWaitingFor(int device) const {
    return waitingFor[device];
  }
  /// Whether `device` has joined collective `id`.
  bool hasJoined(int device, const CollectiveId &id) const {
    return joinedBy[size_t(device) * cindex.size() + cindex(id)];
  }

private:
  friend ProgramRun runProgram(const Pipeline &, const Program &,
                               ProgramObserver &);
  bool isComplete(const CollectiveId &id) const { return done[cindex(id)]; }
  /// Runs device `d` as far as it can go; whether it moved.
  bool advance(int d, ProgramObserver &observer);
  /// Completes, in issue order, the collectives of `shard` every device
  /// has joined.
  void settle(ShardKind shard, ProgramObserver &observer);

  const Pipeline &pipeline;
  const Program &program;
  WorkIndex index;
  CollectiveIndex cindex;
  std::vector<size_t> next;
  std::vector<std::optional<CollectiveId>> waitingFor;
  std::vector<char> joinedBy;
  std::vector<int> joins;
  std::vector<char> done;
  /// (work, receiver) of every send issued.
  llvm::DenseSet<std::pair<size_t, int>> issued;
  /// Each shard's collectives in issue order (device 0's), and how many
  /// of them have completed.
  std::vector<CollectiveId> queue[2];
  size_t completed[2] = {0, 0};
};

/// Runs `program` until every device has finished or none can move.
ProgramRun runProgram(const Pipeline &pipeline, const Program &program,
                      ProgramObserver &observer);

} // namespace mlir::sluice::sched

#endif // SLUICE_SCHEDULE_PROGRAMRUNNER_H
