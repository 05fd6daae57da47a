//===- ExpertDispatch.h - Where expert parallelism moves copies -*- C++ -*-===//
//
// Expert parallelism (docs/moe.md, "Design notes"): an expert group of
// `members` ranks, member j holding experts [j El, (j + 1) El) of every
// sparse layer (El = experts / members). Each member routes its own
// tokens and sorts their copies by expert (moeSort), so the copies for one
// member's experts are contiguous; it tells every member how many copies
// it sends each of that member's experts (an all-to-all of El counts a
// member), then sends the copies (an all-to-all of rows: allToAllAsync).
// A member receives its experts' copies source by source; the grouped
// GEMM wants them expert by expert, so they are regrouped in blocks, and
// back before the return all-to-all.
//
// This is the host's part of that: from the member's own counts and the
// counts it received, the all-to-all's row counts, the regrouping blocks
// and each local expert's first row -- and the refusal, naming the expert,
// of a routing that overflows the rows the plan sized the receive buffers
// for (its capacity), instead of writing past them.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_RUNTIME_BLOCKS_EXPERTDISPATCH_H
#define SLUICE_RUNTIME_BLOCKS_EXPERTDISPATCH_H

#include <cstdint>
#include <string>
#include <vector>

namespace sluice::rt::block {

struct ExpertDispatch {
  /// Copies (rows) this member sends each member and receives from each.
  std::vector<int64_t> sendRows, recvRows;
  /// One contiguous run of received rows: rows [from, from + rows) of the
  /// received buffer (source-major) are rows [to, to + rows) of the
  /// expert-major one.
  struct Block {
    int64_t from, to, rows;
  };
  std::vector<Block> blocks;
  /// Each local expert's first row in the expert-major buffer, and the
  /// total (local experts + 1 entries, as the grouped GEMM reads them).
  std::vector<int64_t> localOffsets;
};

/// Plans member `member`'s dispatch in a group of `members`: `own[e]`, the
/// copies this member routes to expert e (every expert, moeSort's
/// counts); `incoming[s * local + l]`, the copies member s routes to this
/// member's local expert l (the counts' all-to-all). Returns "" or why
/// the routing cannot run: more than `capacity` rows received (the
/// busiest local expert named with its copies), or counts that do not
/// fit the group.
inline std::string planExpertDispatch(const std::vector<int64_t> &own,
                                      const std::vector<int64_t> &incoming,
                                      int members, int member,
                                      int64_t capacity, ExpertDispatch &out) {
  out = ExpertDispatch();
  int64_t experts = int64_t(own.size());
  if (members < 1 || member < 0 || member >= members ||
      experts % members != 0)
    return "an expert group of " + std::to_string(members) +
           " members cannot split " + std::to_string(experts) + " experts";
  int64_t local = experts / members;
  if (int64_t(incoming.size()) != int64_t(members) * local)
    return "expected " + std::to_string(members * local) +
           " incoming counts, got " + std::to_string(incoming.size());
  for (int q = 0; q < members; ++q) {
    int64_t rows = 0;
    for (int64_t l = 0; l < local; ++l)
      rows += own[size_t(q * local + l)];
    out.sendRows.push_back(rows);
  }
  // Expert-major: local expert l's rows from every source, in source
  // order; the received buffer holds source s's rows for l after its rows
  // for the experts before l.
  out.localOffsets.assign(size_t(local + 1), 0);
  for (int64_t l = 0; l < local; ++l) {
    int64_t rows = 0;
    for (int s = 0; s < members; ++s)
      rows += incoming[size_t(s * local + l)];
    out.localOffsets[size_t(l + 1)] = out.localOffsets[size_t(l)] + rows;
  }
  int64_t received = out.localOffsets.back();
  if (received > capacity) {
    int64_t busiest = 0;
    for (int64_t l = 1; l < local; ++l)
      if (out.localOffsets[size_t(l + 1)] - out.localOffsets[size_t(l)] >
          out.localOffsets[size_t(busiest + 1)] -
              out.localOffsets[size_t(busiest)])
        busiest = l;
    return "expert parallelism: member " + std::to_string(member) +
           " receives " + std::to_string(received) + " token copies, over " +
           "the " + std::to_string(capacity) +
           " its buffers were planned for; the busiest, expert " +
           std::to_string(member * local + busiest) + ", has " +
           std::to_string(out.localOffsets[size_t(busiest + 1)] -
                          out.localOffsets[size_t(busiest)]) +
           " (a larger expert capacity, or the load-balancing loss, "
           "aux_loss)";
  }
  std::vector<int64_t> next(out.localOffsets.begin(),
                            out.localOffsets.end() - 1);
  int64_t from = 0;
  for (int s = 0; s < members; ++s) {
    int64_t rows = 0;
    for (int64_t l = 0; l < local; ++l) {
      int64_t count = incoming[size_t(s * local + l)];
      if (count > 0)
        out.blocks.push_back({from, next[size_t(l)], count});
      next[size_t(l)] += count;
      from += count;
      rows += count;
    }
    out.recvRows.push_back(rows);
  }
  return "";
}

} // namespace sluice::rt::block

#endif // SLUICE_RUNTIME_BLOCKS_EXPERTDISPATCH_H
