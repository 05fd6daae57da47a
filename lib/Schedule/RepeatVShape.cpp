//===- RepeatVShape.cpp - V shapes by repeating building blocks ----------===//
//
// The controllable-memory paper's framework (Qi et al. 2024, §3 and
// Appendix A) over its whole space of V building blocks, choosing by the
// real costs: Sluice's cost-aware search for V-Half and V-Min under their
// memory caps. The paper's authors publish the same search
// (v_auto_schedule.py) choosing by their own timing of equal passes; this
// chooses by the simulator's (TimeOrders.h) on the pipeline's durations,
// keeps the fastest few, and the improver (ImproveOrders.h) polishes them
// and weighs them against its other candidates. The authors' own choice
// -- the same blocks, the one their timing of equal passes finds shortest
// -- is a named mode of this search (getAuthorsVShapeOrders), which the
// schedule benchmark uses as its v_auto peer: the two share the block
// construction below and differ in how they choose (docs/schedules.md
// says what the comparison can and cannot show).
//
// The search works on unit slots, six per period (F and B of both chunks,
// two W). A building block gives each device the positions of its six
// passes in the period: device 0's pattern is one of the 60 with F at 0
// and f, B, b at distinct positions, each W in the first free slot after
// its backward; device i + 1's follows device i's by a uniform offset
// (F and B +k, f and b -1; k = 1..5), one offset for the first devices and
// another, not larger, for the rest. Each block is
//   1. repeated (at least 2p microbatches), the passes before the first
//      and after the last valid microbatch cleared;
//   2. squeezed: every pass moves to the earliest slot its dependencies
//      and its device allow, order kept;
//   3. reordered: the warm-up rebuilt (device i: forwards of the first
//      chunk, then i + 1 pairs F f, then B W and a forward in turn), the
//      surplus microbatches dropped, W moved later where memory allows
//      when there are few microbatches, the cool-down rebuilt (the last
//      backwards of both chunks at fixed distances, W after them), and
//      every idle slot filled by the first later pass that may move there
//      without raising the device's peak memory.
// In the grids, F and f are the first and second chunk's forwards, B the
// second chunk's backward (running down the V from device 0), b the first
// chunk's (back up), W and w their weight passes. A block whose schedule
// holds more than the cap ends the walk over the head length for its
// pattern and offsets (larger heads hold more).
//
//===----------------------------------------------------------------------===//

#include "sluice/Schedule/VShapeOrders.h"

#include "VShapeSearch.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <tuple>

using namespace mlir::sluice;
using namespace mlir::sluice::sched;

namespace {
constexpr int kPeriod = 6;
constexpr const char *kKinds = "FfBbWw";
using Grid = std::vector<std::string>;

int kindIndex(char c) {
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
bool isForward(char c) { return c == 'F' || c == 'f'; }
bool isWeight(char c) { return c == 'W' || c == 'w'; }
bool isUpper(char c) { return c == 'F' || c == 'B' || c == 'W'; }

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

Grid Search::repeat(const std::vector<Pattern> &block, int mbs) {
  Grid g;
  for (int i = 0; i < p; ++i) {
    std::string period(kPeriod, ' ');
    for (int k = 0; k < kPeriod; ++k)
      if (block[i][k] >= 0)
        period[size_t(block[i][k])] = kKinds[k];
    std::string row;
    for (int r = 0; r < 4 * p + mbs + 1; ++r)
      row += period;
    g.push_back(row);
  }
  return g;
}

// Walks one cursor over the periods: for each kind in F, f, B, b and each
// device in the kind's direction, the first occurrence at or after the
// cursor is the first valid microbatch; everything one period before it
// and `mbs` periods after it is cleared (with the backward's W).
void Search::clearInvalid(Grid &g, int mbs) {
  long index = kPeriod;
  for (char kind : std::string("FfBb")) {
    bool down = kind == 'F' || kind == 'B';
    for (int n = 0; n < p; ++n) {
      int i = down ? n : p - 1 - n;
      for (int j = 0; j < kPeriod; ++j) {
        if (at(g, i, index) == kind) {
          clearFrom(g, i, index - kPeriod, -1);
          clearFrom(g, i, index + long(kPeriod) * mbs, 1);
          ++index;
          if (kind == 'B' || kind == 'b') {
            char weight = kind == 'B' ? 'W' : 'w';
            for (int k = 0; k < kPeriod; ++k)
              if (at(g, i, index + k) == weight) {
                clearFrom(g, i, index + k - kPeriod, -1);
                clearFrom(g, i, index + k + long(kPeriod) * mbs, 1);
                break;
              }
          }
          break;
        }
        ++index;
      }
    }
  }
}

// Each pass to the earliest slot after its device's previous pass and its
// input (F, B from the device before; f, b from the device after; at the
// V's ends the other chunk's pass on the same device is earlier in the
// row already), walking the slots in order, downward passes first.
Grid Search::squeeze(const Grid &g, int mbs) {
  Grid out(size_t(p), std::string(g[0].size(), ' '));
  std::vector<std::array<int, kPeriod>> count(size_t(p), {0, 0, 0, 0, 0, 0});
  std::vector<std::array<long, kPeriod>> where(size_t(p) * mbs);
  for (auto &w : where)
    w.fill(-1);
  std::vector<long> next(size_t(p), 0);
  long length = long(g[0].size());
  for (long j = 0; j < length; ++j)
    for (int dir = 0; dir < 2; ++dir)
      for (int n = 0; n < p; ++n) {
        int i = dir == 0 ? n : p - 1 - n;
        char c = g[i][size_t(j)];
        if (c == ' ' || isUpper(c) != (dir == 0))
          continue;
        int k = kindIndex(c);
        int mb = count[i][k];
        if (mb >= mbs) {
          ok = false;
          return out;
        }
        long index;
        if (isWeight(c) || (i == 0 && (c == 'F' || c == 'B')) ||
            (i == p - 1 && (c == 'f' || c == 'b'))) {
          bool ready = true;
          if (i == 0 && c == 'B')
            ready = where[size_t(mb) * p + i][kindIndex('f')] >= 0;
          if (i == p - 1 && c == 'f')
            ready = where[size_t(mb) * p + i][kindIndex('F')] >= 0;
          if (i == p - 1 && c == 'b')
            ready = where[size_t(mb) * p + i][kindIndex('B')] >= 0;
          if (!ready) {
            ok = false;
            return out;
          }
          index = next[i];
        } else {
          int from = (c == 'F' || c == 'B') ? i - 1 : i + 1;
          long input = where[size_t(mb) * p + from][k];
          if (input < 0) {
            ok = false;
            return out;
          }
          index = std::max(input + 1, next[i]);
        }
        at(out, i, index) = c;
        if (!ok)
          return out;
        count[i][k] = mb + 1;
        where[size_t(mb) * p + i][k] = index;
        next[i] = index + 1;
      }
  long newLength = *std::max_element(next.begin(), next.end());
  for (std::string &row : out)
    row.resize(size_t(newLength));
  return out;
}

void Search::warmup(Grid &g, int mbs) {
  int limit = std::min(peak(g), 2 * p);
  for (int i = 0; i < p; ++i) {
    int wantFf = std::min({i + 1, limit / 2, mbs});
    int wantF = std::min(limit - wantFf, mbs);
    // Take every pass before the device's first b out, counting them.
    int nF = 0, nFf = 0, nB = 0, nW = 0;
    for (size_t j = 0; j < g[i].size(); ++j) {
      char c = g[i][j];
      if (c == 'b')
        break;
      nF += c == 'F';
      nFf += c == 'f';
      nB += c == 'B';
      nW += c == 'W';
      if (c == 'w') {
        ok = false;
        return;
      }
      g[i][j] = ' ';
    }
    // And put them back: the first chunk's forwards over 2(p - 1 - i)
    // slots, i + 1 pairs F f, then B, W, a forward (f first) in turn.
    long j = i;
    int uF = 0, uFf = 0, uB = 0, uW = 0;
    for (int k = 0; k < 2 * (p - 1 - i); ++k, ++j)
      if (uF < wantF && uF < nF) {
        at(g, i, j) = 'F';
        ++uF;
      }
    for (int k = 0; k < i + 1; ++k) {
      if (uF < wantF && uF < nF) {
        at(g, i, j) = 'F';
        ++uF;
      }
      ++j;
      if (uFf < wantFf && uFf < nFf) {
        at(g, i, j) = 'f';
        ++uFf;
      }
      ++j;
    }
    while (ok && (uF < nF || uFf < nFf || uB < nB || uW < nW)) {
      if (uB < nB) {
        at(g, i, j) = 'B';
        ++uB;
      }
      ++j;
      if (uW < nW) {
        at(g, i, j) = 'W';
        ++uW;
      }
      ++j;
      if (uFf < nFf) {
        if (uFf >= uF) {
          ok = false;
          return;
        }
        at(g, i, j) = 'f';
        ++uFf;
      } else if (uF < nF) {
        at(g, i, j) = 'F';
        ++uF;
      }
      ++j;
    }
  }
}

// Few microbatches: W of the warm-up move to the end of the row until
// the device holds `limit`, using the memory the schedule has anyway.
void Search::releaseWeights(Grid &g, int limit) {
  std::vector<int> all = peaks(g);
  int least = *std::min_element(all.begin(), all.end());
  size_t length = g[0].size();
  for (int i = 0; i < p; ++i) {
    std::string padding(size_t(std::max(0, limit - least)), ' ');
    int moved = 0;
    for (size_t j = 0; j < length; ++j) {
      if (all[i] + moved >= limit)
        break;
      if (isWeight(g[i][j])) {
        padding[size_t(moved)] = g[i][j];
        g[i][j] = ' ';
        ++moved;
      }
    }
    g[i] += padding;
  }
}

void Search::cooldown(Grid &g) {
  int limit = peak(g);
  if (limit > 2 * p) {
    ok = false;
    return;
  }
  int maxBb = std::min((limit + 1) / 2, m);
  int maxB = std::min(limit - maxBb, m);
  long start = -1;
  for (int i = 0; i < p; ++i) {
    int nB = 0, nBb = 0, nW = 0, nWw = 0;
    long lastFf = -1;
    // The last backwards of both chunks come out...
    for (long j = long(g[i].size()) - 1; j >= 0; --j) {
      char &c = g[i][size_t(j)];
      if (c == 'f' && lastFf == -1)
        lastFf = j;
      if (c == 'B' && nB < i + 1 && nB < maxB) {
        c = ' ';
        ++nB;
      }
      if (c == 'b' && nBb < maxBb) {
        c = ' ';
        ++nBb;
      }
    }
    // ... with enough of the last W ...
    for (long j = long(g[i].size()) - 1; j >= 0; --j) {
      if (nW >= nB && nWw >= nBb && nW + nWw >= limit)
        break;
      char &c = g[i][size_t(j)];
      if (c == 'W') {
        c = ' ';
        ++nW;
      }
      if (c == 'w') {
        c = ' ';
        ++nWw;
      }
    }
    if (i == 0)
      start = lastFf;
    // ... and go back at fixed distances from device 0's last f.
    for (int k = 0; k < nBb; ++k) {
      char &c = at(g, i, start - i + 2 * p - 2 * k);
      if (!ok || c != ' ') {
        ok = false;
        return;
      }
      c = 'b';
    }
    for (int k = 0; k < nB; ++k)
      at(g, i, start + 1 + i - 2 * k) = 'B';
    if (!ok)
      return;
  }
  // W back into the idle slots after the device's last W, then the end.
  size_t length = 0;
  for (int i = 0; i < p; ++i) {
    int dueW = 0, dueWw = 0;
    long lastW = -1;
    for (long j = long(g[i].size()) - 1; j >= 0; --j)
      if (isWeight(g[i][size_t(j)])) {
        lastW = j;
        break;
      }
    for (size_t j = 0; j < g[i].size(); ++j) {
      char c = g[i][j];
      dueW += c == 'B' ? 1 : c == 'W' ? -1 : 0;
      dueWw += c == 'b' ? 1 : c == 'w' ? -1 : 0;
      if (c == ' ' && long(j) > lastW) {
        if (dueW > 0) {
          g[i][j] = 'W';
          --dueW;
        } else if (dueWw > 0) {
          g[i][j] = 'w';
          --dueWw;
        }
      }
    }
    g[i].append(size_t(std::max(dueW, 0)), 'W');
    g[i].append(size_t(std::max(dueWw, 0)), 'w');
    length = std::max(length, g[i].size());
  }
  for (std::string &row : g)
    row.resize(length, ' ');
  g = squeeze(g, m);
}

// Left to right over the slots: an idle slot takes the first later pass
// of the device that may run there (its input is done by then, a W's
// backward is done, a forward does not raise the device's peak).
void Search::fillIdle(Grid &g) {
  int limit = peak(g);
  long length = long(g[0].size());
  std::vector<std::array<long, kPeriod>> last(static_cast<size_t>(p));
  for (int i = 0; i < p; ++i) {
    last[i].fill(-1);
    for (long j = 0; j < length; ++j)
      if (int k = kindIndex(g[i][size_t(j)]); k >= 0)
        last[i][k] = j;
  }
  std::vector<int> mem(size_t(p), 0);
  std::vector<std::array<int, kPeriod>> count(size_t(p), {0, 0, 0, 0, 0, 0});
  std::vector<std::array<long, kPeriod>> where(size_t(p) * m);
  for (auto &w : where)
    w.fill(-1);
  auto place = [&](int i, long j, char c) {
    int k = kindIndex(c);
    where[size_t(count[i][k]) * p + i][k] = j;
    ++count[i][k];
    mem[i] += isForward(c) ? 1 : isWeight(c) ? -1 : 0;
  };
  for (long j = 0; j < length; ++j)
    for (int i = 0; i < p; ++i) {
      char c = g[i][size_t(j)];
      if (c != ' ') {
        if (count[i][kindIndex(c)] >= m) {
          ok = false;
          return;
        }
        place(i, j, c);
        continue;
      }
      std::array<bool, kPeriod> open;
      for (int k = 0; k < kPeriod; ++k)
        open[k] = last[i][k] > j;
      int delta = 0, highest = 0;
      for (long k = j + 1; k < length; ++k) {
        if (std::none_of(open.begin(), open.end(), [](bool b) { return b; }))
          break;
        char d = g[i][size_t(k)];
        delta += isForward(d) ? 1 : isWeight(d) ? -1 : 0;
        int before = highest;
        highest = std::max(highest, delta);
        int kind = kindIndex(d);
        if (kind < 0 || !open[kind])
          continue;
        open[kind] = false;
        if (isForward(d) && mem[i] + before >= limit)
          continue;
        int mb = count[i][kind];
        bool movable = true;
        auto inputDone = [&](int from) {
          long input = where[size_t(mb) * p + from][kind];
          return input > -1 && input < j;
        };
        if (d == 'F' || d == 'B') {
          if (i > 0)
            movable = inputDone(i - 1);
          else if (d == 'B')
            movable = count[i][kindIndex('f')] > mb;
        } else if (d == 'f' || d == 'b') {
          if (i + 1 < p)
            movable = inputDone(i + 1);
          else
            movable = count[i][kindIndex(d == 'f' ? 'F' : 'B')] > mb;
        } else {
          movable = count[i][kindIndex(d == 'W' ? 'B' : 'b')] > mb;
        }
        if (!movable)
          continue;
        g[i][size_t(j)] = d;
        g[i][size_t(k)] = ' ';
        place(i, j, d);
        break;
      }
    }
}

// Each W takes the kind of the oldest backward still owing one.
void Search::relabelWeights(Grid &g) {
  for (std::string &row : g) {
    std::array<int, kPeriod> count{};
    for (char c : row)
      if (int k = kindIndex(c); k >= 0)
        ++count[k];
    for (int n : count)
      if (n != m) {
        ok = false;
        return;
      }
    std::string owed;
    size_t head = 0;
    for (char &c : row) {
      if (c == 'B' || c == 'b')
        owed += c == 'B' ? 'W' : 'w';
      else if (isWeight(c)) {
        if (head >= owed.size()) {
          ok = false;
          return;
        }
        c = owed[head++];
      }
    }
  }
}

void Search::dropSurplus(Grid &g) {
  for (std::string &row : g) {
    std::array<int, kPeriod> count{};
    for (char &c : row)
      if (int k = kindIndex(c); k >= 0) {
        if (count[k] >= m)
          c = ' ';
        else
          ++count[k];
      }
  }
}

bool Search::correct(const Grid &g) {
  std::vector<std::array<long, kPeriod>> where(size_t(p) * m);
  for (auto &w : where)
    w.fill(-1);
  for (int i = 0; i < p; ++i) {
    std::array<int, kPeriod> count{};
    for (size_t j = 0; j < g[i].size(); ++j)
      if (int k = kindIndex(g[i][j]); k >= 0) {
        if (count[k] >= m)
          return false;
        where[size_t(count[k]) * p + i][k] = long(j);
        ++count[k];
      }
    for (int n : count)
      if (n != m)
        return false;
  }
  enum { F, Ff, B, Bb, W, Ww };
  for (int i = 0; i < p; ++i)
    for (int mb = 0; mb < m; ++mb) {
      const auto &x = where[size_t(mb) * p + i];
      if (x[B] >= x[W] || x[Bb] >= x[Ww])
        return false;
      if (i == 0 && x[Ff] >= x[B])
        return false;
      if (i == p - 1 && (x[F] >= x[Ff] || x[B] >= x[Bb]))
        return false;
      if (i > 0 && i < p - 1) {
        const auto &up = where[size_t(mb) * p + i - 1];
        const auto &down = where[size_t(mb) * p + i + 1];
        if (up[F] >= x[F] || up[B] >= x[B] || down[Ff] >= x[Ff] ||
            down[Bb] >= x[Bb])
          return false;
      }
    }
  return true;
}

std::pair<std::optional<Grid>, int>
Search::build(const std::vector<Pattern> &block, int maxMem) {
  ok = true;
  int spare = std::max(m, 2 * p);
  Grid g = repeat(block, spare);
  clearInvalid(g, spare);
  int initial = peak(g);
  if (!ok || (m == spare && initial > maxMem) || initial > 2 * p)
    return {std::nullopt, initial};
  g = squeeze(g, spare);
  if (ok)
    warmup(g, spare);
  if (ok)
    g = squeeze(g, spare);
  if (!ok)
    return {std::nullopt, initial};
  int now = peak(g);
  if (now > initial)
    return {std::nullopt, initial};
  if (m < spare) {
    dropSurplus(g);
    if (m <= p && 2 * m <= maxMem)
      releaseWeights(g, std::min(2 * p, now));
    g = squeeze(g, m);
    if (!ok)
      return {std::nullopt, initial};
    initial = now = peak(g);
    if (now > maxMem)
      return {std::nullopt, now};
  }
  cooldown(g);
  if (ok)
    fillIdle(g);
  if (ok)
    relabelWeights(g);
  if (!ok)
    return {std::nullopt, now};
  now = peak(g);
  if (now > initial)
    return {std::nullopt, initial};
  if (!correct(g))
    return {std::nullopt, now};
  return {std::move(g), now};
}

/// Each W in the first free position of the period after its backward.
void fillWeights(Pattern &pattern) {
  std::array<bool, kPeriod> used{};
  for (int k = 0; k < 4; ++k)
    if (pattern[k] >= 0)
      used[size_t(pattern[k])] = true;
  for (int k : {2, 3})
    for (int j = 1; j < kPeriod; ++j) {
      int pos = (pattern[k] + j) % kPeriod;
      if (!used[size_t(pos)]) {
        pattern[k + 2] = pos;
        used[size_t(pos)] = true;
        break;
      }
    }
}

std::optional<std::vector<Pattern>> makeBlock(const Pattern &first,
                                              const std::array<int, 4> &head,
                                              const std::array<int, 4> &tail,
                                              int headLength, int p) {
  std::vector<Pattern> block{first};
  for (int i = 0; i + 1 < p; ++i) {
    const std::array<int, 4> &offset = i < headLength ? head : tail;
    Pattern next;
    next.fill(-1);
    std::array<bool, kPeriod> used{};
    for (int k = 0; k < 4; ++k) {
      int pos = (block[i][k] + offset[k] + kPeriod) % kPeriod;
      if (used[size_t(pos)])
        return std::nullopt;
      used[size_t(pos)] = true;
      next[k] = pos;
    }
    fillWeights(next);
    block.push_back(next);
  }
  return block;
}

/// A grid's passes as each device's order: F and f are the first and
/// second chunk's forwards; the backward of the second chunk runs down the
/// V (B), the first chunk's back up (b); W and w are their weight passes.
BlockOrders toOrders(const Grid &grid, const std::vector<int> &stageOf) {
  BlockOrders orders(grid.size());
  for (size_t d = 0; d < grid.size(); ++d) {
    std::array<int, kPeriod> count{};
    for (char c : grid[d]) {
      int k = kindIndex(c);
      if (k < 0)
        continue;
      PassKind kind = isForward(c)  ? PassKind::F
                      : isWeight(c) ? PassKind::W
                                    : PassKind::B;
      int chunk = (c == 'F' || c == 'b' || c == 'w') ? 0 : 1;
      orders[d].push_back({kind, stageOf[d * 2 + chunk], count[k]++, 0});
    }
  }
  return orders;
}

/// The 60 patterns of device 0 (F at 0; f, B, b apart; each W in the first
/// free slot after its backward).
std::vector<Pattern> getStartPatterns() {
  std::vector<Pattern> starts;
  for (int ff = 1; ff < kPeriod; ++ff)
    for (int bwd = 1; bwd < kPeriod; ++bwd)
      for (int bb = 1; bb < kPeriod; ++bb) {
        if (ff == bwd || ff == bb || bwd == bb)
          continue;
        Pattern pattern{0, ff, bwd, bb, -1, -1};
        fillWeights(pattern);
        starts.push_back(pattern);
      }
  return starts;
}

/// §3.1's uniform offsets: F and B move k slots per device, f and b -1.
std::vector<std::array<int, 4>> getOffsets() {
  std::vector<std::array<int, 4>> offsets;
  for (int k = 1; k < kPeriod; ++k)
    offsets.push_back({k, -1, k, -1});
  return offsets;
}

/// The authors' timing of a grid (v_auto_schedule.py): every pass after
/// the device's previous one; F and B after the device before (plus comm),
/// f and b after the device after; the span from each device's first F to
/// its last W, the longest over devices.
double getAuthorsSpan(const Grid &g, int m, double f, double b, double w,
                      double comm) {
  int p = int(g.size());
  using Id = std::tuple<int, char, int>;
  std::map<Id, Id> previous;
  for (int i = 0; i < p; ++i) {
    std::array<int, kPeriod> count{};
    std::optional<Id> last;
    for (char c : g[i]) {
      int k = kindIndex(c);
      if (k < 0)
        continue;
      Id id{i, c, count[k]++};
      if (last)
        previous[id] = *last;
      last = id;
    }
  }
  std::map<Id, double> done;
  std::function<double(int, char, int)> finish = [&](int i, char c, int mb) {
    Id key{i, c, mb};
    if (auto it = done.find(key); it != done.end())
      return it->second;
    double t = 0;
    if (auto it = previous.find(key); it != previous.end())
      t = finish(std::get<0>(it->second), std::get<1>(it->second),
                 std::get<2>(it->second));
    if ((c == 'F' || c == 'B') && i > 0)
      t = std::max(t, finish(i - 1, c, mb) + comm);
    if ((c == 'f' || c == 'b') && i + 1 < p)
      t = std::max(t, finish(i + 1, c, mb) + comm);
    double cost = isForward(c) ? f : (c == 'B' || c == 'b') ? b : w;
    return done[key] = t + cost;
  };
  double span = 0;
  for (int i = 0; i < p; ++i)
    for (char weight : {'W', 'w'})
      span = std::max(span, finish(i, weight, m - 1) - finish(i, 'F', 0) + f);
  return span;
}

} // namespace

std::vector<std::vector<std::vector<Work>>>
sched::searchRepeatedVShapes(const Pipeline &pipeline,
                             const Durations &durations,
                             llvm::ArrayRef<double> caps, size_t keep) {
  int p = pipeline.devices, m = pipeline.microbatches;
  if (!isPlainVShape(pipeline) || p < 2 || m < 1 || keep == 0 ||
      !canSearchBlocks(pipeline))
    return {};
  std::vector<int> stageOf = getVShapeStages(pipeline);
  // The grids count chunks: the cap is the fewest any device may hold;
  // the caps themselves are checked on the orders.
  int maxChunks = 2 * p;
  for (int d = 0; d < p; ++d)
    maxChunks =
        std::min(maxChunks, getChunkCap(durations, stageOf, caps[d], d));
  std::vector<Pattern> starts = getStartPatterns();
  std::vector<std::array<int, 4>> offsets = getOffsets();

  // Block number ((start * 5 + head offset) * 5 + tail offset) * p + head
  // length; its grid as orders, or its peak when the grid is over the cap.
  auto buildGrid = [&](const Pipeline &sized, size_t index,
                       int &peak) -> std::optional<BlockOrders> {
    int headLength = int(index % size_t(p));
    index /= size_t(p);
    size_t i1 = index % offsets.size(),
           i0 = index / offsets.size() % offsets.size();
    const Pattern &first = starts[index / offsets.size() / offsets.size()];
    auto block = makeBlock(first, offsets[i0], offsets[i1], headLength, p);
    peak = 0;
    if (!block)
      return std::nullopt;
    auto [grid, gridPeak] =
        Search(p, sized.microbatches).build(*block, maxChunks);
    peak = gridPeak;
    if (peak > maxChunks || !grid)
      return std::nullopt;
    return toOrders(*grid, stageOf);
  };
  auto enumerate = [&](const Pipeline &sized, OfferBlock offer) {
    for (size_t s = 0; s < starts.size(); ++s)
      for (size_t i0 = 0; i0 < offsets.size(); ++i0)
        for (size_t i1 = 0; i1 <= i0; ++i1)
          for (int headLength = 1; headLength < p; ++headLength) {
            size_t index =
                ((s * offsets.size() + i0) * offsets.size() + i1) * p +
                headLength;
            int peak;
            if (auto orders = buildGrid(sized, index, peak))
              offer(index, std::move(*orders));
            else if (peak > maxChunks)
              break; // longer heads hold more
          }
  };
  auto buildBlock = [&](const Pipeline &sized, size_t index) {
    int peak;
    return buildGrid(sized, index, peak);
  };
  return selectFastestBlocks(pipeline, durations, caps, keep, enumerate,
                             buildBlock);
}

std::optional<std::vector<std::vector<Work>>>
sched::getAuthorsVShapeOrders(const Pipeline &pipeline, double f, double b,
                              double w, double comm, int maxChunks) {
  int p = pipeline.devices, m = pipeline.microbatches;
  if (!isPlainVShape(pipeline) || p < 2 || m < 1)
    return std::nullopt;
  int limit = std::min(2 * p, maxChunks);
  std::vector<Pattern> starts = getStartPatterns();
  std::vector<std::array<int, 4>> offsets = getOffsets();
  Search search(p, m);
  std::optional<Grid> best;
  double bestSpan = std::numeric_limits<double>::infinity();
  for (const Pattern &first : starts)
    for (size_t i0 = 0; i0 < offsets.size(); ++i0)
      for (size_t i1 = 0; i1 <= i0; ++i1)
        for (int headLength = 1; headLength < p; ++headLength) {
          auto block =
              makeBlock(first, offsets[i0], offsets[i1], headLength, p);
          if (!block)
            continue;
          auto [grid, peak] = search.build(*block, limit);
          if (peak > 2 * p || peak > maxChunks)
            break;
          if (!grid)
            continue;
          double span = getAuthorsSpan(*grid, m, f, b, w, comm);
          if (!best || span < bestSpan) {
            best = std::move(grid);
            bestSpan = span;
          }
        }
  if (!best)
    return std::nullopt;
  return toOrders(*best, getVShapeStages(pipeline));
}
