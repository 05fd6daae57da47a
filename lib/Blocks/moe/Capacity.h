//===- Capacity.h - moe: what an expert-group member receives ---*- C++ -*-===//
//
// The shape part (Shape.cpp) sizes the experts' state and the compute part
// (Compute.cpp) carves it; both take the rows a member's experts compute
// on from here.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_BLOCKS_MOE_CAPACITY_H
#define SLUICE_BLOCKS_MOE_CAPACITY_H

#include "sluice/PlanFormat/ModelConfig.h"

#include <algorithm>

namespace sluice::blocks::moe {

/// The token copies the experts of one member of an expert group of
/// `members` compute on for `tokens` tokens per member, at most: without
/// expert parallelism every copy (tokens x top_k); with it, each member's
/// tokens send this member at most min(top_k, its experts) copies each (a
/// token's k copies go to k different experts), which is dropless whatever
/// the routing -- the plan sizes the buffers for the worst case, so no
/// routing overflows them.
inline int64_t getExpertRows(int64_t tokens, const rt::LayerConfig &l,
                             int members) {
  if (members <= 1)
    return tokens * l.topK;
  int64_t local = l.experts / members;
  return int64_t(members) * tokens * std::min<int64_t>(l.topK, local);
}

/// The i32 entries expert parallelism adds to the routing state: the
/// copies sent to each expert, those received from each member for each
/// local expert, and each local expert's first received row (local + 1).
inline int64_t getDispatchInts(const rt::LayerConfig &l, int members) {
  if (members <= 1)
    return 0;
  return 2 * l.experts + l.experts / members + 1;
}

} // namespace sluice::blocks::moe

#endif // SLUICE_BLOCKS_MOE_CAPACITY_H
