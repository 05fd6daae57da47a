//===- GpuPlacementTest.cpp - Which GPU each rank of a host uses ----------===//
//
// Ranks counted per physical GPU by UUID (GpuPlacement.h), under the ways
// launchers hand out GPUs: every rank sees all of them, each rank sees its
// own, several ranks share one.
//
//===----------------------------------------------------------------------===//

#include "GpuPlacement.h"

#include <gtest/gtest.h>

using namespace sluice::rt;

namespace {

/// What each of a host's ranks sees: `visible` GPUs, the UUIDs of the
/// whole machine's GPUs `ids`, and which of them rank r's process sees
/// first (its view starts at `offset(r)`).
std::vector<GpuPlacement> place(int ranks, int visible,
                                const std::vector<std::string> &ids,
                                int (*offset)(int)) {
  std::vector<std::string> chosen;
  std::vector<int> index;
  for (int r = 0; r < ranks; ++r) {
    int i = chooseGpu(r, visible);
    index.push_back(i);
    chosen.push_back(ids[(offset(r) + i) % ids.size()]);
  }
  std::vector<GpuPlacement> out;
  for (int r = 0; r < ranks; ++r)
    out.push_back(placeOnGpus(r, index[r], chosen));
  return out;
}

const std::vector<std::string> eight = {"g0", "g1", "g2", "g3",
                                        "g4", "g5", "g6", "g7"};

TEST(GpuPlacement, EveryRankSeesEveryGpu) {
  for (const GpuPlacement &p : place(8, 8, eight, [](int) { return 0; })) {
    EXPECT_EQ(p.sharing, 1);
    EXPECT_EQ(p.gpus, 8);
  }
}

// SLURM --gpus-per-task=1: each process sees one GPU, index 0, a different
// one each. Counting by index would put all eight on one GPU.
TEST(GpuPlacement, OneGpuPerTask) {
  std::vector<GpuPlacement> all =
      place(8, 1, eight, [](int r) { return r; });
  for (size_t r = 0; r < all.size(); ++r) {
    EXPECT_EQ(all[r].gpu, 0);
    EXPECT_EQ(all[r].sharing, 1);
    EXPECT_EQ(all[r].gpus, 8);
    EXPECT_EQ(all[r].gpuColor, int(r));
  }
}

TEST(GpuPlacement, RanksShareAGpu) {
  std::vector<GpuPlacement> all =
      place(8, 1, {"only"}, [](int) { return 0; });
  for (size_t r = 0; r < all.size(); ++r) {
    EXPECT_EQ(all[r].sharing, 8);
    EXPECT_EQ(all[r].gpuRank, int(r));
    EXPECT_EQ(all[r].gpus, 1);
  }
}

// Three ranks on two GPUs: round-robin gives GPU 0 two of them.
TEST(GpuPlacement, MoreRanksThanGpus) {
  std::vector<GpuPlacement> all =
      place(3, 2, {"a", "b"}, [](int) { return 0; });
  EXPECT_EQ(all[0].sharing, 2);
  EXPECT_EQ(all[1].sharing, 1);
  EXPECT_EQ(all[2].sharing, 2);
  EXPECT_EQ(all[2].gpuRank, 1);
  EXPECT_EQ(all[0].gpuColor, all[2].gpuColor);
  EXPECT_NE(all[0].gpuColor, all[1].gpuColor);
}

TEST(GpuPlacement, NoGpu) {
  EXPECT_TRUE(placeOnGpus(0, 0, {}).empty());
}

} // namespace
