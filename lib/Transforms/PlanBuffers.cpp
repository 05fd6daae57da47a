//===- PlanBuffers.cpp - Buffer lifetimes and reuse per device ------------===//

#include "sluice/PipelineIR/PipelineIR.h"
#include "sluice/Target/Plan.h"
#include "sluice/Transforms/Passes.h"

#include "sluice/Blocks/Layout.h"
#include "sluice/PlanFormat/Format.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"

#include <deque>
#include <limits>
#include <numeric>
#include <map>

namespace mlir::sluice {
#define GEN_PASS_DEF_PLANBUFFERS
#include "sluice/Transforms/Passes.h.inc"
} // namespace mlir::sluice

using namespace mlir;
using namespace mlir::sluice;
using namespace mlir::sluice::sched;

namespace {

/// What a buffer holds.
enum class ValueKind : uint8_t {
  ForwardState, // F -> B, W
  WeightState,  // B -> W
  Recomputed,   // B -> W: what a recomputing stage's B made again
  KeyValues,    // first slice's F -> first slice's B (per microbatch)
  Outgoing,     // a pass's result on its way to the next stage
  Incoming,     // a received result, until its consumer runs
};
constexpr size_t kNumValueKinds = size_t(ValueKind::Incoming) + 1;

struct ValueKey {
  ValueKind kind;
  size_t work;
  bool operator<(const ValueKey &o) const {
    return std::tie(kind, work) < std::tie(o.kind, o.work);
  }
  bool operator==(const ValueKey &o) const {
    return kind == o.kind && work == o.work;
  }
};

/// Per-device slot allocation: a value gets a free slot of its own size --
/// of those, the one freed first -- or, with `anySize`, the smallest free
/// slot larger than it when none of its size is free; otherwise a new one.
/// It frees its slot after its last use. Free slots are queued by size,
/// so a choice costs a lookup, not a scan of every free slot (a V shape
/// at 64 devices frees hundreds of thousands).
class SlotAllocator {
public:
  explicit SlotAllocator(bool anySize) : anySize(anySize) {}

  int allocate(int64_t bytes) {
    for (auto it = llvm::lower_bound(free, bytes, bySize);
         it != free.end() && (anySize || it->first == bytes); ++it) {
      if (it->second.empty())
        continue;
      int slot = it->second.front();
      it->second.pop_front();
      return slot;
    }
    sizes.push_back(bytes);
    return int(sizes.size()) - 1;
  }
  void release(int slot) {
    int64_t bytes = sizes[slot];
    auto it = llvm::lower_bound(free, bytes, bySize);
    if (it == free.end() || it->first != bytes)
      it = free.insert(it, {bytes, {}});
    it->second.push_back(slot);
  }
  std::vector<int64_t> takeSizes() { return std::move(sizes); }

private:
  bool anySize;
  std::vector<int64_t> sizes;
  /// Free slots by size, ascending: a device has a few sizes (a sorted
  /// vector, not a tree).
  std::vector<std::pair<int64_t, std::deque<int>>> free;
  static bool bySize(const std::pair<int64_t, std::deque<int>> &entry,
                     int64_t bytes) {
    return entry.first < bytes;
  }
};

} // namespace

namespace llvm {
template <> struct DenseMapInfo<ValueKey> {
  static ValueKey getEmptyKey() { return {ValueKind::Incoming, ~size_t(0)}; }
  static ValueKey getTombstoneKey() {
    return {ValueKind::Incoming, ~size_t(0) - 1};
  }
  static unsigned getHashValue(const ValueKey &k) {
    return DenseMapInfo<uint64_t>::getHashValue(
        (uint64_t(k.kind) << 56) ^ uint64_t(k.work));
  }
  static bool isEqual(const ValueKey &a, const ValueKey &b) { return a == b; }
};
} // namespace llvm

namespace {
/// The slot attributes of the instructions (ODS: sluice.exec, sluice.send,
/// sluice.recv), each naming the buffer of one value.
enum class Role : uint8_t { State, WState, RState, KV, In, Out, Buffer };

StringRef getRoleName(Role role) {
  static constexpr const char *kNames[] = {"state", "wstate", "rstate", "kv",
                                           "in",    "out",    "buffer"};
  static_assert(std::size(kNames) == int(Role::Buffer) + 1);
  return kNames[int(role)];
}

/// Writes `slot` (an i64 attribute) as `op`'s attribute for `role`.
void setSlot(Operation *op, Role role, IntegerAttr slot) {
  if (role == Role::Buffer) {
    if (auto send = dyn_cast<SendOp>(op))
      return send.setBufferAttr(slot);
    return cast<RecvOp>(op).setBufferAttr(slot);
  }
  auto exec = cast<ExecOp>(op);
  switch (role) {
  case Role::State:
    return exec.setStateAttr(slot);
  case Role::WState:
    return exec.setWstateAttr(slot);
  case Role::RState:
    return exec.setRstateAttr(slot);
  case Role::KV:
    return exec.setKvAttr(slot);
  case Role::In:
    return exec.setInAttr(slot);
  case Role::Out:
    return exec.setOutAttr(slot);
  case Role::Buffer:
    break;
  }
}

/// The values one instruction defines and uses, each with the slot
/// attribute that names its buffer.
using Roles = SmallVector<std::pair<ValueKey, Role>, 4>;

/// A number for each value a device names (a last use, a value's
/// position): a table over every value of the program, kind by work, with
/// the keys set in the order they were first set, so that it empties in
/// time linear in one device's values. (Hashed maps were most of the
/// planner's time at 64 devices.)
template <typename T> class ValueTable {
public:
  static constexpr T kNone = std::numeric_limits<T>::max();

  explicit ValueTable(size_t size) : values(size, kNone) {}
  T lookup(size_t id) const { return values[id]; }
  /// The entry of `key` (table index `id`), kNone until set; a key not set
  /// before is remembered.
  T &at(const ValueKey &key, size_t id) {
    T &value = values[id];
    if (value == kNone) {
      ids.push_back(id);
      keys.push_back(key);
    }
    return value;
  }
  ArrayRef<ValueKey> getKeys() const { return keys; }
  size_t size() const { return keys.size(); }
  void clear() {
    for (size_t id : ids)
      values[id] = kNone;
    ids.clear();
    keys.clear();
  }

private:
  std::vector<T> values;
  std::vector<size_t> ids;
  std::vector<ValueKey> keys;
};

/// Plans the buffers of one program, device by device: which values each
/// instruction defines and uses, when each dies, and a linear scan that
/// gives each a slot at its definition and frees it after its last use.
class BufferPlanner {
public:
  BufferPlanner(ProgramOp program, ModelOp model, Pipeline pipeline,
                ProgramView view, rt::Precision precision)
      : pipeline(std::move(pipeline)), view(std::move(view)),
        precision(precision),
        // A tensor-parallel shard keeps its heads' and feed-forward
        // share's state (sluice-shard-tensors), and under sequence
        // parallelism its tokens' part of the rest; an expert group's
        // member its experts' (the copies it may receive).
        config(rt::getTensorShardModel(
            getModelConfig(model), int(program.getTp()),
            program.getSequenceParallel(), int(program.getEp()),
            program.getExpertCapacity().value_or(0))),
        lengths(getSliceLengths(program, model)),
        contextShards(program.getCp()),
        stageLayers(getStageLayerIndices(model)), index(this->pipeline),
        lastUse(kNumValueKinds * index.size()),
        number(kNumValueKinds * index.size()), builder(program.getContext()) {
    // A context-parallel rank's caches hold its own tokens.
    config.contextShards = int(contextShards);
    for (StageOp stage : getStages(model))
      recompute.push_back(*rt::parseRecompute(stringifyRecomputeKind(
          stage.getRecompute().value_or(RecomputeKind::none))));
  }

  LogicalResult run() {
    if (failed(checkIndices()))
      return failure();
    indexTransfers();
    for (int d = 0; d < pipeline.devices; ++d) {
      const std::vector<Instr> &instrs = view.program.devices[d];
      std::vector<Roles> defs(instrs.size()), uses(instrs.size());
      for (size_t i = 0; i < instrs.size(); ++i)
        collectValues(d, instrs[i], defs[i], uses[i]);
      lastUse.clear();
      findLastUses(defs, uses);
      keepSentSlots(d);
      if (failed(assignSlots(d, defs, uses)))
        return failure();
    }
    return success();
  }

private:
  /// Every instruction's stage (or device), microbatch and slice inside
  /// the program: everything below indexes tables by them.
  LogicalResult checkIndices() {
    for (int d = 0; d < pipeline.devices; ++d)
      for (size_t i = 0; i < view.program.devices[d].size(); ++i) {
        const Work &w = view.program.devices[d][i].work;
        int stages =
            isVocabPass(w.kind) ? pipeline.devices : pipeline.getNumStages();
        auto outside = [&](const char *what, int64_t value, int64_t count) {
          return view.ops[d][i]->emitOpError("names ")
                 << what << " " << value << ", but the program has " << count;
        };
        if (w.stage < 0 || w.stage >= stages)
          return outside(isVocabPass(w.kind) ? "device" : "stage", w.stage,
                         stages);
        if (w.microbatch < 0 || w.microbatch >= pipeline.microbatches)
          return outside("microbatch", w.microbatch, pipeline.microbatches);
        if (w.slice < 0 || w.slice >= int64_t(lengths.size()))
          return outside("slice", w.slice, int64_t(lengths.size()));
      }
    return success();
  }

  /// The bytes of a value, by its kind, stage and slice (the layout walk
  /// once for each).
  int64_t bytesOf(ValueKind kind, const Work &w) {
    size_t at = (size_t(kind) * pipeline.getNumStages() + w.stage) *
                    lengths.size() +
                w.slice;
    if (sizes.empty())
      sizes.assign(kNumValueKinds * size_t(pipeline.getNumStages()) * lengths.size(), -1);
    if (sizes[at] < 0)
      sizes[at] = computeBytes(kind, w);
    return sizes[at];
  }

  int64_t computeBytes(ValueKind kind, const Work &w) const {
    int64_t offset = 0;
    for (int k = 0; k < w.slice; ++k)
      offset += lengths[k];
    // A context-parallel rank holds its share of the slice's tokens.
    rt::SliceShape s{config.microBatch, lengths[w.slice] / contextShards,
                     offset, contextShards};
    const std::vector<int> &layers = stageLayers[w.stage];
    switch (kind) {
    case ValueKind::ForwardState:
      return rt::getForwardStateBytes(config, layers, s, precision,
                                      recompute[w.stage]);
    case ValueKind::Recomputed:
      return rt::getRecomputedStateBytes(config, layers, s, precision,
                                         recompute[w.stage]);
    case ValueKind::WeightState:
      return rt::getWeightStateBytes(config, layers, s, precision);
    case ValueKind::KeyValues:
      return rt::getKeyValueBytes(config, layers, s.rows, precision);
    case ValueKind::Outgoing:
    case ValueKind::Incoming:
      return rt::getMessageBytes(config, s, precision);
    }
    return 0;
  }

  /// Where every stage message is sent and received (once the indices
  /// are checked: the tables are by work).
  void indexTransfers() {
    sends.assign(index.size(), Transfer());
    recvs.assign(index.size(), Transfer());
    for (int d = 0; d < pipeline.devices; ++d)
      for (auto [k, instr] : llvm::enumerate(view.program.devices[d]))
        if ((instr.kind == InstrKind::Send || instr.kind == InstrKind::Recv) &&
            !isVocabPass(instr.work.kind))
          (instr.kind == InstrKind::Send ? sends : recvs)[index(instr.work)] =
              {d, instr.peer, int64_t(k)};
  }

  static bool isBackward(PassKind k) {
    return k == PassKind::B || k == PassKind::BW;
  }

  /// 1. The values `instr` on device `d` defines and uses.
  void collectValues(int d, const Instr &instr, Roles &defs, Roles &uses) {
    const Work &w = instr.work;
    // The vocabulary shards' state lives across collectives; the runtime
    // keeps it per microbatch slice (docs/plan-format.md).
    if (instr.kind == InstrKind::Collective || isVocabPass(w.kind))
      return;
    size_t id = index(w);
    if (instr.kind == InstrKind::Send)
      return uses.push_back({{ValueKind::Outgoing, id}, Role::Buffer});
    if (instr.kind == InstrKind::Recv)
      return defs.push_back({{ValueKind::Incoming, id}, Role::Buffer});
    size_t forward = index({PassKind::F, w.stage, w.microbatch, w.slice});
    size_t keyValues = index({PassKind::F, w.stage, w.microbatch, 0});
    bool hasKV = bytesOf(ValueKind::KeyValues, w) > 0;
    bool first = w.stage == 0, last = w.stage == pipeline.getLastStage();
    // The input of F is the previous stage's F, of B the next stage's B.
    auto input = [&](int stage) {
      Work producer = w;
      producer.stage = stage;
      if (isBackward(w.kind))
        producer.kind = pipeline.getBackwardKind();
      ValueKind kind = pipeline.getDevice(stage) == d ? ValueKind::Outgoing
                                                      : ValueKind::Incoming;
      uses.push_back({{kind, index(producer)}, Role::In});
    };
    bool recomputes = recompute[w.stage] != rt::Recompute::None;
    if (w.kind == PassKind::F) {
      defs.push_back({{ValueKind::ForwardState, id}, Role::State});
      if (hasKV)
        (w.slice == 0 ? defs : uses)
            .push_back({{ValueKind::KeyValues, keyValues}, Role::KV});
      if (!first)
        input(w.stage - 1);
      if (!last)
        defs.push_back({{ValueKind::Outgoing, id}, Role::Out});
    } else if (isBackward(w.kind)) {
      uses.push_back({{ValueKind::ForwardState, forward}, Role::State});
      if (hasKV)
        uses.push_back({{ValueKind::KeyValues, keyValues}, Role::KV});
      defs.push_back({{ValueKind::WeightState, id}, Role::WState});
      if (recomputes)
        defs.push_back({{ValueKind::Recomputed, id}, Role::RState});
      if (!last)
        input(w.stage + 1);
      if (!first)
        defs.push_back({{ValueKind::Outgoing, id}, Role::Out});
    } else if (w.kind == PassKind::W) {
      size_t b = index({PassKind::B, w.stage, w.microbatch, w.slice});
      uses.push_back({{ValueKind::ForwardState, forward}, Role::State});
      uses.push_back({{ValueKind::WeightState, b}, Role::WState});
      if (recomputes)
        uses.push_back({{ValueKind::Recomputed, b}, Role::RState});
    }
  }

  /// A value's index in the tables.
  size_t idOf(const ValueKey &key) const {
    return size_t(key.kind) * index.size() + key.work;
  }

  /// 2. The last use of every value (its definition if never used again).
  void findLastUses(ArrayRef<Roles> defs, ArrayRef<Roles> uses) {
    for (size_t i = 0; i < defs.size(); ++i) {
      for (auto &[key, role] : defs[i])
        lastUse.at(key, idOf(key)) = uint32_t(i);
      for (auto &[key, role] : uses[i])
        lastUse.at(key, idOf(key)) = uint32_t(i);
    }
  }

  /// 2b. Sends copy nothing: a sent slot stays alive until its send has
  /// surely completed, which the runtime waits for before the slot is
  /// written again. Waiting must not deadlock, so the slot is freed only
  /// once the peer has certainly posted the matching receive: after this
  /// device has consumed a message the peer sent later in its program than
  /// that receive (in 1F1B, the gradient that comes back for the
  /// activation sent). With none, the slot lives to the end of the step.
  void keepSentSlots(int d) {
    const std::vector<Instr> &instrs = view.program.devices[d];
    for (size_t i = 0; i < instrs.size(); ++i) {
      const Instr &send = instrs[i];
      if (send.kind != InstrKind::Send || isVocabPass(send.work.kind))
        continue;
      auto position = [&](InstrKind kind, const Work &w, int from) {
        const Transfer &t =
            (kind == InstrKind::Send ? sends : recvs)[index(w)];
        return t.device == send.peer && t.peer == from ? t.position
                                                       : int64_t(-1);
      };
      int64_t posted = position(InstrKind::Recv, send.work, d);
      size_t until = instrs.size() - 1;
      for (size_t j = i + 1; j < instrs.size() && posted >= 0; ++j) {
        const Instr &recv = instrs[j];
        if (recv.kind != InstrKind::Recv || recv.peer != send.peer ||
            position(InstrKind::Send, recv.work, d) <= posted)
          continue;
        uint32_t consumed =
            lastUse.lookup(idOf({ValueKind::Incoming, index(recv.work)}));
        if (consumed != lastUse.kNone) {
          until = consumed;
          break;
        }
      }
      ValueKey sent{ValueKind::Outgoing, index(send.work)};
      uint32_t &last = lastUse.at(sent, idOf(sent));
      last = last == lastUse.kNone ? uint32_t(until)
                                   : std::max(last, uint32_t(until));
    }
  }

  /// A slot's attribute, made once (uniquing it for every role of every
  /// instruction is a third of the planner's time at 64 devices).
  IntegerAttr getSlotAttr(int slot) {
    if (size_t(slot) >= slotAttrs.size())
      for (size_t i = slotAttrs.size(); i <= size_t(slot); ++i)
        slotAttrs.push_back(builder.getI64IntegerAttr(int64_t(i)));
    return slotAttrs[size_t(slot)];
  }

  /// One device's slots: every role's slot, instruction by instruction
  /// (its definitions, then its uses), and each slot's size.
  struct Slots {
    std::vector<int> ofRole;
    std::vector<int64_t> sizes;
    int64_t getBytes() const {
      return std::accumulate(sizes.begin(), sizes.end(), int64_t(0));
    }
  };

  /// A device's values numbered in order of first appearance: per role
  /// of each instruction (its definitions, then its uses) the value it
  /// names, whether it defines it, each value's bytes, and what dies
  /// after each instruction in the order it is freed. Worked out once
  /// for both linear scans (each scan hashing every value again, and
  /// building a list per instruction of what dies, was most of the
  /// planner's time at 64 devices).
  struct Lifetimes {
    std::vector<uint32_t> value;
    std::vector<bool> defines;
    /// value[roleBegin[i], roleBegin[i + 1]): instruction i's roles.
    std::vector<uint32_t> roleBegin;
    std::vector<int64_t> bytes;
    /// dying[dyingBegin[i], dyingBegin[i + 1]): freed after instruction i.
    std::vector<uint32_t> dying, dyingBegin;
  };

  /// 3. The device's values and their lifetimes; the use of a value no
  /// earlier instruction defines, if any, as (instruction, role).
  std::optional<std::pair<size_t, Role>>
  getLifetimes(int d, ArrayRef<Roles> defs, ArrayRef<Roles> uses,
               Lifetimes &result) {
    const std::vector<Instr> &instrs = view.program.devices[d];
    number.clear();
    for (size_t i = 0; i < instrs.size(); ++i) {
      result.roleBegin.push_back(uint32_t(result.value.size()));
      for (auto &[key, role] : defs[i]) {
        uint32_t &n = number.at(key, idOf(key));
        if (n == number.kNone) {
          n = uint32_t(number.size() - 1);
          result.bytes.push_back(bytesOf(key.kind, instrs[i].work));
        }
        result.value.push_back(n);
        result.defines.push_back(true);
      }
      for (auto &[key, role] : uses[i]) {
        uint32_t n = number.lookup(idOf(key));
        if (n == number.kNone)
          return std::pair(i, role);
        result.value.push_back(n);
        result.defines.push_back(false);
      }
    }
    result.roleBegin.push_back(uint32_t(result.value.size()));
    // Freed in one order whatever the map's (by instruction, then key):
    // the order decides which free slot the next value of a size takes.
    // Bucketed by instruction, then each instruction's few sorted
    // (sorting them all at once was a fifth of the planner at 64 devices).
    // An overlapped group's passes run interleaved (sluice.exec's
    // `paired`): what a member last reads lives until the group's end, so
    // that no member's result lands in a slot another may still read.
    std::vector<size_t> freedAfter(instrs.size());
    for (size_t i = instrs.size(); i-- > 0;)
      freedAfter[i] = instrs[i].paired && i + 1 < instrs.size()
                          ? freedAfter[i + 1]
                          : i;
    result.dyingBegin.assign(instrs.size() + 1, 0);
    for (const ValueKey &key : lastUse.getKeys())
      ++result.dyingBegin[freedAfter[lastUse.lookup(idOf(key))] + 1];
    for (size_t i = 0; i < instrs.size(); ++i)
      result.dyingBegin[i + 1] += result.dyingBegin[i];
    std::vector<ValueKey> dying(lastUse.size());
    std::vector<uint32_t> fill(result.dyingBegin.begin(),
                               result.dyingBegin.end() - 1);
    for (const ValueKey &key : lastUse.getKeys())
      dying[fill[freedAfter[lastUse.lookup(idOf(key))]]++] = key;
    result.dying.reserve(dying.size());
    for (size_t i = 0; i < instrs.size(); ++i) {
      auto begin = dying.begin() + result.dyingBegin[i],
           end = dying.begin() + result.dyingBegin[i + 1];
      std::sort(begin, end);
      for (auto it = begin; it != end; ++it)
        result.dying.push_back(number.lookup(idOf(*it)));
    }
    return std::nullopt;
  }

  /// 3a. Linear scan: allocate at the definition, free after the last use.
  static Slots allocate(const Lifetimes &lifetimes, bool anySize) {
    Slots result;
    SlotAllocator slots(anySize);
    std::vector<int> slotOf(lifetimes.bytes.size(), -1);
    result.ofRole.reserve(lifetimes.value.size());
    for (size_t i = 0; i + 1 < lifetimes.roleBegin.size(); ++i) {
      for (uint32_t r = lifetimes.roleBegin[i]; r < lifetimes.roleBegin[i + 1];
           ++r) {
        uint32_t v = lifetimes.value[r];
        if (lifetimes.defines[r])
          slotOf[v] = slots.allocate(lifetimes.bytes[v]);
        result.ofRole.push_back(slotOf[v]);
      }
      for (uint32_t k = lifetimes.dyingBegin[i];
           k < lifetimes.dyingBegin[i + 1]; ++k)
        slots.release(slotOf[lifetimes.dying[k]]);
    }
    result.sizes = slots.takeSizes();
    return result;
  }

  /// 3b. Of two linear scans, the one that needs less memory: slots of a
  /// value's own size only, or a larger free slot where none of its size
  /// is free. Taking a larger slot saves a new one now but leaves the
  /// next value of the larger size without one; on the lit and benchmark
  /// models the first rule needs 7-45% less on most schedules and up to
  /// 8% more on some (GPipe, V shapes with unequal chunks). It is also
  /// periodic: with the same passes in every period, each period takes
  /// and frees the same sizes in the same order, so a device's steady
  /// state maps its slots the same way each microbatch and the plan
  /// writer's repeat blocks cover it (the second rule lets one size's
  /// queue leak into another's, which breaks the blocks every few dozen
  /// microbatches). On a tie the first. Writes each role's slot on its
  /// instruction and the slot sizes on the device.
  LogicalResult assignSlots(int d, ArrayRef<Roles> defs,
                            ArrayRef<Roles> uses) {
    Lifetimes lifetimes;
    if (auto missing = getLifetimes(d, defs, uses, lifetimes))
      return view.ops[d][missing->first]->emitOpError(
                 "uses a value no earlier instruction of this device "
                 "produces (")
             << getRoleName(missing->second) << ")";
    Slots ownSize = allocate(lifetimes, false),
          anySize = allocate(lifetimes, true);
    const Slots &best =
        anySize.getBytes() < ownSize.getBytes() ? anySize : ownSize;
    ArrayRef<ProgramView::Repeat> repeats = view.repeats[d];
    for (size_t i = 0; i < defs.size();) {
      if (!repeats.empty() && repeats.front().begin == i) {
        writeRepeatSlots(d, repeats.front(), defs, uses, best.ofRole,
                         lifetimes.roleBegin);
        i += repeats.front().length * size_t(repeats.front().count);
        repeats = repeats.drop_front();
        continue;
      }
      writeSlots(view.ops[d][i], i, defs, uses, best.ofRole,
                 lifetimes.roleBegin);
      ++i;
    }
    view.devices[d].setBuffers(best.sizes);
    return success();
  }

  /// Writes the slots of instruction `i` (its roles' slots from
  /// `ofRole`, which roleBegin indexes) on `op`.
  void writeSlots(Operation *op, size_t i, ArrayRef<Roles> defs,
                  ArrayRef<Roles> uses, ArrayRef<int> ofRole,
                  ArrayRef<uint32_t> roleBegin) {
    uint32_t next = roleBegin[i];
    for (auto &[key, role] : defs[i])
      setSlot(op, role, getSlotAttr(ofRole[next++]));
    for (auto &[key, role] : uses[i])
      setSlot(op, role, getSlotAttr(ofRole[next++]));
  }

  /// A stretch of a repeat block's runs whose slots one map carries from
  /// each run to the next.
  struct Segment {
    int64_t firstRun = 0, runs = 0;
    /// The map's entries that are not the identity, ascending.
    SmallVector<std::pair<int64_t, int64_t>> map;
  };

  /// The runs of `block` cut where the slot map from one run to the next
  /// changes: each run's slots are the previous run's mapped once by its
  /// segment's map. Own-size slots rotate the same way every period, so
  /// a steady state is one segment.
  std::vector<Segment> segmentRuns(const ProgramView::Repeat &block,
                                   ArrayRef<int> ofRole,
                                   ArrayRef<uint32_t> roleBegin) {
    std::vector<Segment> segments{{0, 1, {}}};
    llvm::DenseMap<int, int> map;
    SmallVector<int> learned;
    auto close = [&] {
      Segment &last = segments.back();
      for (auto [from, to] : map)
        if (from != to)
          last.map.push_back({from, to});
      llvm::sort(last.map);
      map.clear();
    };
    for (int64_t run = 1; run < block.count; ++run) {
      size_t a = block.begin + size_t(run - 1) * block.length,
             b = a + block.length;
      learned.clear();
      bool holds = roleBegin[a + block.length] - roleBegin[a] ==
                   roleBegin[b + block.length] - roleBegin[b];
      for (uint32_t k = 0; holds && k < roleBegin[b + block.length] -
                                            roleBegin[b];
           ++k) {
        int x = ofRole[roleBegin[a] + k], y = ofRole[roleBegin[b] + k];
        auto [it, added] = map.try_emplace(x, y);
        if (added)
          learned.push_back(x);
        holds = it->second == y;
      }
      if (holds) {
        ++segments.back().runs;
        continue;
      }
      for (int x : learned)
        map.erase(x);
      close();
      segments.push_back({run, 1, {}});
    }
    close();
    return segments;
  }

  /// Writes the slots of a repeat block: the body gets its first run's
  /// and the block its map where one map holds for every run; otherwise
  /// the block is cut into one block per segment (a run on its own is
  /// written out).
  void writeRepeatSlots(int d, const ProgramView::Repeat &block,
                        ArrayRef<Roles> defs,
                        ArrayRef<Roles> uses, ArrayRef<int> ofRole,
                        ArrayRef<uint32_t> roleBegin) {
    std::vector<Segment> segments = segmentRuns(block, ofRole, roleBegin);
    auto setMap = [&](RepeatOp repeat, ArrayRef<std::pair<int64_t, int64_t>> map) {
      SmallVector<int64_t> flat;
      for (auto [from, to] : map)
        flat.append({from, to});
      repeat.setSlots(flat);
    };
    if (segments.size() == 1) {
      for (size_t j = 0; j < block.length; ++j)
        writeSlots(view.ops[d][block.begin + j], block.begin + j, defs, uses,
                   ofRole, roleBegin);
      RepeatOp op = block.op;
      setMap(op, segments.front().map);
      return;
    }
    RepeatOp original = block.op;
    OpBuilder builder(original);
    for (const Segment &segment : segments) {
      SmallVector<Operation *> ops;
      if (segment.runs == 1) {
        ops = cloneRun(builder, original, segment.firstRun);
      } else {
        auto repeat = RepeatOp::create(builder, original.getLoc(),
                                       segment.runs, original.getMbStep());
        setMap(repeat, segment.map);
        OpBuilder inBody(repeat.getContext());
        inBody.setInsertionPointToStart(&repeat.getBody().emplaceBlock());
        ops = cloneRun(inBody, original, segment.firstRun);
      }
      size_t first = block.begin + size_t(segment.firstRun) * block.length;
      for (size_t j = 0; j < block.length; ++j)
        writeSlots(ops[j], first + j, defs, uses, ofRole, roleBegin);
    }
    original.erase();
  }

  Pipeline pipeline;
  ProgramView view;
  rt::Precision precision;
  rt::ModelConfig config;
  std::vector<int64_t> lengths;
  /// The context-parallel ranks a slice's tokens split over.
  int64_t contextShards = 1;
  /// The layers of each stage, as indices into the model's chain.
  std::vector<std::vector<int>> stageLayers;
  std::vector<rt::Recompute> recompute;
  /// bytesOf's answers, -1 where not yet asked.
  std::vector<int64_t> sizes;
  WorkIndex index;
  /// Per device: each value's last use, and its number in order of first
  /// appearance.
  ValueTable<uint32_t> lastUse, number;
  Builder builder;
  std::vector<IntegerAttr> slotAttrs;
  /// Where each stage message is sent and received: the device, its peer
  /// and the position in the device's list (a verified program sends and
  /// receives each once).
  struct Transfer {
    int device = -1, peer = -1;
    int64_t position = -1;
  };
  std::vector<Transfer> sends, recvs;
};
} // namespace

LogicalResult mlir::sluice::planBuffers(ProgramOp program) {
  FailureOr<ModelOp> model = getProgramModel(program);
  if (failed(model))
    return failure();
  FailureOr<Pipeline> pipeline =
      getPipeline(*model, program.getMicrobatches(), program.getSlices());
  if (failed(pipeline))
    return failure();
  FailureOr<ProgramView> view = readProgram(program, *model);
  if (failed(view))
    return failure();
  FailureOr<rt::Precision> precision = getPrecision(*model);
  if (failed(precision))
    return failure();
  return BufferPlanner(program, *model, std::move(*pipeline), std::move(*view),
                       *precision)
      .run();
}

namespace {
struct PlanBuffersPass
    : public mlir::sluice::impl::PlanBuffersBase<PlanBuffersPass> {
  void runOnOperation() override {
    for (ProgramOp program : getOperation().getOps<ProgramOp>())
      if (failed(planBuffers(program)))
        return signalPassFailure();
  }
};
} // namespace
