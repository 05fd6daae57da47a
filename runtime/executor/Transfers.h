//===- Transfers.h - The transfers in flight on one rank --------*- C++ -*-===//
//
// Every part of the executor that waits for a transfer or collective --
// the program's receives and sends, the tensor-parallel sums, the
// data-parallel averages, ZeRO-1's gathers -- waits through one engine, so
// that while it waits every other transfer in flight still advances: a
// host-staged transport posts a send or a collective only when it is
// advanced, so a rank waiting on one must not hold back another rank's.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_EXECUTOR_TRANSFERS_H
#define SLUICE_RUNTIME_EXECUTOR_TRANSFERS_H

#include "Backend.h"

#include <functional>
#include <vector>

namespace sluice::rt {

class TransferEngine {
public:
  /// `comm` says whether the transport watches its own peers
  /// (watchesProgress); otherwise a wait ends after `timeoutSeconds`
  /// without progress. The host's seconds spent waiting are added to
  /// `waitedSeconds`.
  TransferEngine(Communicator &comm, double timeoutSeconds,
                 double &waitedSeconds)
      : comm(comm), timeout(timeoutSeconds), waited(waitedSeconds) {}

  /// Also advanced on every turn: another engine's work (the vocabulary
  /// shards' collectives).
  void setOthers(std::function<Status()> others) {
    progressOthers = std::move(others);
  }
  /// A transfer the host may still have work for, until it is done.
  void track(Request &request) { active.push_back(&request); }
  void forget(Request *request);
  /// Forgets every transfer (the step's are done).
  void clear() { active.clear(); }

  /// Advances every tracked transfer, never blocking.
  void progress();
  /// The same, and the others.
  Status progressAll();
  /// Waits until `request` needs the host no more, advancing everything
  /// else meanwhile, then orders `stream` after it.
  Status await(Request &request, Stream &stream);

private:
  Communicator &comm;
  double timeout;
  double &waited;
  std::vector<Request *> active;
  std::function<Status()> progressOthers;
};

} // namespace sluice::rt

#endif // SLUICE_RUNTIME_EXECUTOR_TRANSFERS_H
