//===- Repeats.cpp - Finding a device program's repeated blocks -----------===//
//
// The writer's side of plan version 9's repeat blocks (Repeats.h). A
// greedy scan: at each row, the periods tried are the distances to the
// next rows with the same fixed fields (a period must bring the row back),
// and each is extended run by run while every row of the next run is the
// previous run's shifted by one microbatch step, one key step and one slot
// map. Linear in the rows for the schedules Sluice writes: a long block is
// skipped over once found, and a period that is a multiple of a shorter
// one that held starts from what the shorter one's runs already prove
// (RunMatcher::matchMultiple) instead of comparing the stretch again.
//
//===----------------------------------------------------------------------===//

#include "sluice/PlanFormat/Repeats.h"

#include <algorithm>
#include <functional>
#include <optional>
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
      : rows(rows), map(size_t(std::max<int64_t>(numSlots, 0)), kUnset),
        seen(map.size(), 0), baseNext(map.size(), kUnset) {}

  /// The block of period `length` from `begin`, run as often as it holds.
  RepeatBlock match(size_t begin, size_t length) {
    RepeatBlock block;
    block.begin = begin;
    block.length = length;
    block.count = 1;
    hasMb = hasKey = false;
    return extend(std::move(block));
  }

  /// match(begin, k x base.length) for a block `base` that match() just
  /// found from the same row, with its map `baseMap` (from, to) and
  /// where each `from` was first seen (`baseSeen`, rows after begin).
  /// Rows [begin, begin + (base.count - 1) x L) recur one period L later
  /// shifted by the base's steps and map, so they recur k periods later
  /// shifted k times: the longer block's first floor(count / k) - 1
  /// comparisons hold, its steps are k times the base's and its map is
  /// the base's applied k times -- set here instead of compared row by
  /// row again (candidate periods are mostly a steady state's multiples,
  /// each compared over the whole steady state: a tenth of a p 64
  /// compile). The same block as match(): the comparisons skipped are
  /// the ones that hold, and the map they would learn is the one set.
  RepeatBlock matchMultiple(const RepeatBlock &base, size_t k,
                            const std::vector<std::pair<int64_t, int64_t>> &baseMap,
                            const std::vector<size_t> &baseSeen,
                            bool baseHasMb, bool baseHasKey) {
    size_t length = base.length * k;
    size_t known = base.count / k; // runs of the longer period that hold
    auto tooLong = [&](int64_t step) {
      return step * int64_t(k) > kMaxRepeatStep ||
             step * int64_t(k) < -kMaxRepeatStep;
    };
    if (known < 2 || (baseHasMb && tooLong(base.mbStep)) ||
        (baseHasKey && tooLong(base.keyStep)))
      return match(base.begin, length);
    RepeatBlock block;
    block.begin = base.begin;
    block.length = length;
    block.count = known;
    hasMb = baseHasMb;
    hasKey = baseHasKey;
    block.mbStep = base.mbStep * int64_t(k);
    block.keyStep = base.keyStep * int64_t(k);
    // The slots the skipped comparisons learn: those seen in their first
    // runs, mapped k times (each step of the way is a slot of a run the
    // base compared, so the base learned it).
    for (const auto &[from, to] : baseMap)
      baseNext[size_t(from)] = to;
    size_t rowsCompared = (known - 1) * length;
    bool complete = true;
    for (size_t e = 0; e < baseMap.size() && complete; ++e) {
      if (baseSeen[e] >= rowsCompared)
        continue;
      int64_t x = baseMap[e].first, y = x;
      for (size_t step = 0; step < k && complete; ++step) {
        y = baseNext[size_t(y)];
        complete = y != kUnset;
      }
      map[size_t(x)] = y;
      touched.push_back(x);
    }
    for (const auto &[from, to] : baseMap)
      baseNext[size_t(from)] = kUnset;
    if (!complete) { // cannot happen (see above); compare row by row
      for (int64_t x : touched)
        map[size_t(x)] = kUnset;
      touched.clear();
      return match(base.begin, length);
    }
    return extend(std::move(block));
  }

  /// The map `match` learned for its last block, with where each entry
  /// was first seen; valid until the next match.
  const std::vector<std::pair<int64_t, int64_t>> &getLastMap() const {
    return lastMap;
  }
  const std::vector<size_t> &getLastSeen() const { return lastSeen; }
  bool getLastHasMb() const { return hasMb; }
  bool getLastHasKey() const { return hasKey; }

private:
  /// Runs `block` on from its count while the next run holds.
  RepeatBlock extend(RepeatBlock block) {
    size_t begin = block.begin, length = block.length;
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
    lastMap.clear();
    lastSeen.clear();
    for (int64_t from : touched) {
      if (map[size_t(from)] != from)
        block.slotMap.push_back({from, map[size_t(from)]});
      lastMap.push_back({from, map[size_t(from)]});
      lastSeen.push_back(seen[size_t(from)]);
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

  static constexpr int64_t kUnset = -2;

  /// Whether rows [to, to + length) are rows [from, ...) shifted by the
  /// block's steps and map (learning what is not yet known).
  bool sameRun(size_t from, size_t to, size_t length, RepeatBlock &block) {
    for (size_t j = 0; j < length; ++j) {
      size_t row = from + j - block.begin;
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
          seen[size_t(x)] = row;
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
  /// Per slot, the row (after the block's first) where map learned it.
  std::vector<size_t> seen;
  /// matchMultiple's copy of the base's map.
  std::vector<int64_t> baseNext;
  std::vector<int64_t> touched;
  std::vector<std::pair<int64_t, int64_t>> lastMap;
  std::vector<size_t> lastSeen;
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
    // The shortest period that held, and what matchMultiple needs of it.
    std::optional<RepeatBlock> base;
    std::vector<std::pair<int64_t, int64_t>> baseMap;
    std::vector<size_t> baseSeen;
    bool baseHasMb = false, baseHasKey = false;
    for (int tries = 0; tries < kCandidates && q < n; ++tries, q = next[q]) {
      size_t length = q - i;
      if (i + 2 * length > n)
        break;
      RepeatBlock block =
          base && length % base->length == 0
              ? matcher.matchMultiple(*base, length / base->length, baseMap,
                                      baseSeen, baseHasMb, baseHasKey)
              : matcher.match(i, length);
      if (block.count < 2)
        continue;
      if (!base) {
        base = block;
        baseMap = matcher.getLastMap();
        baseSeen = matcher.getLastSeen();
        baseHasMb = matcher.getLastHasMb();
        baseHasKey = matcher.getLastHasKey();
      }
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
