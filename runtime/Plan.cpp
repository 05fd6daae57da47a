//===- Plan.cpp - Load and validate a plan --------------------------------===//

#include "Plan.h"
#include "CommOrder.h"

#include "Slots.h"
#include "sluice/Blocks/Feature.h"
#include "sluice/Blocks/Spec.h"

#include <nlohmann/json.hpp>

#include <array>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <tuple>

namespace sluice::rt {

using nlohmann::json;

namespace {

/// Thrown inside the parser, turned into one Status at the boundary.
struct PlanError {
  std::string message;
};

[[noreturn]] void fail(const std::string &message) { throw PlanError{message}; }

const json &field(const json &object, const char *name,
                  const std::string &where) {
  if (!object.is_object() || !object.contains(name))
    fail(where + " has no '" + name + "'");
  return object.at(name);
}

/// `value` as an integer in [min, max]; `what` names it in the error. A
/// float, or an integer out of int64_t's range, is refused before any
/// conversion (converting them is undefined; found by sluice-fuzz-plan).
int64_t integerValue(const json &value, const std::string &what, int64_t min,
                     int64_t max) {
  if (!value.is_number_integer() ||
      (value.is_number_unsigned() &&
       value.get<uint64_t>() > uint64_t(INT64_MAX)))
    fail(what + " must be an integer, got " + value.dump());
  int64_t v = value.get<int64_t>();
  if (v < min)
    fail(what + " must be at least " + std::to_string(min) + ", got " +
         std::to_string(v));
  if (v > max)
    fail(what + " must be at most " + std::to_string(max) + ", got " +
         std::to_string(v));
  return v;
}

int64_t integer(const json &object, const char *name, const std::string &where,
                int64_t min = 0, int64_t max = INT64_MAX) {
  return integerValue(field(object, name, where), where + ": '" + name + "'",
                      min, max);
}

/// The largest model dimension a plan may state (hidden, heads, ffn,
/// sequence length, ...) and the largest vocabulary: far past any model
/// trained today, and small enough that the layout's products of them
/// stay inside int64_t.

/// An integer field the runtime keeps in an int (devices, indices, counts).
int integer32(const json &object, const char *name, const std::string &where,
              int64_t min = 0) {
  return int(integerValue(field(object, name, where),
                          where + ": '" + name + "'", min, INT32_MAX));
}

std::string text(const json &object, const char *name,
                 const std::string &where) {
  const json &value = field(object, name, where);
  if (!value.is_string())
    fail(where + ": '" + name + "' must be a string, got " + value.dump());
  return value.get<std::string>();
}

bool flag(const json &object, const char *name, const std::string &where) {
  const json &value = field(object, name, where);
  if (!value.is_boolean())
    fail(where + ": '" + name + "' must be true or false, got " + value.dump());
  return value.get<bool>();
}

/// The numerics the layers share (optional: 1e-5 and tanh GELU before
/// they were recorded), and what the model does not compute.
void readNumerics(const json &j, ModelConfig &m) {
  if (j.contains("norm_eps")) {
    const json &eps = j["norm_eps"];
    if (!eps.is_number() || !(eps.get<double>() > 0 && eps.get<double>() < 1))
      fail("model: 'norm_eps' must be a number in (0, 1), got " + eps.dump());
    m.normEps = eps.get<double>();
  }
  if (j.contains("gelu")) {
    std::string gelu = text(j, "gelu", "model");
    if (gelu != "tanh" && gelu != "erf")
      fail("model: 'gelu' must be \"tanh\" or \"erf\", got \"" + gelu + "\"");
    m.exactGelu = gelu == "erf";
  }
  if (j.contains("sliding_window")) {
    // Plans before version 7: a window no shorter than the sequence, which
    // is full causal attention (newer plans give each layer its window).
    int64_t window = integer(j, "sliding_window", "model", 1, INT64_MAX);
    if (window < m.seqLen)
      fail("model: 'sliding_window' = " + std::to_string(window) +
           " is shorter than seq_len = " + std::to_string(m.seqLen) +
           "; a version 7 plan gives each layer its 'window' (compile it "
           "again)");
  }
  for (auto [key, into] : {std::pair{"embedding_scale", &m.embeddingScale},
                            std::pair{"attention_scale", &m.attentionScale},
                            std::pair{"attention_softcap",
                                      &m.attentionSoftcap},
                            std::pair{"final_softcap", &m.finalSoftcap}}) {
    if (!j.contains(key))
      continue;
    const json &value = j[key];
    if (!value.is_number() || !(value.get<double>() > 0) ||
        !std::isfinite(value.get<double>()))
      fail("model: '" + std::string(key) +
           "' must be a positive number, got " + value.dump());
    *into = value.get<double>();
  }
  if (j.contains("padding_token"))
    m.paddingToken = integer(j, "padding_token", "model", 0, INT64_MAX);
  if (j.contains("max_positions"))
    m.maxPositions = integer(j, "max_positions", "model", 1, INT64_MAX);
  if (!j.contains("unmodelled"))
    return;
  const json &list = j["unmodelled"];
  if (!list.is_array())
    fail("model: 'unmodelled' must be a list of strings, got " + list.dump());
  std::string what;
  for (const json &item : list) {
    if (!item.is_string())
      fail("model: 'unmodelled' must be a list of strings, got " + list.dump());
    m.unmodelled.push_back(item.get<std::string>());
    what += (what.empty() ? "" : "; ") + m.unmodelled.back();
  }
  // Training it would train another model than the one it names
  // (docs/import.md, "Not modelled"): refused, not approximated.
  if (!m.unmodelled.empty())
    fail("model '" + m.name + "' computes what the runtime does not: " + what +
         " (sluice-compile's costs hold; training it would train a "
         "different model)");
}

ModelConfig readModel(const json &j) {
  ModelConfig m;
  const std::string where = "model";
  m.name = text(j, "name", where);
  m.seqLen = integer(j, "seq_len", where, 1, kMaxDimension);
  m.microBatch = integer(j, "micro_batch", where, 1, kMaxDimension);
  m.hidden = integer(j, "hidden", where, 1, kMaxDimension);
  readNumerics(j, m);
  const json &layers = field(j, "layers", where);
  if (!layers.is_array() || layers.size() < 2)
    fail("model: 'layers' must list an embedding, transformer layers and an "
         "output layer");
  for (size_t i = 0; i < layers.size(); ++i) {
    const json &l = layers[i];
    std::string at = "model layer " + std::to_string(i);
    LayerConfig c;
    std::string kind = text(l, "kind", at);
    bool first = i == 0, last = i + 1 == layers.size();
    if (kind == "embedding" && first)
      c.kind = LayerKind::Embedding;
    else if (kind == "output" && last)
      c.kind = LayerKind::Output;
    else if (kind == "transformer" && !first && !last)
      c.kind = LayerKind::Transformer;
    else
      fail(at + ": unexpected '" + kind +
           "' here (a model is an embedding, "
           "transformer layers, then an output layer)");
    // The spec's fields and rules, as the compiler's (lib/Blocks).
    if (std::string why = blocks::readLayer(l, c); !why.empty())
      fail(at + ": " + why);
    if (std::string why = blocks::checkLayer(c, m.hidden); !why.empty())
      fail(at + ": " + why);
    for (const blocks::Feature *f : blocks::getEnabledFeatures(c))
      if (!block::lookupCompute(f->getName()))
        fail(at + ": block feature '" + f->getName() +
             "' has no compute part in this runtime");
    c.headDim = blocks::getHeadDim(c, m.hidden);
    if (c.kind == LayerKind::Embedding && c.positions &&
        c.positions < m.seqLen)
      fail(at + ": 'positions' = " + std::to_string(c.positions) +
           " is shorter than seq_len = " + std::to_string(m.seqLen));
    m.layers.push_back(c);
  }
  const LayerConfig &out = m.layers.back();
  if (out.tied && out.vocab != m.layers.front().vocab)
    fail("model: the tied output layer's vocab " + std::to_string(out.vocab) +
         " differs from the embedding's " +
         std::to_string(m.layers.front().vocab));
  // The labels are the input tokens one later: each needs a logit.
  if (out.vocab < m.layers.front().vocab)
    fail("model: the output layer's vocab " + std::to_string(out.vocab) +
         " is smaller than the embedding's " +
         std::to_string(m.layers.front().vocab) +
         ": the labels are input tokens, and some would have no logit");
  // Vocabulary Parallelism's S and T passes combine the softmax's parts
  // before the barrier (equation 6), which the cap's slope would enter.
  if (m.finalSoftcap > 0 && out.sharded)
    fail("model: 'final_softcap' with the output layer sharded over the "
         "pipeline (--vocab) is not computed: compile without --vocab");
  if (m.paddingToken >= m.layers.front().vocab)
    fail("model: 'padding_token' = " + std::to_string(m.paddingToken) +
         " is not below the vocabulary size " +
         std::to_string(m.layers.front().vocab));
  return m;
}

Pass readPass(const std::string &name, const std::string &where) {
  if (std::optional<Pass> pass = parsePass(name))
    return *pass;
  fail(where + ": pass '" + name + "' is not one the runtime runs (" +
       passNames() + ")");
}

Shard readShard(const std::string &name, const std::string &where) {
  if (std::optional<Shard> shard = parseShard(name))
    return *shard;
  fail(where + ": unknown shard '" + name + "' (expected input or output)");
}

ShardPlan readShardPlan(const json &j, const std::string &where) {
  ShardPlan shard;
  shard.present = true;
  shard.name = text(j, "name", where);
  shard.vocab = integer(j, "vocab", where, 1, kMaxVocab);
  shard.paddedVocab = integer(j, "padded_vocab", where, 1, kMaxVocab);
  shard.root = integer32(j, "root", where);
  return shard;
}

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
                           const std::string &where, const ShardState &st) {
  std::optional<CollectiveRef> in = plan.getCollectiveInput(instr);
  if (in &&
      !st.issued.count({d, int(in->shard), in->group, instr.mb, instr.slice}))
    fail(where + ": needs collective " + std::to_string(in->group) +
         " of the " + shardName(in->shard) +
         " shard, which this device has not issued before it");
}

void validateShardInstruction(const Plan &plan, int d, const Instruction &instr,
                              const std::string &where, ShardState &st) {
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

/// The whole-plan checks after parsing, in steps: the layout (slices,
/// stages, programs), each instruction, then what only the whole plan
/// shows (matched messages, gradient averaging, every pass run, the same
/// collective order everywhere).
class PlanValidator {
public:
  explicit PlanValidator(const Plan &plan) : plan(plan) {
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
    }
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

  /// A stage's index, or -1 - shard for a vocabulary shard.
  static int ownerOf(const Instruction &instr) {
    return instr.shard != Shard::None ? -1 - int(instr.shard) : instr.stage;
  }
  std::string ownerName(int owner) const {
    return owner >= 0
               ? "stage " + plan.stages[owner].name
               : std::string("the ") + shardName(Shard(-1 - owner)) + " shard";
  }

  void checkInstruction(int d, size_t i) {
    const Instruction &instr = plan.programs[d].instructions[i];
    std::string where = "device " + std::to_string(d) + ", instruction " +
                        std::to_string(i) + " (" + plan.describe(instr) + ")";
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

  void checkGradSync(int d, size_t i, const Instruction &instr,
                     const std::string &where) {
    if (plan.dp < 2)
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
      fail(where + ": averages the gradients of " + ownerName(ownerOf(instr)) +
           " a second time");
  }

  /// `slot` of device `d` exists and holds `need` bytes (a role a pass
  /// does not have needs 0 and may be -1).
  void checkSlot(int d, const std::string &where, int32_t slot, int64_t need,
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

  void checkExec(int d, const Instruction &instr, const std::string &where) {
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

  /// Each slot of a stage pass holds what the layout says it needs.
  void checkExecSlots(int d, const Instruction &instr,
                      const std::string &where) const {
    const StagePlan &stage = plan.stages[instr.stage];
    const ModelConfig &model = plan.shardModel;
    const Precision &precision = plan.precision;
    SliceShape s = plan.getSliceShape(instr.slice);
    checkSlot(d, where, instr.state,
              getForwardStateBytes(model, stage.layers, s, precision,
                                   stage.recompute),
              "forward state");
    if (instr.pass != Pass::F) {
      checkSlot(d, where, instr.wstate,
                getWeightStateBytes(model, stage.layers, s, precision),
                "weight state");
      if (stage.recompute != Recompute::None)
        checkSlot(d, where, instr.rstate,
                  getRecomputedStateBytes(model, stage.layers, s, precision,
                                          stage.recompute),
                  "recomputed state");
    }
    if (instr.pass == Pass::W)
      return;
    checkSlot(d, where, instr.kv,
              getKeyValueBytes(model, stage.layers, s.rows, precision),
              "key/value state");
    bool first = instr.stage == 0;
    bool last = instr.stage + 1 == int(plan.stages.size());
    bool hasInput = instr.pass == Pass::F ? !first : !last;
    bool hasOutput = instr.pass == Pass::F ? !last : !first;
    int64_t message = getMessageBytes(model, s, precision);
    checkSlot(d, where, instr.in, hasInput ? message : 0, "input");
    checkSlot(d, where, instr.out, hasOutput ? message : 0, "output");
  }

  void checkMessage(int d, size_t i, const Instruction &instr,
                    const std::string &where) {
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
    if (plan.dp < 2)
      return;
    for (auto &[key, last] : lastExec) {
      auto [device, owner] = key;
      auto sync = gradSync.find(key);
      std::string at = "device " + std::to_string(device) + ": ";
      if (sync == gradSync.end())
        fail(at + "the gradients of " + ownerName(owner) +
             " are never averaged over the " + std::to_string(plan.dp) +
             " data-parallel replicas (no grad_sync)");
      if (sync->second < last)
        fail(at + "instruction " + std::to_string(sync->second) +
             " averages the gradients of " + ownerName(owner) +
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
  ShardState shardState;
  /// (device, peer, key) of every send and receive, to match them.
  std::map<std::tuple<int, int, int64_t>, int> sends, recvs;
  /// (pass, stage, mb, slice) of every stage pass.
  std::set<std::tuple<int, int, int, int>> executed;
  /// Per (device, stage or -1 - shard): its last exec and its grad_sync.
  std::map<std::pair<int, int>, size_t> lastExec, gradSync;
};

void validate(Plan &plan) { PlanValidator(plan).run(); }

} // namespace

VocabularyShape Plan::getVocabularyShape() const {
  VocabularyShape shape;
  shape.input = vocabulary.input.present;
  shape.output = vocabulary.output.present;
  shape.algorithm = vocabulary.algorithm;
  shape.inputRoot = vocabulary.input.root;
  shape.outputRoot = vocabulary.output.root;
  shape.lastStage = getLastStage();
  shape.splitBackward = splitBackward;
  return shape;
}

std::optional<CollectiveRef>
Plan::getCollectiveInput(const Instruction &exec) const {
  if (exec.op != Op::Exec)
    return std::nullopt;
  return rt::getCollectiveInput(getVocabularyShape(), exec.pass, exec.shard,
                                exec.stage);
}

bool Plan::contributes(CollectiveRef ref, int device, Pass pass, int stage,
                       Shard execShard) const {
  return rt::contributes(getVocabularyShape(), ref, device, pass, stage,
                         execShard);
}

SliceShape Plan::getSliceShape(int slice) const {
  int64_t offset = 0;
  for (int k = 0; k < slice; ++k)
    offset += slices[k];
  return {model.microBatch, slices[slice], offset};
}

std::string Plan::describe(const Instruction &instr) const {
  std::ostringstream os;
  if (instr.op == Op::GradSync) {
    os << "grad_sync of ";
    if (instr.shard != Shard::None)
      os << "the " << shardName(instr.shard) << " shard";
    else
      os << "stage " << instr.stage;
    return os.str();
  }
  if (instr.op == Op::Collective) {
    os << "collective " << instr.group << " of the " << shardName(instr.shard)
       << " shard, microbatch " << instr.mb << ", slice " << instr.slice;
    return os.str();
  }
  os << (instr.op == Op::Exec   ? "exec "
         : instr.op == Op::Send ? "send "
                                : "recv ")
     << passName(instr.pass);
  if (instr.shard != Shard::None)
    os << " of the " << shardName(instr.shard) << " shard";
  else
    os << " of stage " << instr.stage;
  os << ", microbatch " << instr.mb << ", slice " << instr.slice;
  if (instr.op != Op::Exec)
    os << (instr.op == Op::Send ? " to device " : " from device ")
       << instr.peer;
  return os.str();
}

namespace {

void readMesh(const json &mesh, Plan &plan) {
  int64_t pp = integer(mesh, "pp", "mesh", 1);
  plan.tp = integer32(mesh, "tp", "mesh", 1);
  plan.dp = integer32(mesh, "dp", "mesh", 1);
  plan.sequenceParallel = mesh.contains("sequence_parallel") &&
                          flag(mesh, "sequence_parallel", "mesh");
  if (mesh.contains("zero")) {
    plan.zero = integer32(mesh, "zero", "mesh", 0);
    if (plan.zero > 1)
      fail("mesh: 'zero' = " + std::to_string(plan.zero) +
           " is not a ZeRO stage Sluice runs (0 or 1)");
    if (plan.zero == 1 && plan.dp < 2)
      fail("mesh: 'zero' = 1 shards the optimizer state over the "
           "data-parallel replicas, but dp = 1");
  }
  if (pp != plan.devices)
    fail("the mesh's pp = " + std::to_string(pp) + " is not the plan's " +
         std::to_string(plan.devices) + " devices");
  std::string problem = blocks::checkTensorParallel(plan.model, plan.tp);
  if (!problem.empty())
    fail("the mesh's tp = " + std::to_string(plan.tp) + ": model " + problem);
}

/// Each shard holds a contiguous 1/tp of a slice's rows x tokens
/// (ModelConfig::sequenceShards), as sluice-compile checks.
void checkSequenceParallel(const Plan &plan) {
  if (plan.tp < 2)
    fail("mesh: 'sequence_parallel' splits tokens over the "
         "tensor-parallel shards, but tp = " +
         std::to_string(plan.tp));
  if (plan.model.seqLen % plan.tp != 0)
    fail("mesh: 'sequence_parallel' splits each sequence over tp = " +
         std::to_string(plan.tp) + " shards, but seq_len " +
         std::to_string(plan.model.seqLen) + " does not divide by it");
  if (plan.slices.size() > 1)
    fail("mesh: 'sequence_parallel' with " +
         std::to_string(plan.slices.size()) +
         " token slices per microbatch (it splits whole sequences)");
}

StagePlan readStage(const json &s) {
  StagePlan stage;
  stage.name = text(s, "name", "stage");
  std::string where = "stage " + stage.name;
  stage.device = integer32(s, "device", where);
  stage.chunk = integer32(s, "chunk", where);
  for (const json &layer : field(s, "layers", where))
    stage.layers.push_back(
        int(integerValue(layer, where + ": a layer index", 0, INT32_MAX)));
  if (s.contains("recompute")) {
    std::string mode = text(s, "recompute", where);
    std::optional<Recompute> recompute = parseRecompute(mode);
    if (!recompute)
      fail(where + ": unknown recompute '" + mode +
           "' (expected none, selective or full)");
    stage.recompute = *recompute;
  }
  return stage;
}

void readVocabulary(const json &v, VocabularyPlan &vocabulary) {
  if (v.contains("input"))
    vocabulary.input = readShardPlan(v.at("input"), "vocabulary input shard");
  if (v.contains("output")) {
    const json &out = v.at("output");
    vocabulary.output = readShardPlan(out, "vocabulary output shard");
    vocabulary.algorithm =
        integer32(out, "algorithm", "vocabulary output shard");
    vocabulary.barriers =
        integer32(out, "barriers", "vocabulary output shard", 1);
  }
  vocabulary.synchronous = flag(v, "synchronous", "vocabulary");
}

/// One instruction; `at` names it in errors. Only the fields of its op
/// are read (docs/plan-format.md).
Instruction readInstruction(const json &in, const std::string &at) {
  Instruction instr;
  std::string op = text(in, "op", at);
  std::optional<Op> parsed = parseOp(op);
  if (!parsed)
    fail(at + ": unknown op '" + op + "' (expected " + opNames() + ")");
  instr.op = *parsed;
  if (instr.op == Op::GradSync) {
    if (in.contains("shard")) {
      instr.shard = readShard(text(in, "shard", at), at);
      instr.stage = -1;
    } else {
      instr.stage = integer32(in, "stage", at);
    }
    return instr;
  }
  if (instr.op == Op::Collective) {
    instr.shard = readShard(text(in, "shard", at), at);
    instr.group = integer32(in, "group", at);
    instr.mb = integer32(in, "mb", at);
    instr.slice = integer32(in, "slice", at);
    instr.blocking = flag(in, "blocking", at);
    instr.stage = -1;
    return instr;
  }
  instr.pass = readPass(text(in, "pass", at), at);
  if (in.contains("shard")) {
    // A vocabulary shard's pass runs on this device's rows.
    instr.shard = readShard(text(in, "shard", at), at);
    instr.mb = integer32(in, "mb", at);
    instr.slice = integer32(in, "slice", at);
    instr.stage = -1;
    return instr;
  }
  if (isShardPass(instr.pass))
    fail(at + ": pass " + passName(instr.pass) +
         " runs a vocabulary shard and must name it ('shard')");
  instr.stage = integer32(in, "stage", at);
  instr.mb = integer32(in, "mb", at);
  instr.slice = integer32(in, "slice", at);
  if (instr.op == Op::Exec) {
    instr.state = integer32(in, "state", at, -1);
    instr.wstate = integer32(in, "wstate", at, -1);
    instr.kv = integer32(in, "kv", at, -1);
    instr.in = integer32(in, "in", at, -1);
    instr.out = integer32(in, "out", at, -1);
    if (in.contains("rstate"))
      instr.rstate = integer32(in, "rstate", at, -1);
  } else {
    instr.peer = integer32(in, "peer", at, -1);
    instr.key = integer(in, "key", at, -1);
    instr.buffer = integer32(in, "buffer", at, -1);
  }
  return instr;
}

DeviceProgram readProgram(const json &p) {
  DeviceProgram program;
  program.device = integer32(p, "device", "program");
  std::string where = "device " + std::to_string(program.device);
  for (const json &bytes : field(p, "buffers", where))
    program.buffers.push_back(
        integerValue(bytes, where + ": a buffer size", 0, INT64_MAX));
  const json &instrs = field(p, "instructions", where);
  for (size_t i = 0; i < instrs.size(); ++i)
    program.instructions.push_back(readInstruction(
        instrs[i], where + ", instruction " + std::to_string(i)));
  return program;
}

/// Reads every field of the plan in `j` (then validate() checks the
/// whole).
void readPlan(const json &j, Plan &plan) {
  if (!j.is_object() || !j.contains("format") || j["format"] != "sluice-plan")
    fail("not a sluice plan (no \"format\": \"sluice-plan\")");
  int64_t version = integer(j, "version", "plan", 1);
  if (version > kPlanVersion)
    fail("plan version " + std::to_string(version) +
         " is newer than this runtime reads (" + std::to_string(kPlanVersion) +
         " and older); run it with the sluice-run of the sluice-compile "
         "that wrote it");
  plan = Plan();
  plan.version = int(version);
  if (j.contains("precision")) {
    std::string name = text(j, "precision", "plan");
    if (!Precision::parse(name, plan.precision))
      fail("unknown precision '" + name + "' (expected fp32, bf16 or fp8)");
  }
  plan.model = readModel(field(j, "model", "plan"));
  plan.schedule = text(j, "schedule", "plan");
  plan.devices = integer32(j, "devices", "plan", 1);
  plan.microbatches = integer32(j, "microbatches", "plan", 1);
  if (j.contains("mesh"))
    readMesh(j.at("mesh"), plan);
  plan.shardModel =
      getTensorShardModel(plan.model, plan.tp, plan.sequenceParallel);
  plan.splitBackward = flag(j, "split_backward", "plan");
  for (const json &length : field(j, "slices", "plan"))
    plan.slices.push_back(
        integerValue(length, "a token length in 'slices'", 1, kMaxDimension));
  if (plan.sequenceParallel)
    checkSequenceParallel(plan);
  for (const json &s : field(j, "stages", "plan"))
    plan.stages.push_back(readStage(s));
  if (plan.stages.empty())
    fail("the plan has no stages");
  if (j.contains("vocabulary"))
    readVocabulary(j.at("vocabulary"), plan.vocabulary);
  for (const json &p : field(j, "programs", "plan"))
    plan.programs.push_back(readProgram(p));
  // Before anything is sized by the device count.
  if (plan.programs.size() != size_t(plan.devices))
    fail("the plan has " + std::to_string(plan.programs.size()) +
         " device programs for " + std::to_string(plan.devices) + " devices");
}

} // namespace

Status parsePlan(const std::string &textIn, const std::string &origin,
                 Plan &plan) {
  try {
    readPlan(json::parse(textIn), plan);
    validate(plan);
  } catch (const PlanError &e) {
    return Status::error(origin + ": " + e.message);
  } catch (const json::exception &e) {
    return Status::error(origin + ": malformed plan: " + e.what());
  }
  return Status::ok();
}

Status Plan::setPrecision(const Precision &run) {
  if (run == precision)
    return Status::ok();
  Precision compiled = precision;
  precision = run;
  try {
    validate(*this);
  } catch (const PlanError &e) {
    precision = compiled;
    return Status::error(
        "the plan was compiled for " + std::string(compiled.getName()) +
        " and cannot run in " + run.getName() + ": " + e.message +
        "; compile it with --precision " + run.getName());
  }
  return Status::ok();
}

Status loadPlan(const std::string &path, Plan &plan) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return Status::error("cannot open plan '" + path + "'");
  std::stringstream buffer;
  buffer << in.rdbuf();
  return parsePlan(buffer.str(), path, plan);
}

} // namespace sluice::rt
