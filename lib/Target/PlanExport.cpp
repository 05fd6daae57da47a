//===- PlanExport.cpp - Program level to plan.json ------------------------===//
//
// Written with llvm::json's streaming writer (the compiler is built without
// exceptions); the runtime reads the file with nlohmann-json. The schema is
// docs/plan-format.md; this file and runtime/Plan.cpp are its two ends,
// and the names and rules both spell are the plan format's
// (sluice/PlanFormat/Format.h).
//
//===----------------------------------------------------------------------===//

#include "sluice/Target/Plan.h"

#include "sluice/Analysis/CostModel.h"
#include "sluice/PipelineIR/PipelineIR.h"

#include "sluice/Blocks/Spec.h"
#include "sluice/PlanFormat/Format.h"
#include "sluice/PlanFormat/Repeats.h"

#include <nlohmann/json.hpp>
#include <numeric>

#include "llvm/Support/JSON.h"

using namespace mlir;
using namespace mlir::sluice;

/// The dialect's norm kind as the plan format's.
static rt::NormType toPlan(NormKind norm) {
  return norm == NormKind::rmsnorm ? rt::NormType::RmsNorm
                                   : rt::NormType::LayerNorm;
}

rt::ModelConfig mlir::sluice::getModelConfig(ModelOp model) {
  rt::ModelConfig config;
  config.name = model.getSymName().str();
  config.seqLen = model.getSeqLen();
  config.microBatch = model.getMicroBatch();
  config.hidden = model.getHidden();
  config.normEps = model.getNormEpsOrDefault();
  config.exactGelu = model.getExactGelu();
  config.embeddingScale = model.getEmbeddingScale().value_or(1.0);
  config.paddingToken = model.getPaddingToken().value_or(-1);
  config.maxPositions = model.getMaxPositions().value_or(0);
  config.attentionScale = model.getAttentionScale().value_or(0.0);
  config.attentionSoftcap = model.getAttentionSoftcap().value_or(0.0);
  config.finalSoftcap = model.getFinalSoftcap().value_or(0.0);
  if (std::optional<ArrayAttr> list = model.getUnmodelled())
    for (Attribute a : *list)
      config.unmodelled.push_back(cast<StringAttr>(a).str());
  // The final norm of a sharded output layer sits on the last stage.
  std::optional<NormKind> finalNorm;
  model.getBody().walk([&](FinalNormOp op) { finalNorm = op.getNorm(); });
  model.getBody().walk([&](Operation *op) {
    rt::LayerConfig layer;
    if (auto in = dyn_cast<VocabInputOp>(op)) {
      layer.kind = rt::LayerKind::Embedding;
      layer.vocab = in.getVocab();
      layer.positions = in.getPositions().value_or(0);
      layer.sharded = true;
    } else if (auto out = dyn_cast<VocabOutputOp>(op)) {
      layer.kind = rt::LayerKind::Output;
      layer.vocab = out.getVocab();
      layer.norm = toPlan(finalNorm.value_or(NormKind::layernorm));
      layer.tied = out.getTied();
      layer.sharded = true;
    } else if (auto e = dyn_cast<EmbeddingOp>(op)) {
      layer.kind = rt::LayerKind::Embedding;
      layer.vocab = e.getVocab();
      layer.positions = e.getPositions().value_or(0);
    } else if (auto t = dyn_cast<TransformerLayerOp>(op)) {
      // The op holds the spec itself; the plan states the head size.
      layer = t.getSpec();
      layer.headDim = t.getHeadDimOrDefault();
    } else if (auto o = dyn_cast<OutputLayerOp>(op)) {
      layer.kind = rt::LayerKind::Output;
      layer.vocab = o.getVocab();
      layer.norm = toPlan(o.getNorm());
      layer.tied = o.getTied();
    } else {
      return;
    }
    config.layers.push_back(layer);
  });
  return config;
}

std::vector<std::vector<int>>
mlir::sluice::getStageLayerIndices(ModelOp model) {
  bool shardedInput = !model.getBody().getOps<VocabInputOp>().empty();
  std::vector<std::vector<int>> indices;
  int next = 0;
  for (StageOp stage : getStages(model)) {
    std::vector<int> layers;
    // The sharded embedding's positions are added on the first stage.
    if (shardedInput && indices.empty())
      layers.push_back(next++);
    for (size_t i = 0, e = stage.getLayers().size(); i < e; ++i)
      layers.push_back(next++);
    indices.push_back(std::move(layers));
  }
  return indices;
}

std::vector<int64_t> mlir::sluice::getSliceLengths(ProgramOp program,
                                                   ModelOp model) {
  SmallVector<int64_t> lengths = model.getSliceLengths(program.getSlices());
  return std::vector<int64_t>(lengths.begin(), lengths.end());
}

FailureOr<rt::Precision> mlir::sluice::getPrecision(ModelOp model) {
  Type dtype = model.getDtype();
  if (dtype.isBF16())
    return rt::Precision::bf16();
  if (dtype.isF32())
    return rt::Precision::fp32();
  return model.emitOpError("dtype ")
         << dtype
         << " has no runtime precision: plans train in bf16 or f32 "
            "(sluice-compile --precision bf16|fp32)";
}

namespace {
/// Writes one program's plan: a section per method, in the file's order
/// (docs/plan-format.md). Every name the file spells (passes, ops,
/// shards, recomputation, layer kinds) comes from the plan format
/// (sluice/PlanFormat/Format.h), which the runtime reads with.
class PlanWriter {
public:
  PlanWriter(ProgramOp program, ModelOp model, llvm::raw_ostream &os,
             bool repeats)
      : program(program), model(model), repeats(repeats),
        stages(getStages(model)),
        shards(getShardNames(model)), json(os, 1) {
    for (auto [i, stage] : llvm::enumerate(stages))
      stageIndex[stage.getSymName()] = int(i);
  }

  void write(const rt::Precision &precision) {
    json.object([&] {
      json.attribute("format", "sluice-plan");
      json.attribute("version", rt::kPlanVersion);
      json.attribute("precision", precision.getName());
      json.attributeObject("model", [&] { writeModel(); });
      json.attribute("schedule", stringifyScheduleKind(program.getSchedule()));
      json.attribute("devices", program.getDevices());
      json.attributeObject("mesh", [&] { writeMesh(); });
      json.attribute("microbatches", program.getMicrobatches());
      json.attributeArray("slices", [&] {
        for (int64_t length : getSliceLengths(program, model))
          json.value(length);
      });
      json.attribute("split_backward", isSplit());
      json.attributeArray("stages", [&] { writeStages(); });
      json.attributeObject("vocabulary", [&] { writeVocabulary(); });
      json.attributeArray("programs", [&] {
        for (DeviceOp device : program.getBody().getOps<DeviceOp>())
          json.object([&] { writeDevice(device); });
      });
    });
  }

private:
  bool isSplit() {
    std::optional<ArrayAttr> passes = stages.front().getPasses();
    return passes && llvm::any_of(*passes, [](Attribute a) {
             return cast<PassKindAttr>(a).getValue() == PassKind::B;
           });
  }

  void writeModel() {
    rt::ModelConfig config = getModelConfig(model);
    json.attribute("name", config.name);
    json.attribute("seq_len", config.seqLen);
    json.attribute("micro_batch", config.microBatch);
    json.attribute("hidden", config.hidden);
    json.attribute("norm_eps", config.normEps);
    json.attribute("gelu", config.exactGelu ? "erf" : "tanh");
    if (config.embeddingScale != 1.0)
      json.attribute("embedding_scale", config.embeddingScale);
    if (config.paddingToken >= 0)
      json.attribute("padding_token", config.paddingToken);
    if (config.maxPositions > 0)
      json.attribute("max_positions", config.maxPositions);
    if (config.attentionScale > 0)
      json.attribute("attention_scale", config.attentionScale);
    if (config.attentionSoftcap > 0)
      json.attribute("attention_softcap", config.attentionSoftcap);
    if (config.finalSoftcap > 0)
      json.attribute("final_softcap", config.finalSoftcap);
    if (!config.unmodelled.empty())
      json.attributeArray("unmodelled", [&] {
        for (const std::string &what : config.unmodelled)
          json.value(what);
      });
    json.attributeArray("layers", [&] {
      // Each layer's fields as the block spec writes them (lib/Blocks),
      // which the runtime reads back with the same table.
      for (const rt::LayerConfig &l : config.layers)
        writeJson(::sluice::blocks::writeLayer(l));
    });
  }

  /// A value the block spec wrote (nlohmann-json), through this writer so
  /// that the file keeps one layout.
  void writeJson(const nlohmann::ordered_json &value) {
    if (value.is_object()) {
      json.object([&] {
        for (const auto &item : value.items()) {
          json.attributeBegin(item.key());
          writeJson(item.value());
          json.attributeEnd();
        }
      });
    } else if (value.is_array()) {
      json.array([&] {
        for (const auto &item : value)
          writeJson(item);
      });
    } else if (value.is_boolean()) {
      json.value(value.get<bool>());
    } else if (value.is_number_integer()) {
      json.value(value.get<int64_t>());
    } else if (value.is_number()) {
      json.value(value.get<double>());
    } else if (value.is_string()) {
      json.value(value.get<std::string>());
    } else {
      json.value(nullptr);
    }
  }

  /// Version 4: the device mesh; ranks = devices x tp x dp.
  void writeMesh() {
    json.attribute("pp", program.getDevices());
    json.attribute("tp", program.getTp());
    json.attribute("dp", program.getDp());
    if (program.getCp() != 1)
      json.attribute("cp", program.getCp());
    if (program.getZero() != 0)
      json.attribute("zero", program.getZero());
    if (program.getZero() == 3)
      json.attribute("reshard", ::sluice::rt::getReshardName(
                                    program.getReshardPerStep()
                                        ? ::sluice::rt::Reshard::Step
                                        : ::sluice::rt::Reshard::EveryPass));
    if (program.getEp() != 1)
      json.attribute("ep", program.getEp());
    if (std::optional<double> capacity = program.getExpertCapacity())
      json.attribute("expert_capacity", *capacity);
    if (program.getSequenceParallel())
      json.attribute("sequence_parallel", true);
  }

  void writeStages() {
    std::vector<std::vector<int>> layerIndices = getStageLayerIndices(model);
    for (size_t i = 0; i < stages.size(); ++i)
      json.object([&] {
        StageOp stage = stages[i];
        json.attribute("name", stage.getSymName());
        json.attribute("device", stage.getDevice());
        json.attribute("chunk", stage.getChunk());
        if (std::optional<RecomputeKind> r = stage.getRecompute();
            r && *r != RecomputeKind::none)
          json.attribute("recompute", stringifyRecomputeKind(*r));
        json.attributeArray("layers", [&] {
          for (int layer : layerIndices[i])
            json.value(layer);
        });
      });
  }

  /// The vocabulary shards: sizes, roots and the output shard's form.
  void writeVocabulary() {
    bool synchronous = false;
    for (auto in : model.getBody().getOps<VocabInputOp>()) {
      synchronous |= in.getSynchronous();
      json.attributeObject("input", [&] {
        json.attribute("name", in.getSymName());
        json.attribute("vocab", in.getVocab());
        json.attribute("padded_vocab", in.getPaddedVocab());
        json.attribute("root", in.getRoot());
      });
    }
    for (auto out : model.getBody().getOps<VocabOutputOp>()) {
      synchronous |= out.getSynchronous();
      json.attributeObject("output", [&] {
        json.attribute("name", out.getSymName());
        json.attribute("vocab", out.getVocab());
        json.attribute("padded_vocab", out.getPaddedVocab());
        json.attribute("root", out.getRoot());
        json.attribute("algorithm", int64_t(out.getAlgorithm()));
        json.attribute("barriers", out.getBarriers());
      });
    }
    json.attribute("synchronous", synchronous);
  }

  void writeDevice(DeviceOp device) {
    json.attribute("device", device.getIndex());
    ArrayRef<int64_t> buffers =
        device.getBuffers().value_or(ArrayRef<int64_t>());
    json.attributeArray("buffers", [&] {
      for (int64_t bytes : buffers)
        json.value(bytes);
    });
    json.attributeArray("instructions", [&] {
      // Plain instructions between the program's repeat blocks.
      SmallVector<Operation *> plain;
      auto flush = [&] {
        writePlain(plain, int64_t(buffers.size()));
        plain.clear();
      };
      for (Operation &op : device.getBody().front()) {
        auto repeat = dyn_cast<RepeatOp>(op);
        if (!repeat) {
          plain.push_back(&op);
          continue;
        }
        flush();
        if (repeats)
          writeRepeat(repeat);
        else
          writeRuns(repeat, int64_t(buffers.size()));
      }
      flush();
    });
  }

  /// A stretch of plain instructions: version 9 finds its periodic
  /// stretches as repeat blocks (sluice/PlanFormat/Repeats.h) -- a program
  /// the schedule wrote without sluice.repeat, or whose blocks the buffer
  /// planner wrote out -- unless every instruction is asked for.
  void writePlain(ArrayRef<Operation *> ops, int64_t numSlots) {
    std::vector<rt::RepeatBlock> blocks;
    if (repeats) {
      std::vector<rt::RepeatFields> rows;
      rows.reserve(ops.size());
      for (Operation *op : ops)
        rows.push_back(getRepeatFields(*op));
      blocks = rt::findRepeats(rows, numSlots);
    }
    size_t next = 0;
    auto literal = [&](size_t end) {
      for (; next < end; ++next)
        writeInstructionLine(*ops[next]);
    };
    for (const rt::RepeatBlock &block : blocks) {
      literal(block.begin);
      writeBlock(block.count, block.mbStep, block.keyStep, block.slotMap,
                 ops.slice(block.begin, block.length));
      next = block.begin + block.length * block.count;
    }
    literal(ops.size());
  }

  /// A sluice.repeat as the plan's repeat block: the same runs. A message
  /// key steps with its microbatch (keyOf), by mb_step x slices.
  void writeRepeat(RepeatOp repeat) {
    SmallVector<Operation *> body = llvm::map_to_vector(
        repeat.getBody().front(), [](Operation &op) { return &op; });
    bool messages = llvm::any_of(
        body, [](Operation *op) { return isa<SendOp, RecvOp>(op); });
    int64_t step = repeat.getMbStep();
    writeBlock(repeat.getCount(), step,
               messages ? step * program.getSlices() : 0,
               repeat.getSlotMap(), body);
  }

  void writeBlock(int64_t count, int64_t mbStep, int64_t keyStep,
                  ArrayRef<std::pair<int64_t, int64_t>> slotMap,
                  ArrayRef<Operation *> body) {
    json.object([&] {
      json.attribute("repeat", count);
      json.attribute("mb_step", mbStep);
      json.attribute("key_step", keyStep);
      json.attributeBegin("slots");
      json.rawValue([&](llvm::raw_ostream &os) {
        llvm::json::OStream line(os);
        line.array([&] {
          for (const std::pair<int64_t, int64_t> &entry : slotMap)
            line.array([&] {
              line.value(entry.first);
              line.value(entry.second);
            });
        });
      });
      json.attributeEnd();
      json.attributeArray("body", [&] {
        for (Operation *op : body)
          writeInstructionLine(*op);
      });
    });
  }

  /// A sluice.repeat's runs written out (--expand-plan): run i's
  /// microbatches stepped i times, its slots mapped i times.
  void writeRuns(RepeatOp repeat, int64_t numSlots) {
    llvm::DenseMap<int64_t, int64_t> map;
    for (auto [from, to] : repeat.getSlotMap())
      map[from] = to;
    runSlots.resize(size_t(std::max<int64_t>(numSlots, 0)));
    std::iota(runSlots.begin(), runSlots.end(), int64_t(0));
    for (int64_t run = 0; run < repeat.getCount(); ++run) {
      runMb = run * repeat.getMbStep();
      for (Operation &op : repeat.getBody().front())
        writeInstructionLine(op);
      for (int64_t &slot : runSlots)
        if (auto it = map.find(slot); it != map.end())
          slot = it->second;
    }
    runMb = 0;
    runSlots.clear();
  }

  /// One instruction, on a line of its own: the file stays readable a
  /// line per instruction, at a third of the indented size.
  void writeInstructionLine(Operation &op) {
    json.rawValue([&](llvm::raw_ostream &os) {
      llvm::json::OStream line(os);
      line.object([&] { writeInstruction(line, op); });
    });
  }

  /// A send's or receive's fields for a repeat block.
  template <typename MessageOp>
  void messageFields(rt::RepeatFields &row, rt::Op opKind, MessageOp m,
                     int64_t peer) {
    row.fixed = {int64_t(opKind), int64_t(m.getKind()),
                 stageIndex.lookup(m.getStage()), m.getSlice(), peer,
                 int64_t(m.getStream())};
    row.mb = m.getMb();
    row.key = keyOf(m.getKind(), m.getStage(), m.getMb(), m.getSlice());
    row.slots.back() = slot(m.getBuffer());
  }

  /// What a repeat block compares of `op`: everything it writes, with the
  /// microbatch, key and slots apart (they step from run to run).
  rt::RepeatFields getRepeatFields(Operation &op) {
    rt::RepeatFields row;
    auto stageOrShard = [&](StringRef name) -> int64_t {
      if (name == shards.input)
        return -2;
      if (name == shards.output)
        return -3;
      return stageIndex.lookup(name);
    };
    if (auto g = dyn_cast<GradSyncOp>(op)) {
      row.fixed = {int64_t(rt::Op::GradSync), stageOrShard(g.getStage())};
    } else if (auto c = dyn_cast<CollectiveInstrOp>(op)) {
      row.fixed = {int64_t(rt::Op::Collective), stageOrShard(c.getShard()),
                   c.getGroup(), c.getSlice(), int64_t(c.getStream())};
      row.mb = c.getMb();
    } else if (auto e = dyn_cast<ExecOp>(op)) {
      row.fixed = {int64_t(rt::Op::Exec), int64_t(e.getKind()),
                   stageOrShard(e.getStage()), e.getSlice(),
                   e.getRstate().has_value(), int64_t(e.getPaired())};
      row.mb = e.getMb();
      row.slots = {slot(e.getState()), slot(e.getWstate()), slot(e.getKv()),
                   slot(e.getIn()),    slot(e.getOut()),    slot(e.getRstate()),
                   -1};
    } else if (auto s = dyn_cast<SendOp>(op)) {
      messageFields(row, rt::Op::Send, s, s.getTo());
    } else if (auto r = dyn_cast<RecvOp>(op)) {
      messageFields(row, rt::Op::Recv, r, r.getFrom());
    } else {
      // Not an instruction the file has: never part of a block.
      row.fixed = {-1, int64_t(reinterpret_cast<uintptr_t>(&op))};
    }
    return row;
  }

  const char *shardOf(StringRef name) {
    return rt::shardName(name == shards.input ? rt::Shard::Input
                                              : rt::Shard::Output);
  }
  const char *passOf(PassKind kind) {
    return rt::passName(sched::toPlanPass(kind));
  }
  /// A message's key: the work it carries, numbered densely. Unique within
  /// a step, so it can be the transport's tag.
  int64_t keyOf(PassKind kind, StringRef stage, int64_t mb, int64_t slice) {
    int64_t numStages = int64_t(stages.size());
    return ((int64_t(kind) * numStages + stageIndex.lookup(stage)) *
                program.getMicrobatches() +
            mb) *
               program.getSlices() +
           slice;
  }
  /// The fields every stage instruction has.
  void writeStageWork(llvm::json::OStream &json, rt::Op opKind, PassKind kind,
                      StringRef stage, int64_t mb, int64_t slice) {
    json.attribute("op", rt::opName(opKind));
    json.attribute("pass", passOf(kind));
    json.attribute("stage", stageIndex.lookup(stage));
    json.attribute("mb", mb);
    json.attribute("slice", slice);
  }
  template <typename MessageOp>
  void writeMessage(llvm::json::OStream &json, rt::Op opKind, MessageOp m,
                    int64_t peer) {
    writeStageWork(json, opKind, m.getKind(), m.getStage(), mbOf(m.getMb()), m.getSlice());
    json.attribute("peer", peer);
    json.attribute("key",
                   keyOf(m.getKind(), m.getStage(), mbOf(m.getMb()), m.getSlice()));
    json.attribute("buffer", slot(m.getBuffer()));
    json.attribute("stream", stringifyStreamKind(m.getStream()));
  }
  /// A slot as the plan writes it: -1 for a role the pass does not have;
  /// in a run writeRuns writes out, mapped as the run maps it.
  int64_t slot(std::optional<int64_t> index) const {
    int64_t value = index.value_or(-1);
    if (value >= 0 && size_t(value) < runSlots.size())
      return runSlots[size_t(value)];
    return value;
  }
  /// A microbatch as the plan writes it (stepped in writeRuns' runs).
  int64_t mbOf(int64_t mb) const { return mb + runMb; }

  void writeInstruction(llvm::json::OStream &json, Operation &op) {
    if (auto g = dyn_cast<GradSyncOp>(op)) {
      json.attribute("op", rt::opName(rt::Op::GradSync));
      StringRef name = g.getStage();
      if (name == shards.input || name == shards.output)
        json.attribute("shard", shardOf(name));
      else
        json.attribute("stage", stageIndex.lookup(name));
    } else if (auto c = dyn_cast<CollectiveInstrOp>(op)) {
      json.attribute("op", rt::opName(rt::Op::Collective));
      json.attribute("shard", shardOf(c.getShard()));
      json.attribute("group", c.getGroup());
      json.attribute("mb", mbOf(c.getMb()));
      json.attribute("slice", c.getSlice());
      json.attribute("blocking", c.getStream() == StreamKind::compute);
    } else if (auto e = dyn_cast<ExecOp>(op);
               e && sched::isVocabPass(e.getKind())) {
      json.attribute("op", rt::opName(rt::Op::Exec));
      json.attribute("pass", passOf(e.getKind()));
      json.attribute("shard", shardOf(e.getStage()));
      json.attribute("mb", mbOf(e.getMb()));
      json.attribute("slice", e.getSlice());
    } else if (e) {
      writeStageWork(json, rt::Op::Exec, e.getKind(), e.getStage(), mbOf(e.getMb()),
                     e.getSlice());
      json.attribute("state", slot(e.getState()));
      json.attribute("wstate", slot(e.getWstate()));
      json.attribute("kv", slot(e.getKv()));
      json.attribute("in", slot(e.getIn()));
      json.attribute("out", slot(e.getOut()));
      // Version 5: a recomputing stage's recomputed state.
      if (e.getRstate())
        json.attribute("rstate", slot(e.getRstate()));
      // An overlapped group's members but the last (dualpipev).
      if (e.getPaired())
        json.attribute("paired", true);
    } else if (auto s = dyn_cast<SendOp>(op)) {
      writeMessage(json, rt::Op::Send, s, s.getTo());
    } else if (auto r = dyn_cast<RecvOp>(op)) {
      writeMessage(json, rt::Op::Recv, r, r.getFrom());
    }
  }

  ProgramOp program;
  ModelOp model;
  bool repeats;
  /// The run writeRuns writes: its microbatch offset and each slot's
  /// image (empty: none).
  int64_t runMb = 0;
  std::vector<int64_t> runSlots;
  SmallVector<StageOp> stages;
  ShardNames shards;
  llvm::json::OStream json;
  llvm::StringMap<int> stageIndex;
};
} // namespace

LogicalResult mlir::sluice::exportPlan(ProgramOp program, llvm::raw_ostream &os,
                                       bool fp8Gemms, bool repeats) {
  auto module = program->getParentOfType<ModuleOp>();
  auto model = module.lookupSymbol<ModelOp>(program.getModelAttr());
  if (!model)
    return program.emitOpError("refers to @")
           << program.getModel() << ", which is not a sluice.model";
  for (DeviceOp device : program.getBody().getOps<DeviceOp>())
    if (!device.getBuffers())
      return program.emitOpError(
          "has no buffers: run sluice-plan-buffers before exporting a plan");
  FailureOr<rt::Precision> precision = getPrecision(model);
  if (failed(precision))
    return failure();
  if (fp8Gemms) {
    if (!precision->isMixed())
      return model.emitOpError("dtype ")
             << model.getDtype()
             << " cannot take FP8 GEMMs: fp8 plans keep bf16 activations";
    precision->fp8Gemms = true;
  }
  PlanWriter(program, model, os, repeats).write(*precision);
  os << "\n";
  return success();
}
