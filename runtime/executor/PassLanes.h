//===- PassLanes.h - An overlapped group's two passes, interleaved -*- C++ -*-===//
//
// DualPipe's overlapped pair (DeepSeek-AI, 2024, §3.2.1, Figure 4) on a
// host: a group's forward and its backward (B, B then W, or BW) each run
// on a lane, a thread of its own, but only one lane runs at a time. A
// lane hands over where it starts an expert all-to-all (ExpertParallel):
// the all-to-all is in flight -- MPI_Ialltoallv, or a slow network's
// latency -- while the other lane computes, and the lane waits for it only
// when it runs again. So the overlap is the communication's, not two
// passes' compute on one core.
//
// Why one lane at a time: the passes then touch the device's kernels, the
// pipeline's transfers and every communicator in one order, the same on
// every rank (each lane's calls are its pass's, the hand-overs fall at
// each lane's all-to-alls), so the collectives of the expert and tensor
// groups match across ranks without a lock in any of them, and MPI sees
// one thread at a time (MPI_THREAD_SERIALIZED).
//
// The backward lane starts: its first part is the combine's gradient, an
// all-to-all, which then runs beside the forward's attention.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_EXECUTOR_PASSLANES_H
#define SLUICE_RUNTIME_EXECUTOR_PASSLANES_H

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace sluice::rt {

class PassLanes {
public:
  PassLanes() = default;
  /// Ends the backward lane's thread.
  ~PassLanes();
  PassLanes(const PassLanes &) = delete;
  PassLanes &operator=(const PassLanes &) = delete;

  /// Runs `backward` and `forward` interleaved (the backward first): the
  /// forward on the calling thread, the backward on the lane thread
  /// (started at the first group, kept for the next); returns when both
  /// have ended.
  void run(const std::function<void()> &forward,
           const std::function<void()> &backward);

  /// Called by a lane that has started something it need not wait for
  /// yet: the other lane runs until it hands back (or ends). Outside a
  /// group, nothing happens.
  static void handOver();

private:
  void enter(int lane);
  void yield(int lane);
  void leave(int lane);
  void serve();

  std::mutex mutex;
  std::condition_variable changed;
  std::thread thread;
  /// The lane that may run; each lane's end; the backward lane's work
  /// (null: none waiting); whether the thread is to stop.
  int turn = 1;
  bool done[2] = {true, true};
  const std::function<void()> *job = nullptr;
  bool stopping = false;
};

} // namespace sluice::rt

#endif // SLUICE_RUNTIME_EXECUTOR_PASSLANES_H
