//===- PlanPassTest.cpp - The schedule library meets the plan format ------===//
//
// The dialect's pass kinds and recomputation modes are spelled as the plan
// format spells them, so the schedule library and the runtime share the
// format's collective rules (sluice/PlanFormat/Format.h).
//
//===----------------------------------------------------------------------===//

#include "sluice/Schedule/Pipeline.h"

#include <gtest/gtest.h>

using namespace mlir::sluice;
using namespace mlir::sluice::sched;

namespace {

TEST(PlanPass, EveryPassKindRoundTripsThroughThePlanFormat) {
  for (uint32_t i = 0; i <= getMaxEnumValForPassKind(); ++i) {
    std::optional<PassKind> kind = symbolizePassKind(i);
    ASSERT_TRUE(kind);
    rt::Pass pass = toPlanPass(*kind);
    EXPECT_EQ(stringifyPassKind(*kind), rt::passName(pass));
    EXPECT_EQ(fromPlanPass(pass), *kind);
  }
  EXPECT_EQ(size_t(rt::kNumPasses), kNumPassKinds);
}

TEST(PlanPass, EveryRecomputeKindIsAPlanName) {
  for (uint32_t i = 0; i <= getMaxEnumValForRecomputeKind(); ++i) {
    std::optional<RecomputeKind> kind = symbolizeRecomputeKind(i);
    ASSERT_TRUE(kind);
    std::optional<rt::Recompute> mode =
        rt::parseRecompute(stringifyRecomputeKind(*kind).str());
    ASSERT_TRUE(mode) << stringifyRecomputeKind(*kind).str();
    EXPECT_EQ(rt::recomputeName(*mode), stringifyRecomputeKind(*kind));
  }
}

/// The schedule library's dependencies through collectives come from the
/// plan format's rules: with Algorithm 1 over 4 devices (stages on
/// devices 0..3), the last stage's B waits for every device's T.
TEST(PlanPass, CollectiveDependenciesFollowThePlanFormat) {
  Pipeline pipeline;
  pipeline.devices = 4;
  pipeline.splitBackward = true;
  for (int s = 0; s < 4; ++s)
    pipeline.stages.push_back({s, 0});
  pipeline.vocab.input = pipeline.vocab.output = true;
  pipeline.vocab.algorithm = 1;
  llvm::SmallVector<CollectiveId> inputs;
  getCollectiveInputs(pipeline, Work{PassKind::B, 3, 2, 0}, inputs);
  ASSERT_EQ(inputs.size(), 1u);
  EXPECT_EQ(inputs[0].shard, ShardKind::Output);
  EXPECT_EQ(inputs[0].group, 2);
  for (int d = 0; d < 4; ++d) {
    llvm::SmallVector<Work> from;
    getCollectiveContributions(pipeline, inputs[0], d, from);
    ASSERT_EQ(from.size(), 1u);
    EXPECT_EQ(from[0].kind, PassKind::T);
    EXPECT_EQ(from[0].stage, d) << "a shard pass names its device";
    EXPECT_EQ(from[0].microbatch, 2);
  }
  // The input shard's gradient scatter: stage 0's B, on device 0 only.
  CollectiveId scatter{ShardKind::Input, 1, 1, 0};
  llvm::SmallVector<Work> from;
  getCollectiveContributions(pipeline, scatter, 1, from);
  EXPECT_TRUE(from.empty());
  getCollectiveContributions(pipeline, scatter, 0, from);
  ASSERT_EQ(from.size(), 1u);
  EXPECT_EQ(from[0].kind, PassKind::B);
  EXPECT_EQ(from[0].stage, 0);
}

} // namespace
