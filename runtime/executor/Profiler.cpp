//===- Profiler.cpp - Where a rank's step went ----------------------------===//

#include "Profiler.h"

#include <algorithm>

namespace sluice::rt {

namespace {
constexpr int kPasses = int(Pass::IB) + 1;

/// The seconds two intervals share.
double overlap(double aStart, double aEnd, double bStart, double bEnd) {
  return std::max(0.0, std::min(aEnd, bEnd) - std::max(aStart, bStart));
}
} // namespace

void PassProfiler::createEvents(bool dataParallel) {
  const DeviceProgram &program = plan.programs[deviceIndex];
  stepBegin = device.createEvent();
  waited.assign(program.instructions.size(), 0);
  passStart.resize(program.instructions.size());
  passEnd.resize(program.instructions.size());
  for (size_t i = 0; i < program.instructions.size(); ++i)
    if (program.instructions[i].op == Op::Exec ||
        (program.instructions[i].op == Op::GradSync && dataParallel)) {
      passStart[i] = device.createEvent();
      passEnd[i] = device.createEvent();
    }
  profile.assign((plan.stages.size() + 2) * kPasses, PassProfile());
}

size_t PassProfiler::profileIndex(int stage, Shard shard, Pass pass) const {
  size_t owner =
      stage >= 0 ? size_t(stage) : plan.stages.size() + size_t(int(shard));
  return owner * kPasses + size_t(pass);
}

double PassProfiler::account(StepTimes &times, VocabularyShards *shards) {
  const DeviceProgram &program = plan.programs[deviceIndex];
  double dispatchIdle = 0;
  Event *previous = stepBegin.get();
  passSpans.clear();
  collectiveSpans.clear();
  for (size_t i = 0; i < program.instructions.size(); ++i) {
    const Instruction &instr = program.instructions[i];
    if (instr.op != Op::Exec)
      continue;
    double took = passEnd[i]->secondsSince(*passStart[i]);
    double idle = std::max(0.0, passStart[i]->secondsSince(*previous));
    if (!waited[i])
      dispatchIdle += idle;
    previous = passEnd[i].get();
    double start = passStart[i]->secondsSince(*stepBegin);
    passSpans.push_back({i, start, start + took});
    times.compute += took;
    PassProfile &p =
        profile[profileIndex(instr.stage, instr.shard, instr.pass)];
    SliceShape s = plan.getSliceShape(instr.slice);
    p.seconds += took;
    p.runs += 1;
    p.tokens += s.rows * s.tokens;
  }
  syncSpans.clear();
  for (size_t i = 0; i < program.instructions.size(); ++i) {
    if (program.instructions[i].op != Op::GradSync || !passStart[i])
      continue;
    double start = passStart[i]->secondsSince(*stepBegin);
    double end = std::max(start, passEnd[i]->secondsSince(*stepBegin));
    syncSpans.push_back({i, start, end});
    times.gradSyncs += end - start;
    for (const PassSpan &pass : passSpans)
      times.gradSyncsOverlapped += overlap(start, end, pass.start, pass.end);
  }
  if (shards) {
    // The passes are in order on one stream: a collective's overlap is its
    // intersection with them.
    collectiveSpans = shards->getSpans(*stepBegin);
    for (VocabularyShards::Span &c : collectiveSpans) {
      c.end = std::max(c.start, c.end);
      times.vocabCollectives += c.end - c.start;
      for (const PassSpan &pass : passSpans)
        times.vocabOverlapped += overlap(c.start, c.end, pass.start, pass.end);
    }
  }
  return dispatchIdle;
}

std::vector<TraceSpan> PassProfiler::getTrace() const {
  const DeviceProgram &program = plan.programs[deviceIndex];
  std::vector<TraceSpan> trace;
  for (const PassSpan &pass : passSpans) {
    // An overlapped group's backward runs on lane 1 (PassLanes.h; on a
    // GPU, its own stream), beside the forward: a track of its own.
    size_t i = pass.instruction;
    const Instruction &instr = program.instructions[i];
    bool grouped =
        instr.paired || (i > 0 && program.instructions[i - 1].paired);
    // describe() begins "exec ".
    trace.push_back({plan.describe(instr).substr(5),
                     grouped && instr.pass != Pass::F ? "compute, lane 1"
                                                      : "compute",
                     pass.start, pass.end});
  }
  for (const PassSpan &sync : syncSpans)
    trace.push_back({plan.describe(program.instructions[sync.instruction]),
                     "data", sync.start, sync.end});
  for (const VocabularyShards::Span &c : collectiveSpans) {
    Instruction collective;
    collective.op = Op::Collective;
    collective.shard = c.shard;
    collective.group = c.group;
    collective.mb = c.mb;
    collective.slice = c.slice;
    trace.push_back({plan.describe(collective), "vocabulary", c.start, c.end});
  }
  return trace;
}

std::map<std::pair<std::string, std::string>, PassProfile>
PassProfiler::getProfile() const {
  std::map<std::pair<std::string, std::string>, PassProfile> named;
  for (size_t owner = 0; owner < plan.stages.size() + 2; ++owner)
    for (int pass = 0; pass < kPasses; ++pass) {
      const PassProfile &p = profile[owner * kPasses + pass];
      if (p.runs == 0)
        continue;
      std::string name = owner < plan.stages.size() ? plan.stages[owner].name
                         : owner == plan.stages.size()
                             ? plan.vocabulary.input.name
                             : plan.vocabulary.output.name;
      named[{name, passName(Pass(pass))}] = p;
    }
  return named;
}

} // namespace sluice::rt
