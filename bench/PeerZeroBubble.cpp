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
enum Kind { F = 0, B = 1, W = 2 };

PassKind getPass(Kind kind) {
  return kind == F ? PassKind::F : kind == B ? PassKind::B : PassKind::W;
}

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
    return {getPass(kind), stage, mb, 0};
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

//===----------------------------------------------------------------------===//
// ZB-V: the zero-bubble authors' V-shape heuristic
//===----------------------------------------------------------------------===//
//
// Their repository's zbv.py (Qi et al., "Pipeline Parallelism with
// Controllable Memory", the V-shape ZB-V), re-implemented from its
// behaviour: each device holds stage i (chunk 0, forward flows down the
// devices) and stage 2p-1-i (chunk 1, flowing back up). Warm-up: every
// device's first chunk-0 forward; then from the last device up, chunk-0
// forwards while memory leaves room for the V's depth and they end before
// the chunk-1 forward arrives, then a chunk-1 forward; then lower devices
// catch up with forwards of alternating chunks. Steady state, 2m rounds:
// a backward per device (the chunk whose input has arrived; chunk 1's
// first), then a forward per device, each preceded by W passes that fit
// before its input arrives, or one W when the wait is longer than the
// largest bubble any device has accumulated. Repeated with the devices'
// bubbles as the budget while the worst bubble shrinks; four switch
// settings (a W before a chunk-0 backward, before a forward), the best
// kept -- as theirs does, but by this simulator's makespan.

namespace {
class VHeuristic {
public:
  VHeuristic(const Pipeline &pipeline, const Durations &durations, double cap,
             bool fillF, bool fillB, std::vector<double> approved)
      : p(pipeline.devices), m(pipeline.microbatches),
        durations(durations), cap(cap), fillF(fillF), fillB(fillB),
        approved(std::move(approved)), count(p, std::vector<int>(6, 0)),
        now(p, 0.0), memory(p, 0.0), bubble(p, 0.0), pending(p),
        finish(6 * size_t(p) * m, -1.0), orders(p) {
    stageOf.assign(2 * size_t(p), -1);
    for (int s = 0; s < pipeline.getNumStages(); ++s)
      stageOf[size_t(pipeline.stages[s].device) * 2 +
              pipeline.stages[s].chunk] = s;
  }

  /// Per device, the order (nullopt if this setting gets stuck);
  /// getBubbles() then gives each device's accumulated idle time.
  std::optional<std::vector<std::vector<Work>>> run();
  const std::vector<double> &getBubbles() const { return bubble; }

private:
  // Kind F, B, W; `flow` 0 runs from device i-1 to i, 1 from i+1 to i. A
  // forward's flow is its chunk; a backward's is the other chunk's
  // (backward runs the V the other way).
  int stage(Kind kind, int flow, int device) const {
    int chunk = kind == F ? flow : 1 - flow;
    return stageOf[size_t(device) * 2 + chunk];
  }
  Work work(Kind kind, int flow, int device, int mb) const {
    return {getPass(kind), stage(kind, flow, device), mb, 0};
  }
  double cost(Kind kind, int flow, int device) const {
    return durations.compute(
        work(kind, flow, device, std::min(count[device][kind * 2 + flow], m - 1)));
  }
  double units(int flow, int device) const {
    Work w = work(F, flow, device, 0);
    return durations.activation ? durations.activation(w) : 1.0;
  }
  double &at(Kind kind, int flow, int device, int mb) {
    return finish[((size_t(kind) * 2 + flow) * p + device) * m + mb];
  }
  /// -1 where not scheduled (or no such pass).
  double ended(Kind kind, int flow, int device, int mb) {
    if (device < 0 || device >= p || mb >= m)
      return -1;
    return at(kind, flow, device, mb);
  }
  double maxBubble(int device = -1) const {
    double worst = *std::max_element(bubble.begin(), bubble.end());
    if (device >= 0 && !approved.empty()) {
      double most = *std::max_element(approved.begin(), approved.end());
      worst = std::max(worst, most - approved[device]);
    }
    return worst;
  }
  bool put(Kind kind, int flow, int device);
  bool putW(int device) {
    if (pending[device].empty())
      return false;
    int flow = pending[device].front();
    pending[device].erase(pending[device].begin());
    return put(W, flow, device);
  }
  double nextWCost(int device) const {
    int flow = pending[device].front();
    return durations.compute(
        work(W, flow, device, std::min(count[device][4 + flow], m - 1)));
  }
  /// W passes before a pass whose input ends at `arrival` (-1: none).
  bool weightsBefore(int device, double arrival, bool fill) {
    double comm = durations.transfer;
    while (!pending[device].empty() && arrival >= 0 &&
           arrival + comm >= now[device] + nextWCost(device))
      if (!putW(device))
        return false;
    if (!pending[device].empty() &&
        arrival + comm - now[device] > maxBubble(device) - bubble[device] &&
        fill)
      return putW(device);
    return true;
  }

  int p, m;
  const Durations &durations;
  double cap;
  bool fillF, fillB;
  std::vector<double> approved;
  std::vector<int> stageOf;
  std::vector<std::vector<int>> count;
  std::vector<double> now, memory, bubble;
  std::vector<std::vector<int>> pending;
  std::vector<double> finish;
  std::vector<std::vector<Work>> orders;
};
} // namespace

bool VHeuristic::put(Kind kind, int flow, int device) {
  int mb = count[device][kind * 2 + flow];
  if (mb >= m)
    return false;
  double grow = kind == F ? units(flow, device)
                : kind == W ? -units(1 - flow, device)
                            : 0.0;
  if (memory[device] + grow > cap + 1e-9)
    return false;
  double length = durations.compute(work(kind, flow, device, mb));
  double done = now[device] + length, unhindered = done;
  double comm = durations.transfer;
  if (kind != W) {
    int from = flow == 0 ? device - 1 : device + 1;
    if (from >= 0 && from < p) {
      double input = at(kind, flow, from, mb);
      if (input < 0)
        return false; // its input is not scheduled yet
      done = std::max(done, input + comm + length);
    }
  }
  if (count[device][0] > 0)
    bubble[device] += done - unhindered;
  at(kind, flow, device, mb) = done;
  now[device] = done;
  memory[device] += grow;
  orders[device].push_back(work(kind, flow, device, mb));
  if (kind == B)
    pending[device].push_back(flow);
  ++count[device][kind * 2 + flow];
  return true;
}

std::optional<std::vector<std::vector<Work>>> VHeuristic::run() {
  double comm = durations.transfer;
  for (int i = 0; i < p; ++i)
    if (!put(F, 0, i))
      return std::nullopt;
  for (int i = p - 1; i >= 0; --i) {
    if (i == p - 1) {
      if (!put(F, 1, i))
        return std::nullopt;
      continue;
    }
    double back = at(F, 1, i + 1, 0) + comm;
    while (memory[i] + units(0, i) * (2 + 2 * i) <= cap + 1e-9 &&
           now[i] + cost(F, 0, i) <= back && count[i][0] < m)
      for (int j = 0; j <= i; ++j)
        if (!put(F, 0, j))
          return std::nullopt;
    if (!put(F, 1, i))
      return std::nullopt;
  }
  int flow = 0;
  for (int i = 1; i < p; ++i) {
    int idle = 0;
    while (count[i][0] + count[i][1] < count[i - 1][0] + count[i - 1][1] ||
           (count[i][1] <= count[i - 1][1] && count[i - 1][1] < m)) {
      bool any = false;
      for (int j = p - 1; j >= i; --j)
        if (count[j][flow] < m) {
          if (!put(F, flow, j))
            return std::nullopt;
          any = true;
        }
      flow = 1 - flow;
      if (!any && ++idle > 2)
        return std::nullopt; // no progress: this setting cannot go on
    }
  }
  for (int round = 0; round < 2 * m; ++round) {
    std::vector<int> first, second;
    for (int i = 0; i < p; ++i) {
      if (count[i][3] >= count[i][2])
        second.push_back(i);
      else if (i == p - 1)
        first.push_back(i);
      else if (ended(B, 1, i + 1, count[i][3]) >= 0 || count[i][2] >= m)
        first.push_back(i);
      else
        second.push_back(i);
    }
    std::vector<std::pair<int, int>> backwards;
    for (auto it = first.rbegin(); it != first.rend(); ++it)
      backwards.push_back({*it, 1});
    for (int i : second)
      backwards.push_back({i, 0});
    for (auto [i, f] : backwards) {
      if (count[i][2 + f] >= m)
        continue;
      double arrival = -1;
      if (f == 1 && i < p - 1)
        arrival = ended(B, 1, i + 1, count[i][3]);
      if (f == 0 && i > 0)
        arrival = ended(B, 0, i - 1, count[i][2]);
      if (!weightsBefore(i, arrival, f == 1 || fillB))
        return std::nullopt;
      if (!put(B, f, i))
        return std::nullopt;
    }
    for (int i = 0; i < p; ++i) {
      if (count[i][1] >= m)
        continue;
      int item = -1;
      if (count[i][1] >= count[i][0])
        item = 0;
      else if (i == p - 1)
        item = 1;
      else if (ended(F, 1, i + 1, count[i][1]) >= 0)
        item = 1;
      else if (count[i][0] < m &&
               (i == 0 || ended(F, 0, i - 1, count[i][0]) >= 0))
        item = 0;
      if (item < 0)
        continue;
      while (memory[i] + units(item, i) > cap + 1e-9)
        if (!putW(i))
          return std::nullopt;
      double arrival = -1;
      if (item == 0 && i > 0)
        arrival = ended(F, 0, i - 1, count[i][0]);
      if (item == 1 && i < p - 1)
        arrival = ended(F, 1, i + 1, count[i][1]);
      if (!weightsBefore(i, arrival, fillF))
        return std::nullopt;
      if (!put(F, item, i))
        return std::nullopt;
    }
  }
  for (int i = 0; i < p; ++i)
    while (!pending[i].empty())
      if (!putW(i))
        return std::nullopt;
  for (int i = 0; i < p; ++i)
    if (count[i][4] < m || count[i][5] < m)
      return std::nullopt; // some pass never found its turn
  return orders;
}

std::optional<std::vector<std::vector<Work>>>
getPeerZeroBubbleVOrders(const Pipeline &pipeline, const Durations &durations,
                         double cap,
                         llvm::function_ref<double(
                             const std::vector<std::vector<Work>> &)>
                             time) {
  if (pipeline.chunks != 2 || pipeline.getNumStages() != 2 * pipeline.devices)
    return std::nullopt;
  Best best{time};
  for (bool fillB : {true, false})
    for (bool fillF : {true, false}) {
      // Again with the bubbles as the budget while the worst one shrinks.
      std::vector<double> approved;
      double worst = -1;
      for (int attempt = 0; attempt < 64; ++attempt) {
        VHeuristic heuristic(pipeline, durations, cap, fillF, fillB, approved);
        auto orders = heuristic.run();
        if (!orders)
          break;
        const std::vector<double> &bubbles = heuristic.getBubbles();
        double mine = *std::max_element(bubbles.begin(), bubbles.end());
        if (worst >= 0 && mine >= worst)
          break;
        worst = mine;
        approved = bubbles;
        best.offer(std::move(*orders));
      }
    }
  return best.orders;
}
