//===- ExpertDispatchTest.cpp - Expert parallelism's host plan ------------===//
//
// runtime/blocks/ExpertDispatch.h: the all-to-all's row counts, the
// regrouping from source-major to expert-major, and the capacity refusal.
//
//===----------------------------------------------------------------------===//

#include "ExpertDispatch.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <tuple>

using namespace sluice::rt::block;

namespace {

TEST(ExpertDispatch, CountsBlocksAndOffsetsOfOneMember) {
  // Member 1 of 2, 4 experts (it holds 2 and 3).
  ExpertDispatch d;
  ASSERT_EQ(planExpertDispatch({3, 0, 2, 5}, {2, 1, 2, 5}, 2, 1, 100, d), "");
  EXPECT_EQ(d.sendRows, (std::vector<int64_t>{3, 7}));
  EXPECT_EQ(d.recvRows, (std::vector<int64_t>{3, 7}));
  EXPECT_EQ(d.localOffsets, (std::vector<int64_t>{0, 4, 10}));
  std::vector<std::tuple<int64_t, int64_t, int64_t>> blocks;
  for (const ExpertDispatch::Block &b : d.blocks)
    blocks.push_back({b.from, b.to, b.rows});
  EXPECT_EQ(blocks, (std::vector<std::tuple<int64_t, int64_t, int64_t>>{
                        {0, 0, 2}, {2, 4, 1}, {3, 2, 2}, {5, 5, 5}}));
}

// The whole group simulated: every member's received rows, labelled by
// (source, expert, copy), regrouped by its blocks, come out expert by
// expert and source by source within an expert, as the grouped GEMM and
// the return trip need; and what s sends q is what q receives from s.
TEST(ExpertDispatch, TheGroupsRowsArriveExpertMajor) {
  std::mt19937 rng(7);
  for (int members : {1, 2, 3, 4}) {
    int64_t local = 3, experts = members * local;
    std::vector<std::vector<int64_t>> counts(static_cast<size_t>(members));
    for (auto &row : counts)
      for (int64_t e = 0; e < experts; ++e)
        row.push_back(int64_t(rng() % 4)); // some experts get none
    std::vector<ExpertDispatch> plans(static_cast<size_t>(members));
    for (int j = 0; j < members; ++j) {
      std::vector<int64_t> incoming;
      for (int s = 0; s < members; ++s)
        for (int64_t l = 0; l < local; ++l)
          incoming.push_back(counts[size_t(s)][size_t(j * local + l)]);
      ASSERT_EQ(planExpertDispatch(counts[size_t(j)], incoming, members, j,
                                   1 << 20, plans[size_t(j)]),
                "");
    }
    for (int j = 0; j < members; ++j) {
      const ExpertDispatch &d = plans[size_t(j)];
      for (int s = 0; s < members; ++s)
        EXPECT_EQ(d.recvRows[size_t(s)], plans[size_t(s)].sendRows[size_t(j)]);
      // What arrives, source by source, each source's rows expert by
      // expert (it sorted them so).
      std::vector<std::tuple<int, int64_t, int64_t>> received, want;
      for (int s = 0; s < members; ++s)
        for (int64_t l = 0; l < local; ++l)
          for (int64_t i = 0; i < counts[size_t(s)][size_t(j * local + l)];
               ++i)
            received.push_back({s, j * local + l, i});
      std::vector<std::tuple<int, int64_t, int64_t>> regrouped(
          received.size(), {-1, -1, -1});
      for (const ExpertDispatch::Block &b : d.blocks)
        for (int64_t r = 0; r < b.rows; ++r)
          regrouped[size_t(b.to + r)] = received[size_t(b.from + r)];
      want = received;
      std::stable_sort(want.begin(), want.end(), [](auto &a, auto &b) {
        return std::get<1>(a) < std::get<1>(b);
      });
      EXPECT_EQ(regrouped, want) << members << " members, member " << j;
      for (int64_t l = 0; l < local; ++l)
        for (int64_t r = d.localOffsets[size_t(l)];
             r < d.localOffsets[size_t(l + 1)]; ++r)
          EXPECT_EQ(std::get<1>(regrouped[size_t(r)]), j * local + l);
    }
  }
}

TEST(ExpertDispatch, AnOverflowNamesTheBusiestExpert) {
  ExpertDispatch d;
  EXPECT_EQ(planExpertDispatch({0, 0, 4, 1}, {3, 1, 6, 0}, 2, 1, 9, d),
            "expert parallelism: member 1 receives 10 token copies, over the "
            "9 its buffers were planned for; the busiest, expert 2, has 9 (a "
            "larger expert capacity, or the load-balancing loss, aux_loss)");
  EXPECT_EQ(planExpertDispatch({1, 2, 3}, {1}, 2, 0, 9, d),
            "an expert group of 2 members cannot split 3 experts");
}

} // namespace
