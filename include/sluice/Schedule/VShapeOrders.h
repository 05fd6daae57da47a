//===- VShapeOrders.h - The V-shape papers' own orders ----------*- C++ -*-===//
//
// Orders the V-shape schedules' authors publish, which Sluice offers its
// improver next to its own blocks (Schedules.cpp): the controllable-memory
// paper's V-Half and V-Min (Qi et al. 2024, §3), built on unit time slots
// from a repeated pattern and squeezed without raising any device's peak
// memory (SqueezeVShape.cpp), and the zero-bubble paper's handcrafted ZB-V
// (Qi et al. 2023, §6) as PyTorch's ScheduleZBVZeroBubble runs it
// (ZeroBubbleV.cpp) and as the zero-bubble repository's cost-aware
// heuristic builds it (GreedyZeroBubbleV.cpp). And DeepSeek's DualPipeV
// (DualPipeV.cpp), whose forward and backward passes overlap in pairs.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_SCHEDULE_VSHAPEORDERS_H
#define SLUICE_SCHEDULE_VSHAPEORDERS_H

#include "sluice/Schedule/BuildingBlock.h"

#include <optional>

namespace mlir::sluice::sched {

/// Per device, the V-Half (`half`) or V-Min order; the memory is what the
/// pattern gives (about a half or a third of 1F1B's, counted from F to W),
/// and the order does not depend on the pass costs. nullopt unless the
/// pipeline is a V (two chunks per device, one stage each, no slices) or if
/// the pattern breaks a dependency.
std::optional<std::vector<std::vector<Work>>>
getSqueezedVShapeOrders(const Pipeline &pipeline, bool half);

/// Up to `keep` orders, fastest first (timed with the simulator's rules on
/// `durations`), of the V building blocks of Qi et al. 2024 (§3.1,
/// Appendix A: device 0's pattern of a 6-slot period and uniform offsets
/// to the next devices), each repeated and squeezed as
/// getSqueezedVShapeOrders does its one pattern, that hold at most
/// `caps[d]` activations from F to W on device d. Empty unless the
/// pipeline is a V without slices or vocabulary passes.
std::vector<std::vector<std::vector<Work>>>
searchVShapeBlocks(const Pipeline &pipeline, const Durations &durations,
                   llvm::ArrayRef<double> caps, size_t keep);

/// Up to `keep` orders, fastest first (timed with the simulator's rules on
/// `durations`), of the controllable-memory paper's framework (Qi et al.
/// 2024, §3, Appendix A) over its whole space of V building blocks: each
/// block repeated, squeezed and reordered (warm-up and cool-down rebuilt,
/// idle slots filled) on unit slots without raising its memory, those
/// holding at most `caps[d]` activations from F to W on device d kept.
/// RepeatVShape.cpp. Empty unless the pipeline is a V without slices or
/// vocabulary passes.
std::vector<std::vector<std::vector<Work>>>
searchRepeatedVShapes(const Pipeline &pipeline, const Durations &durations,
                      llvm::ArrayRef<double> caps, size_t keep);

/// The authors' choice among the same blocks (Qi et al. 2024, Appendix A;
/// their repository's v_auto_schedule.py): per device of a V pipeline
/// (two chunks per device, no slices or vocabulary passes), the order of
/// the block whose schedule, holding at most `maxChunks` chunk activations
/// (F to W) on every device, their own timing of passes f, b, w (one
/// chunk's F, B, W) and `comm` per hop finds shortest; nullopt if none
/// holds. A named mode of searchRepeatedVShapes' construction, so not an
/// independent implementation: what the schedule benchmark compares with
/// it is the choice by real costs and the improver.
std::optional<std::vector<std::vector<Work>>>
getAuthorsVShapeOrders(const Pipeline &pipeline, double f, double b, double w,
                       double comm, int maxChunks);

/// Per device, the handcrafted ZB-V order: rank r runs 2(p - r) - 1
/// forwards of its first chunk, r pairs (second chunk, first chunk), p - r
/// triples F, B, W of the second chunk, then F, B, W of the first chunk
/// and of the second until every forward is done, then r pairs of
/// backwards (first chunk, second chunk), p - r pairs B, W of the first
/// chunk and the remaining W (second chunk, then first). Planned for
/// max(m, 2p - 1) microbatches, those beyond m dropped. nullopt unless the
/// pipeline is a V without slices or vocabulary passes.
std::optional<std::vector<std::vector<Work>>>
getHandcraftedZbvOrders(const Pipeline &pipeline);

/// Per device, the ZB-V order the zero-bubble repository's heuristic
/// (zbv.py) builds for these costs with at most `caps[d]` activations held
/// from F to W on device d: the fastest (by timeOrders) of its switch
/// settings and bubble-budget repeats. nullopt unless the pipeline is a V
/// without slices or vocabulary passes, or if no setting fits the caps.
std::optional<std::vector<std::vector<Work>>>
getGreedyZbvOrders(const Pipeline &pipeline, const Durations &durations,
                   llvm::ArrayRef<double> caps);

/// Per device orders and, for each position, whether the pass there joins
/// the next one in an overlapped group (lowerToProgram's `pairs`).
struct OverlappedOrders {
  std::vector<std::vector<Work>> orders;
  std::vector<std::vector<char>> pairs;
};

/// DualPipeV (DeepSeek-AI, 2024, §3.2.1, cut in half into a V as the
/// DualPipe repository describes it, and as PyTorch's ScheduleDualPipeV
/// runs it): device d holds stages d and 2p - 1 - d and runs, with m >= 2p
/// microbatches, 2(p - d - 1) forwards of its first stage, d + 1 forwards
/// of each, p - d - 1 rounds of (B, W, F) of its second stage, then the
/// steady state of overlapped pairs -- F of one stage beside the full
/// backward (B then W) of the other -- and a cool-down whose second half
/// defers W passes, run first in, first out. `overlap` false gives the
/// same order without the pairs (what the overlap is worth). nullopt
/// unless the pipeline is a V without slices or vocabulary passes, with
/// the backward split and m >= 2p.
std::optional<OverlappedOrders> getDualPipeVOrders(const Pipeline &pipeline,
                                                   bool overlap = true);

} // namespace mlir::sluice::sched

#endif // SLUICE_SCHEDULE_VSHAPEORDERS_H
