//===- PlanReader.cpp - Every field of a plan, read and named -------------===//
//
// The JSON side of a plan (docs/plan-format.md): each field read with the
// place it came from, so that a wrong one is refused by name; the model's
// layers through the block spec's shared reader (lib/Blocks/Spec.cpp).
//
//===----------------------------------------------------------------------===//

#include "PlanJson.h"

#include "Slots.h"
#include "sluice/Blocks/Feature.h"
#include "sluice/Blocks/Spec.h"
#include "sluice/PlanFormat/Repeats.h"
#include "sluice/PlanFormat/TrainingState.h"

#include <cmath>
#include <optional>

namespace sluice::rt::planfile {

namespace {

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
  if (std::string why = checkBalanceLoss(m); !why.empty())
    fail("model: " + why);
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

void readMesh(const json &mesh, Plan &plan) {
  int64_t pp = integer(mesh, "pp", "mesh", 1);
  plan.tp = integer32(mesh, "tp", "mesh", 1);
  plan.dp = integer32(mesh, "dp", "mesh", 1);
  if (mesh.contains("cp"))
    plan.cp = integer32(mesh, "cp", "mesh", 1);
  plan.sequenceParallel = mesh.contains("sequence_parallel") &&
                          flag(mesh, "sequence_parallel", "mesh");
  if (mesh.contains("zero")) {
    plan.zero = integer32(mesh, "zero", "mesh", 0);
    if (std::string why = checkZeroStage(plan.zero, plan.getGradientRanks());
        !why.empty())
      fail("mesh: 'zero' = " + std::to_string(plan.zero) + ": " + why);
  }
  if (plan.zero == 3)
    if (std::string why = checkShardedWeights(plan.model); !why.empty())
      fail("mesh: 'zero' = 3: model " + why);
  if (mesh.contains("reshard")) {
    const json &value = mesh["reshard"];
    if (!value.is_string() ||
        !parseReshard(value.get<std::string>(), plan.reshard))
      fail("mesh: 'reshard' = " + value.dump() +
           " is not a re-shard choice (\"every-pass\" or \"step\")");
    if (plan.zero != 3)
      fail("mesh: 'reshard' chooses when ZeRO-3 drops the gathered "
           "weights, but 'zero' = " +
           std::to_string(plan.zero));
  }
  if (mesh.contains("ep")) {
    plan.ep = integer32(mesh, "ep", "mesh", 1);
    if (plan.dp % plan.ep != 0)
      fail("mesh: 'ep' = " + std::to_string(plan.ep) +
           " does not divide dp = " + std::to_string(plan.dp) +
           " (each expert group is ep of the data-parallel replicas)");
    if (std::string why = checkExpertParallel(plan.model, plan.ep);
        !why.empty())
      fail("the mesh's ep = " + std::to_string(plan.ep) + ": model " + why);
  }
  if (mesh.contains("expert_capacity")) {
    const json &capacity = mesh["expert_capacity"];
    if (!capacity.is_number())
      fail("mesh: 'expert_capacity' must be a number, got " +
           capacity.dump());
    plan.expertCapacity = capacity.get<double>();
    if (plan.ep < 2 || !(plan.expertCapacity >= 1))
      fail("mesh: 'expert_capacity' = " + capacity.dump() +
           (plan.ep < 2 ? " sizes expert parallelism's buffers, but ep = 1"
                        : " must be at least 1 (the balanced share)"));
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
  if (plan.model.seqLen / plan.cp % plan.tp != 0)
    fail("mesh: 'sequence_parallel' splits each sequence" +
         (plan.cp > 1 ? " (a context-parallel rank's " +
                            std::to_string(plan.model.seqLen / plan.cp) +
                            " tokens of it)"
                      : std::string()) +
         " over tp = " + std::to_string(plan.tp) + " shards, but seq_len " +
         std::to_string(plan.model.seqLen) + " does not divide by it" +
         (plan.cp > 1 ? " x cp" : ""));
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
    if (in.contains("paired"))
      instr.paired = flag(in, "paired", at);
  } else {
    instr.peer = integer32(in, "peer", at, -1);
    instr.key = integer(in, "key", at, -1);
    instr.buffer = integer32(in, "buffer", at, -1);
  }
  return instr;
}

/// A repeat block's body run `count` times (plan version 9,
/// sluice/PlanFormat/Repeats.h): run i adds i x mb_step to every
/// microbatch, i x key_step to every key, and maps every slot through the
/// slot map i times.
void readRepeat(const json &r, const std::string &at, DeviceProgram &program,
                int version) {
  if (version < 9)
    fail(at + ": a repeat block in a version " + std::to_string(version) +
         " plan (repeat blocks are version 9's)");
  int64_t count = integer(r, "repeat", at, 1, int64_t(kMaxProgramInstructions));
  int64_t mbStep = integer(r, "mb_step", at, -kMaxRepeatStep, kMaxRepeatStep);
  int64_t keyStep =
      integer(r, "key_step", at, -kMaxRepeatStep, kMaxRepeatStep);
  int64_t slots = int64_t(program.buffers.size());
  std::vector<int32_t> map(static_cast<size_t>(slots));
  for (int32_t x = 0; x < int32_t(slots); ++x)
    map[size_t(x)] = x;
  for (const json &pair : field(r, "slots", at)) {
    if (!pair.is_array() || pair.size() != 2)
      fail(at + ": 'slots' must list [from, to] pairs of buffer slots, got " +
           pair.dump());
    int64_t from = integerValue(pair[0], at + ": a slot map's slot", 0,
                                slots - 1);
    int64_t to =
        integerValue(pair[1], at + ": a slot map's slot", 0, slots - 1);
    map[size_t(from)] = int32_t(to);
  }
  const json &body = field(r, "body", at);
  if (!body.is_array() || body.empty())
    fail(at + ": 'body' must list the block's instructions");
  if (size_t(count) * body.size() + program.instructions.size() >
      kMaxProgramInstructions)
    fail(at + ": " + std::to_string(count) + " runs of " +
         std::to_string(body.size()) + " instructions take the device past " +
         std::to_string(kMaxProgramInstructions) + " instructions");
  std::vector<Instruction> first;
  for (size_t i = 0; i < body.size(); ++i) {
    std::string where = at + ", body instruction " + std::to_string(i);
    if (body[i].is_object() && body[i].contains("repeat"))
      fail(where + ": repeat blocks do not nest");
    first.push_back(readInstruction(body[i], where));
  }
  // The slot map applied i times, for run i.
  std::vector<int32_t> power(map.size());
  for (size_t x = 0; x < power.size(); ++x)
    power[x] = int32_t(x);
  auto mapped = [&](int32_t slot) {
    return slot < 0 || slot >= int32_t(power.size()) ? slot
                                                     : power[size_t(slot)];
  };
  for (int64_t run = 0; run < count; ++run) {
    for (const Instruction &base : first) {
      Instruction in = base;
      if (base.op != Op::GradSync) {
        int64_t mb = base.mb + run * mbStep;
        if (mb < INT32_MIN || mb > INT32_MAX)
          fail(at + ": run " + std::to_string(run) + "'s microbatch " +
               std::to_string(mb) + " is out of range");
        in.mb = int32_t(mb);
      }
      if ((base.op == Op::Send || base.op == Op::Recv) &&
          __builtin_add_overflow(base.key, run * keyStep, &in.key))
        fail(at + ": run " + std::to_string(run) + "'s message key is out "
             "of range");
      for (int32_t *slot : {&in.state, &in.wstate, &in.kv, &in.in, &in.out,
                            &in.rstate, &in.buffer})
        *slot = mapped(*slot);
      program.instructions.push_back(in);
    }
    for (int32_t &slot : power)
      slot = map[size_t(slot)];
  }
}

DeviceProgram readProgram(const json &p, int version) {
  DeviceProgram program;
  program.device = integer32(p, "device", "program");
  std::string where = "device " + std::to_string(program.device);
  for (const json &bytes : field(p, "buffers", where))
    program.buffers.push_back(
        // Up to 2^50 bytes (a PiB, far past any device): a device's sizes
        // then sum without wrapping (a 2^63 - 1 byte buffer was refused
        // as "cannot allocate" a negative count, and its sum passed the
        // memory check as a negative need).
        integerValue(bytes, where + ": a buffer size", 0, int64_t(1) << 50));
  const json &instrs = field(p, "instructions", where);
  for (size_t i = 0; i < instrs.size(); ++i) {
    std::string at = where + ", instruction " + std::to_string(i);
    if (instrs[i].is_object() && instrs[i].contains("repeat"))
      readRepeat(instrs[i], at, program, version);
    else if (program.instructions.size() >= kMaxProgramInstructions)
      fail(at + ": the device has more than " +
           std::to_string(kMaxProgramInstructions) + " instructions");
    else
      program.instructions.push_back(readInstruction(instrs[i], at));
  }
  return program;
}

/// Reads every field of the plan in `j` (then validate() checks the

} // namespace

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
      getTensorShardModel(plan.model, plan.tp, plan.sequenceParallel, plan.ep,
                          plan.expertCapacity);
  // A context-parallel rank's caches hold its own tokens (ring attention).
  plan.shardModel.contextShards = plan.cp;
  plan.splitBackward = flag(j, "split_backward", "plan");
  for (const json &length : field(j, "slices", "plan"))
    plan.slices.push_back(
        integerValue(length, "a token length in 'slices'", 1, kMaxDimension));
  if (std::string why = checkContextParallel(plan.model, plan.cp, plan.slices);
      !why.empty())
    fail("mesh: 'cp' = " + std::to_string(plan.cp) + ": " + why);
  if (plan.sequenceParallel)
    checkSequenceParallel(plan);
  for (const json &s : field(j, "stages", "plan"))
    plan.stages.push_back(readStage(s));
  if (plan.stages.empty())
    fail("the plan has no stages");
  if (j.contains("vocabulary"))
    readVocabulary(j.at("vocabulary"), plan.vocabulary);
  for (const json &p : field(j, "programs", "plan"))
    plan.programs.push_back(readProgram(p, plan.version));
  // Before anything is sized by the device count.
  if (plan.programs.size() != size_t(plan.devices))
    fail("the plan has " + std::to_string(plan.programs.size()) +
         " device programs for " + std::to_string(plan.devices) + " devices");
}

} // namespace sluice::rt::planfile
