//===- Settings.h - A session's options, checked and resolved ---*- C++ -*-===//

#ifndef SLUICE_RUNTIME_SESSION_SETTINGS_H
#define SLUICE_RUNTIME_SESSION_SETTINGS_H

#include "ProcessGroup.h"
#include "Checkpoint.h"
#include "SessionOptions.h"

namespace sluice::rt::session {

/// Everything about the options that can be wrong before the plan is
/// read, checked the same way on every rank, so the job ends with one
/// message.
void checkOptions(Communicator &world, const SessionOptions &o);

/// The run's optimizer settings and seed: each option given, else what the
/// checkpoint being resumed recorded (so a resumed run continues the
/// interrupted one's schedule), else the option's default. Rank 0 notes
/// the options that override what the checkpoint recorded.
TrainingSettings resolveSettings(HostGroup &world,
                                 const SessionOptions &o);

} // namespace sluice::rt::session

#endif // SLUICE_RUNTIME_SESSION_SETTINGS_H
