//===- Repeats.cpp - Finding a device program's repeated blocks -----------===//
//
// The writer's side of plan version 9's repeat blocks (Repeats.h). A
// greedy scan: at each row, the periods tried are the distances to the
// next rows with the same fixed fields (a period must bring the row back),
// and each is extended run by run while every row of the next run is the
// previous run's shifted by one microbatch step, one key step and one slot
// map. Linear in the rows for the schedules Sluice writes: a long block is
// skipped over once found.
//
//===----------------------------------------------------------------------===//

#include "sluice/PlanFormat/Repeats.h"

#include <algorithm>
#include <functional>
#include <unordered_map>

namespace sluice::rt {

namespace {

/// Periods tried at each row: the distances to its next few recurrences.
constexpr int kCandidates = 8;

size_t hashFixed(const RepeatFields &row) {
  size_t h = std::hash<int64_t>()(row.mb == RepeatFields::kAbsent);
  auto mix = [&](int64_t v) {
    h ^= std::hash<int64_t>()(v) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  };
  mix(row.key == RepeatFields::kAbsent);
  for (int64_t v : row.fixed)
    mix(v);
  for (int64_t s : row.slots)
    mix(s < 0);
  return h;
}

/// Extends a block run by run, learning its steps and slot map.
class RunMatcher {
public:
  RunMatcher(const std::vector<RepeatFields> &rows, int64_t numSlots)
      : rows(rows), map(size_t(std::max<int64_t>(numSlots, 0)), kUnset) {}

  /// The block of period `length` from `begin`, run as often as it holds.
  RepeatBlock match(size_t begin, size_t length) {
    RepeatBlock block;
    block.begin = begin;
    block.length = length;
    block.count = 1;
    hasMb = hasKey = false;
    while (begin + (block.count + 1) * length <= rows.size()) {
      size_t mark = touched.size();
      bool hadMb = hasMb, hadKey = hasKey;
      if (!sameRun(begin + (block.count - 1) * length,
                   begin + block.count * length, length, block)) {
        for (size_t t = mark; t < touched.size(); ++t)
          map[size_t(touched[t])] = kUnset;
        touched.resize(mark);
        hasMb = hadMb;
        hasKey = hadKey;
        break;
      }
      ++block.count;
    }
    for (int64_t from : touched) {
      if (map[size_t(from)] != from)
        block.slotMap.push_back({from, map[size_t(from)]});
      map[size_t(from)] = kUnset;
    }
    touched.clear();
    std::sort(block.slotMap.begin(), block.slotMap.end());
    if (!hasMb)
      block.mbStep = 0;
    if (!hasKey)
      block.keyStep = 0;
    return block;
  }

private:
  static constexpr int64_t kUnset = -2;

  /// Whether rows [to, to + length) are rows [from, ...) shifted by the
  /// block's steps and map (learning what is not yet known).
  bool sameRun(size_t from, size_t to, size_t length, RepeatBlock &block) {
    for (size_t j = 0; j < length; ++j) {
      const RepeatFields &a = rows[from + j], &b = rows[to + j];
      if (a.fixed != b.fixed ||
          !step(a.mb, b.mb, hasMb, block.mbStep) ||
          !step(a.key, b.key, hasKey, block.keyStep))
        return false;
      for (size_t r = 0; r < a.slots.size(); ++r) {
        int64_t x = a.slots[r], y = b.slots[r];
        if (x < 0 || y < 0) {
          if (x != y)
            return false;
          continue;
        }
        if (size_t(x) >= map.size() || size_t(y) >= map.size())
          return false;
        if (map[size_t(x)] == kUnset) {
          map[size_t(x)] = y;
          touched.push_back(x);
        } else if (map[size_t(x)] != y) {
          return false;
        }
      }
    }
    return true;
  }

  /// Whether `b` is `a` plus the step (learning it from the first pair).
  static bool step(int64_t a, int64_t b, bool &known, int64_t &stepValue) {
    if ((a == RepeatFields::kAbsent) != (b == RepeatFields::kAbsent))
      return false;
    if (a == RepeatFields::kAbsent)
      return true;
    int64_t d = b - a;
    if (!known) {
      if (d > kMaxRepeatStep || d < -kMaxRepeatStep)
        return false;
      known = true;
      stepValue = d;
      return true;
    }
    return d == stepValue;
  }

  const std::vector<RepeatFields> &rows;
  std::vector<int64_t> map;
  std::vector<int64_t> touched;
  bool hasMb = false, hasKey = false;
};

} // namespace

std::vector<RepeatBlock> findRepeats(const std::vector<RepeatFields> &rows,
                                     int64_t numSlots, size_t minSaved) {
  size_t n = rows.size();
  // next[i]: the next row with row i's fixed fields (n: none).
  std::vector<size_t> next(n, n);
  {
    std::unordered_map<size_t, size_t> last;
    for (size_t i = n; i-- > 0;) {
      auto [it, inserted] = last.try_emplace(hashFixed(rows[i]), n);
      next[i] = it->second;
      it->second = i;
    }
  }
  std::vector<RepeatBlock> blocks;
  RunMatcher matcher(rows, numSlots);
  for (size_t i = 0; i < n;) {
    RepeatBlock best;
    size_t bestSaved = 0;
    size_t q = next[i];
    for (int tries = 0; tries < kCandidates && q < n; ++tries, q = next[q]) {
      size_t length = q - i;
      if (i + 2 * length > n)
        break;
      RepeatBlock block = matcher.match(i, length);
      if (block.count < 2)
        continue;
      // The block's header costs about one row.
      size_t saved = (block.count - 1) * length - 1;
      if (saved > bestSaved) {
        bestSaved = saved;
        best = std::move(block);
      }
    }
    if (bestSaved >= minSaved && bestSaved > 0) {
      i += best.length * best.count;
      blocks.push_back(std::move(best));
    } else {
      ++i;
    }
  }
  return blocks;
}

} // namespace sluice::rt
