//===- Interrupt.cpp - SIGINT and SIGTERM as a request to stop ------------===//

#include "Interrupt.h"

#include <csignal>
#include <cstdlib>
#include <fstream>
#include <cstring>
#include <unistd.h>

namespace sluice::rt::session {

namespace {
volatile std::sig_atomic_t received = 0;
volatile std::sig_atomic_t announcing = 0;
volatile std::sig_atomic_t saving = 0;
/// Started by sluice-launch, which passes the user's requests on as
/// SIGUSR1: a SIGTERM or SIGINT is then mpirun ending the job (another
/// rank failed), which no step will outlast.
volatile std::sig_atomic_t launched = 0;
/// Started by srun: a SIGTERM is either the scheduler's request to stop
/// (the time limit's --signal, scancel --signal, a preemption) or srun
/// ending the step because another rank failed, and nothing tells the
/// two apart here. The rank says nothing then: the lines after the step
/// ("saved checkpoint", "stopped by SIGTERM after step N") say what was
/// done once every rank agreed to it.
volatile std::sig_atomic_t underSrun = 0;

void onSignal(int sig) {
  if (received) {
    // The second: what the signal would have done without us.
    std::signal(sig, SIG_DFL);
    std::raise(sig);
    return;
  }
  if (launched && sig != SIGUSR1) {
    // The job is ending: say so, not that this rank will stop and save.
    static const char ending[] =
        "sluice-run: the job is being ended (another rank failed, or "
        "mpirun was stopped): not saving\n";
    ssize_t ignored = ::write(2, ending, sizeof(ending) - 1);
    (void)ignored;
    std::signal(sig, SIG_DFL);
    std::raise(sig);
    return;
  }
  received = sig;
  if (announcing && !underSrun) {
    // write(2) only: nothing else is safe in a handler. A run without
    // --save says so rather than promise a save it will not make.
    static const char save[] =
        "sluice-run: stopping after this step, then saving (--save); "
        "a second signal ends the run at once\n";
    static const char noSave[] =
        "sluice-run: stopping after this step (nothing is saved: the run "
        "has no --save); a second signal ends the run at once\n";
    ssize_t ignored = saving ? ::write(2, save, sizeof(save) - 1)
                             : ::write(2, noSave, sizeof(noSave) - 1);
    (void)ignored;
  }
}
} // namespace

void installInterruptHandlers(bool announce, bool saves) {
  announcing = announce ? 1 : 0;
  saving = saves ? 1 : 0;
  launched = std::getenv("SLUICE_STOP_REASON") ? 1 : 0;
  underSrun = !launched && std::getenv("SLURM_STEP_ID") ? 1 : 0;
  struct sigaction action;
  std::memset(&action, 0, sizeof(action));
  action.sa_handler = onSignal;
  sigemptyset(&action.sa_mask);
  // Calls the signal interrupts go on: the step finishes as it would.
  action.sa_flags = SA_RESTART;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  // What mpirun passes on to every rank without ending the job:
  // sluice-launch turns Ctrl-C and SIGTERM into it.
  sigaction(SIGUSR1, &action, nullptr);
}

int getInterruptSignal() { return received; }

std::string describeStop(int sig) {
  switch (sig) {
  case SIGINT:
    return "by SIGINT";
  case SIGTERM:
    return "by SIGTERM";
  case SIGUSR1:
    break;
  default:
    return "by a signal";
  }
  // mpirun passes SIGUSR1 on without ending the job, so sluice-launch
  // turns the user's signal into it; what the user sent is in the file.
  std::string sent;
  if (const char *path = std::getenv("SLUICE_STOP_REASON"))
    std::getline(std::ifstream(path), sent);
  if (sent == "SIGINT")
    return "by SIGINT (Ctrl-C) to sluice-launch";
  if (sent == "SIGTERM")
    return "by SIGTERM to sluice-launch";
  return "on request (SIGUSR1)";
}

} // namespace sluice::rt::session
