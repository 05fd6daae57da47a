//===- PeerVAuto.h - The controllable-memory repo's V search ----*- C++ -*-===//
//
// Benchmark-only: the cost-aware V-shape search the controllable-memory
// paper's authors publish (Qi et al. 2024, §3 and Appendix A; their
// repository's v_auto_schedule.py), re-implemented here so that
// sluice-bench-schedules can compare V-Half and V-Min against an order
// Sluice never sees. Nothing in the library calls it.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_BENCH_PEERVAUTO_H
#define SLUICE_BENCH_PEERVAUTO_H

#include "sluice/Schedule/BuildingBlock.h"

#include <optional>

/// Per device of a V pipeline (two chunks per device, no slices or
/// vocabulary passes), the order the authors' search picks for pass costs
/// f, b, w (one chunk's F, B, W) and `comm` per hop, among the building
/// blocks whose repeated, squeezed and reordered schedule holds at most
/// `maxChunks` chunk activations (F to W) on every device; nullopt if none
/// does.
std::optional<std::vector<std::vector<mlir::sluice::sched::Work>>>
getPeerVAutoOrders(const mlir::sluice::sched::Pipeline &pipeline, double f,
                   double b, double w, double comm, int maxChunks);

#endif // SLUICE_BENCH_PEERVAUTO_H
