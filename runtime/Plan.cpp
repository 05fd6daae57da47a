//===- Plan.cpp - Load and validate a plan --------------------------------===//

#include "Plan.h"

#include <nlohmann/json.hpp>

#include <fstream>
#include <map>
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

int64_t integer(const json &object, const char *name, const std::string &where,
                int64_t min = 0) {
  const json &value = field(object, name, where);
  if (!value.is_number_integer())
    fail(where + ": '" + name + "' must be an integer, got " + value.dump());
  int64_t v = value.get<int64_t>();
  if (v < min)
    fail(where + ": '" + name + "' must be at least " + std::to_string(min) +
         ", got " + std::to_string(v));
  return v;
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

const char *passName(Pass pass) {
  switch (pass) {
  case Pass::F:
    return "F";
  case Pass::B:
    return "B";
  case Pass::W:
    return "W";
  case Pass::BW:
    return "BW";
  }
  return "?";
}

ModelConfig readModel(const json &j) {
  ModelConfig m;
  const std::string where = "model";
  m.name = text(j, "name", where);
  m.seqLen = integer(j, "seq_len", where, 1);
  m.microBatch = integer(j, "micro_batch", where, 1);
  m.hidden = integer(j, "hidden", where, 1);
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
    if (kind == "embedding" && first) {
      c.kind = LayerKind::Embedding;
      c.vocab = integer(l, "vocab", at, 1);
      c.positions = integer(l, "positions", at, 0);
      if (c.positions && c.positions < m.seqLen)
        fail(at + ": 'positions' = " + std::to_string(c.positions) +
             " is shorter than seq_len = " + std::to_string(m.seqLen));
    } else if (kind == "output" && last) {
      c.kind = LayerKind::Output;
      c.vocab = integer(l, "vocab", at, 1);
      c.norm = text(l, "norm", at);
      c.tied = flag(l, "tied", at);
    } else if (kind == "transformer" && !first && !last) {
      c.kind = LayerKind::Transformer;
      c.heads = integer(l, "heads", at, 1);
      c.kvHeads = integer(l, "kv_heads", at, 1);
      c.headDim = integer(l, "head_dim", at, 1);
      c.ffn = integer(l, "ffn", at, 1);
      c.norm = text(l, "norm", at);
      c.mlp = text(l, "mlp", at);
      c.bias = flag(l, "bias", at);
      // What the CPU backend implements; say so rather than compute wrong.
      if (c.kvHeads != c.heads)
        fail(at + ": grouped-query attention (kv_heads = " +
             std::to_string(c.kvHeads) +
             ", heads = " + std::to_string(c.heads) +
             ") is not implemented by the CPU runtime");
      if (c.mlp != "gelu")
        fail(at + ": mlp '" + c.mlp +
             "' is not implemented by the CPU runtime (it runs GELU MLPs)");
    } else {
      fail(at + ": unexpected '" + kind +
           "' here (a model is an embedding, "
           "transformer layers, then an output layer)");
    }
    if (c.kind != LayerKind::Embedding && c.norm != "layernorm" &&
        c.norm != "rmsnorm")
      fail(at + ": unknown norm '" + c.norm + "'");
    m.layers.push_back(c);
  }
  const LayerConfig &out = m.layers.back();
  if (out.tied && out.vocab != m.layers.front().vocab)
    fail("model: the tied output layer's vocab " + std::to_string(out.vocab) +
         " differs from the embedding's " +
         std::to_string(m.layers.front().vocab));
  return m;
}

Pass readPass(const std::string &name, const std::string &where) {
  if (name == "F")
    return Pass::F;
  if (name == "B")
    return Pass::B;
  if (name == "W")
    return Pass::W;
  if (name == "BW")
    return Pass::BW;
  fail(where + ": pass '" + name +
       "' is not one the CPU runtime runs (F, B, "
       "W, BW)");
}

/// Floats the stage's layers keep for `kind` of state on a slice.
int64_t stateFloats(const Plan &plan, int stage, const SliceShape &s,
                    int64_t (*perLayer)(const ModelConfig &,
                                        const LayerConfig &,
                                        const SliceShape &)) {
  int64_t total = 0;
  for (int layer : plan.stages[stage].layers)
    total += perLayer(plan.model, plan.model.layers[layer], s);
  return total;
}

void validate(Plan &plan) {
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
      fail("stage " + stage.name + ": device " + std::to_string(stage.device) +
           " is outside the plan's " + std::to_string(plan.devices));
    for (int layer : stage.layers)
      if (layer != next++)
        fail("stage " + stage.name +
             ": layers must continue the chain in order (expected layer " +
             std::to_string(next - 1) + ", got " + std::to_string(layer) + ")");
  }
  if (next != int(plan.model.layers.size()))
    fail("the stages hold " + std::to_string(next) + " layers, the model has " +
         std::to_string(plan.model.layers.size()));
  if (int(plan.programs.size()) != plan.devices)
    fail("the plan has " + std::to_string(plan.programs.size()) +
         " device programs for " + std::to_string(plan.devices) + " devices");

  // (device, peer, key) of every send and receive, to match them.
  std::map<std::tuple<int, int, int64_t>, int> sends, recvs;
  std::set<std::tuple<int, int, int, int>> executed;
  for (int d = 0; d < plan.devices; ++d) {
    const DeviceProgram &program = plan.programs[d];
    if (program.device != d)
      fail("device program " + std::to_string(d) + " says it is device " +
           std::to_string(program.device));
    for (size_t i = 0; i < program.instructions.size(); ++i) {
      const Instruction &instr = program.instructions[i];
      std::string where = "device " + std::to_string(d) + ", instruction " +
                          std::to_string(i) + " (" + plan.describe(instr) + ")";
      if (instr.stage < 0 || instr.stage >= int(plan.stages.size()))
        fail(where + ": stage " + std::to_string(instr.stage) +
             " does not exist");
      if (instr.mb < 0 || instr.mb >= plan.microbatches)
        fail(where + ": microbatch out of range");
      if (instr.slice < 0 || instr.slice >= int(plan.slices.size()))
        fail(where + ": slice out of range");
      SliceShape s = plan.getSliceShape(instr.slice);
      auto checkSlot = [&](int32_t slot, int64_t floats, const char *what) {
        if (floats == 0 && slot < 0)
          return;
        if (slot < 0 || slot >= int(program.buffers.size()))
          fail(where + ": " + what + " buffer " + std::to_string(slot) +
               " does not exist (the device has " +
               std::to_string(program.buffers.size()) + ")");
        int64_t need = floats * int64_t(sizeof(float));
        if (program.buffers[slot] < need)
          fail(where + ": buffer " + std::to_string(slot) + " has " +
               std::to_string(program.buffers[slot]) + " bytes, the " + what +
               " needs " + std::to_string(need));
      };
      const StagePlan &stage = plan.stages[instr.stage];
      if (instr.op == Op::Exec) {
        if (stage.device != d)
          fail(where + ": stage " + stage.name + " is on device " +
               std::to_string(stage.device));
        bool legal = plan.splitBackward
                         ? instr.pass != Pass::BW
                         : (instr.pass == Pass::F || instr.pass == Pass::BW);
        if (!legal)
          fail(where + ": pass " + passName(instr.pass) +
               (plan.splitBackward ? " in a plan with split backward passes"
                                   : " in a plan with unsplit backward "
                                     "passes"));
        if (!executed
                 .insert({int(instr.pass), instr.stage, instr.mb, instr.slice})
                 .second)
          fail(where + ": runs twice");
        bool first = instr.stage == 0;
        bool last = instr.stage + 1 == int(plan.stages.size());
        int64_t message = getMessageFloats(plan.model, s);
        checkSlot(instr.state,
                  stateFloats(plan, instr.stage, s, getForwardStateFloats),
                  "forward state");
        if (instr.pass != Pass::F)
          checkSlot(instr.wstate,
                    stateFloats(plan, instr.stage, s, getWeightStateFloats),
                    "weight state");
        if (instr.pass != Pass::W) {
          int64_t kv = 0;
          for (int layer : stage.layers)
            kv +=
                getKeyValueFloats(plan.model, plan.model.layers[layer], s.rows);
          checkSlot(instr.kv, kv, "key/value state");
          bool hasInput = instr.pass == Pass::F ? !first : !last;
          bool hasOutput = instr.pass == Pass::F ? !last : !first;
          checkSlot(instr.in, hasInput ? message : 0, "input");
          checkSlot(instr.out, hasOutput ? message : 0, "output");
        }
      } else {
        if (instr.peer < 0 || instr.peer >= plan.devices || instr.peer == d)
          fail(where + ": peer " + std::to_string(instr.peer) +
               " is not another device");
        if (instr.key < 0)
          fail(where + ": message key must be non-negative");
        checkSlot(instr.buffer, getMessageFloats(plan.model, s), "message");
        auto &table = instr.op == Op::Send ? sends : recvs;
        auto key = std::make_tuple(d, instr.peer, instr.key);
        if (!table.emplace(key, int(i)).second)
          fail(where + ": a second " +
               (instr.op == Op::Send ? "send" : "receive") + " of key " +
               std::to_string(instr.key));
      }
    }
  }
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
           " to device " + std::to_string(peer) + ", which never receives it");
  }
  // Every pass of every stage, microbatch and slice runs somewhere.
  size_t expected = plan.stages.size() * size_t(plan.microbatches) *
                    plan.slices.size() * (plan.splitBackward ? 3 : 2);
  if (executed.size() != expected)
    fail("the plan runs " + std::to_string(executed.size()) + " passes, " +
         std::to_string(expected) + " are needed");
}

} // namespace

SliceShape Plan::getSliceShape(int slice) const {
  int64_t offset = 0;
  for (int k = 0; k < slice; ++k)
    offset += slices[k];
  return {model.microBatch, slices[slice], offset};
}

std::string Plan::describe(const Instruction &instr) const {
  std::ostringstream os;
  os << (instr.op == Op::Exec   ? "exec "
         : instr.op == Op::Send ? "send "
                                : "recv ")
     << passName(instr.pass) << " of stage " << instr.stage << ", microbatch "
     << instr.mb << ", slice " << instr.slice;
  if (instr.op != Op::Exec)
    os << (instr.op == Op::Send ? " to device " : " from device ")
       << instr.peer;
  return os.str();
}

Status parsePlan(const std::string &textIn, const std::string &origin,
                 Plan &plan) {
  try {
    json j = json::parse(textIn);
    if (!j.is_object() || !j.contains("format") || j["format"] != "sluice-plan")
      fail("not a sluice plan (no \"format\": \"sluice-plan\")");
    int64_t version = integer(j, "version", "plan", 1);
    if (version != kPlanVersion)
      fail("plan version " + std::to_string(version) +
           " is not the version this runtime reads (" +
           std::to_string(kPlanVersion) +
           "); recompile it with this "
           "release's sluice-compile");
    plan = Plan();
    plan.model = readModel(field(j, "model", "plan"));
    plan.schedule = text(j, "schedule", "plan");
    plan.devices = int(integer(j, "devices", "plan", 1));
    plan.microbatches = int(integer(j, "microbatches", "plan", 1));
    plan.splitBackward = flag(j, "split_backward", "plan");
    for (const json &length : field(j, "slices", "plan")) {
      if (!length.is_number_integer() || length.get<int64_t>() < 1)
        fail("'slices' must be positive token lengths, got " + length.dump());
      plan.slices.push_back(length.get<int64_t>());
    }
    for (const json &s : field(j, "stages", "plan")) {
      StagePlan stage;
      stage.name = text(s, "name", "stage");
      std::string where = "stage " + stage.name;
      stage.device = int(integer(s, "device", where));
      stage.chunk = int(integer(s, "chunk", where));
      for (const json &layer : field(s, "layers", where))
        stage.layers.push_back(layer.get<int>());
      plan.stages.push_back(stage);
    }
    for (const json &p : field(j, "programs", "plan")) {
      DeviceProgram program;
      program.device = int(integer(p, "device", "program"));
      std::string where = "device " + std::to_string(program.device);
      for (const json &bytes : field(p, "buffers", where))
        program.buffers.push_back(bytes.get<int64_t>());
      const json &instrs = field(p, "instructions", where);
      for (size_t i = 0; i < instrs.size(); ++i) {
        const json &in = instrs[i];
        std::string at = where + ", instruction " + std::to_string(i);
        Instruction instr;
        std::string op = text(in, "op", at);
        instr.op = op == "exec"   ? Op::Exec
                   : op == "send" ? Op::Send
                   : op == "recv"
                       ? Op::Recv
                       : (fail(at + ": unknown op '" + op + "'"), Op::Exec);
        instr.pass = readPass(text(in, "pass", at), at);
        instr.stage = int32_t(integer(in, "stage", at));
        instr.mb = int32_t(integer(in, "mb", at));
        instr.slice = int32_t(integer(in, "slice", at));
        if (instr.op == Op::Exec) {
          instr.state = int32_t(integer(in, "state", at, -1));
          instr.wstate = int32_t(integer(in, "wstate", at, -1));
          instr.kv = int32_t(integer(in, "kv", at, -1));
          instr.in = int32_t(integer(in, "in", at, -1));
          instr.out = int32_t(integer(in, "out", at, -1));
        } else {
          instr.peer = int32_t(integer(in, "peer", at, -1));
          instr.key = integer(in, "key", at, -1);
          instr.buffer = int32_t(integer(in, "buffer", at, -1));
        }
        program.instructions.push_back(instr);
      }
      plan.programs.push_back(std::move(program));
    }
    validate(plan);
  } catch (const PlanError &e) {
    return Status::error(origin + ": " + e.message);
  } catch (const json::exception &e) {
    return Status::error(origin + ": malformed plan: " + e.what());
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
