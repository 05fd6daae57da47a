//===- Reports.h - What a session reports after its steps -------*- C++ -*-===//
//
// The reports rank 0 gathers from every rank once the steps are done:
// --check-against's verdict, --profile's pass times (a --costs file),
// --trace's Chrome trace and --timing's lines.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_SESSION_REPORTS_H
#define SLUICE_RUNTIME_SESSION_REPORTS_H

#include "Executor.h"
#include "ProcessGroup.h"
#include "Session.h"

#include <string>

namespace sluice::rt::session {

/// --check-against: every rank's worst tensor reaches rank 0, which
/// compares the losses and gradient norms too, prints the figures and
/// returns why the run fails the check ("" when it passes, and on the
/// other ranks).
std::string judgeRun(HostGroup &world, const RunResult &run,
                     const SessionOptions &o);
/// --profile: every rank's measured pass times, merged by rank 0.
void writeProfile(Communicator &comm, Executor &executor, const Plan &plan,
                  const SessionOptions &o, bool root);
/// --trace: Chrome's trace format, one process per rank, one thread per
/// stream, complete events in microseconds from the rank's step start.
void writeTrace(Communicator &comm, Executor &executor,
                const std::string &path, bool root);
/// --timing: where each rank's last step went, printed by rank 0.
void printTiming(Communicator &comm, Executor &executor);

} // namespace sluice::rt::session

#endif // SLUICE_RUNTIME_SESSION_REPORTS_H
