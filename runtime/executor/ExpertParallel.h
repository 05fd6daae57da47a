//===- ExpertParallel.h - The expert group's calls and sums -----*- C++ -*-===//
//
// Expert parallelism (plan.ep > 1; docs/moe.md): ep consecutive replicas
// of a device's shard form an expert group, member j holding experts
// [j E/ep, (j+1) E/ep) of every sparse layer. Inside the passes the
// mixture of experts sends each token's copies to their experts' members
// and back (block::ExpertGroup: the all-to-alls on the compute stream,
// the counts read by the host); before the update the expert gradients
// are summed over the dp / ep replicas that hold the same experts, the
// others over all dp (GradientSync). This is where the group's calls and
// the expert gradients' list live.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_EXECUTOR_EXPERTPARALLEL_H
#define SLUICE_RUNTIME_EXECUTOR_EXPERTPARALLEL_H

#include "Plan.h"
#include "Stage.h"
#include "Transfers.h"

#include <chrono>
#include <string>
#include <vector>

namespace sluice::rt {

class ExpertParallel {
public:
  /// `group` spans this device shard's expert group (rank = member); null:
  /// no expert parallelism, and nothing here does anything.
  ExpertParallel(const Plan &plan, Communicator *group, Device &device,
                 TransferEngine &transfers);

  bool isOn() const { return group != nullptr; }
  /// This rank's member index (0 without expert parallelism).
  int getMember() const { return group ? group->rank() : 0; }
  /// The calls a stage runner's mixtures of experts make (each done when
  /// it returns; the all-to-all's wait advances the pipeline's transfers).
  block::ExpertGroup getCalls();
  /// Off while a rank calibrates alone: each member then keeps its own
  /// copies (the all-to-all sends itself its part and receives nothing
  /// from the others), so a pass times this member's routing and experts.
  void setEnabled(bool on) { enabled = on; }
  /// Benchmarks only (sluice-run --slow-all-to-all): every all-to-all
  /// holds one slow link for `seconds` -- it completes that long after it
  /// was started or after the one before it completed, whichever is
  /// later, as the cost model's communication stream has it
  /// (getPairTime). What an overlapped group (PassLanes.h) can hide is
  /// then the other pass's compute, not a second all-to-all.
  void setDelay(double seconds) { delay = seconds; }

  /// The first routing refused since the last take (a member's experts
  /// received more copies than the plan's capacity), if any.
  Status takeFailure() {
    Status st = failure;
    failure = Status::ok();
    return st;
  }

  /// `value` summed over the expert group (host values).
  Status sumOverGroup(double &value) {
    return group ? group->allReduceSum(&value, 1) : Status::ok();
  }


private:
  [[noreturn]] void abortWith(const std::string &why);
  void allToAll(DevicePtr send, const std::vector<int64_t> &sendCounts,
                DevicePtr recv, const std::vector<int64_t> &recvCounts);

  const Plan &plan;
  Communicator *group;
  Device &device;
  Kernels &kernels;
  Stream &compute;
  TransferEngine &transfers;
  bool enabled = true;
  double delay = 0;
  /// When the slow link finishes the all-to-alls started so far.
  std::chrono::steady_clock::time_point linkFree;
  Status failure = Status::ok();
};

} // namespace sluice::rt

#endif // SLUICE_RUNTIME_EXECUTOR_EXPERTPARALLEL_H
