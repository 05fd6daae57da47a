//===- CommOrder.h - One global order of a step's communication -*- C++ -*-===//
//
// NCCL matches point-to-point operations by order, not by tag, and its
// kernels wait on the GPU for their peers: two ranks that issue the
// operations of their communicators in orders no single global order
// explains can wait for each other forever (NCCL's user guide, "Using
// multiple NCCL communicators concurrently"; docs/communication.md). A
// plan's device programs are each in a valid order, but nothing makes the
// orders of two devices agree: the vocabulary shards' collectives and the
// messages of a V-shaped pipeline interleave differently on different
// devices.
//
// orderCommunication finds one order for the whole step, from the plan
// alone, so every rank computes the same one: it runs every device's
// program together, passes taking no time and the devices taking turns
// an instruction at a time (as devices running at once; one whose last
// send has not completed waits while another can move), with the
// executor's waits
// (a pass waits for its receive and the collectives it reads; a slot is
// written only once the send reading it has completed) and rendezvous
// semantics -- a message completes when both ends have posted it, a
// collective when every device has. Each device then issues its
// instructions in the order they completed in that run: an exec where it
// ran, a send, receive or collective where it completed. Every
// communication operation thus sits at one position of one global
// sequence on every rank that takes part in it, which is the condition
// NCCL states for deadlock freedom, and every rank still finds what each
// instruction waits for issued before it.
//
// A plan no such run completes (a receive posted after the pass that
// needs it, a send nobody receives) is refused with the instructions each
// device is stuck at.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_COMMORDER_H
#define SLUICE_RUNTIME_COMMORDER_H

#include "Plan.h"

#include <vector>

namespace sluice::rt {

/// Per device, its instruction indices in the issue order described above
/// (a permutation of its program).
Status orderCommunication(const Plan &plan,
                          std::vector<std::vector<size_t>> &order);

/// Rewrites every device program of `plan` into that order. Idempotent:
/// a program already in it is left as it is.
Status applyCommunicationOrder(Plan &plan);

/// Whether the programs, issued as they stand, run under NCCL's worst
/// case: every device's communication operations one after another (each
/// waiting for the one issued before it, on any communicator), each a
/// rendezvous of its members -- a message of its two ends, a collective of
/// every device. An error names what each stuck device waits in. Programs
/// in the global order always pass (docs/communication.md).
Status checkSerializedOrder(const Plan &plan);

} // namespace sluice::rt

#endif // SLUICE_RUNTIME_COMMORDER_H
