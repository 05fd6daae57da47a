//===- PeerZeroBubble.h - The zero-bubble repo's schedules ------*- C++ -*-===//
//
// Benchmark-only: the zero-bubble repository's schedules that
// sluice-bench-schedules compares ZB-H1, ZB-H2, ZB-V, V-Half and V-Min
// against (PeerZeroBubble.cpp; ZB-V uses the library's port of zbv.py,
// VShapeOrders.h, which Sluice also offers its improver; V-Half and V-Min
// have the authors' choice among the library's own V blocks,
// getAuthorsVShapeOrders).
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_BENCH_PEERZEROBUBBLE_H
#define SLUICE_BENCH_PEERZEROBUBBLE_H

#include "sluice/Schedule/BuildingBlock.h"

#include <optional>

/// Per stage (one per device, loop placement), the order the zero-bubble
/// authors' heuristic builds under `cap` activations from F to W: the best
/// of its eight switch settings by `time` (negative: cannot execute);
/// nullopt if none fits the cap.
std::optional<std::vector<std::vector<mlir::sluice::sched::Work>>>
getPeerZeroBubbleOrders(
    const mlir::sluice::sched::Pipeline &pipeline,
    const mlir::sluice::sched::Durations &durations, double cap,
    llvm::function_ref<
        double(const std::vector<std::vector<mlir::sluice::sched::Work>> &)>
        time);

#endif // SLUICE_BENCH_PEERZEROBUBBLE_H
