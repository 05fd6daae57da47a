//===- Interrupt.h - SIGINT and SIGTERM as a request to stop ----*- C++ -*-===//
//
// A Ctrl-C (SIGINT), a scheduler's SIGTERM or SIGUSR1 (which mpirun
// forwards to every rank, and sluice-launch sends for the first two) asks
// a training run to stop
// at the end of the step in flight: the session agrees the stop across the
// ranks (each may get the signal at another moment, or not at all), saves
// a checkpoint and says how to resume -- as Megatron-LM's
// --exit-signal-handler and torchtitan's checkpoint on SIGTERM do. A
// second signal ends the process at once, the signal's default action.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_SESSION_INTERRUPT_H
#define SLUICE_RUNTIME_SESSION_INTERRUPT_H

#include <string>

namespace sluice::rt::session {

/// Installs the handlers of SIGINT, SIGTERM and SIGUSR1 (again: no
/// effect). The
/// process that `announces` writes one line to stderr when the first
/// signal arrives: that the run stops after this step, and saves if it
/// `saves` (--save).
void installInterruptHandlers(bool announce, bool saves);

/// The first signal that asked this process to stop, or 0.
int getInterruptSignal();

/// How the run was stopped, for "stopped ... after step N": "by SIGINT",
/// "by SIGTERM"; for SIGUSR1, the signal sluice-launch received and
/// passed on as SIGUSR1 ("by SIGINT (Ctrl-C) to sluice-launch"), which it
/// writes to the file $SLUICE_STOP_REASON names, else "on request
/// (SIGUSR1)".
std::string describeStop(int sig);

} // namespace sluice::rt::session

#endif // SLUICE_RUNTIME_SESSION_INTERRUPT_H
