//===- PlanValidator.cpp - A plan proved before any work ------------------===//
//
// The whole-plan checks after parsing (docs/plan-format.md, "Checks"), in
// two steps: a walk over every instruction -- the layout (slices, stages,
// programs), each instruction against the stages, buffers and shards --
// that collects the plan's facts, then what only the whole plan shows from
// them: matched and agreeing messages, values flowing to the passes that
// read them, gradients averaged once, every pass run, the same collective
// order on every device, and programs that run to the end.
//
//===----------------------------------------------------------------------===//

#include "CommOrder.h"
#include "PlanJson.h"

#include <array>
#include <map>
#include <optional>
#include <set>
#include <tuple>

namespace sluice::rt::planfile {

namespace {

/// The vocabulary shards against the model and the stages.
void validateVocabulary(const Plan &plan) {
  const VocabularyPlan &v = plan.vocabulary;
  const LayerConfig &embedding = plan.model.layers.front();
  const LayerConfig &output = plan.model.layers.back();
  if (embedding.sharded != v.input.present)
    fail(std::string("the model's embedding is ") +
         (embedding.sharded ? "" : "not ") +
         "sharded, but the plan's vocabulary section " +
         (v.input.present ? "has" : "has no") + " input shard");
  if (output.sharded != v.output.present)
    fail(std::string("the model's output layer is ") +
         (output.sharded ? "" : "not ") +
         "sharded, but the plan's vocabulary section " +
         (v.output.present ? "has" : "has no") + " output shard");
  auto check = [&](const ShardPlan &shard, const LayerConfig &layer,
                   int expectedRoot, const char *what) {
    if (!shard.present)
      return;
    std::string where = std::string("vocabulary ") + what + " shard";
    if (shard.vocab != layer.vocab)
      fail(where + ": 'vocab' = " + std::to_string(shard.vocab) +
           ", the model's is " + std::to_string(layer.vocab));
    int64_t multiple = 2 * int64_t(plan.devices);
    if (shard.paddedVocab < shard.vocab || shard.paddedVocab % multiple != 0)
      fail(where + ": 'padded_vocab' = " + std::to_string(shard.paddedVocab) +
           " must be a multiple of 2 * devices = " + std::to_string(multiple) +
           " no smaller than 'vocab' = " + std::to_string(shard.vocab));
    if (shard.root != expectedRoot)
      fail(where + ": 'root' = " + std::to_string(shard.root) +
           ", but the stage next to it is on device " +
           std::to_string(expectedRoot));
  };
  check(v.input, embedding, plan.stages.front().device, "input");
  check(v.output, output, plan.stages.back().device, "output");
  if (v.output.present) {
    if (v.algorithm < 0 || v.algorithm > 2)
      fail("vocabulary output shard: 'algorithm' = " +
           std::to_string(v.algorithm) + " is not 0, 1 or 2");
    int expected = getBarriers(v.algorithm);
    if (v.barriers != expected)
      fail("vocabulary output shard: algorithm " + std::to_string(v.algorithm) +
           " crosses " + std::to_string(expected) +
           " barriers, the plan says " + std::to_string(v.barriers));
  }
  if (output.tied && v.input.present != v.output.present)
    fail("a tied model must shard both vocabulary layers or neither");
  if (output.tied && v.input.present &&
      v.input.paddedVocab != v.output.paddedVocab)
    fail("the tied shards pad the vocabulary differently (" +
         std::to_string(v.input.paddedVocab) + " and " +
         std::to_string(v.output.paddedVocab) + ")");
}

/// Where an instruction is, for a message: "device 3, instruction 17
/// (F of stage 2, microbatch 5, ...)", spelled only when a check fails --
/// spelling it for every instruction was a fifth of loading a deep
/// pipeline's plan.
class Where {
public:
  Where(const Plan &plan, int device, size_t index)
      : plan(plan), device(device), index(index) {}
  std::string str() const {
    return "device " + std::to_string(device) + ", instruction " +
           std::to_string(index) + " (" +
           plan.describe(plan.programs[device].instructions[index]) + ")";
  }
  friend std::string operator+(const Where &where, const std::string &rest) {
    return where.str() + rest;
  }
  friend std::string operator+(const Where &where, const char *rest) {
    return where.str() + rest;
  }

private:
  const Plan &plan;
  int device;
  size_t index;
};

/// What the shard checks track while walking the programs.
struct ShardState {
  /// (device, pass, stage or shard, mb, slice) of every pass run so far.
  std::set<std::tuple<int, int, int, int, int>> executed;
  /// (device, shard, group, mb, slice) of every collective issued so far.
  std::set<std::tuple<int, int, int, int, int>> issued;
  /// Per device and shard, the (group, mb, slice) sequence issued.
  std::vector<std::array<std::vector<std::tuple<int, int, int>>, 2>> sequence;
  std::vector<size_t> shardPassesRun;
};

/// An exec's collective inputs were issued earlier on its device.
void checkCollectiveInputs(const Plan &plan, int d, const Instruction &instr,
                           const Where &where, const ShardState &st) {
  std::optional<CollectiveRef> in = plan.getCollectiveInput(instr);
  if (in &&
      !st.issued.count({d, int(in->shard), in->group, instr.mb, instr.slice}))
    fail(where + ": needs collective " + std::to_string(in->group) +
         " of the " + shardName(in->shard) +
         " shard, which this device has not issued before it");
}

void validateShardInstruction(const Plan &plan, int d, const Instruction &instr,
                              const Where &where, ShardState &st) {
  const VocabularyPlan &v = plan.vocabulary;
  const ShardPlan &shard = instr.shard == Shard::Input ? v.input : v.output;
  if (!shard.present)
    fail(where + ": the plan has no " + shardName(instr.shard) + " shard");
  if (instr.op == Op::Exec) {
    bool inputPass = instr.pass == Pass::IF || instr.pass == Pass::IB;
    bool legal = isShardPass(instr.pass) &&
                 inputPass == (instr.shard == Shard::Input) &&
                 (instr.pass != Pass::S2 || v.algorithm == 0);
    if (!legal)
      fail(where + ": pass " + passName(instr.pass) + " is not a pass of the " +
           shardName(instr.shard) + " shard" +
           (instr.pass == Pass::S2 ? " in this form" : ""));
    if (!st.executed
             .insert({d, int(instr.pass), -1 - int(instr.shard), instr.mb,
                      instr.slice})
             .second)
      fail(where + ": runs twice");
    ++st.shardPassesRun[d];
    checkCollectiveInputs(plan, d, instr, where, st);
    return;
  }
  if (instr.op != Op::Collective)
    fail(where + ": sends and receives name a stage, not a shard");
  if (instr.group < 0 ||
      instr.group >= plan.getVocabularyShape().getNumGroups(instr.shard))
    fail(where + ": the " + std::string(shardName(instr.shard)) +
         " shard has no collective " + std::to_string(instr.group));
  if (instr.blocking != v.synchronous)
    fail(where + ": a " + (instr.blocking ? "blocking" : "non-blocking") +
         " collective, but the vocabulary layers are " +
         (v.synchronous ? "synchronous" : "asynchronous"));
  if (!st.issued
           .insert({d, int(instr.shard), instr.group, instr.mb, instr.slice})
           .second)
    fail(where + ": issued twice");
  st.sequence[d][int(instr.shard)].push_back(
      {instr.group, instr.mb, instr.slice});
  // What it carries has been computed on this device.
  for (auto [pass, stage, execShard] :
       std::vector<std::tuple<Pass, int, Shard>>{
           {Pass::IF, -1, Shard::Input},
           {Pass::S, -1, Shard::Output},
           {Pass::S2, -1, Shard::Output},
           {Pass::T, -1, Shard::Output},
           {plan.splitBackward ? Pass::B : Pass::BW, 0, Shard::None},
           {Pass::F, plan.getLastStage(), Shard::None}}) {
    if (!plan.contributes({instr.shard, instr.group}, d, pass, stage,
                          execShard))
      continue;
    int key = execShard == Shard::None ? stage : -1 - int(execShard);
    if (!st.executed.count({d, int(pass), key, instr.mb, instr.slice}))
      fail(where + ": issued before " + passName(pass) +
           (execShard == Shard::None ? " of stage " + std::to_string(stage)
                                     : std::string(" of the shard")) +
           ", whose result it carries");
  }
}

/// A stage's index, or -1 - shard for a vocabulary shard.
int ownerOf(const Instruction &instr) {
  return instr.shard != Shard::None ? -1 - int(instr.shard) : instr.stage;
}
std::string ownerName(const Plan &plan, int owner) {
  return owner >= 0
             ? "stage " + plan.stages[owner].name
             : std::string("the ") + shardName(Shard(-1 - owner)) + " shard";
}

/// What the walk over every instruction collects for the whole-plan
/// checks.
struct PlanFacts {
  ShardState shardState;
  /// (device, peer, key) of every send and receive, to match them.
  std::map<std::tuple<int, int, int64_t>, int> sends, recvs;
  /// (pass, stage, mb, slice) of every stage pass.
  std::set<std::tuple<int, int, int, int>> executed;
  /// Per (device, stage or -1 - shard): its last exec and its grad_sync.
  std::map<std::pair<int, int>, size_t> lastExec, gradSync;
};

/// The walk: the layout, then each instruction of each device in order.
class InstructionChecks {
public:
  InstructionChecks(const Plan &plan, PlanFacts &facts)
      : plan(plan), shardState(facts.shardState), sends(facts.sends),
        recvs(facts.recvs), executed(facts.executed),
        lastExec(facts.lastExec), gradSync(facts.gradSync) {
    shardState.sequence.resize(plan.devices);
    shardState.shardPassesRun.assign(plan.devices, 0);
  }

  void run() {
    validateVocabulary(plan);
    checkLayout();
    for (int d = 0; d < plan.devices; ++d) {
      const DeviceProgram &program = plan.programs[d];
      if (program.device != d)
        fail("device program " + std::to_string(d) + " says it is device " +
             std::to_string(program.device));
      for (size_t i = 0; i < program.instructions.size(); ++i)
        checkInstruction(d, i);
      checkGroups(d);
    }
  }

private:
  void checkLayout() {
    int64_t covered = 0;
    for (int64_t length : plan.slices)
      covered += length;
    if (covered != plan.model.seqLen)
      fail("'slices' cover " + std::to_string(covered) +
           " tokens, the model's sequence has " +
           std::to_string(plan.model.seqLen));
    int next = 0;
    for (const StagePlan &stage : plan.stages) {
      if (stage.device < 0 || stage.device >= plan.devices)
        fail("stage " + stage.name + ": device " +
             std::to_string(stage.device) + " is outside the plan's " +
             std::to_string(plan.devices));
      for (int layer : stage.layers)
        if (layer != next++)
          fail("stage " + stage.name +
               ": layers must continue the chain in order (expected layer " +
               std::to_string(next - 1) + ", got " + std::to_string(layer) +
               ")");
    }
    if (next != int(plan.model.layers.size()))
      fail("the stages hold " + std::to_string(next) +
           " layers, the model has " +
           std::to_string(plan.model.layers.size()));
    if (int(plan.programs.size()) != plan.devices)
      fail("the plan has " + std::to_string(plan.programs.size()) +
           " device programs for " + std::to_string(plan.devices) + " devices");
  }

  void checkInstruction(int d, size_t i) {
    const Instruction &instr = plan.programs[d].instructions[i];
    Where where(plan, d, i);
    if (instr.op == Op::GradSync)
      return checkGradSync(d, i, instr, where);
    if (instr.op == Op::Exec)
      lastExec[{d, ownerOf(instr)}] = i;
    if (instr.mb < 0 || instr.mb >= plan.microbatches)
      fail(where + ": microbatch out of range");
    if (instr.slice < 0 || instr.slice >= int(plan.slices.size()))
      fail(where + ": slice out of range");
    if (instr.shard != Shard::None)
      return validateShardInstruction(plan, d, instr, where, shardState);
    if (instr.stage < 0 || instr.stage >= int(plan.stages.size()))
      fail(where + ": stage " + std::to_string(instr.stage) +
           " does not exist");
    if (instr.op == Op::Exec)
      checkExec(d, instr, where);
    else
      checkMessage(d, i, instr, where);
  }

  /// Overlapped groups ("paired", which the reader takes on execs only):
  /// consecutive stage passes, one F beside
  /// a backward (B, B then its W, or BW) of one stage and another
  /// microbatch -- the two run interleaved, so neither may need the
  /// other's result.
  void checkGroups(int d) const {
    const std::vector<Instruction> &list = plan.programs[d].instructions;
    for (size_t i = 0; i < list.size(); ++i) {
      if (!list[i].paired)
        continue;
      Where where(plan, d, i);
      size_t last = i;
      while (last < list.size() && list[last].op == Op::Exec &&
             list[last].paired)
        ++last;
      if (last >= list.size() || list[last].op != Op::Exec)
        fail(where + ": is paired, but no pass follows it at once");
      std::vector<GroupPass> members;
      for (size_t j = i; j <= last; ++j) {
        const Instruction &x = list[j];
        if (x.shard != Shard::None)
          fail(Where(plan, d, j) +
               ": a vocabulary shard's pass cannot be paired");
        members.push_back({x.pass, x.stage, x.mb, x.slice});
      }
      if (std::string why = checkOverlappedGroup(members.data(), members.size());
          !why.empty())
        fail(where + ": " + why);
      i = last;
    }
  }

  void checkGradSync(int d, size_t i, const Instruction &instr,
                     const Where &where) {
    if (plan.getGradientRanks() < 2)
      fail(where + ": averages gradients over data-parallel replicas, "
                   "but the plan's mesh has none (dp = 1)");
    if (instr.shard != Shard::None) {
      const ShardPlan &shard = instr.shard == Shard::Input
                                   ? plan.vocabulary.input
                                   : plan.vocabulary.output;
      if (!shard.present)
        fail(where + ": the plan has no " + shardName(instr.shard) + " shard");
    } else if (instr.stage < 0 || instr.stage >= int(plan.stages.size())) {
      fail(where + ": stage " + std::to_string(instr.stage) +
           " does not exist");
    } else if (plan.stages[instr.stage].device != d) {
      fail(where + ": stage " + plan.stages[instr.stage].name +
           " is on device " + std::to_string(plan.stages[instr.stage].device));
    }
    if (!gradSync.emplace(std::pair{d, ownerOf(instr)}, i).second)
      fail(where + ": averages the gradients of " + ownerName(plan, ownerOf(instr)) +
           " a second time");
  }

  /// `slot` of device `d` exists and holds `need` bytes (a role a pass
  /// does not have needs 0 and may be -1).
  void checkSlot(int d, const Where &where, int32_t slot, int64_t need,
                 const char *what) const {
    const std::vector<int64_t> &buffers = plan.programs[d].buffers;
    if (need == 0 && slot < 0)
      return;
    if (slot < 0 || slot >= int(buffers.size()))
      fail(where + ": " + what + " buffer " + std::to_string(slot) +
           " does not exist (the device has " + std::to_string(buffers.size()) +
           ")");
    if (buffers[slot] < need)
      fail(where + ": buffer " + std::to_string(slot) + " has " +
           std::to_string(buffers[slot]) + " bytes, the " + what + " needs " +
           std::to_string(need) + " in " + plan.precision.getName() +
           (plan.version < kPlanVersion
                ? " (a version " + std::to_string(plan.version) +
                      " plan sizes buffers for an earlier layout: "
                      "compile it again)"
                : std::string()));
  }

  void checkExec(int d, const Instruction &instr, const Where &where) {
    const StagePlan &stage = plan.stages[instr.stage];
    if (stage.device != d)
      fail(where + ": stage " + stage.name + " is on device " +
           std::to_string(stage.device));
    bool legal = plan.splitBackward
                     ? instr.pass != Pass::BW
                     : (instr.pass == Pass::F || instr.pass == Pass::BW);
    if (!legal)
      fail(where + ": pass " + passName(instr.pass) +
           (plan.splitBackward ? " in a plan with split backward passes"
                               : " in a plan with unsplit backward passes"));
    if (!executed.insert({int(instr.pass), instr.stage, instr.mb, instr.slice})
             .second)
      fail(where + ": runs twice");
    shardState.executed.insert(
        {d, int(instr.pass), instr.stage, instr.mb, instr.slice});
    checkCollectiveInputs(plan, d, instr, where, shardState);
    checkExecSlots(d, instr, where);
  }

  /// What each slot of a stage's pass on a slice needs, from the layout.
  struct SlotNeeds {
    int64_t state, wstate, rstate, kv, message;
  };
  /// The layout's walk once per stage and slice, not per instruction (it
  /// was a fifth of loading a 64-device plan).
  const SlotNeeds &getSlotNeeds(int stageIndex, int slice) const {
    size_t at = size_t(stageIndex) * plan.slices.size() + size_t(slice);
    if (needs.empty())
      needs.resize(plan.stages.size() * plan.slices.size());
    if (!needs[at]) {
      const StagePlan &stage = plan.stages[stageIndex];
      const ModelConfig &model = plan.shardModel;
      const Precision &precision = plan.precision;
      SliceShape s = plan.getSliceShape(slice);
      needs[at] = SlotNeeds{
          getForwardStateBytes(model, stage.layers, s, precision,
                               stage.recompute),
          getWeightStateBytes(model, stage.layers, s, precision),
          stage.recompute == Recompute::None
              ? 0
              : getRecomputedStateBytes(model, stage.layers, s, precision,
                                        stage.recompute),
          getKeyValueBytes(model, stage.layers, s.rows, precision),
          getMessageBytes(model, s, precision)};
    }
    return *needs[at];
  }

  /// Each slot of a stage pass holds what the layout says it needs.
  void checkExecSlots(int d, const Instruction &instr,
                      const Where &where) const {
    const StagePlan &stage = plan.stages[instr.stage];
    const SlotNeeds &need = getSlotNeeds(instr.stage, instr.slice);
    checkSlot(d, where, instr.state, need.state, "forward state");
    if (instr.pass != Pass::F) {
      checkSlot(d, where, instr.wstate, need.wstate, "weight state");
      if (stage.recompute != Recompute::None)
        checkSlot(d, where, instr.rstate, need.rstate, "recomputed state");
    }
    if (instr.pass == Pass::W)
      return;
    checkSlot(d, where, instr.kv, need.kv, "key/value state");
    bool first = instr.stage == 0;
    bool last = instr.stage + 1 == int(plan.stages.size());
    bool hasInput = instr.pass == Pass::F ? !first : !last;
    bool hasOutput = instr.pass == Pass::F ? !last : !first;
    checkSlot(d, where, instr.in, hasInput ? need.message : 0, "input");
    checkSlot(d, where, instr.out, hasOutput ? need.message : 0, "output");
  }

  void checkMessage(int d, size_t i, const Instruction &instr,
                    const Where &where) {
    if (instr.peer < 0 || instr.peer >= plan.devices || instr.peer == d)
      fail(where + ": peer " + std::to_string(instr.peer) +
           " is not another device");
    if (instr.key < 0)
      fail(where + ": message key must be non-negative");
    checkSlot(d, where, instr.buffer,
              getMessageBytes(plan.shardModel, plan.getSliceShape(instr.slice),
                              plan.precision),
              "message");
    auto &table = instr.op == Op::Send ? sends : recvs;
    if (!table.emplace(std::make_tuple(d, instr.peer, instr.key), int(i))
             .second)
      fail(where + ": a second " + (instr.op == Op::Send ? "send" : "receive") +
           " of key " + std::to_string(instr.key));
  }

  const Plan &plan;
  ShardState &shardState;
  std::map<std::tuple<int, int, int64_t>, int> &sends, &recvs;
  std::set<std::tuple<int, int, int, int>> &executed;
  std::map<std::pair<int, int>, size_t> &lastExec, &gradSync;
  /// getSlotNeeds' answers by stage and slice.
  mutable std::vector<std::optional<SlotNeeds>> needs;
};

/// What only the whole plan shows, from the walk's facts.
class WholePlanChecks {
public:
  WholePlanChecks(const Plan &plan, const PlanFacts &facts)
      : plan(plan), shardState(facts.shardState), sends(facts.sends),
        recvs(facts.recvs), executed(facts.executed),
        lastExec(facts.lastExec), gradSync(facts.gradSync) {}

  void run() const {
    checkMessagesMatch();
    checkMessagesAgree();
    for (int d = 0; d < plan.devices; ++d)
      checkDataflow(d);
    checkGradientsAveraged();
    checkEveryPassRuns();
    checkShardCollectives();
    checkRunsToTheEnd();
  }

private:
  /// The programs run to the end with the executor's waits: each matched
  /// and flowing right, they can still wait for each other in a cycle (a
  /// send moved after a pass that needs its peer's reply). The run that
  /// orders the step's communication (CommOrder.h) is the proof.
  void checkRunsToTheEnd() const {
    std::vector<std::vector<size_t>> order;
    if (Status st = orderCommunication(plan, order); !st)
      fail(st.message());
  }

  void checkMessagesMatch() const {
    for (auto &[key, index] : recvs) {
      auto [device, peer, k] = key;
      if (!sends.count({peer, device, k}))
        fail("device " + std::to_string(device) + ", instruction " +
             std::to_string(index) + ": receives key " + std::to_string(k) +
             " from device " + std::to_string(peer) + ", which never sends it");
    }
    for (auto &[key, index] : sends) {
      auto [device, peer, k] = key;
      if (!recvs.count({peer, device, k}))
        fail("device " + std::to_string(device) + ", instruction " +
             std::to_string(index) + ": sends key " + std::to_string(k) +
             " to device " + std::to_string(peer) +
             ", which never receives it");
    }
  }

  /// A message's two ends name the same pass, stage, microbatch and slice:
  /// swapped keys would deliver one microbatch's activation as another's.
  void checkMessagesAgree() const {
    for (auto &[key, at] : recvs) {
      auto [device, peer, k] = key;
      const Instruction &r = plan.programs[device].instructions[at];
      const Instruction &s =
          plan.programs[peer].instructions[sends.at({peer, device, k})];
      if (r.pass != s.pass || r.stage != s.stage || r.mb != s.mb ||
          r.slice != s.slice || r.shard != s.shard)
        fail("device " + std::to_string(device) + ", instruction " +
             std::to_string(at) + ": message " + std::to_string(k) +
             " is received as " + plan.describe(r) + " but device " +
             std::to_string(peer) + " sends it as " + plan.describe(s));
    }
  }

  /// What a slot holds between the instruction that writes it and the
  /// ones that read it (plan-format.md, "Buffers").
  enum class Holds : uint8_t { Result, State, WeightState, Recomputed, KV };
  struct Value {
    Holds holds;
    Pass pass;
    int stage, mb, slice;
    bool operator==(const Value &o) const {
      return holds == o.holds && pass == o.pass && stage == o.stage &&
             mb == o.mb && slice == o.slice;
    }
  };
  std::string describeValue(const Value &v) const {
    static const char *names[] = {"the result of", "the forward state of",
                                  "the weight state of",
                                  "the recomputed state of",
                                  "the key/value cache of"};
    std::string what = std::string(names[int(v.holds)]) + " ";
    if (v.holds == Holds::Result)
      what += std::string(passName(v.pass)) + " of ";
    what += "stage " + std::to_string(v.stage) + ", microbatch " +
            std::to_string(v.mb);
    return v.holds == Holds::KV ? what
                                : what + ", slice " + std::to_string(v.slice);
  }

  /// Every pass of device `d` reads, from each slot, the value its
  /// producer wrote there for the same microbatch and slice: an exec
  /// pointed at another slot, or a slot written over before it is read,
  /// would train on the wrong data.
  void checkDataflow(int d) const {
    const DeviceProgram &program = plan.programs[d];
    std::vector<std::optional<Value>> slots(program.buffers.size());
    for (size_t i = 0; i < program.instructions.size(); ++i) {
      const Instruction &instr = program.instructions[i];
      if (instr.shard != Shard::None || isShardPass(instr.pass) ||
          (instr.op != Op::Exec && instr.op != Op::Send &&
           instr.op != Op::Recv))
        continue;
      auto require = [&](int32_t slot, const char *role, Value want) {
        if (slot >= 0 && slots[slot] && *slots[slot] == want)
          return;
        fail("device " + std::to_string(d) + ", instruction " +
             std::to_string(i) + " (" + plan.describe(instr) + "): its " +
             role + " slot " +
             (slot < 0 ? std::string("is missing")
                       : std::to_string(slot) + " holds " +
                             (slots[slot] ? describeValue(*slots[slot])
                                          : std::string("nothing yet"))) +
             ", not " + describeValue(want));
      };
      auto write = [&](int32_t slot, Value v) {
        if (slot >= 0)
          slots[slot] = v;
      };
      Value result{Holds::Result, instr.pass, instr.stage, instr.mb,
                   instr.slice};
      if (instr.op == Op::Send)
        require(instr.buffer, "sent", result);
      else if (instr.op == Op::Recv)
        write(instr.buffer, result);
      else
        checkExecDataflow(instr, require, write);
    }
  }

  template <class Require, class Write>
  void checkExecDataflow(const Instruction &x, Require &require,
                         Write &write) const {
    int s = x.stage, mb = x.mb, k = x.slice, last = plan.getLastStage();
    auto value = [&](Holds h, Pass p, int stage, int slice) {
      return Value{h, p, stage, mb, slice};
    };
    Pass backward = plan.splitBackward ? Pass::B : Pass::BW;
    Value state = value(Holds::State, Pass::F, s, k);
    Value cache = value(Holds::KV, Pass::F, s, 0);
    switch (x.pass) {
    case Pass::F:
      if (s > 0)
        require(x.in, "input", value(Holds::Result, Pass::F, s - 1, k));
      if (x.kv >= 0 && k > 0)
        require(x.kv, "key/value", cache);
      else
        write(x.kv, cache);
      write(x.state, state);
      write(x.out, value(Holds::Result, Pass::F, s, k));
      return;
    case Pass::B:
    case Pass::BW:
      if (s < last && x.in >= 0)
        require(x.in, "input gradient",
                value(Holds::Result, backward, s + 1, k));
      require(x.state, "forward state", state);
      if (x.kv >= 0)
        require(x.kv, "key/value", cache);
      write(x.out, value(Holds::Result, x.pass, s, k));
      write(x.wstate, value(Holds::WeightState, Pass::F, s, k));
      write(x.rstate, value(Holds::Recomputed, Pass::F, s, k));
      return;
    case Pass::W:
      require(x.state, "forward state", state);
      if (x.wstate >= 0)
        require(x.wstate, "weight state",
                value(Holds::WeightState, Pass::F, s, k));
      if (x.rstate >= 0)
        require(x.rstate, "recomputed state",
                value(Holds::Recomputed, Pass::F, s, k));
      return;
    default:
      return;
    }
  }

  /// With replicas, each stage's and shard's gradients are averaged once,
  /// after its last pass on the device (earlier would miss some of them).
  void checkGradientsAveraged() const {
    if (plan.getGradientRanks() < 2)
      return;
    for (auto &[key, last] : lastExec) {
      auto [device, owner] = key;
      auto sync = gradSync.find(key);
      std::string at = "device " + std::to_string(device) + ": ";
      if (sync == gradSync.end())
        fail(at + "the gradients of " + ownerName(plan, owner) +
             " are never averaged over the " +
             std::to_string(plan.getGradientRanks()) +
             (plan.cp > 1 ? " data- and context-parallel ranks"
                          : " data-parallel replicas") +
             " (no grad_sync)");
      if (sync->second < last)
        fail(at + "instruction " + std::to_string(sync->second) +
             " averages the gradients of " + ownerName(plan, owner) +
             " before its last pass (instruction " + std::to_string(last) +
             ")");
    }
  }

  /// Every pass of every stage, microbatch and slice runs somewhere.
  void checkEveryPassRuns() const {
    size_t expected = plan.stages.size() * size_t(plan.microbatches) *
                      plan.slices.size() * (plan.splitBackward ? 3 : 2);
    if (executed.size() != expected)
      fail("the plan runs " + std::to_string(executed.size()) + " passes, " +
           std::to_string(expected) + " are needed");
  }

  /// And every shard pass on every device, and every collective: each
  /// device issues the same collectives of a shard in the same order.
  void checkShardCollectives() const {
    const VocabularyPlan &v = plan.vocabulary;
    size_t units = size_t(plan.microbatches) * plan.slices.size();
    size_t shardPasses =
        (v.input.present ? getNumShardPasses(Shard::Input, v.algorithm) : 0) +
        (v.output.present ? getNumShardPasses(Shard::Output, v.algorithm) : 0);
    for (int d = 0; d < plan.devices; ++d) {
      size_t ran = shardState.shardPassesRun[d];
      if (ran != shardPasses * units)
        fail("device " + std::to_string(d) + " runs " + std::to_string(ran) +
             " vocabulary shard passes, " +
             std::to_string(shardPasses * units) + " are needed");
      for (Shard shard : {Shard::Input, Shard::Output})
        checkCollectiveOrder(d, shard, units);
    }
  }

  void checkCollectiveOrder(int d, Shard shard, size_t units) const {
    const auto &mine = shardState.sequence[d][int(shard)];
    size_t needed =
        units * size_t(plan.getVocabularyShape().getNumGroups(shard));
    if (mine.size() != needed)
      fail("device " + std::to_string(d) + " issues " +
           std::to_string(mine.size()) + " collectives of the " +
           shardName(shard) + " shard, " + std::to_string(needed) +
           " are needed");
    const auto &first = shardState.sequence[0][int(shard)];
    for (size_t k = 0; k < mine.size(); ++k)
      if (mine[k] != first[k])
        fail("device " + std::to_string(d) + " issues the " + shardName(shard) +
             " shard's collectives in another order "
             "than device 0 (collective number " +
             std::to_string(k) + "): the run would deadlock");
  }

  const Plan &plan;
  const ShardState &shardState;
  const std::map<std::tuple<int, int, int64_t>, int> &sends, &recvs;
  const std::set<std::tuple<int, int, int, int>> &executed;
  const std::map<std::pair<int, int>, size_t> &lastExec, &gradSync;
};

} // namespace

void validate(Plan &plan) {
  PlanFacts facts;
  InstructionChecks(plan, facts).run();
  WholePlanChecks(plan, facts).run();
}

} // namespace sluice::rt::planfile
