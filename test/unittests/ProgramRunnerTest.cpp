//===- ProgramRunnerTest.cpp - The one program execution engine -----------===//
//
// The runner's blocking rules (ProgramRunner.h), which the simulator and
// the verifier's deadlock check both rely on.
//
//===----------------------------------------------------------------------===//

#include "sluice/Schedule/ProgramRunner.h"

#include <gtest/gtest.h>

using namespace mlir::sluice;
using namespace mlir::sluice::sched;

namespace {

/// Two stages on two devices, one microbatch, F and BW.
Pipeline twoStages() {
  Pipeline pipeline;
  pipeline.devices = 2;
  pipeline.stages = {{0, 0}, {1, 0}};
  return pipeline;
}

/// Counts what the runner reports.
struct Counter : ProgramObserver {
  int execs = 0, sends = 0, joins = 0;
  std::vector<CollectiveId> completions;
  void executed(int, const Instr &) override { ++execs; }
  void sent(int, const Instr &) override { ++sends; }
  void joined(int, const Instr &) override { ++joins; }
  void completed(const CollectiveId &id) override {
    completions.push_back(id);
  }
};

Work f(int stage) { return {PassKind::F, stage, 0, 0}; }
Work bw(int stage) { return {PassKind::BW, stage, 0, 0}; }

TEST(ProgramRunner, RunsAMatchedProgramToTheEnd) {
  Pipeline pipeline = twoStages();
  Program program;
  program.devices = {
      {Instr::exec(f(0)), Instr::send(f(0), 1), Instr::recv(bw(1), 1),
       Instr::exec(bw(0))},
      {Instr::recv(f(0), 0), Instr::exec(f(1)), Instr::exec(bw(1)),
       Instr::send(bw(1), 0)}};
  Counter counter;
  ProgramRun run = runProgram(pipeline, program, counter);
  EXPECT_TRUE(run.finished());
  EXPECT_EQ(counter.execs, 4);
  EXPECT_EQ(counter.sends, 2);
}

TEST(ProgramRunner, AReceiveBeforeItsSendIsADeadlock) {
  Pipeline pipeline = twoStages();
  Program program;
  // Device 0 waits for the gradient before it sends the activation that
  // produces it.
  program.devices = {
      {Instr::exec(f(0)), Instr::recv(bw(1), 1), Instr::send(f(0), 1),
       Instr::exec(bw(0))},
      {Instr::recv(f(0), 0), Instr::exec(f(1)), Instr::exec(bw(1)),
       Instr::send(bw(1), 0)}};
  Counter counter;
  ProgramRun run = runProgram(pipeline, program, counter);
  EXPECT_FALSE(run.finished());
  EXPECT_EQ(run.getNext(0), 1u);
  EXPECT_EQ(run.getNext(1), 0u);
  EXPECT_FALSE(run.getWaitingFor(0));
  EXPECT_EQ(counter.execs, 1);
}

/// The output shard's collectives complete in the order device 0 issues
/// them, once every device has joined; a pass reading one waits for it.
TEST(ProgramRunner, CollectivesCompleteInIssueOrderOnceAllJoined) {
  Pipeline pipeline = twoStages();
  pipeline.vocab.output = true;
  pipeline.vocab.algorithm = 2;
  CollectiveId broadcast{ShardKind::Output, 0, 0, 0};
  CollectiveId barrier{ShardKind::Output, 1, 0, 0};
  Work s0{PassKind::S, 0, 0, 0}, s1{PassKind::S, 1, 0, 0};
  Work t0{PassKind::T, 0, 0, 0}, t1{PassKind::T, 1, 0, 0};
  Program program;
  program.devices = {
      {Instr::coll(broadcast, false), Instr::exec(s0),
       Instr::coll(barrier, false), Instr::exec(t0)},
      {Instr::coll(broadcast, false), Instr::exec(s1),
       Instr::coll(barrier, false), Instr::exec(t1)}};
  Counter counter;
  ProgramRun run = runProgram(pipeline, program, counter);
  EXPECT_TRUE(run.finished());
  EXPECT_EQ(counter.joins, 4);
  ASSERT_EQ(counter.completions.size(), 2u);
  EXPECT_EQ(counter.completions[0].group, 0);
  EXPECT_EQ(counter.completions[1].group, 1);

  // Device 1 never joins the barrier: device 0's T waits for it.
  program.devices[1].erase(program.devices[1].begin() + 2);
  Counter stuck;
  ProgramRun partial = runProgram(pipeline, program, stuck);
  EXPECT_FALSE(partial.finished());
  EXPECT_EQ(partial.getNext(0), 3u);
  ASSERT_TRUE(partial.getWaitingFor(0));
  EXPECT_EQ(partial.getWaitingFor(0)->group, 1);
  EXPECT_TRUE(partial.hasJoined(0, barrier));
  EXPECT_FALSE(partial.hasJoined(1, barrier));
}

} // namespace
