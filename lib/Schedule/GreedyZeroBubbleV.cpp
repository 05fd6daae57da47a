//===- GreedyZeroBubbleV.cpp - The zero-bubble authors' ZB-V heuristic ---===//
//
// The heuristic the zero-bubble repository builds ZB-V with (its zbv.py;
// the V-shape schedule of Qi et al. 2023, §6, cited in
// Yeung et al., 2024), re-implemented from its behaviour.
// Sluice offers its order to the improver beside its own ZB-V block and
// the handcrafted order (Schedules.cpp); the schedule benchmark prints it
// as the zero-bubble repository's column.
//
// Each device holds stage i (chunk 0, forward flows down the devices) and
// stage 2p-1-i (chunk 1, flowing back up). Warm-up: every device's first
// chunk-0 forward; then from the last device up, chunk-0 forwards while
// memory leaves room for the V's depth and they end before the chunk-1
// forward arrives, then a chunk-1 forward; then lower devices catch up
// with forwards of alternating chunks. Steady state, 2m rounds: a backward
// per device (the chunk whose input has arrived; chunk 1's first), then a
// forward per device, each preceded by W passes that fit before its input
// arrives, or one W when the wait is longer than the largest bubble any
// device has accumulated. Repeated with the devices' bubbles as the budget
// while the worst bubble shrinks; four switch settings (a W before a
// chunk-0 backward, before a forward), the fastest by timeOrders kept.
//
//===----------------------------------------------------------------------===//

#include "sluice/Schedule/TimeOrders.h"
#include "sluice/Schedule/VShapeOrders.h"

#include <algorithm>

using namespace mlir::sluice;
using namespace mlir::sluice::sched;

namespace {
enum Kind { F = 0, B = 1, W = 2 };

PassKind getPass(Kind kind) {
  return kind == F ? PassKind::F : kind == B ? PassKind::B : PassKind::W;
}
} // namespace

namespace {
class VHeuristic {
public:
  VHeuristic(const Pipeline &pipeline, const Durations &durations,
             llvm::ArrayRef<double> caps, bool fillF, bool fillB,
             std::vector<double> approved)
      : p(pipeline.devices), m(pipeline.microbatches), durations(durations),
        caps(caps), fillF(fillF), fillB(fillB), approved(std::move(approved)),
        count(p, std::vector<int>(6, 0)), now(p, 0.0), memory(p, 0.0),
        bubble(p, 0.0), pending(p), finish(6 * size_t(p) * m, -1.0), orders(p) {
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
  // run()'s phases; each false when this setting cannot go on.
  bool warmUp();
  bool balanceFlows();
  bool placeBackwards();
  bool placeForwards();

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
    return durations.compute(work(
        kind, flow, device, std::min(count[device][kind * 2 + flow], m - 1)));
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
  llvm::ArrayRef<double> caps;
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
  double grow = kind == F   ? units(flow, device)
                : kind == W ? -units(1 - flow, device)
                            : 0.0;
  if (memory[device] + grow > caps[device] + 1e-9)
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
  if (!warmUp() || !balanceFlows())
    return std::nullopt;
  for (int round = 0; round < 2 * m; ++round)
    if (!placeBackwards() || !placeForwards())
      return std::nullopt;
  for (int i = 0; i < p; ++i)
    while (!pending[i].empty())
      if (!putW(i))
        return std::nullopt;
  for (int i = 0; i < p; ++i)
    if (count[i][4] < m || count[i][5] < m)
      return std::nullopt; // some pass never found its turn
  return orders;
}

/// The warm-up: the first chunk's forwards down the V, then as many more
/// as fit before the second chunk's forward comes back up.
bool VHeuristic::warmUp() {
  double comm = durations.transfer;
  for (int i = 0; i < p; ++i)
    if (!put(F, 0, i))
      return false;
  for (int i = p - 1; i >= 0; --i) {
    if (i == p - 1) {
      if (!put(F, 1, i))
        return false;
      continue;
    }
    double back = at(F, 1, i + 1, 0) + comm;
    while (memory[i] + units(0, i) * (2 + 2 * i) <= caps[i] + 1e-9 &&
           now[i] + cost(F, 0, i) <= back && count[i][0] < m)
      for (int j = 0; j <= i; ++j)
        if (!put(F, 0, j))
          return false;
    if (!put(F, 1, i))
      return false;
  }
  return true;
}

/// Forwards alternating between the chunks until each device has run as
/// many as the one before it.
bool VHeuristic::balanceFlows() {
  int flow = 0;
  for (int i = 1; i < p; ++i) {
    int idle = 0;
    while (count[i][0] + count[i][1] < count[i - 1][0] + count[i - 1][1] ||
           (count[i][1] <= count[i - 1][1] && count[i - 1][1] < m)) {
      bool any = false;
      for (int j = p - 1; j >= i; --j)
        if (count[j][flow] < m) {
          if (!put(F, flow, j))
            return false;
          any = true;
        }
      flow = 1 - flow;
      if (!any && ++idle > 2)
        return false; // no progress: this setting cannot go on
    }
  }
  return true;
}

/// One steady-state round's backwards: the second chunk's first where its
/// gradient has arrived, from the bottom of the V up, then the first's.
bool VHeuristic::placeBackwards() {
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
    if (!weightsBefore(i, arrival, f == 1 || fillB) || !put(B, f, i))
      return false;
  }
  return true;
}

/// One steady-state round's forwards: on each device the chunk whose
/// input is there, making room with W passes under the memory cap.
bool VHeuristic::placeForwards() {
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
    while (memory[i] + units(item, i) > caps[i] + 1e-9)
      if (!putW(i))
        return false;
    double arrival = -1;
    if (item == 0 && i > 0)
      arrival = ended(F, 0, i - 1, count[i][0]);
    if (item == 1 && i < p - 1)
      arrival = ended(F, 1, i + 1, count[i][1]);
    if (!weightsBefore(i, arrival, fillF) || !put(F, item, i))
      return false;
  }
  return true;
}

std::optional<std::vector<std::vector<Work>>>
sched::getGreedyZbvOrders(const Pipeline &pipeline, const Durations &durations,
                          llvm::ArrayRef<double> caps) {
  if (pipeline.chunks != 2 || pipeline.getNumStages() != 2 * pipeline.devices ||
      pipeline.slices != 1 || !pipeline.splitBackward || pipeline.vocab.any() ||
      caps.size() != size_t(pipeline.devices))
    return std::nullopt;
  std::optional<std::vector<std::vector<Work>>> best;
  double fastest = 0;
  OrderClock clock(pipeline, durations);
  for (bool fillB : {true, false})
    for (bool fillF : {true, false}) {
      // Again with the bubbles as the budget while the worst one shrinks.
      std::vector<double> approved;
      double worst = -1;
      for (int attempt = 0; attempt < 64; ++attempt) {
        VHeuristic heuristic(pipeline, durations, caps, fillF, fillB, approved);
        auto orders = heuristic.run();
        if (!orders)
          break;
        const std::vector<double> &bubbles = heuristic.getBubbles();
        double mine = *std::max_element(bubbles.begin(), bubbles.end());
        if (worst >= 0 && mine >= worst)
          break;
        worst = mine;
        approved = bubbles;
        std::string why;
        std::optional<OrderTiming> timing = clock.time(*orders, why);
        if (timing && (!best || timing->makespan < fastest)) {
          best = std::move(*orders);
          fastest = timing->makespan;
        }
      }
    }
  return best;
}
