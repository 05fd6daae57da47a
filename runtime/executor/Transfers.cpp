//===- Transfers.cpp - The transfers in flight on one rank ----------------===//

#include "Transfers.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>

namespace sluice::rt {

void TransferEngine::forget(Request *request) {
  active.erase(std::remove(active.begin(), active.end(), request),
               active.end());
}

void TransferEngine::progress() {
  // Drop what the host is done with; the rest get a turn.
  active.erase(std::remove_if(active.begin(), active.end(),
                              [](Request *r) { return r->test(); }),
               active.end());
}

Status TransferEngine::progressAll() {
  progress();
  return progressOthers ? progressOthers() : Status::ok();
}

Status TransferEngine::await(Request &request, Stream &stream) {
  using Clock = std::chrono::steady_clock;
  auto start = Clock::now();
  auto since = [&] {
    return std::chrono::duration<double>(Clock::now() - start).count();
  };
  while (!request.test()) {
    if (Status st = progressAll(); !st)
      return st;
    // A host transport's peer that failed or never came: end the run
    // instead of waiting for good (NCCL's own waits are on the GPU).
    if (!comm.watchesProgress() && since() > timeout)
      return Status::error(
          "no progress for " + std::to_string(int64_t(timeout)) +
          " s (--comm-timeout) waiting for a transfer or collective; a peer "
          "has failed or never joined it");
    std::this_thread::yield();
  }
  Status st = request.waitOn(stream);
  waited += since();
  return st;
}

} // namespace sluice::rt
