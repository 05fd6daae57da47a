//===- SqueezeVShape.cpp - V-Half / V-Min by repeating and squeezing ------===//
//
// The V-Half and V-Min orders of Qi et al. 2024, "Pipeline Parallelism with
// Controllable Memory" (§3: repeat a building block, squeeze, reorder),
// as the authors' runtime builds them for its `half` and `min` memory
// setups (their repository's zbv_greedy.py), re-implemented from that
// behaviour. Sluice offers them to the improver as one more candidate
// (Schedules.cpp), and the schedule benchmark prints them as the authors'
// column.
//
// The method works on unit time slots. Every device repeats a fixed
// pattern every 6 slots (one slot each for F and B of both chunks, and two
// for W); the pattern's offsets across devices are what set the memory
// (V-Min about a third of 1F1B's, V-Half about half). Then it squeezes:
//   1. W passes go into the first free slots after their backward;
//   2. outside the steady phase (before device 0's first backward of its
//      first chunk, and after the last forward), each pass moves to the
//      earliest free slot after its dependencies where the device's peak
//      memory (F and f +1, W -1) does not grow; the steady phase keeps the
//      pattern;
//   3. W is taken out and step 2 runs again on F and B alone, W implied in
//      idle slots; finally W goes back into the first free slots (the
//      first chunk's backward's W first when both wait).
// The order that results does not depend on the pass costs: the repository
// builds it with unit costs and so does this.
//
//===----------------------------------------------------------------------===//

#include "sluice/Schedule/VShapeOrders.h"

#include "VShapeSearch.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <queue>
#include <set>
#include <tuple>

using namespace mlir::sluice;
using namespace mlir::sluice::sched;

namespace {
// Pass types in the greedy schedule's order: forward on flow 0 (device
// i-1 -> i) and flow 1 (i+1 -> i), backward on flow 0 and flow 1, then W
// (one kind while reordering; split by flow at the end).
enum Type { FwdDown = 0, FwdUp = 1, BwdDown = 2, BwdUp = 3, Weight = 4 };
constexpr int kComputeTypes = 4;

/// slots[type][mb]: the time slot of each pass of one device.
using DeviceSlots = std::vector<std::vector<int>>;

/// One pass in the global walk over the slots.
struct Item {
  int slot, device, type, mb;
  bool operator>(const Item &o) const {
    return std::tie(slot, device, type, mb) >
           std::tie(o.slot, o.device, o.type, o.mb);
  }
};

class GreedyV {
public:
  /// Peak activations of a device: F and f hold one, W frees one; without
  /// W lists a W is implied in every idle slot while one is due.
  static int peakMemory(const DeviceSlots &s);

  GreedyV(int devices, int microbatches) : p(devices), m(microbatches) {}

  /// Per device, (type, microbatch) in execution order; types 4 and 5 are
  /// the W of flow 0 and flow 1 backwards. nullopt if the pattern breaks a
  /// dependency (the repository would stop on an assertion).
  std::optional<std::vector<std::vector<std::pair<int, int>>>>
  run(const std::vector<std::array<int, 4>> &pattern);

private:
  static int lastSlot(const DeviceSlots &s) {
    int last = -1;
    for (const auto &list : s)
      if (!list.empty())
        last = std::max(last, list.back());
    return last;
  }
  /// The passes of one device sorted by slot (then type): a merge, as
  /// each type's slots are increasing (sorting them was most of the block
  /// search's time, peakMemory being called for every move tried).
  static std::vector<std::pair<int, int>> events(const DeviceSlots &s,
                                                 int types) {
    std::vector<std::pair<int, int>> all;
    std::array<size_t, kComputeTypes + 2> next{};
    for (;;) {
      int best = -1;
      for (int t = 0; t < types; ++t)
        if (next[t] < s[t].size() &&
            (best < 0 || s[t][next[t]] < s[best][next[best]]))
          best = t;
      if (best < 0)
        return all;
      all.push_back({s[best][next[best]++], best});
    }
  }
  /// W into the first free slots after the backwards; `split` keeps one
  /// list per flow (the flow-0 backward's W first when both wait).
  static void addWeights(DeviceSlots &s, bool split);
  /// Unit-cost start times of every pass when run in slot order (the
  /// repository's "squeeze"); nullopt if a dependency is out of order.
  std::optional<std::vector<DeviceSlots>>
  squeeze(const std::vector<DeviceSlots> &slots, int types,
          std::vector<std::vector<std::pair<int, int>>> *order) const;
  /// One round of moving passes into earlier free slots.
  std::optional<std::vector<DeviceSlots>>
  reorder(std::vector<DeviceSlots> slots, bool withWeights) const;

  int p, m;
};
} // namespace

void GreedyV::addWeights(DeviceSlots &s, bool split) {
  std::vector<std::pair<int, int>> all = events(s, kComputeTypes);
  int bound = all.empty() ? -1 : all.back().first;
  s.resize(kComputeTypes + (split ? 2 : 1));
  int due[2] = {0, 0};
  size_t next = 0;
  for (int slot = 0; slot <= bound; ++slot) {
    if (next < all.size() && all[next].first == slot) {
      int type = all[next++].second;
      if (type == BwdDown || type == BwdUp)
        ++due[split ? type - BwdDown : 0];
      continue;
    }
    for (int w = 0; w < 2; ++w)
      if (due[w]) {
        s[Weight + w].push_back(slot);
        --due[w];
        break;
      }
  }
  int slot = bound;
  for (int w = 0; w < 2; ++w)
    for (; due[w] > 0; --due[w])
      s[Weight + w].push_back(++slot);
}

int GreedyV::peakMemory(const DeviceSlots &s) {
  bool explicitW = s.size() > kComputeTypes;
  std::vector<std::pair<int, int>> all = events(s, int(s.size()));
  int bound = all.empty() ? -1 : all.back().first;
  int current = 0, peak = 0, due = 0;
  size_t next = 0;
  for (int slot = 0; slot <= bound; ++slot) {
    if (next < all.size() && all[next].first == slot) {
      int type = all[next++].second;
      current += type <= FwdUp ? 1 : type >= Weight ? -1 : 0;
      if (type == BwdDown || type == BwdUp)
        ++due;
    } else if (!explicitW && due > 0) {
      --current;
      --due;
    }
    peak = std::max(peak, current);
  }
  return peak;
}

std::optional<std::vector<DeviceSlots>>
GreedyV::squeeze(const std::vector<DeviceSlots> &slots, int types,
                 std::vector<std::vector<std::pair<int, int>>> *order) const {
  std::vector<DeviceSlots> end(p), start(p);
  std::priority_queue<Item, std::vector<Item>, std::greater<Item>> queue;
  for (int d = 0; d < p; ++d) {
    end[d].resize(types);
    start[d].resize(types);
    for (int t = 0; t < types; ++t) {
      // The unsplit W list has one entry per backward: 2m.
      end[d][t].assign(slots[d][t].size(), -1);
      start[d][t].assign(slots[d][t].size(), -1);
    }
    for (int t = 0; t < types; ++t)
      if (!slots[d][t].empty())
        queue.push({slots[d][t][0], d, t, 0});
  }
  std::vector<int> deviceEnd(p, 0);
  if (order)
    order->assign(p, {});
  while (!queue.empty()) {
    Item it = queue.top();
    queue.pop();
    int ready = deviceEnd[it.device];
    auto after = [&](int d, int t, int mb) {
      if (end[d][t][mb] < 0)
        return false; // runs later in slot order: a broken dependency
      ready = std::max(ready, end[d][t][mb]);
      return true;
    };
    bool ok = true;
    if ((it.type == FwdDown || it.type == BwdDown) && it.device > 0)
      ok &= after(it.device - 1, it.type, it.mb);
    if ((it.type == FwdUp || it.type == BwdUp) && it.device + 1 < p)
      ok &= after(it.device + 1, it.type, it.mb);
    if (it.type > FwdDown && it.type < Weight)
      ok &= after(it.device, it.type - 1, it.mb);
    if (it.mb > 0)
      ok &= after(it.device, it.type, it.mb - 1);
    if (!ok)
      return std::nullopt;
    start[it.device][it.type][it.mb] = ready;
    end[it.device][it.type][it.mb] = deviceEnd[it.device] = ready + 1;
    if (order)
      (*order)[it.device].push_back({it.type, it.mb});
    if (it.mb + 1 < int(slots[it.device][it.type].size()))
      queue.push({slots[it.device][it.type][it.mb + 1], it.device, it.type,
                  it.mb + 1});
  }
  return start;
}

std::optional<std::vector<DeviceSlots>>
GreedyV::reorder(std::vector<DeviceSlots> slots, bool withWeights) const {
  if (withWeights)
    for (DeviceSlots &s : slots)
      addWeights(s, /*split=*/false);
  int types = withWeights ? kComputeTypes + 1 : kComputeTypes;
  int limit = 0;
  std::vector<std::vector<bool>> occupied(p);
  for (int d = 0; d < p; ++d) {
    limit = std::max(limit, peakMemory(slots[d]));
    occupied[d].assign(size_t(lastSlot(slots[d]) + 1), false);
  }
  std::priority_queue<Item, std::vector<Item>, std::greater<Item>> queue;
  for (int d = 0; d < p; ++d)
    for (int t = 0; t < types; ++t)
      queue.push({slots[d][t][0], d, t, 0});
  // 0: warm-up, passes move; 1: steady, the pattern stays; 2: cool-down.
  int phase = 0;
  while (!queue.empty()) {
    Item it = queue.top();
    queue.pop();
    if (it.mb + 1 < int(slots[it.device][it.type].size()))
      queue.push({slots[it.device][it.type][it.mb + 1], it.device, it.type,
                  it.mb + 1});
    std::vector<int> &mine = slots[it.device][it.type];
    if (phase == 0 && it.type == BwdUp && it.device == 0)
      phase = 1;
    bool stays = phase == 1 || (phase == 0 && !withWeights);
    if (phase == 1 && it.type == FwdDown && it.mb == m - 1)
      phase = 2;
    if (!stays) {
      int earliest = -1;
      if ((it.type == FwdDown || it.type == BwdDown) && it.device > 0)
        earliest = std::max(earliest, slots[it.device - 1][it.type][it.mb]);
      if ((it.type == FwdUp || it.type == BwdUp) && it.device + 1 < p)
        earliest = std::max(earliest, slots[it.device + 1][it.type][it.mb]);
      if (it.type > FwdDown && it.type < Weight)
        earliest = std::max(earliest, slots[it.device][it.type - 1][it.mb]);
      if (it.type == Weight) {
        std::vector<int> backwards = slots[it.device][BwdDown];
        backwards.insert(backwards.end(), slots[it.device][BwdUp].begin(),
                         slots[it.device][BwdUp].end());
        std::nth_element(backwards.begin(), backwards.begin() + it.mb,
                         backwards.end());
        earliest = std::max(earliest, backwards[it.mb]);
      }
      if (it.mb > 0)
        earliest = std::max(earliest, mine[it.mb - 1]);
      bool moved = false;
      for (int slot = earliest + 1; slot < it.slot && !moved; ++slot) {
        if (occupied[it.device][slot])
          continue;
        mine[it.mb] = slot;
        moved = peakMemory(slots[it.device]) <= limit;
      }
      if (!moved)
        mine[it.mb] = it.slot;
    }
    occupied[it.device][mine[it.mb]] = true;
  }
  if (!withWeights)
    for (DeviceSlots &s : slots)
      addWeights(s, /*split=*/false);
  return squeeze(slots, kComputeTypes + 1, nullptr);
}

std::optional<std::vector<std::vector<std::pair<int, int>>>>
GreedyV::run(const std::vector<std::array<int, 4>> &pattern) {
  std::vector<DeviceSlots> slots(p, DeviceSlots(kComputeTypes));
  for (int d = 0; d < p; ++d)
    for (int t = 0; t < kComputeTypes; ++t)
      for (int mb = 0; mb < m; ++mb)
        slots[d][t].push_back(pattern[d][t] + 6 * mb);
  for (bool withWeights : {true, false}) {
    auto next = reorder(std::move(slots), withWeights);
    if (!next)
      return std::nullopt;
    slots = std::move(*next);
    for (DeviceSlots &s : slots)
      s.resize(kComputeTypes); // W is placed again
  }
  for (DeviceSlots &s : slots)
    addWeights(s, /*split=*/true);
  std::vector<std::vector<std::pair<int, int>>> order;
  if (!squeeze(slots, kComputeTypes + 2, &order))
    return std::nullopt;
  return order;
}

/// GreedyV's (type, microbatch) orders as the pipeline's passes.
static std::vector<std::vector<Work>>
toWorkOrders(const Pipeline &pipeline, llvm::ArrayRef<int> stageOf,
             const std::vector<std::vector<std::pair<int, int>>> &order) {
  std::vector<std::vector<Work>> orders(pipeline.devices);
  for (int d = 0; d < pipeline.devices; ++d)
    for (auto [type, mb] : order[d]) {
      // A forward's flow is its chunk; a backward runs the V the other way,
      // so flow 0 is the second chunk's; a W follows its backward's flow.
      PassKind kind = type < 2   ? PassKind::F
                      : type < 4 ? PassKind::B
                                 : PassKind::W;
      int flow = type < 4 ? type % 2 : type - 4;
      int chunk = kind == PassKind::F ? flow : 1 - flow;
      orders[d].push_back({kind, stageOf[size_t(d) * 2 + chunk], mb, 0});
    }
  return orders;
}

std::optional<std::vector<std::vector<Work>>>
sched::getSqueezedVShapeOrders(const Pipeline &pipeline, bool half) {
  int p = pipeline.devices, m = pipeline.microbatches;
  if (!isPlainVShape(pipeline))
    return std::nullopt;
  // The steady-state pattern: the slot (within the first 6p or so) of each
  // device's F and B of both flows; W fills the remaining two of every 6.
  std::vector<std::array<int, 4>> pattern(p);
  for (int i = 0; i < p; ++i) {
    if (half) {
      int gap = p % 2 == 0 ? 3 : 0;
      pattern[i] = {2 * i, 3 * p - i - 2, 3 * p + gap + 2 * i - 1,
                    6 * p + gap - i - 2};
    } else {
      int gap = p % 3 == 0 ? 2 : 0;
      pattern[i] = {i, 2 * p - i - 1, 2 * p + gap + i, 4 * p + gap - i - 1};
    }
  }
  GreedyV greedy(p, m);
  auto order = greedy.run(pattern);
  if (!order)
    return std::nullopt;
  return toWorkOrders(pipeline, getVShapeStages(pipeline), *order);
}

//===----------------------------------------------------------------------===//
// The cost-aware search over building blocks
//===----------------------------------------------------------------------===//

// Qi et al. 2024, §3.1 and Appendix A: a V building block gives each device
// the positions of its F and B of both chunks within a period of 6 unit
// slots; device 0 has F at 0 and the other three anywhere else (60
// patterns), and each next device's positions follow the previous
// device's by a uniform offset -- the first chunk's F and the second
// chunk's B k slots later, the other two one slot earlier -- with one k
// for the first devices and a k no larger for the rest. The memory a
// block holds grows with k. The repeated block, squeezed by GreedyV,
// gives one order per block; which is fastest depends on the pass costs,
// so the search times each with the simulator's rules on the real costs.
std::vector<std::vector<std::vector<Work>>>
sched::searchVShapeBlocks(const Pipeline &pipeline, const Durations &durations,
                          llvm::ArrayRef<double> caps, size_t keep) {
  std::vector<int> stageOf = getSearchableVShape(pipeline, keep);
  if (stageOf.empty())
    return {};
  int p = pipeline.devices;
  std::vector<int> chunkCap(p);
  for (int d = 0; d < p; ++d)
    chunkCap[d] = getChunkCap(durations, stageOf, caps[d], d);

  // Positions (mod 6) of FwdDown, FwdUp, BwdDown, BwdUp per device, then
  // the absolute slot of each device's first pass of each type: after the
  // pass it depends on (the previous device along the flow, the turn of
  // the V on the end devices), in the position the block gives.
  auto firstSlots = [&](const std::vector<std::array<int, 4>> &mod) {
    auto next = [](int after, int position) {
      int slot = after + 1;
      return slot + ((position - slot) % 6 + 6) % 6;
    };
    std::vector<std::array<int, 4>> first(p);
    first[0][FwdDown] = mod[0][FwdDown];
    for (int i = 1; i < p; ++i)
      first[i][FwdDown] = next(first[i - 1][FwdDown], mod[i][FwdDown]);
    first[p - 1][FwdUp] = next(first[p - 1][FwdDown], mod[p - 1][FwdUp]);
    for (int i = p - 2; i >= 0; --i)
      first[i][FwdUp] = next(first[i + 1][FwdUp], mod[i][FwdUp]);
    first[0][BwdDown] = next(first[0][FwdUp], mod[0][BwdDown]);
    for (int i = 1; i < p; ++i)
      first[i][BwdDown] = next(first[i - 1][BwdDown], mod[i][BwdDown]);
    first[p - 1][BwdUp] = next(first[p - 1][BwdDown], mod[p - 1][BwdUp]);
    for (int i = p - 2; i >= 0; --i)
      first[i][BwdUp] = next(first[i + 1][BwdUp], mod[i][BwdUp]);
    return first;
  };

  std::set<std::vector<std::array<int, 4>>> seen;
  std::vector<std::vector<std::array<int, 4>>> patterns;
  for (int up = 1; up < 6; ++up)
    for (int down = 1; down < 6; ++down)
      for (int back = 1; back < 6; ++back) {
        if (up == down || up == back || down == back)
          continue;
        for (int k0 = 1; k0 < 6; ++k0)
          for (int k1 = 1; k1 <= k0; ++k1)
            for (int head = 1; head < p; ++head) {
              std::vector<std::array<int, 4>> mod(p);
              mod[0] = {0, up, down, back};
              bool collides = false;
              for (int i = 1; i < p && !collides; ++i) {
                int k = i - 1 < head ? k0 : k1;
                std::array<int, 4> shift = {k, -1, k, -1};
                unsigned used = 0;
                for (int t = 0; t < 4; ++t) {
                  mod[i][t] = (mod[i - 1][t] + shift[t] + 6) % 6;
                  collides |= (used >> mod[i][t]) & 1;
                  used |= 1u << mod[i][t];
                }
              }
              if (collides)
                continue;
              auto first = firstSlots(mod);
              if (seen.insert(first).second)
                patterns.push_back(std::move(first));
              // With one offset for all devices, longer heads repeat it.
              if (k0 == k1)
                break;
            }
      }

  auto buildBlock = [&](const Pipeline &sized,
                        size_t index) -> std::optional<BlockOrders> {
    const std::vector<std::array<int, 4>> &pattern = patterns[index];
    int mbs = sized.microbatches;
    // The block's own memory, before any squeezing: GreedyV never holds
    // more, so a block over a device's cap cannot come under it.
    for (int d = 0; d < p; ++d) {
      DeviceSlots slots(kComputeTypes);
      for (int t = 0; t < kComputeTypes; ++t)
        for (int mb = 0; mb < mbs; ++mb)
          slots[t].push_back(pattern[d][t] + 6 * mb);
      if (GreedyV::peakMemory(slots) > chunkCap[d])
        return std::nullopt;
    }
    auto order = GreedyV(p, mbs).run(pattern);
    if (!order)
      return std::nullopt;
    return toWorkOrders(sized, stageOf, *order);
  };
  auto enumerate = [&](const Pipeline &sized, OfferBlock offer) {
    for (size_t i = 0; i < patterns.size(); ++i)
      if (std::optional<BlockOrders> orders = buildBlock(sized, i))
        offer(i, std::move(*orders));
  };
  return selectFastestBlocks(pipeline, durations, caps, keep, enumerate,
                             buildBlock);
}
