//===- ExpertParallel.cpp - The expert group's calls and sums -------------===//

#include "ExpertParallel.h"
#include "PassLanes.h"

#include <algorithm>
#include <chrono>
#include <thread>
#include <cstdio>
#include <cstdlib>

namespace sluice::rt {

ExpertParallel::ExpertParallel(const Plan &plan, Communicator *group,
                               Device &device, TransferEngine &transfers)
    : plan(plan), group(plan.ep > 1 ? group : nullptr), device(device),
      kernels(device.getKernels(StreamKind::Compute)),
      compute(device.getStream(StreamKind::Compute)), transfers(transfers) {}

void ExpertParallel::allToAll(DevicePtr send,
                              const std::vector<int64_t> &sendCounts,
                              DevicePtr recv,
                              const std::vector<int64_t> &recvCounts) {
  int me = group->rank();
  if (!enabled) {
    // Alone: this member's own part to itself, nothing from the others
    // (their counts read as zero, so no rows are expected from them).
    int64_t from = 0, to = 0, total = 0;
    for (int q = 0; q < int(recvCounts.size()); ++q) {
      if (q < me) {
        from += sendCounts[size_t(q)];
        to += recvCounts[size_t(q)];
      }
      total += recvCounts[size_t(q)];
    }
    kernels.fill(recv, 0.0, total);
    kernels.copy(recv + to, send + from,
                 std::min(sendCounts[size_t(me)], recvCounts[size_t(me)]));
    return;
  }
  using Clock = std::chrono::steady_clock;
  Clock::time_point done{};
  if (delay > 0) {
    linkFree = std::max(linkFree, Clock::now()) +
               std::chrono::duration_cast<Clock::duration>(
                   std::chrono::duration<double>(delay));
    done = linkFree;
  }
  std::unique_ptr<Request> request =
      group->allToAllAsync(send, sendCounts, recv, recvCounts, 0, compute);
  if (!request)
    abortWith("this transport has no all-to-all");
  // In an overlapped group the other pass runs while this one is in
  // flight (PassLanes.h); alone, this returns at once.
  PassLanes::handOver();
  if (Status st = transfers.await(*request, compute); !st)
    abortWith(st.message());
  if (delay > 0) {
    // A sleep overshoots by tens of microseconds, hundreds of times a
    // step: sleep to just before the link is done, then spin.
    auto margin = std::chrono::microseconds(200);
    if (Clock::now() + margin < done)
      std::this_thread::sleep_until(done - margin);
    while (Clock::now() < done)
      std::this_thread::yield();
  }
}

void ExpertParallel::abortWith(const std::string &why) {
  // Every member waits in the same collectives: one that cannot go on (a
  // failed transfer) ends the job, with why, rather than leave the others
  // waiting.
  std::fprintf(stderr,
               "sluice-run: error: expert parallelism, member %d of %d: %s\n",
               group->rank(), group->size(), why.c_str());
  std::fflush(stderr);
  group->abort(1);
  std::abort(); // (abort is noreturn; the compiler cannot see it)
}

block::ExpertGroup ExpertParallel::getCalls() {
  block::ExpertGroup calls;
  if (!group)
    return calls;
  calls.member = group->rank();
  calls.members = group->size();
  calls.allToAll = [this](DevicePtr send, const std::vector<int64_t> &sendCounts,
                          DevicePtr recv,
                          const std::vector<int64_t> &recvCounts) {
    allToAll(send, sendCounts, recv, recvCounts);
  };
  calls.read = [this](DevicePtr from, int64_t count, int32_t *to) {
    device.download(to, from, count * int64_t(sizeof(int32_t)), compute);
    if (Status st = compute.synchronize(); !st)
      abortWith(st.message());
  };
  calls.write = [this](const int32_t *from, int64_t count, DevicePtr to) {
    device.upload(to, from, count * int64_t(sizeof(int32_t)), compute);
    // The host's values stay valid until the stream has copied them.
    if (Status st = compute.synchronize(); !st)
      abortWith(st.message());
  };
  calls.anyOf = [this](bool mine) {
    double any = mine ? 1.0 : 0.0;
    if (!enabled)
      return mine;
    if (Status st = group->allReduceMax(&any, 1); !st)
      abortWith(st.message());
    return any > 0;
  };
  // Kept for the executor, which ends the step after the pass; the first
  // refusal of the step is the one reported.
  calls.fail = [this](const std::string &why) {
    if (failure)
      failure = Status::error(why);
  };
  return calls;
}

} // namespace sluice::rt
