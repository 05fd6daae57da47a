//===- CommOrderTest.cpp - One global order of a step's communication -----===//
//
// orderCommunication (runtime/CommOrder.h): every rank issues its step in
// one global order, which survives NCCL's worst case (each rank's
// operations one after another, each a rendezvous); a plan that cannot
// run to the end is refused naming where each device waits.
//
//===----------------------------------------------------------------------===//

#include "CommOrder.h"
#include "Plan.h"
#include "TinyPlans.h"

#include <gtest/gtest.h>

using namespace sluice::rt;

namespace {

Plan parse(const std::string &text) {
  Plan plan;
  Status st = parsePlan(text, "hand-written", plan);
  EXPECT_TRUE(st.isOk()) << st.message();
  return plan;
}

std::vector<Op> ops(const Plan &plan, int device) {
  std::vector<Op> kinds;
  for (const Instruction &instr : plan.programs[device].instructions)
    kinds.push_back(instr.op);
  return kinds;
}

// 1F1B's steady state as the plan lists it: both devices send before they
// receive, which NCCL's rendezvous sends cannot do one after another.
TEST(CommOrder, PlanOrderWaitsForGoodUnderNccl) {
  Plan plan = parse(planReusingASentSlot());
  Status st = checkSerializedOrder(plan);
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("device 0 waits in send F of stage 0, "
                              "microbatch 1"),
            std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("device 1 waits in send BW of stage 1, "
                              "microbatch 0"),
            std::string::npos)
      << st.message();
}

TEST(CommOrder, GlobalOrderRunsUnderNccl) {
  Plan plan = parse(planReusingASentSlot());
  Plan before = plan;
  Status st = applyCommunicationOrder(plan);
  ASSERT_TRUE(st.isOk()) << st.message();
  st = checkSerializedOrder(plan);
  EXPECT_TRUE(st.isOk()) << st.message();
  // Every instruction kept, passes in their order; only transfers move,
  // and never ahead of where the plan lists them relative to passes.
  for (int d = 0; d < 2; ++d) {
    ASSERT_EQ(plan.programs[d].instructions.size(),
              before.programs[d].instructions.size());
    std::vector<std::string> execs, execsBefore;
    for (const Instruction &i : plan.programs[d].instructions)
      if (i.op == Op::Exec)
        execs.push_back(plan.describe(i));
    for (const Instruction &i : before.programs[d].instructions)
      if (i.op == Op::Exec)
        execsBefore.push_back(before.describe(i));
    EXPECT_EQ(execs, execsBefore);
  }
  // The devices take turns: device 0's second activation waits for slot
  // 2's first send, which completes once device 1 has received it; by
  // then device 0 has posted its receive of the first gradient, so that
  // receive comes first and device 1 keeps its own order (it sends the
  // gradient, then receives the second activation).
  EXPECT_EQ(ops(plan, 0),
            (std::vector<Op>{Op::Exec, Op::Send, Op::Exec, Op::Recv, Op::Send,
                             Op::Exec, Op::Recv, Op::Exec}));
  EXPECT_EQ(ops(plan, 1), ops(before, 1));
  // Applying it again changes nothing.
  Plan again = plan;
  ASSERT_TRUE(applyCommunicationOrder(again).isOk());
  EXPECT_EQ(ops(again, 0), ops(plan, 0));
  EXPECT_EQ(ops(again, 1), ops(plan, 1));
}

// Issue 58: a send takes its place in the order as soon as its receiver
// has posted the receive, not after its device has run ahead to its next
// wait. With microbatch 1's activation in a slot of its own, device 0
// could run both forwards before its first send completed; taking turns,
// the first activation is listed right after the pass that made it (and
// the runtime issues it there).
TEST(CommOrder, AnActivationLeavesWithItsPass) {
  Plan plan = parse(planReusingASentSlot());
  DeviceProgram &program = plan.programs[0];
  int32_t fresh = int32_t(program.buffers.size());
  program.buffers.push_back(program.buffers[2]);
  ASSERT_EQ(program.instructions[2].op, Op::Exec);
  ASSERT_EQ(program.instructions[3].op, Op::Send);
  program.instructions[2].out = fresh;
  program.instructions[3].buffer = fresh;
  ASSERT_TRUE(applyCommunicationOrder(plan).isOk());
  EXPECT_EQ(ops(plan, 0),
            (std::vector<Op>{Op::Exec, Op::Send, Op::Exec, Op::Recv, Op::Send,
                             Op::Exec, Op::Recv, Op::Exec}));
  EXPECT_TRUE(checkSerializedOrder(plan).isOk());
}

// A receive moved to the end of its device's list: the plan validates
// (messages match, counts agree) but no order runs it.
TEST(CommOrder, RefusesAPlanThatCannotFinish) {
  Plan plan = parse(planReusingASentSlot());
  std::vector<Instruction> &program = plan.programs[1].instructions;
  Instruction first = program.front();
  ASSERT_EQ(first.op, Op::Recv);
  program.erase(program.begin());
  program.push_back(first);
  std::vector<std::vector<size_t>> order;
  Status st = orderCommunication(plan, order);
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("cannot all run to the end"), std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("device 0 waits at instruction"),
            std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("device 1 waits at instruction"),
            std::string::npos)
      << st.message();
}

} // namespace
