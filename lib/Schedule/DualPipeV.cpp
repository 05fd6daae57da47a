//===- DualPipeV.cpp - DeepSeek's DualPipeV with overlapped pairs ---------===//
//
// DualPipe (DeepSeek-AI, 2024, §3.2.1) runs, on each device, the forward
// of one microbatch beside the backward of another, so that one's expert
// all-to-alls run while the other computes (its Figure 4). Its V form,
// DualPipeV, places two stages per device like ZB-V and runs eight
// phases per device, written down in the DualPipe repository and rebuilt
// action by action by PyTorch's ScheduleDualPipeV. This is that order,
// built from the phases' description without looking at costs; the
// pairs are what Sluice's simulator and runtime overlap
// (Instr::paired).
//
// Its W passes: a "full" backward is B followed at once by its own W (a
// pair's backward lane is both, the way DualPipe's backward chunk computes
// both gradients); a zero-bubble backward queues its W, and the queued W
// passes run first in, first out where the phases say.
//
//===----------------------------------------------------------------------===//

#include "sluice/Schedule/VShapeOrders.h"

#include "VShapeSearch.h"

#include <deque>

using namespace mlir::sluice;
using namespace mlir::sluice::sched;

std::optional<OverlappedOrders>
sched::getDualPipeVOrders(const Pipeline &pipeline, bool overlap) {
  int p = pipeline.devices, m = pipeline.microbatches;
  if (!isPlainVShape(pipeline) || m < 2 * p)
    return std::nullopt;
  std::vector<int> stageOf = getVShapeStages(pipeline);
  OverlappedOrders result;
  result.orders.resize(p);
  result.pairs.resize(p);
  for (int d = 0; d < p; ++d) {
    std::vector<Work> &order = result.orders[d];
    std::vector<char> &pairs = result.pairs[d];
    int nextForward[2] = {0, 0}, nextBackward[2] = {0, 0};
    std::deque<Work> weights;
    auto stage = [&](int chunk) { return stageOf[size_t(d) * 2 + chunk]; };
    auto push = [&](const Work &work, bool joinsNext) {
      order.push_back(work);
      pairs.push_back(joinsNext && overlap);
    };
    auto forward = [&](int chunk, bool joinsNext = false) {
      push({PassKind::F, stage(chunk), nextForward[chunk]++, 0}, joinsNext);
    };
    // B, then its W at once (full) or queued (zero bubble).
    auto backward = [&](int chunk, bool zeroBubble, bool joinsNext = false) {
      int mb = nextBackward[chunk]++;
      Work weight{PassKind::W, stage(chunk), mb, 0};
      push({PassKind::B, stage(chunk), mb, 0}, joinsNext && !zeroBubble);
      if (zeroBubble)
        weights.push_back(weight);
      else
        push(weight, false);
    };
    auto queuedWeight = [&] {
      if (weights.empty())
        return;
      push(weights.front(), false);
      weights.pop_front();
    };
    // An overlapped pair: F of one chunk beside the full backward of the
    // other.
    auto pair = [&](int forwardChunk, int backwardChunk) {
      forward(forwardChunk, /*joinsNext=*/true);
      backward(backwardChunk, /*zeroBubble=*/false, /*joinsNext=*/true);
    };

    // 1: forwards of the first stage, two per device to the V's bottom.
    for (int i = 0; i < 2 * (p - d - 1); ++i)
      forward(0);
    // 2: forwards of both stages, alternating.
    for (int i = 0; i < d + 1; ++i) {
      forward(0);
      forward(1);
    }
    // 3: the second stage's zero-bubble backward, its W, its next forward.
    for (int i = 0; i < p - d - 1; ++i) {
      backward(1, /*zeroBubble=*/true);
      queuedWeight();
      forward(1);
    }
    // 4, the steady state: pairs, first stage's F beside the second's
    // backward, then the reverse. The V's bottom device does not overlap
    // its first (the phases' own exception: it shortens the bubble).
    for (int i = 0; i < m - 2 * p + d + 1; ++i) {
      if (i == 0 && d == p - 1) {
        forward(0);
        backward(1, /*zeroBubble=*/false);
      } else {
        pair(0, 1);
      }
      pair(1, 0);
    }
    // 5: the second stage's backward alone, then a pair.
    for (int i = 0; i < p - d - 1; ++i) {
      backward(1, /*zeroBubble=*/false);
      pair(1, 0);
    }
    // 6: backwards of both stages; from the middle of the phase on, zero
    // bubble (odd devices switch before the second stage's, even ones
    // after it).
    bool zeroBubble = false;
    for (int i = 0; i < d + 1; ++i) {
      if (i == (d + 1) / 2 && d % 2 == 1)
        zeroBubble = true;
      backward(1, zeroBubble);
      if (i == (d + 1) / 2 && d % 2 == 0)
        zeroBubble = true;
      backward(0, zeroBubble);
    }
    // 7: a queued W, then the first stage's zero-bubble backward.
    for (int i = 0; i < p - d - 1; ++i) {
      queuedWeight();
      backward(0, /*zeroBubble=*/true);
    }
    // 8: the queued W passes.
    while (!weights.empty())
      queuedWeight();
  }
  return result;
}
