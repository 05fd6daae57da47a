//===- ZeroBubbleV.cpp - The zero-bubble paper's handcrafted ZB-V ---------===//
//
// The ZB-V order of Qi et al. 2023, §6 (cited in
// Yeung et al., 2024), as PyTorch's ScheduleZBVZeroBubble
// builds it per rank, without looking at costs. Sluice offers it to the
// improver beside its own ZB-V block; the schedule benchmark prints it as
// PyTorch's column.
//
//===----------------------------------------------------------------------===//

#include "sluice/Schedule/VShapeOrders.h"

#include "VShapeSearch.h"

using namespace mlir::sluice;
using namespace mlir::sluice::sched;

std::optional<std::vector<std::vector<Work>>>
sched::getHandcraftedZbvOrders(const Pipeline &pipeline) {
  int p = pipeline.devices, m = pipeline.microbatches;
  if (!isPlainVShape(pipeline))
    return std::nullopt;
  std::vector<int> stageOf = getVShapeStages(pipeline);
  int planned = std::max(2 * p - 1, m);
  std::vector<std::vector<Work>> orders(p);
  for (int r = 0; r < p; ++r) {
    // count[chunk][kind]: the next microbatch of each.
    int count[2][3] = {{0, 0, 0}, {0, 0, 0}};
    std::vector<Work> &order = orders[r];
    auto add = [&](int chunk, PassKind kind) {
      int &next = count[chunk][int(kind == PassKind::F   ? 0
                                   : kind == PassKind::B ? 1
                                                         : 2)];
      int mb = next++;
      if (mb < m) // planned beyond m: dropped
        order.push_back({kind, stageOf[size_t(r) * 2 + chunk], mb, 0});
    };
    for (int i = 0; i < 2 * (p - r) - 1; ++i)
      add(0, PassKind::F);
    for (int i = 0; i < r; ++i) {
      add(1, PassKind::F);
      add(0, PassKind::F);
    }
    for (int i = 0; i < p - r; ++i) {
      add(1, PassKind::F);
      add(1, PassKind::B);
      add(1, PassKind::W);
    }
    while (count[1][0] < count[0][0] || count[0][0] < planned) {
      if (count[0][0] < planned)
        add(0, PassKind::F);
      add(0, PassKind::B);
      add(0, PassKind::W);
      add(1, PassKind::F);
      add(1, PassKind::B);
      add(1, PassKind::W);
    }
    for (int i = 0; i < r; ++i) {
      add(0, PassKind::B);
      add(1, PassKind::B);
    }
    for (int i = 0; i < p - r; ++i) {
      add(0, PassKind::B);
      add(0, PassKind::W);
    }
    while (count[1][2] < count[1][1])
      add(1, PassKind::W);
    while (count[0][2] < count[0][1])
      add(0, PassKind::W);
  }
  return orders;
}
