//===- Failure.h - Ending a session from deep inside it ---------*- C++ -*-===//
//
// Inside the session library a failure unwinds to the public entry point
// (Session::open, Session::train) as a SessionEnd, which returns its
// Outcome: the checks stay one line each where they are made, as the
// plan reader's do with its PlanError. Nothing outside the library sees
// the exception.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_SESSION_FAILURE_H
#define SLUICE_RUNTIME_SESSION_FAILURE_H

#include "Outcome.h"

#include <string>

namespace sluice::rt {

class Communicator;
class HostGroup;

namespace session {

struct SessionEnd {
  Outcome outcome;
};

/// Every rank found `message` (a flag, the plan, the data): rank 0 of
/// `world` reports it.
[[noreturn]] void failEverywhere(const Communicator &world,
                                 const std::string &message);
/// This rank alone failed (a step, a file it writes): "rank R: message",
/// R its rank in the job (setFailureRank; the session sets it).
[[noreturn]] void failHere(const std::string &message);
void setFailureRank(int rank);
/// Ends every rank when any failed `st`, so that no rank is left waiting
/// in a collective the others never join: every rank calls it at the same
/// point (a file every rank reads, a part only some ranks hold). Rank 0
/// reports each distinct failure once, naming the ranks that had it
/// unless all did.
void agree(HostGroup &world, const Status &st);

} // namespace session
} // namespace sluice::rt

#endif // SLUICE_RUNTIME_SESSION_FAILURE_H
