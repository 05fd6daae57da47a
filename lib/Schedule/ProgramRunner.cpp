//===- ProgramRunner.cpp - Issue device programs in order -----------------===//

#include "sluice/Schedule/ProgramRunner.h"

using namespace mlir;
using namespace mlir::sluice;
using namespace mlir::sluice::sched;

ProgramRun::ProgramRun(const Pipeline &pipeline, const Program &program)
    : pipeline(pipeline), program(program), index(pipeline), cindex(pipeline),
      next(pipeline.devices, 0), waitingFor(pipeline.devices),
      joinedBy(size_t(pipeline.devices) * cindex.size(), 0),
      joins(cindex.size(), 0), done(cindex.size(), 0) {
  if (pipeline.devices > 0)
    for (const Instr &instr : program.devices[0])
      if (instr.kind == InstrKind::Collective)
        queue[int(instr.collective.shard)].push_back(instr.collective);
}

bool ProgramRun::finished() const {
  for (int d = 0; d < pipeline.devices; ++d)
    if (next[d] < program.devices[d].size())
      return false;
  return true;
}

void ProgramRun::settle(ShardKind shard, ProgramObserver &observer) {
  std::vector<CollectiveId> &ids = queue[int(shard)];
  size_t &count = completed[int(shard)];
  while (count < ids.size() && joins[cindex(ids[count])] == pipeline.devices) {
    const CollectiveId &id = ids[count++];
    done[cindex(id)] = 1;
    observer.completed(id);
  }
}

bool ProgramRun::advance(int d, ProgramObserver &observer) {
  const std::vector<Instr> &instrs = program.devices[d];
  bool moved = false;
  waitingFor[d].reset();
  llvm::SmallVector<CollectiveId, 2> inputs;
  for (; next[d] < instrs.size(); ++next[d], moved = true) {
    const Instr &instr = instrs[next[d]];
    switch (instr.kind) {
    case InstrKind::Recv:
      if (!issued.contains({index(instr.work), d}))
        return moved;
      break;
    case InstrKind::Collective: {
      char &joined =
          joinedBy[size_t(d) * cindex.size() + cindex(instr.collective)];
      if (!joined) {
        joined = 1;
        moved = true;
        ++joins[cindex(instr.collective)];
        observer.joined(d, instr);
        settle(instr.collective.shard, observer);
      }
      if (instr.blocking) {
        if (!isComplete(instr.collective)) {
          waitingFor[d] = instr.collective;
          return moved;
        }
        observer.passedBlocking(d, instr);
      }
      break;
    }
    case InstrKind::Send:
      issued.insert({index(instr.work), instr.peer});
      observer.sent(d, instr);
      break;
    case InstrKind::Exec:
      inputs.clear();
      getCollectiveInputs(pipeline, instr.work, inputs);
      for (const CollectiveId &id : inputs)
        if (!isComplete(id)) {
          waitingFor[d] = id;
          return moved;
        }
      observer.executed(d, instr);
      break;
    case InstrKind::GradSync:
      break;
    }
  }
  return moved;
}

ProgramRun sched::runProgram(const Pipeline &pipeline, const Program &program,
                             ProgramObserver &observer) {
  ProgramRun run(pipeline, program);
  // A device waits only at a receive, a pass reading an unfinished
  // collective, or a blocking collective: sweep the devices until a sweep
  // moves nothing.
  for (bool moved = true; moved;) {
    moved = false;
    for (int d = 0; d < pipeline.devices; ++d)
      moved |= run.advance(d, observer);
  }
  return run;
}
