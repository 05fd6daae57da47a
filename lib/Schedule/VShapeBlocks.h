//===- VShapeBlocks.h - V building blocks as grids --------------*- C++ -*-===//
//
// Private to lib/Schedule: the controllable-memory paper's V building
// blocks (Qi et al. 2024, §3 and Appendix A) as grids of unit slots, and
// the steps that turn a block into a schedule (repeat, squeeze, reorder;
// RepeatVShape.cpp's header says how). Sluice's cost-aware search and the
// authors' choice (RepeatVShape.cpp) both build their candidates here.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_LIB_SCHEDULE_VSHAPEBLOCKS_H
#define SLUICE_LIB_SCHEDULE_VSHAPEBLOCKS_H

#include "VShapeSearch.h"

#include <algorithm>
#include <array>
#include <optional>
#include <string>
#include <vector>

namespace mlir::sluice::sched::vblocks {

inline constexpr int kPeriod = 6;
inline constexpr const char *kKinds = "FfBbWw";
using Grid = std::vector<std::string>;

inline int kindIndex(char c) {
  switch (c) {
  case 'F':
    return 0;
  case 'f':
    return 1;
  case 'B':
    return 2;
  case 'b':
    return 3;
  case 'W':
    return 4;
  case 'w':
    return 5;
  default:
    return -1;
  }
}
inline bool isForward(char c) { return c == 'F' || c == 'f'; }
inline bool isWeight(char c) { return c == 'W' || c == 'w'; }
inline bool isUpper(char c) { return c == 'F' || c == 'B' || c == 'W'; }

/// Positions of F, f, B, b, W, w within the period (-1: none yet).
using Pattern = std::array<int, kPeriod>;

class Search {
public:
  Search(int p, int m) : p(p), m(m) {}

  /// Steps 1-3 for one block under `maxMem`; the peak memory (for the
  /// caller's stopping rule) and the grid when valid.
  std::pair<std::optional<Grid>, int> build(const std::vector<Pattern> &block,
                                            int maxMem);

private:
  int p, m;
  bool ok = true;

  char &at(Grid &g, int i, long j) {
    static char dummy;
    if (i < 0 || i >= int(g.size()) || j < 0 || j >= long(g[i].size())) {
      ok = false;
      return dummy = ' ';
    }
    return g[i][size_t(j)];
  }

  static std::vector<int> peaks(const Grid &g) {
    std::vector<int> all;
    for (const std::string &row : g) {
      int peak = 0, mem = 0;
      for (char c : row) {
        mem += isForward(c) ? 1 : isWeight(c) ? -1 : 0;
        peak = std::max(peak, mem);
      }
      all.push_back(peak);
    }
    return all;
  }
  static int peak(const Grid &g) {
    std::vector<int> all = peaks(g);
    return *std::max_element(all.begin(), all.end());
  }

  void clearFrom(Grid &g, int i, long pos, int step) {
    while (pos >= 0 && pos < long(g[i].size())) {
      g[i][size_t(pos)] = ' ';
      pos += step * kPeriod;
    }
  }
  Grid repeat(const std::vector<Pattern> &block, int mbs);
  void clearInvalid(Grid &g, int mbs);
  Grid squeeze(const Grid &g, int mbs);
  void warmup(Grid &g, int mbs);
  void releaseWeights(Grid &g, int limit);
  void cooldown(Grid &g);
  void fillIdle(Grid &g);
  void relabelWeights(Grid &g);
  void dropSurplus(Grid &g);
  bool correct(const Grid &g);
};

/// Each W in the first free position of the period after its backward.
void fillWeights(Pattern &pattern);
/// A building block: device 0's pattern `first`, each next device's
/// offset by `head` for the first `headLength` devices and by `tail`
/// after; nullopt where two passes of a device meet.
std::optional<std::vector<Pattern>> makeBlock(const Pattern &first,
                                              const std::array<int, 4> &head,
                                              const std::array<int, 4> &tail,
                                              int headLength, int p);
/// A grid's passes as each device's order: F and f are the first and
/// second chunk's forwards; the backward of the second chunk runs down the
/// V (B), the first chunk's back up (b); W and w are their weight passes.
BlockOrders toOrders(const Grid &grid, const std::vector<int> &stageOf);
/// The 60 patterns of device 0 (F at 0; f, B, b apart; each W in the first
/// free slot after its backward).
std::vector<Pattern> getStartPatterns();
/// §3.1's uniform offsets: F and B move k slots per device, f and b -1.
std::vector<std::array<int, 4>> getOffsets();

} // namespace mlir::sluice::sched::vblocks

#endif // SLUICE_LIB_SCHEDULE_VSHAPEBLOCKS_H
