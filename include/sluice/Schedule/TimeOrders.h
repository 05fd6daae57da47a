//===- TimeOrders.h - Orders executed strictly, in time ---------*- C++ -*-===//
//
// The scheduler's cost model applied to fixed per-device orders: passes on
// one device run one after another in order, each as soon as its inputs
// are there (a transfer later from another device). The tests time every
// order of small pipelines with it to check the exact schedule of
// OptimalOrders.h by brute force, and measure how far the generated
// schedules are from it.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_SCHEDULE_TIMEORDERS_H
#define SLUICE_SCHEDULE_TIMEORDERS_H

#include "sluice/Schedule/BuildingBlock.h"

#include <memory>
#include <optional>

namespace mlir::sluice::sched {

/// Orders executed strictly: each device runs its passes in its order, a
/// pass starting once the device is free and its inputs have arrived.
struct OrderTiming {
  /// When the last pass ends.
  double makespan = 0;
  /// The sum of every pass's end.
  double totalEnd = 0;
};

/// Per pass (indexed by WorkIndex), when it starts and ends and when its
/// result reaches the consuming device (its end where that is its own).
struct PassTimes {
  std::vector<double> start, end, arrival;
};

/// Times `orders`; nullopt (with `error` naming a stuck pass) if some pass
/// waits for one that never runs. With `times`, also each pass's times.
std::optional<OrderTiming>
timeOrders(const Pipeline &pipeline,
           llvm::ArrayRef<std::vector<Work>> orders,
           const Durations &durations, std::string &error,
           PassTimes *times = nullptr);

/// timeOrders for many orders of one pipeline under the same durations:
/// each pass's duration, device, consumer and inputs are worked out once,
/// the first time an order holds it, and kept. The improvers time the
/// same passes in thousands of orders; looking their inputs up again each
/// time was half of a zero-bubble compile (the same timings; those
/// compiles 1.6x faster: bench/results/cpu-2026-11-27-search).
class OrderClock {
public:
  OrderClock(const Pipeline &pipeline, const Durations &durations);
  ~OrderClock();
  OrderClock(const OrderClock &) = delete;
  OrderClock &operator=(const OrderClock &) = delete;

  std::optional<OrderTiming> time(llvm::ArrayRef<std::vector<Work>> orders,
                                  std::string &error,
                                  PassTimes *times = nullptr);

  /// time() for `orders` that equal the ones the last time() call timed
  /// (successfully) except that `device`'s positions [first, last] hold
  /// the same passes in another order: only the passes that started at
  /// or after the earliest of them are timed again (a local search's
  /// move late in a long pipeline times a few passes, not all). The same
  /// step time as time(); the sum of ends is the last timing's plus the
  /// change. The tables keep the last time()'s times, so any number of
  /// candidates can be timed against one reference.
  std::optional<OrderTiming> retime(llvm::ArrayRef<std::vector<Work>> orders,
                                    int device, size_t first, size_t last,
                                    std::string &error);

  /// What the clock knows of a pass, for other simulations of the same
  /// pipeline (refineOrders): its WorkIndex, learning on first sight its
  /// duration, device and inputs.
  /// 8 bytes: the timings walk these tables in the orders' sequence, and
  /// at p 64, m 512 they outgrow the cache (their loads were half of a
  /// timing).
  struct Input {
    uint32_t id;
    int32_t device;
  };
  size_t learn(const Work &work);
  double getDuration(size_t id) const;
  llvm::ArrayRef<Input> getInputs(size_t id) const;

private:
  struct Tables;
  std::unique_ptr<Tables> tables;
};

/// The activations of `work`'s microbatch slice on its stage (what its F
/// allocates and its W or BW frees): Durations::activation of the F, one
/// if that is null.
double getActivation(const Durations &durations, const Work &work);

/// Per device, the most activations held from F to W (to BW where the
/// backward is not split) along its order.
std::vector<double>
getPeakUntilW(const Pipeline &pipeline,
              const std::vector<std::vector<Work>> &orders,
              const Durations &durations);

} // namespace mlir::sluice::sched

#endif // SLUICE_SCHEDULE_TIMEORDERS_H
