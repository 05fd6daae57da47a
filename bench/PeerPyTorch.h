//===- PeerPyTorch.h - PyTorch's zero-bubble schedule orders ----*- C++ -*-===//
//
// Benchmark-only: the orders torch.distributed.pipelining builds for its
// zero-bubble schedules, a peer column of sluice-bench-schedules (see
// PeerPyTorch.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_BENCH_PEERPYTORCH_H
#define SLUICE_BENCH_PEERPYTORCH_H

#include "sluice/Schedule/BuildingBlock.h"

#include <optional>

/// ScheduleInterleavedZeroBubble with one stage per rank (the zero-bubble
/// paper's handcrafted ZB-H1); nullopt unless one stage per device.
std::optional<std::vector<std::vector<mlir::sluice::sched::Work>>>
getPyTorchZeroBubbleOrders(const mlir::sluice::sched::Pipeline &pipeline);

#endif // SLUICE_BENCH_PEERPYTORCH_H
