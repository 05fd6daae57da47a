//===- PlanFormatTest.cpp - The plan format's names and rules -------------===//
//
// Linked into SluiceRuntimeTests, which links no LLVM or MLIR: the plan
// format library stands on its own, as the runtime-only build needs.
//
//===----------------------------------------------------------------------===//

#include "sluice/PlanFormat/Format.h"

#include <gtest/gtest.h>

using namespace sluice::rt;

namespace {

TEST(PlanFormat, EveryNameParsesBackToItsValue) {
  for (int i = 0; i < kNumPasses; ++i)
    EXPECT_EQ(parsePass(passName(Pass(i))), Pass(i)) << passName(Pass(i));
  for (int i = 0; i < kNumOps; ++i)
    EXPECT_EQ(parseOp(opName(Op(i))), Op(i)) << opName(Op(i));
  for (Shard s : {Shard::Input, Shard::Output})
    EXPECT_EQ(parseShard(shardName(s)), s);
  for (Recompute r : {Recompute::None, Recompute::Selective, Recompute::Full})
    EXPECT_EQ(parseRecompute(recomputeName(r)), r);
  // Names are case-sensitive and exact, as the file is.
  EXPECT_FALSE(parsePass("f"));
  EXPECT_FALSE(parsePass("BWW"));
  EXPECT_FALSE(parseOp("send "));
  EXPECT_FALSE(parseShard("none"));
  EXPECT_FALSE(parseRecompute("partial"));
  EXPECT_EQ(passNames(), "F, B, W, BW, S, S2, T, IF, IB");
  EXPECT_EQ(opNames(), "exec, send, recv, collective, grad_sync");
}

TEST(PlanFormat, ShardPassesBelongToTheirShard) {
  for (Pass p : {Pass::F, Pass::B, Pass::W, Pass::BW})
    EXPECT_EQ(getPassShard(p), Shard::None) << passName(p);
  for (Pass p : {Pass::S, Pass::S2, Pass::T})
    EXPECT_EQ(getPassShard(p), Shard::Output) << passName(p);
  for (Pass p : {Pass::IF, Pass::IB})
    EXPECT_EQ(getPassShard(p), Shard::Input) << passName(p);
}

// Yeung et al., 2024 §4: the naive output layer crosses
// three barriers, Algorithm 1 two, Algorithm 2 one; each barrier is a
// collective after the broadcast of the last stage's output.
TEST(PlanFormat, BarriersPerAlgorithm) {
  EXPECT_EQ(getBarriers(0), 3);
  EXPECT_EQ(getBarriers(1), 2);
  EXPECT_EQ(getBarriers(2), 1);
  VocabularyShape shape;
  shape.input = shape.output = true;
  for (int algorithm : {0, 1, 2}) {
    shape.algorithm = algorithm;
    EXPECT_EQ(shape.getNumGroups(Shard::Output), 1 + getBarriers(algorithm));
    EXPECT_EQ(shape.getNumGroups(Shard::Input), 2);
  }
  EXPECT_EQ(getNumShardPasses(Shard::Input, 2), 2);
  EXPECT_EQ(getNumShardPasses(Shard::Output, 0), 3); // S, S2, T
  EXPECT_EQ(getNumShardPasses(Shard::Output, 1), 2); // S, T
  EXPECT_EQ(getNumShardPasses(Shard::Output, 2), 2);
  shape.input = shape.output = false;
  EXPECT_EQ(shape.getNumGroups(Shard::Input), 0);
  EXPECT_EQ(shape.getNumGroups(Shard::Output), 0);
}

/// Every collective a pass waits for is one that exists, and is
/// contributed to by a pass that comes before it in the shard's order
/// (S, [S2,] T), or by the stage pass next to the shard.
TEST(PlanFormat, EachPassWaitsForTheCollectiveBeforeIt) {
  VocabularyShape shape;
  shape.input = shape.output = true;
  shape.inputRoot = 0;
  shape.outputRoot = 3;
  shape.lastStage = 7;
  for (bool split : {false, true})
    for (int algorithm : {0, 1, 2}) {
      shape.algorithm = algorithm;
      shape.splitBackward = split;
      Pass backward = split ? Pass::B : Pass::BW;
      auto in = [&](Pass pass, Shard shard, int stage) {
        return getCollectiveInput(shape, pass, shard, stage);
      };
      // The first stage's F reads the gathered lookup (IF's group 0).
      EXPECT_EQ(in(Pass::F, Shard::None, 0), (CollectiveRef{Shard::Input, 0}));
      EXPECT_FALSE(in(Pass::F, Shard::None, 1));
      EXPECT_EQ(getContributor(shape, {Shard::Input, 0})->pass, Pass::IF);
      // IB reads the first stage's input gradient, from its device only.
      EXPECT_EQ(in(Pass::IB, Shard::Input, 0), (CollectiveRef{Shard::Input, 1}));
      std::optional<Contributor> grad =
          getContributor(shape, {Shard::Input, 1});
      EXPECT_EQ(grad->pass, backward);
      EXPECT_EQ(grad->device, 0);
      EXPECT_TRUE(contributes(shape, {Shard::Input, 1}, 0, backward, 0,
                              Shard::None));
      EXPECT_FALSE(contributes(shape, {Shard::Input, 1}, 1, backward, 0,
                               Shard::None));
      // S reads the broadcast of the last stage's F, from its device.
      EXPECT_EQ(in(Pass::S, Shard::Output, 0),
                (CollectiveRef{Shard::Output, 0}));
      EXPECT_TRUE(contributes(shape, {Shard::Output, 0}, 3, Pass::F, 7,
                              Shard::None));
      EXPECT_FALSE(contributes(shape, {Shard::Output, 0}, 2, Pass::F, 7,
                               Shard::None));
      EXPECT_FALSE(contributes(shape, {Shard::Output, 0}, 3, Pass::F, 6,
                               Shard::None));
      // T reads the last collective before it: after S2 (naive) or S.
      std::optional<CollectiveRef> t = in(Pass::T, Shard::Output, 0);
      ASSERT_TRUE(t);
      EXPECT_EQ(getContributor(shape, *t)->pass,
                algorithm == 0 ? Pass::S2 : Pass::S);
      // The last stage's backward reads the last barrier, which reduces
      // the input gradient: after T, or after S with Algorithm 2, whose
      // one barrier carries it (§5, Algorithm 2).
      std::optional<CollectiveRef> last = in(backward, Shard::None, 7);
      ASSERT_TRUE(last);
      EXPECT_EQ(last->group, getBarriers(algorithm));
      EXPECT_EQ(getContributor(shape, *last)->pass,
                algorithm == 2 ? Pass::S : Pass::T);
      EXPECT_FALSE(in(backward, Shard::None, 6));
      // Shard passes contribute on every device, only to their shard.
      EXPECT_TRUE(contributes(shape, {Shard::Output, 1}, 5, Pass::S, 0,
                              Shard::Output));
      EXPECT_FALSE(contributes(shape, {Shard::Output, 1}, 5, Pass::S, 0,
                               Shard::Input));
      // No collective past the shard's last.
      EXPECT_FALSE(getContributor(shape, {Shard::Output, 1 + last->group}));
    }
}

TEST(PlanFormat, AnAbsentShardHasNoCollectives) {
  VocabularyShape shape;
  shape.lastStage = 3;
  EXPECT_FALSE(getCollectiveInput(shape, Pass::F, Shard::None, 0));
  EXPECT_FALSE(getCollectiveInput(shape, Pass::BW, Shard::None, 3));
  EXPECT_FALSE(getContributor(shape, {Shard::Input, 0}));
  EXPECT_FALSE(getContributor(shape, {Shard::Output, 0}));
}

} // namespace
