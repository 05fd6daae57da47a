//===- Repeats.h - A device program's repeated blocks -----------*- C++ -*-===//
//
// Pipeline schedules are periodic: after its warm-up a device runs the
// same few instructions for one microbatch after another (1F1B's steady
// state, a V shape's F-B-W of its two chunks), so that a program grows
// with the microbatches while its pattern does not. Plan version 9 states
// such a stretch once, as a repeat block (docs/plan-format.md):
//
//   {"repeat": c, "mb_step": s, "key_step": k, "slots": [[a, b], ...],
//    "body": [ ...L instructions... ]}
//
// is the body run c times; in its i-th run (from 0) every instruction's
// microbatch is the body's plus i x s, every message key the body's plus
// i x k, and every buffer slot x (not -1) the slot map applied i times
// (pi^i(x); a slot the map does not list maps to itself: the buffer
// planner's slots rotate through rings, so a body is one period of the
// schedule, not the least common multiple of every ring's length).
//
// findRepeats is the writer's side: the schedule pass finds a device's
// periodic stretches with it (sluice.repeat), and the plan writer the
// blocks of stretches without one; the runtime's reader expands them back into the
// list it validates and runs, so that nothing downstream of the reader
// knows about repeats. Plain C++ (the runtime-only build links it).
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_PLANFORMAT_REPEATS_H
#define SLUICE_PLANFORMAT_REPEATS_H

#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace sluice::rt {

/// What a repeat block compares of one instruction.
struct RepeatFields {
  /// Absent (an instruction without a microbatch or key).
  static constexpr int64_t kAbsent = INT64_MIN;
  /// Fields every run of a body repeats verbatim: the op, pass, stage or
  /// shard, slice, peer, group, stream, ... (the writer's choice of
  /// encoding; only equality matters).
  std::array<int64_t, 8> fixed{};
  int64_t mb = kAbsent;
  int64_t key = kAbsent;
  /// Buffer slots, -1 for a role the instruction does not have.
  std::array<int64_t, 7> slots{-1, -1, -1, -1, -1, -1, -1};
};

/// One repeat block of a program: rows [begin, begin + length * count)
/// are the first `length` rows run `count` times.
struct RepeatBlock {
  size_t begin = 0;
  size_t length = 0;
  size_t count = 0;
  int64_t mbStep = 0;
  int64_t keyStep = 0;
  /// (from, to): the slot map's entries that are not the identity,
  /// ascending.
  std::vector<std::pair<int64_t, int64_t>> slotMap;
};

/// The expanded instructions a program may hold, per device: far past
/// any real schedule's (64 devices x 2048 microbatches of a V shape hold
/// about 30,000 a device), and small enough that a hostile file cannot
/// make the reader allocate without bound.
constexpr size_t kMaxProgramInstructions = size_t(1) << 24;
/// The largest step a repeat block takes, and the largest repeat count.
constexpr int64_t kMaxRepeatStep = int64_t(1) << 31;

/// The repeat blocks of `rows` (a device's instructions in order), in
/// order and disjoint: greedily from the first row, the block that saves
/// the most rows among periods at which the row's fields recur, kept when
/// it saves at least `minSaved` rows. `numSlots` bounds every slot.
std::vector<RepeatBlock> findRepeats(const std::vector<RepeatFields> &rows,
                                     int64_t numSlots, size_t minSaved = 8);

} // namespace sluice::rt

#endif // SLUICE_PLANFORMAT_REPEATS_H
