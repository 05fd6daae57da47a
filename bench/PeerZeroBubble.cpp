//===- PeerZeroBubble.cpp - The zero-bubble repo's ZB-H heuristic ---------===//
//
// A peer column for sluice-bench-schedules: the heuristic the zero-bubble
// authors publish for ZB-H1/ZB-H2 under a memory limit (Qi et al. 2023,
// §3.1; their repository's zb.py), re-implemented here from its
// description and behaviour so that both schedules are timed by one
// simulator on the same costs. It walks microbatches in order: in the
// warm-up, as many forwards per stage as memory allows and the first
// backward's arrival leaves room for; then one forward per stage (unless a
// stage is two ahead of the next and a forward would delay the next
// stage's backward) and one backward per stage, inserting W passes before
// a pass when memory needs them, when they fit before its input, or when
// the gap is no bigger than the largest bubble any stage has accumulated.
// The repository tries eight combinations of three switches and keeps the
// best; so does this.
//
//===----------------------------------------------------------------------===//

#include "PeerZeroBubble.h"

#include <algorithm>
#include <optional>

using namespace mlir::sluice;
using namespace mlir::sluice::sched;

namespace {
/// The peer's pass indices (its arrays are indexed F, B, W).
enum Kind { F = 0, B = 1, W = 2 };
constexpr PassKind kPassOf[] = {PassKind::F, PassKind::B, PassKind::W};

/// Keeps the fastest executable order of the switch settings tried.
struct Best {
  llvm::function_ref<double(const std::vector<std::vector<Work>> &)> time;
  std::optional<std::vector<std::vector<Work>>> orders;
  double seconds = 0;
  void offer(std::vector<std::vector<Work>> candidate) {
    double t = time(candidate);
    if (t >= 0 && (!orders || t < seconds)) {
      orders = std::move(candidate);
      seconds = t;
    }
  }
};

class Heuristic {
public:
  Heuristic(int stages, int microbatches, const Durations &durations,
            double cap, bool bubbleBeforeFirstB, bool prioritiseB,
            bool greedyW)
      : p(stages), m(microbatches), durations(durations), cap(cap),
        bubbleBeforeFirstB(bubbleBeforeFirstB), prioritiseB(prioritiseB),
        greedyW(greedyW), count(3, std::vector<int>(stages, 0)),
        end(stages, 0.0), memory(stages, 0.0), bubble(stages, 0.0),
        finish(3 * size_t(stages) * microbatches, -1.0), orders(stages) {}

  std::optional<std::vector<std::vector<Work>>> run();

private:
  Work work(Kind kind, int stage, int mb) const {
    return {kPassOf[kind], stage, mb, 0};
  }
  double cost(Kind kind, int stage, int mb) const {
    return durations.compute(work(kind, stage, mb));
  }
  // Memory: a forward allocates one unit, its W frees it (the cap counts
  // from F to W, as Sluice's does).
  double mem(Kind kind) const { return kind == F ? 1 : kind == W ? -1 : 0; }
  double &at(Kind kind, int stage, int mb) {
    return finish[(size_t(kind) * p + stage) * m + mb];
  }
  double maxBubble() const {
    return *std::max_element(bubble.begin(), bubble.end());
  }
  void put(int stage, Kind kind);
  /// W passes before a pass whose input arrives at `arrival`; false if
  /// memory cannot be freed.
  bool weightsBefore(int stage, Kind next, std::optional<double> arrival);

  int p, m;
  const Durations &durations;
  double cap;
  bool bubbleBeforeFirstB, prioritiseB, greedyW;
  std::vector<std::vector<int>> count;
  std::vector<double> end, memory, bubble, finish;
  std::vector<std::vector<Work>> orders;
};
} // namespace

void Heuristic::put(int stage, Kind kind) {
  int mb = count[kind][stage];
  double length = cost(kind, stage, mb);
  double done = end[stage] + length, unhindered = done;
  if (kind == F && stage > 0)
    done = std::max(done, at(F, stage - 1, mb) + durations.transfer + length);
  if (kind == B && stage + 1 < p)
    done = std::max(done, at(B, stage + 1, mb) + durations.transfer + length);
  if (count[F][stage] > 0)
    bubble[stage] += done - unhindered;
  end[stage] = done;
  at(kind, stage, mb) = done;
  memory[stage] += mem(kind);
  ++count[kind][stage];
  orders[stage].push_back(work(kind, stage, mb));
}

bool Heuristic::weightsBefore(int stage, Kind next,
                              std::optional<double> arrival) {
  while (memory[stage] + mem(next) > cap + 1e-9) {
    if (count[W][stage] >= count[B][stage])
      return false;
    put(stage, W);
  }
  if (!arrival)
    return true;
  while (count[W][stage] < count[B][stage] &&
         end[stage] + cost(W, stage, count[W][stage]) <= *arrival)
    put(stage, W);
  if (count[W][stage] < count[B][stage] && end[stage] < *arrival) {
    if (*arrival - end[stage] <= maxBubble() - bubble[stage]) {
      if (greedyW)
        put(stage, W);
    } else {
      put(stage, W);
    }
  }
  return true;
}

std::optional<std::vector<std::vector<Work>>> Heuristic::run() {
  double comm = durations.transfer;
  for (int i = 0; i < m; ++i) {
    std::vector<int> extra(p, 0);
    if (i == 0) {
      for (int j = 0; j < p; ++j)
        put(j, F);
      // Warm-up: forwards while memory allows and the first backward is
      // not back yet.
      double back = 0;
      for (int j = p - 1; j >= 0; --j) {
        if (j == p - 1) {
          back = at(F, j, 0) + cost(B, j, 0);
          continue;
        }
        double mem = memory[j], time = end[j];
        while (count[F][j] + extra[j] < m && mem + 1 <= cap + 1e-9) {
          double length = cost(F, j, count[F][j] + extra[j]);
          if (bubbleBeforeFirstB ? time + length > back + comm
                                 : time >= back + comm)
            break;
          mem += 1;
          time += length;
          ++extra[j];
        }
        back = std::max(time, back + comm) + cost(B, j, 0);
      }
      for (int j = 1; j < p; ++j)
        while (extra[j] > 0 && extra[j] >= extra[j - 1] &&
               count[F][j] + extra[j] < m)
          --extra[j];
      for (int j = 0; j < p; ++j)
        for (int k = 0; k < extra[j]; ++k) {
          if (memory[j] + 1 > cap + 1e-9)
            return std::nullopt;
          put(j, F);
        }
      for (int j = p - 1; j >= 0; --j)
        put(j, B);
      continue;
    }
    for (int j = 0; j < p; ++j) {
      if (count[F][j] >= m)
        continue;
      if (prioritiseB && j + 1 < p && count[F][j] >= count[F][j + 1] + 2) {
        double nextBack = end[j + 1] + cost(F, j + 1, count[F][j + 1]) +
                          cost(B, j + 1, count[B][j + 1]) + comm;
        if (end[j] >= nextBack)
          continue;
        double wCost = 0, mem = memory[j] + 1;
        for (int k = 0; mem > cap + 1e-9 && count[W][j] + k < count[B][j];
             ++k) {
          wCost += cost(W, j, count[W][j] + k);
          mem -= 1;
        }
        if (end[j] + cost(F, j, count[F][j]) + wCost <= nextBack) {
          extra[j] = 1;
          continue;
        }
        if (nextBack - end[j] <= maxBubble() - bubble[j])
          continue;
      }
      extra[j] = 1;
    }
    for (int j = p - 2; j >= 0; --j)
      extra[j] = std::min(extra[j], extra[j + 1]);
    for (int j = 0; j < p; ++j) {
      if (!extra[j])
        continue;
      std::optional<double> arrival;
      if (j > 0)
        arrival = at(F, j - 1, count[F][j]) + comm;
      if (!weightsBefore(j, F, arrival))
        return std::nullopt;
      put(j, F);
    }
    for (int j = p - 1; j >= 0; --j) {
      std::optional<double> arrival;
      if (j + 1 < p)
        arrival = at(B, j + 1, i) + comm;
      if (!weightsBefore(j, B, arrival))
        return std::nullopt;
      if (j == 0 && count[F][j] == m)
        while (count[W][j] < count[B][j])
          put(j, W);
      put(j, B);
    }
  }
  for (int j = 0; j < p; ++j)
    while (count[W][j] < m)
      put(j, W);
  return orders;
}

std::optional<std::vector<std::vector<Work>>>
getPeerZeroBubbleOrders(const Pipeline &pipeline, const Durations &durations,
                        double cap,
                        llvm::function_ref<double(
                            const std::vector<std::vector<Work>> &)>
                            time) {
  Best best{time};
  for (bool bubbleBeforeFirstB : {true, false})
    for (bool prioritiseB : {true, false})
      for (bool greedyW : {true, false}) {
        Heuristic heuristic(pipeline.getNumStages(), pipeline.microbatches,
                            durations, cap, bubbleBeforeFirstB, prioritiseB,
                            greedyW);
        if (auto orders = heuristic.run())
          best.offer(std::move(*orders));
      }
  return best.orders;
}
