//===- ExpertCapacity.h - What an expert-group member receives -*- C++ -*-===//
//
// The moe feature's shape part (lib/Blocks/moe/Shape.cpp) sizes the
// experts' state and its compute part carves it; sluice-shard-tensors
// types the dispatch's result and the dialect verifies it: all take the
// rows a member's experts compute on from here.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_BLOCKS_EXPERTCAPACITY_H
#define SLUICE_BLOCKS_EXPERTCAPACITY_H

#include "sluice/PlanFormat/ModelConfig.h"

#include <algorithm>
#include <cmath>

namespace sluice::blocks::moe {

/// The token copies the experts of one member of an expert group of
/// `members` compute on for `tokens` tokens per member, at most: without
/// expert parallelism every copy (tokens x top_k); with it, each member's
/// tokens send this member at most min(top_k, its experts) copies each (a
/// token's k copies go to k different experts), which is dropless whatever
/// the routing. A `capacity` C >= 1 sizes them for C times the balanced
/// share instead (tokens x top_k: the group's copies spread evenly), at
/// most that bound (GShard's and Megatron-LM's capacity factor, except
/// that a routing beyond it is refused rather than its tokens dropped).
inline int64_t getExpertRows(int64_t tokens, const rt::LayerConfig &l,
                             int members, double capacity = 0) {
  if (members <= 1)
    return tokens * l.topK;
  int64_t local = l.experts / members;
  int64_t dropless =
      int64_t(members) * tokens * std::min<int64_t>(l.topK, local);
  if (!(capacity > 0))
    return dropless;
  double sized = std::ceil(capacity * double(tokens * l.topK));
  return sized >= double(dropless) ? dropless
                                   : std::max<int64_t>(1, int64_t(sized));
}

/// The i32 entries expert parallelism adds to the routing state: the
/// copies sent to each expert, those received from each member for each
/// local expert, and each local expert's first received row (local + 1).
inline int64_t getDispatchInts(const rt::LayerConfig &l, int members) {
  if (members <= 1)
    return 0;
  return 2 * l.experts + l.experts / members + 1;
}

/// Whether the layer's shared expert has a sigmoid gate (Qwen2-MoE's),
/// whose values and logit gradient the routing state holds.
inline bool hasSharedGate(const rt::LayerConfig &l) {
  return l.sharedFfn > 0 && l.sharedGate;
}

/// The most expert groups a router takes (the GPU router keeps one score
/// per group in registers).
constexpr int64_t kMaxExpertGroups = 64;

} // namespace sluice::blocks::moe

#endif // SLUICE_BLOCKS_EXPERTCAPACITY_H
