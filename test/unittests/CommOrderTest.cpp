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
  // Device 1's first gradient send completes only once device 0 posts its
  // receive, which device 0 lists after its second activation send: device
  // 1 now receives that activation first, then sends.
  EXPECT_EQ(ops(plan, 0), ops(before, 0));
  EXPECT_EQ(ops(plan, 1),
            (std::vector<Op>{Op::Recv, Op::Exec, Op::Exec, Op::Recv, Op::Send,
                             Op::Exec, Op::Exec, Op::Send}));
  // Applying it again changes nothing.
  Plan again = plan;
  ASSERT_TRUE(applyCommunicationOrder(again).isOk());
  EXPECT_EQ(ops(again, 0), ops(plan, 0));
  EXPECT_EQ(ops(again, 1), ops(plan, 1));
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
