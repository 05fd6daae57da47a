//===- Verifier.h - Check per-device programs -------------------*- C++ -*-===//
//
// What sluice-verify-schedule checks, on the IR-free Program: every unit of
// work exactly once on its stage's device; each unit after what it depends
// on (F before B before W on a stage, stage order across devices through
// matched send/receive pairs, forward slices in order and backward slices
// in reverse); every send received exactly once and every receive sent;
// and no deadlock when receives block until their send has been issued.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_SCHEDULE_VERIFIER_H
#define SLUICE_SCHEDULE_VERIFIER_H

#include "sluice/Schedule/Pipeline.h"

#include <optional>

namespace mlir::sluice::sched {

/// An instruction: its device and position in that device's list. An index
/// of -1 means the device as a whole.
struct InstrRef {
  int device = 0;
  int index = -1;
};

/// A broken rule: where, and optionally the instruction it conflicts with.
struct Violation {
  std::string message;
  InstrRef at;
  std::optional<InstrRef> related;
  std::string relatedMessage;
};

/// The first broken rule, or nothing if the program is correct.
std::optional<Violation> verifyProgram(const Pipeline &pipeline,
                                       const Program &program);

} // namespace mlir::sluice::sched

#endif // SLUICE_SCHEDULE_VERIFIER_H
