//===- Pipeline.cpp - Work dependencies and lowering to send/recv ---------===//

#include "sluice/Schedule/Pipeline.h"

#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace mlir::sluice;
using namespace mlir::sluice::sched;

std::string sched::toString(const Work &work) {
  return llvm::formatv("{0} of stage {1}, microbatch {2}, slice {3}",
                       stringifyPassKind(work.kind), work.stage,
                       work.microbatch, work.slice)
      .str();
}

llvm::SmallVector<PassKind, 3> sched::getStagePasses(const Pipeline &pipeline) {
  if (pipeline.splitBackward)
    return {PassKind::F, PassKind::B, PassKind::W};
  return {PassKind::F, PassKind::BW};
}

void sched::getDependencies(const Pipeline &pipeline, const Work &work,
                            llvm::SmallVectorImpl<Work> &deps) {
  auto at = [&](PassKind kind, int stage, int slice) {
    return Work{kind, stage, work.microbatch, slice};
  };
  PassKind backward = pipeline.getBackwardKind();
  switch (work.kind) {
  case PassKind::F:
    if (work.stage > 0)
      deps.push_back(at(PassKind::F, work.stage - 1, work.slice));
    // Causal attention: slice k reads the keys and values of slices < k.
    if (work.slice > 0)
      deps.push_back(at(PassKind::F, work.stage, work.slice - 1));
    break;
  case PassKind::B:
  case PassKind::BW:
    if (work.stage < pipeline.getLastStage())
      deps.push_back(at(backward, work.stage + 1, work.slice));
    else
      deps.push_back(at(PassKind::F, work.stage, work.slice));
    // Slice k's keys and values receive gradients from every later slice,
    // so the backward runs in reverse slice order.
    if (work.slice + 1 < pipeline.slices)
      deps.push_back(at(work.kind, work.stage, work.slice + 1));
    break;
  case PassKind::W:
    deps.push_back(at(PassKind::B, work.stage, work.slice));
    break;
  default:
    break;
  }
}

/// The stage that consumes the result of `work`, or -1 if none does.
static int getConsumerStage(const Pipeline &pipeline, const Work &work) {
  if (work.kind == PassKind::F)
    return work.stage < pipeline.getLastStage() ? work.stage + 1 : -1;
  if (work.kind == PassKind::B || work.kind == PassKind::BW)
    return work.stage > 0 ? work.stage - 1 : -1;
  return -1;
}

Program sched::lowerToProgram(const Pipeline &pipeline,
                              llvm::ArrayRef<std::vector<Work>> orders) {
  Program program;
  program.devices.resize(pipeline.devices);
  llvm::SmallVector<Work, 4> deps;
  for (int device = 0; device < pipeline.devices; ++device) {
    std::vector<Instr> &instrs = program.devices[device];
    instrs.reserve(orders[device].size() * 2);
    for (const Work &work : orders[device]) {
      // Receive what this work needs from other devices, just before it.
      deps.clear();
      getDependencies(pipeline, work, deps);
      for (const Work &dep : deps) {
        int from = pipeline.getDevice(dep.stage);
        if (from != device)
          instrs.push_back({InstrKind::Recv, dep, from});
      }
      instrs.push_back({InstrKind::Exec, work, -1});
      int consumer = getConsumerStage(pipeline, work);
      if (consumer >= 0 && pipeline.getDevice(consumer) != device)
        instrs.push_back({InstrKind::Send, work, pipeline.getDevice(consumer)});
    }
  }
  return program;
}
