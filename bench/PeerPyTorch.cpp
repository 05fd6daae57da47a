//===- PeerPyTorch.cpp - PyTorch's zero-bubble schedule orders ------------===//
//
// A peer column for sluice-bench-schedules: the per-rank orders of
// torch.distributed.pipelining's zero-bubble schedules, re-implemented from
// their documented behaviour so that both are timed by one simulator.
// PyTorch builds these orders without looking at costs; the padding it
// adds between actions to show the timeline does not change the order.
//
// ScheduleInterleavedZeroBubble with one local stage (the zero-bubble
// paper's ZB-H1, Qi et al. 2023, §3.1): rank r runs min(p - 1 - r, m)
// forwards, then forward/backward pairs, then the remaining backwards; it
// starts W passes (oldest first) once r backwards are done, one after each
// backward, and runs the rest at the end.
//
// ScheduleZBVZeroBubble (the paper's ZB-V, §6) is the library's
// getHandcraftedZbvOrders (VShapeOrders.h), which Sluice also offers its
// improver.
//
//===----------------------------------------------------------------------===//

#include "PeerPyTorch.h"


using namespace mlir::sluice;
using namespace mlir::sluice::sched;

std::optional<std::vector<std::vector<Work>>>
getPyTorchZeroBubbleOrders(const Pipeline &pipeline) {
  int p = pipeline.devices, m = pipeline.microbatches;
  if (pipeline.getNumStages() != p)
    return std::nullopt;
  std::vector<std::vector<Work>> orders(p);
  for (int r = 0; r < p; ++r) {
    int stage = -1;
    for (int s = 0; s < p; ++s)
      if (pipeline.stages[s].device == r)
        stage = s;
    int warmup = std::min(p - 1 - r, m);
    int pairs = m - warmup;
    int forwards = 0, backwards = 0, weights = 0;
    std::vector<Work> &order = orders[r];
    auto add = [&](PassKind kind, int &count) {
      order.push_back({kind, stage, count++, 0});
    };
    for (int op = 0; op < m + warmup; ++op) {
      if (op < warmup) {
        add(PassKind::F, forwards);
        continue;
      }
      if (op < warmup + pairs)
        add(PassKind::F, forwards);
      add(PassKind::B, backwards);
      if (op - warmup >= r)
        add(PassKind::W, weights);
    }
    while (weights < backwards)
      add(PassKind::W, weights);
  }
  return orders;
}
