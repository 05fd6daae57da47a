//===- ImproveOrders.cpp - Faster orders under a memory cap ---------------===//

#include "sluice/Schedule/ImproveOrders.h"
#include "sluice/Schedule/TimeOrders.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <queue>

using namespace mlir;
using namespace mlir::sluice;
using namespace mlir::sluice::sched;

double sched::getMicrobatchActivation(const Pipeline &pipeline,
                                      const Durations &durations, int device) {
  double total = 0;
  for (int s = 0; s < pipeline.getNumStages(); ++s)
    if (pipeline.getDevice(s) == device)
      for (int k = 0; k < pipeline.slices; ++k)
        total += getActivation(durations, Work{PassKind::F, s, 0, k});
  return total;
}

namespace {
constexpr double kInfinity = std::numeric_limits<double>::infinity();
constexpr double kEpsilon = 1e-9;

/// The list scheduler: an event simulation in which each device, at its
/// clock, either runs a pass or advances its clock to the next time
/// something may change. Devices are visited in clock order, so when
/// device d decides at time t every other device is at t or later: a pass
/// not run yet cannot end before t plus its duration, which bounds the
/// arrivals d does not know yet.
class ListScheduler {
public:
  ListScheduler(const Pipeline &pipeline, const Durations &durations,
                const MemoryCaps &caps, const ListPolicy &policy)
      : pipe(pipeline), durations(durations), caps(caps), policy(policy),
        index(pipeline), units(pipeline.microbatches * pipeline.slices) {}

  FailureOr<std::vector<std::vector<Work>>> run(std::string &error);

private:
  struct Device {
    double clock = 0;
    /// Activations held: every F run less what each W (BW) has freed.
    double live = 0;
    /// What the microbatches started on the device will still allocate.
    double pending = 0;
    /// The largest forward of a stage after the device's first one.
    double laterForward = 0;
    /// getMicrobatchActivation of the device, computed once.
    double perMicrobatch = 0;
    std::vector<int> stages;
    std::deque<Work> dueW;
    std::vector<char> started;
    size_t remaining = 0;
  };

  Work forwardAt(int stage, int i) const {
    return {PassKind::F, stage, i / pipe.slices, i % pipe.slices};
  }
  Work backwardAt(int stage, int i) const {
    return {pipe.getBackwardKind(), stage, i / pipe.slices,
            pipe.slices - 1 - i % pipe.slices};
  }
  /// When `work` may start on its device at `now`: its inputs' arrivals,
  /// or (with `known` false) a lower bound where one has not run.
  double readyTime(const Work &work, double now, bool &known);
  void execute(int d, const Work &work);
  /// Resets the state and gives each device its stages and caps; fails if
  /// a cap is below one microbatch of the device's activations.
  LogicalResult prepare(std::string &error);
  double getCap(int d) const {
    return d < int(caps.size()) ? caps[d] : kInfinity;
  }
  /// What device `d` may run at `now`: the best ready backward and forward
  /// (a forward only if its memory fits), whether a ready forward is held
  /// back by the cap, and when the next pass may become ready.
  struct Candidates {
    std::optional<Work> bestB, bestF;
    bool blockedF = false;
    /// The earliest a forward or backward may become ready, and the
    /// earliest a backward's input is known to arrive.
    double nextArrival = kInfinity, nextKnownB = kInfinity;
  };
  Candidates findCandidates(int d, double now);
  /// The device's priority between two ready passes of one kind.
  bool before(const Work &a, const Work &b) const {
    if (a.microbatch != b.microbatch && !policy.laterStageFirst)
      return a.microbatch < b.microbatch;
    if (a.stage != b.stage)
      return a.stage > b.stage;
    return a.microbatch < b.microbatch;
  }

  const Pipeline &pipe;
  const Durations &durations;
  const MemoryCaps &caps;
  const ListPolicy &policy;
  WorkIndex index;
  int units;
  std::vector<double> end, arrival;
  std::vector<double> linkFree;
  std::vector<int> nextF, nextB;
  std::vector<Device> devices;
  std::vector<std::vector<Work>> orders;
  llvm::SmallVector<Work, 4> deps;
};
} // namespace

double ListScheduler::readyTime(const Work &work, double now, bool &known) {
  deps.clear();
  getDependencies(pipe, work, deps);
  int d = pipe.getWorkDevice(work);
  double ready = 0;
  known = true;
  for (const Work &dep : deps) {
    bool remote = pipe.getWorkDevice(dep) != d;
    double at = remote ? arrival[index(dep)] : end[index(dep)];
    if (at < 0) {
      known = false;
      at = now + durations.compute(dep) + (remote ? durations.transfer : 0);
    }
    ready = std::max(ready, at);
  }
  return ready;
}

void ListScheduler::execute(int d, const Work &work) {
  Device &dev = devices[d];
  double finish = dev.clock + durations.compute(work);
  size_t id = index(work);
  end[id] = finish;
  dev.clock = finish;
  orders[d].push_back(work);
  --dev.remaining;
  // The result travels on the link to the consumer's device, in order
  // behind the link's earlier sends (NCCL: one connection per peer).
  int consumer = getConsumerStage(pipe, work);
  if (consumer >= 0 && pipe.getDevice(consumer) != d) {
    double &link =
        linkFree[size_t(d) * pipe.devices + pipe.getDevice(consumer)];
    link = std::max(link, finish) + durations.transfer;
    arrival[id] = link;
  } else {
    arrival[id] = finish;
  }
  switch (work.kind) {
  case PassKind::F:
    ++nextF[work.stage];
    if (!dev.started[work.microbatch]) {
      dev.started[work.microbatch] = 1;
      dev.pending += dev.perMicrobatch;
    }
    dev.live += getActivation(durations, work);
    dev.pending -= getActivation(durations, work);
    break;
  case PassKind::B:
    ++nextB[work.stage];
    dev.dueW.push_back({PassKind::W, work.stage, work.microbatch, work.slice});
    break;
  case PassKind::BW:
    ++nextB[work.stage];
    dev.live -= getActivation(durations, work);
    break;
  case PassKind::W:
    dev.live -= getActivation(durations, work);
    break;
  default:
    break;
  }
}

LogicalResult ListScheduler::prepare(std::string &error) {
  int p = pipe.devices;
  end.assign(index.size(), -1.0);
  arrival.assign(index.size(), -1.0);
  linkFree.assign(size_t(p) * p, 0.0);
  nextF.assign(pipe.getNumStages(), 0);
  nextB.assign(pipe.getNumStages(), 0);
  devices.assign(p, Device{});
  orders.assign(p, {});
  size_t passesPerStage = pipe.splitBackward ? 3 : 2;
  for (int s = 0; s < pipe.getNumStages(); ++s) {
    Device &dev = devices[pipe.getDevice(s)];
    dev.stages.push_back(s);
    dev.remaining += passesPerStage * units;
  }
  for (int d = 0; d < p; ++d) {
    devices[d].started.assign(pipe.microbatches, 0);
    for (size_t i = 1; i < devices[d].stages.size(); ++i)
      for (int k = 0; k < pipe.slices; ++k)
        devices[d].laterForward = std::max(
            devices[d].laterForward,
            getActivation(durations,
                          Work{PassKind::F, devices[d].stages[i], 0, k}));
    double need = devices[d].perMicrobatch =
        getMicrobatchActivation(pipe, durations, d);
    if (d < int(caps.size()) && caps[d] + kEpsilon < need) {
      error = llvm::formatv("the memory cap of device {0} ({1}) is below one "
                            "microbatch of its activations ({2})",
                            d, caps[d], need);
      return failure();
    }
  }
  return success();
}

ListScheduler::Candidates ListScheduler::findCandidates(int d, double now) {
  Device &dev = devices[d];
  Candidates c;
  for (int s : dev.stages) {
    if (nextB[s] < units) {
      Work b = backwardAt(s, nextB[s]);
      bool known;
      double ready = readyTime(b, now, known);
      if (known && ready <= now + kEpsilon) {
        if (!c.bestB || before(b, *c.bestB))
          c.bestB = b;
      } else {
        c.nextArrival = std::min(c.nextArrival, ready);
        if (known)
          c.nextKnownB = std::min(c.nextKnownB, ready);
      }
    }
    if (nextF[s] < units) {
      Work f = forwardAt(s, nextF[s]);
      // Room for this forward and what the started microbatches will
      // still need: all of it, or one more forward of a later stage.
      double need;
      if (policy.reserveMicrobatch)
        need =
            dev.pending + (dev.started[f.microbatch] ? 0 : dev.perMicrobatch);
      else
        need = getActivation(durations, f) +
               (dev.started[f.microbatch] ? 0 : dev.laterForward);
      bool fits = dev.live + need <= getCap(d) + kEpsilon;
      bool known;
      double ready = readyTime(f, now, known);
      if (known && ready <= now + kEpsilon) {
        if (!fits)
          c.blockedF = true;
        else if (!c.bestF || before(f, *c.bestF))
          c.bestF = f;
      } else if (fits) {
        c.nextArrival = std::min(c.nextArrival, ready);
      }
    }
  }
  // A forward that would hold up a backward whose input is on its way
  // waits, as the policy says.
  if (c.bestF && !c.bestB &&
      now + durations.compute(*c.bestF) >
          c.nextKnownB + policy.forwardOverrun * durations.compute(*c.bestF) +
              kEpsilon) {
    c.nextArrival = std::min(c.nextArrival, c.nextKnownB);
    c.bestF.reset();
  }
  return c;
}

FailureOr<std::vector<std::vector<Work>>>
ListScheduler::run(std::string &error) {
  if (failed(prepare(error)))
    return failure();
  int p = pipe.devices;
  using Event = std::pair<double, int>;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events;
  for (int d = 0; d < p; ++d)
    events.push({0.0, d});
  while (!events.empty()) {
    auto [time, d] = events.top();
    events.pop();
    Device &dev = devices[d];
    if (time != dev.clock || dev.remaining == 0)
      continue;
    double now = dev.clock;
    Candidates c = findCandidates(d, now);
    if (c.bestB || c.bestF) {
      bool forward = c.bestF && (!c.bestB || policy.forwardFirst);
      execute(d, forward ? *c.bestF : *c.bestB);
      events.push({dev.clock, d});
      continue;
    }
    if (!dev.dueW.empty()) {
      Work w = dev.dueW.front();
      double length = durations.compute(w);
      // W frees memory a blocked forward needs, fills a gap it fits, or
      // overruns the next arrival by what the policy allows; once nothing
      // but W is left it simply runs.
      if (c.blockedF || c.nextArrival == kInfinity ||
          now + length <=
              c.nextArrival + policy.weightOverrun * length + kEpsilon) {
        dev.dueW.pop_front();
        execute(d, w);
        events.push({dev.clock, d});
        continue;
      }
    }
    if (c.nextArrival == kInfinity) {
      error = llvm::formatv("device {0} cannot go on at time {1}: its memory "
                            "cap ({2}) admits no forward and no backward is "
                            "left to free it",
                            d, now, getCap(d));
      return failure();
    }
    dev.clock = c.nextArrival;
    events.push({dev.clock, d});
  }
  for (int d = 0; d < p; ++d)
    if (devices[d].remaining != 0) {
      error = llvm::formatv("device {0} never ran {1} of its passes", d,
                            devices[d].remaining);
      return failure();
    }
  return std::move(orders);
}

FailureOr<std::vector<std::vector<Work>>>
sched::scheduleByList(const Pipeline &pipeline, const Durations &durations,
                      const MemoryCaps &caps, const ListPolicy &policy,
                      std::string &error) {
  if (pipeline.vocab.any()) {
    error = "the list scheduler does not place vocabulary passes";
    return failure();
  }
  ListScheduler scheduler(pipeline, durations, caps, policy);
  return scheduler.run(error);
}

/// Whether `orders` hold at most `caps` from F to W on every device.
static bool keepsCaps(const Pipeline &pipeline,
                      const std::vector<std::vector<Work>> &orders,
                      const Durations &durations, const MemoryCaps &caps) {
  std::vector<double> peaks = getPeakUntilW(pipeline, orders, durations);
  for (size_t d = 0; d < caps.size() && d < peaks.size(); ++d)
    if (peaks[d] > caps[d] + kEpsilon)
      return false;
  return true;
}

/// `orders` with W passes moved earlier where a forward would break a cap:
/// before each F that would, the device's oldest W whose B has run moves to
/// just before it. nullopt if no W can free enough (a cap below what the
/// order's backwards allow).
static std::optional<std::vector<std::vector<Work>>>
moveWeightsForCaps(const Pipeline &pipeline,
                   const std::vector<std::vector<Work>> &orders,
                   const Durations &durations, const MemoryCaps &caps) {
  std::vector<std::vector<Work>> result(orders.size());
  WorkIndex index(pipeline);
  std::vector<char> moved(index.size(), 0);
  for (size_t d = 0; d < orders.size(); ++d) {
    double cap = d < caps.size() ? caps[d] : kInfinity, live = 0;
    std::deque<Work> due;
    for (const Work &work : orders[d]) {
      if (work.kind == PassKind::W && moved[index(work)])
        continue;
      if (work.kind == PassKind::F) {
        double need = getActivation(durations, work);
        while (live + need > cap + kEpsilon) {
          if (due.empty())
            return std::nullopt;
          Work w = due.front();
          due.pop_front();
          moved[index(w)] = 1;
          result[d].push_back(w);
          live -= getActivation(durations, w);
        }
        live += need;
      } else if (work.kind == PassKind::B) {
        due.push_back({PassKind::W, work.stage, work.microbatch, work.slice});
      } else if (work.kind == PassKind::W || work.kind == PassKind::BW) {
        live -= getActivation(durations, work);
        if (work.kind == PassKind::W)
          llvm::erase(due, work);
      }
      result[d].push_back(work);
    }
  }
  return result;
}

namespace {
/// Local search on fixed orders: a pass on the critical path that waited
/// for its own device moves earlier on it, past up to kReach passes, where
/// that keeps the caps and lowers the step time (or, at the same step
/// time, the sum of every pass's end: it lets the search cross plateaus
/// and cannot cycle). Repeated until no move helps or the budget of
/// timings is spent. The critical-path neighbourhood is the job-shop one
/// (moves inside the chains of passes that run back to back on a device
/// with no slack), so each round tries a few dozen orders, not all.
class Polisher {
public:
  /// `clock` is the improver's (each finalist polished with a clock of
  /// its own learned every pass again: four clocks built for nothing
  /// where the pipeline is too large to polish).
  Polisher(const Pipeline &pipeline, const Durations &durations,
           const MemoryCaps &caps, OrderClock &clock)
      : pipe(pipeline), durations(durations), caps(caps), index(pipeline),
        clock(clock) {}

  /// Improves `orders` in place within `budget` pass timings (a timing
  /// of the whole orders costs their number of passes); `makespan` is
  /// their step time.
  void run(std::vector<std::vector<Work>> &orders, double &makespan,
           size_t budget);

private:
  static constexpr int kReach = 6;
  /// The passes (device, position) on the critical path that started the
  /// moment their device's previous pass ended, latest first.
  std::vector<std::pair<int, int>>
  getCriticalChains(const std::vector<std::vector<Work>> &orders,
                    const PassTimes &times);

  const Pipeline &pipe;
  const Durations &durations;
  const MemoryCaps &caps;
  WorkIndex index;
  OrderClock &clock;
  llvm::SmallVector<Work, 8> deps;
};
} // namespace

std::vector<std::pair<int, int>>
Polisher::getCriticalChains(const std::vector<std::vector<Work>> &orders,
                            const PassTimes &times) {
  std::vector<std::pair<int, int>> position(index.size(), {-1, -1});
  int lastDevice = -1, lastPos = -1;
  double latest = -1;
  for (size_t d = 0; d < orders.size(); ++d)
    for (size_t i = 0; i < orders[d].size(); ++i) {
      position[index(orders[d][i])] = {int(d), int(i)};
      double end = times.end[index(orders[d][i])];
      if (end > latest) {
        latest = end;
        lastDevice = int(d);
        lastPos = int(i);
      }
    }
  std::vector<std::pair<int, int>> chain;
  int d = lastDevice, i = lastPos;
  while (d >= 0) {
    const Work &work = orders[d][i];
    double start = times.start[index(work)];
    if (start <= kEpsilon)
      break;
    // A dependency that arrived just then: moving this pass earlier on
    // its device would not start it sooner, so the path goes there.
    deps.clear();
    getAllDependencies(pipe, work, deps);
    std::optional<Work> binding;
    for (const Work &dep : deps) {
      double ready = pipe.getWorkDevice(dep) == d ? times.end[index(dep)]
                                                  : times.arrival[index(dep)];
      if (std::abs(ready - start) <= kEpsilon)
        binding = dep;
    }
    if (binding) {
      std::tie(d, i) = position[index(*binding)];
      continue;
    }
    if (i == 0)
      break; // an idle start not explained by inputs: nothing to move
    chain.push_back({d, i});
    --i;
  }
  return chain;
}

void Polisher::run(std::vector<std::vector<Work>> &orders, double &makespan,
                   size_t passBudget) {
  size_t passes = 0;
  for (const auto &order : orders)
    passes += order.size();
  size_t budget = passBudget / std::max<size_t>(passes, 1);
  // Too few timings to get anywhere: leave large pipelines as they are
  // (compile time stays linear in the passes).
  if (budget < 16)
    return;
  std::string why;
  PassTimes times;
  std::optional<OrderTiming> best = clock.time(orders, why, &times);
  if (!best)
    return;
  // Moves that only lower the sum of ends are stepping stones: unless the
  // step time drops in the end, the original order stays (it may hold
  // less from F to B, which the cap does not count).
  std::vector<std::vector<Work>> original = orders;
  while (budget > 0) {
    bool improved = false;
    for (auto [d, i] : getCriticalChains(orders, times)) {
      Work moving = orders[d][i];
      deps.clear();
      getAllDependencies(pipe, moving, deps);
      for (int k = 1; k <= kReach && i - k >= 0 && budget > 0; ++k) {
        const Work &passed = orders[d][i - k];
        // Never past an input or a pass of the same stage and kind (the
        // microbatch order of a stage's passes is fixed).
        if (llvm::is_contained(deps, passed) ||
            (passed.stage == moving.stage && passed.kind == moving.kind))
          break;
        std::vector<Work> &order = orders[d];
        std::rotate(order.begin() + (i - k), order.begin() + i,
                    order.begin() + i + 1);
        bool kept = moving.kind != PassKind::F ||
                    keepsCaps(pipe, orders, durations, caps);
        std::optional<OrderTiming> timing;
        if (kept) {
          --budget;
          // Against `best`'s times, which the clock holds: the move late in
          // a long pipeline re-times only what starts after it.
          timing = clock.retime(orders, d, size_t(i - k), size_t(i), why);
        }
        if (timing && (timing->makespan < best->makespan - kEpsilon ||
                       (timing->makespan <= best->makespan + kEpsilon &&
                        timing->totalEnd < best->totalEnd - kEpsilon))) {
          best = clock.time(orders, why, &times);
          improved = true;
          break;
        }
        // Undo.
        std::rotate(order.begin() + (i - k), order.begin() + (i - k) + 1,
                    order.begin() + i + 1);
      }
      if (improved || budget == 0)
        break;
    }
    if (!improved)
      break;
  }
  if (best->makespan < makespan - kEpsilon)
    makespan = best->makespan;
  else
    orders = std::move(original);
}

namespace {
/// The fastest few orders found, fastest first (on a tie the earlier
/// found); each is polished at the end and the fastest result wins.
struct Finalists {
  static constexpr size_t kSize = 4;
  std::vector<Improved> list;

  void offer(const std::vector<std::vector<Work>> &orders, double makespan,
             llvm::function_ref<std::string()> source) {
    auto at = llvm::find_if(list, [&](const Improved &f) {
      return makespan < f.makespan - kEpsilon;
    });
    if (size_t(at - list.begin()) >= kSize)
      return;
    for (const Improved &f : list)
      if (f.orders == orders)
        return;
    list.insert(at, Improved{orders, makespan, source()});
    if (list.size() > kSize)
      list.pop_back();
  }
};

/// Every policy on small pipelines; on large ones, where a list schedule
/// costs tens of milliseconds, the four that won most often over the
/// benchmark's grid (bench/ScheduleQuality.cpp).
std::vector<ListPolicy> getListPolicies(size_t passes) {
  if (passes > 20000)
    return {ListPolicy{0, true, 1e9}, ListPolicy{0, true, 0},
            ListPolicy{1e9, true, 1e9}, ListPolicy{0, true, 1e9, true}};
  std::vector<ListPolicy> policies;
  for (double weightOverrun : {0.0, 0.5, 1e9})
    for (bool laterStageFirst : {true, false})
      for (double forwardOverrun : {1e9, 0.0})
        for (bool reserve : {false, true})
          for (bool forwardFirst : {false, true})
            policies.push_back({weightOverrun, laterStageFirst, forwardOverrun,
                                reserve, forwardFirst});
  return policies;
}

std::string describe(const ListPolicy &policy) {
  return llvm::formatv("list (W overrun {0}, {1} first, F overrun {2}{3}{4})",
                       policy.weightOverrun,
                       policy.laterStageFirst ? "later stage" : "oldest",
                       policy.forwardOverrun,
                       policy.reserveMicrobatch ? ", whole microbatches" : "",
                       policy.forwardFirst ? ", forwards first" : "")
      .str();
}

/// Each policy's list schedule, and its refinement, as finalists.
void offerListSchedules(const Pipeline &pipeline, size_t passes,
                        const Durations &durations, const MemoryCaps &caps,
                        OrderClock &clock, Finalists &finalists) {
  for (const ListPolicy &policy : getListPolicies(passes)) {
    std::string why;
    auto listed = scheduleByList(pipeline, durations, caps, policy, why);
    if (failed(listed))
      continue;
    auto refined = refineOrders(pipeline, *listed, durations, why, &clock);
    if (failed(refined))
      continue;
    for (auto *candidate : {&*listed, &*refined})
      if (auto time = clock.time(*candidate, why))
        finalists.offer(*candidate, time->makespan,
                        [&] { return describe(policy); });
  }
}

/// Polishes each finalist and returns the fastest. Timings are linear in
/// the passes: the search as a whole gets about 8e6 pass timings (a
/// quarter of a second on this machine), shared by the finalists; none
/// where that is under 16 timings each (above 125,000 passes).
Improved polishBest(const Pipeline &pipeline, const Durations &durations,
                    const MemoryCaps &caps, OrderClock &clock,
                    Finalists &finalists) {
  constexpr size_t kPassBudget = 8'000'000;
  size_t passes = 0;
  for (const auto &order : finalists.list.front().orders)
    passes += order.size();
  size_t each = kPassBudget / finalists.list.size();
  // Where each finalist gets under 100 timings (past 20,000 passes), a
  // polish gained at most 0.3% of the step on a grid of 60 compiles at
  // p 32 and 64 (five capped schedules, three cost profiles): a finalist
  // more than 1% behind the fastest cannot overtake it, and polishing it
  // was a third of the improver's time there.
  bool skipSlow = each / std::max<size_t>(passes, 1) < 100;
  double fastest = finalists.list.front().makespan;
  std::optional<Improved> best;
  for (Improved &finalist : finalists.list) {
    if (skipSlow && finalist.makespan > fastest * 1.01)
      continue;
    double before = finalist.makespan;
    Polisher(pipeline, durations, caps, clock)
        .run(finalist.orders, finalist.makespan, each);
    if (finalist.makespan < before - kEpsilon)
      finalist.source += ", polished";
    if (!best || finalist.makespan < best->makespan - kEpsilon)
      best = std::move(finalist);
  }
  return std::move(*best);
}
} // namespace

FailureOr<Improved>
sched::improveOrders(const Pipeline &pipeline,
                     llvm::ArrayRef<std::vector<std::vector<Work>>> candidates,
                     const Durations &durations, const MemoryCaps &caps,
                     std::string &error, OrderClock *sharedClock) {
  // One clock for every candidate and refinement: each pass's inputs are
  // looked up once (a fresh clock per candidate, and the refiner's own
  // look-ups, were a third of a V-shape compile at p 64, m 512).
  std::optional<OrderClock> ownClock;
  if (!sharedClock)
    ownClock.emplace(pipeline, durations);
  OrderClock &clock = sharedClock ? *sharedClock : *ownClock;
  Finalists finalists;
  // A block over the cap may come within it with some W passes earlier
  // (they free what the forward after them needs).
  std::vector<std::vector<std::vector<Work>>> blocks(candidates.begin(),
                                                     candidates.end());
  if (!pipeline.vocab.any())
    for (const auto &orders : candidates)
      if (!keepsCaps(pipeline, orders, durations, caps))
        if (auto capped =
                moveWeightsForCaps(pipeline, orders, durations, caps)) {
          std::string why;
          auto refined =
              refineOrders(pipeline, *capped, durations, why, &clock);
          if (succeeded(refined))
            blocks.push_back(std::move(*refined));
        }
  for (size_t i = 0; i < blocks.size(); ++i) {
    std::optional<OrderTiming> timing = clock.time(blocks[i], error);
    if (!timing)
      return failure();
    if (pipeline.vocab.any())
      return Improved{blocks[i], timing->makespan, "block"};
    if (!keepsCaps(pipeline, blocks[i], durations, caps))
      continue;
    finalists.offer(blocks[i], timing->makespan, [&] {
      return i == 0 ? std::string("block") : "block " + std::to_string(i);
    });
  }
  size_t passes = 0;
  for (const auto &order : candidates.front())
    passes += order.size();
  offerListSchedules(pipeline, passes, durations, caps, clock, finalists);
  if (finalists.list.empty()) {
    error = "no order keeps the memory caps";
    return failure();
  }
  return polishBest(pipeline, durations, caps, clock, finalists);
}
