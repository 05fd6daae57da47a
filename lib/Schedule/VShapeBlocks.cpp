//===- VShapeBlocks.cpp - V building blocks as grids ----------------------===//
//
// The steps from a V building block to a schedule (Qi et al. 2024, §3 and
// Appendix A; RepeatVShape.cpp's header walks through them).
//
//===----------------------------------------------------------------------===//

#include "VShapeBlocks.h"

using namespace mlir::sluice;
using namespace mlir::sluice::sched;

namespace mlir::sluice::sched::vblocks {

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

std::vector<std::array<int, 4>> getOffsets() {
  std::vector<std::array<int, 4>> offsets;
  for (int k = 1; k < kPeriod; ++k)
    offsets.push_back({k, -1, k, -1});
  return offsets;
}

} // namespace mlir::sluice::sched::vblocks
