//===- PipelineIR.cpp - Between the program level and sched:: -------------===//

#include "sluice/PipelineIR/PipelineIR.h"

#include "sluice/PlanFormat/Repeats.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"

using namespace mlir;
using namespace mlir::sluice;
using namespace mlir::sluice::sched;

FailureOr<ModelOp> mlir::sluice::getSingleModel(ModuleOp module) {
  auto models = llvm::to_vector(module.getOps<ModelOp>());
  if (models.size() == 1)
    return models.front();
  module.emitError("expected exactly one sluice.model, found ")
      << models.size();
  return failure();
}

FailureOr<Pipeline>
mlir::sluice::getPipeline(ModelOp model, int64_t microbatches, int64_t slices) {
  SmallVector<StageOp> stages = getStages(model);
  if (stages.empty()) {
    model.emitOpError("is not partitioned into stages: run "
                      "sluice-partition-stages first");
    return failure();
  }
  Pipeline pipeline;
  pipeline.microbatches = static_cast<int>(microbatches);
  pipeline.slices = static_cast<int>(slices);
  std::optional<bool> split;
  for (StageOp stage : stages) {
    std::optional<ArrayAttr> passes = stage.getPasses();
    if (!passes) {
      stage.emitOpError("has no passes: run sluice-split-passes first");
      return failure();
    }
    bool hasB = llvm::any_of(*passes, [](Attribute a) {
      return cast<PassKindAttr>(a).getValue() == PassKind::B;
    });
    if (split && *split != hasB) {
      stage.emitOpError("splits its backward differently from stage @")
          << stages.front().getSymName()
          << ": every stage must run F, B, W or every stage F, BW";
      return failure();
    }
    split = hasB;
    pipeline.stages.push_back({static_cast<int>(stage.getDevice()),
                               static_cast<int>(stage.getChunk())});
    pipeline.devices =
        std::max(pipeline.devices, static_cast<int>(stage.getDevice()) + 1);
    pipeline.chunks =
        std::max(pipeline.chunks, static_cast<int>(stage.getChunk()) + 1);
  }
  pipeline.splitBackward = *split;

  // Sharded vocabulary layers (sluice-partition-vocab, split by
  // sluice-split-passes).
  for (Operation &op : model.getBody().front()) {
    auto requirePasses = [&](std::optional<ArrayAttr> passes,
                             ArrayRef<PassKind> expected) -> LogicalResult {
      if (!passes)
        return op.emitOpError("has no passes: run sluice-split-passes first");
      SmallVector<PassKind> have;
      for (Attribute a : *passes)
        have.push_back(cast<PassKindAttr>(a).getValue());
      if (ArrayRef<PassKind>(have) != expected)
        return op.emitOpError("'passes' do not match its form: expected ")
               << llvm::join(llvm::map_range(expected,
                                             [](PassKind k) {
                                               return stringifyPassKind(k);
                                             }),
                             ", ");
      return success();
    };
    // A shard spans every device and is rooted where its end of the
    // chain is.
    auto requireSpan = [&](Operation *shard, int64_t devices, int64_t root,
                           StringRef end, int64_t expected) -> LogicalResult {
      if (devices == pipeline.devices && root == expected)
        return success();
      return shard->emitOpError("is sharded over ")
             << devices << " devices rooted at device " << root
             << ", but the stages span " << pipeline.devices
             << " devices and the " << end << " one is on device " << expected;
    };
    if (auto out = dyn_cast<VocabOutputOp>(op)) {
      pipeline.vocab.output = true;
      pipeline.vocab.algorithm = static_cast<int>(out.getAlgorithm());
      pipeline.vocab.synchronous |= out.getSynchronous();
      if (failed(requireSpan(out, out.getDevices(), out.getRoot(), "last",
                             pipeline.getOutputRoot())))
        return failure();
      if (failed(
              requirePasses(out.getPasses(), pipeline.vocab.getOutputPasses())))
        return failure();
    } else if (auto in = dyn_cast<VocabInputOp>(op)) {
      pipeline.vocab.input = true;
      pipeline.vocab.synchronous |= in.getSynchronous();
      if (failed(requireSpan(in, in.getDevices(), in.getRoot(), "first",
                             pipeline.getInputRoot())))
        return failure();
      if (failed(requirePasses(in.getPasses(), {PassKind::IF, PassKind::IB})))
        return failure();
    }
  }
  return pipeline;
}

ShardNames mlir::sluice::getShardNames(ModelOp model) {
  ShardNames names;
  for (Operation &op : model.getBody().front()) {
    if (auto out = dyn_cast<VocabOutputOp>(op))
      names.output = out.getSymName();
    else if (auto in = dyn_cast<VocabInputOp>(op))
      names.input = in.getSymName();
  }
  return names;
}

FailureOr<ModelOp> mlir::sluice::getProgramModel(ProgramOp program) {
  auto module = program->getParentOfType<ModuleOp>();
  auto model =
      module ? module.lookupSymbol<ModelOp>(program.getModelAttr()) : ModelOp();
  if (!model) {
    program.emitOpError("refers to @")
        << program.getModel() << ", which is not a sluice.model";
    return failure();
  }
  return model;
}

FailureOr<ProgramView> mlir::sluice::readProgram(ProgramOp program,
                                                 ModelOp model) {
  llvm::StringMap<int> stageIndex;
  for (auto [i, stage] : llvm::enumerate(getStages(model)))
    stageIndex[stage.getSymName()] = static_cast<int>(i);
  ShardNames shards = getShardNames(model);

  ProgramView view;
  int64_t devices = program.getDevices();
  view.program.devices.resize(devices);
  view.ops.resize(devices);
  view.devices.resize(devices);
  view.repeats.resize(devices);
  // One instruction, or none for an op the program level does not run
  // (a gradient sync).
  auto read = [&](Operation &op, int d) -> FailureOr<std::optional<Instr>> {
    Instr instr;
    StringRef stageName;
    auto fill = [&](auto typed, InstrKind kind, int64_t peer) {
      instr.kind = kind;
      instr.work = {typed.getKind(), 0, static_cast<int32_t>(typed.getMb()),
                    static_cast<int32_t>(typed.getSlice())};
      instr.peer = static_cast<int32_t>(peer);
      stageName = typed.getStage();
    };
    if (auto coll = dyn_cast<CollectiveInstrOp>(op)) {
      StringRef shard = coll.getShard();
      if (shard.empty() || (shard != shards.input && shard != shards.output))
        return op.emitOpError("names @")
               << shard << ", which is not a vocabulary shard of model @"
               << model.getSymName();
      instr.kind = InstrKind::Collective;
      instr.collective = {shard == shards.input ? sched::ShardKind::Input
                                                : sched::ShardKind::Output,
                          static_cast<int32_t>(coll.getGroup()),
                          static_cast<int32_t>(coll.getMb()),
                          static_cast<int32_t>(coll.getSlice())};
      instr.blocking = coll.getStream() == StreamKind::compute;
      return std::optional(instr);
    }
    if (auto exec = dyn_cast<ExecOp>(op)) {
      fill(exec, InstrKind::Exec, -1);
      instr.paired = exec.getPaired();
    } else if (auto send = dyn_cast<SendOp>(op))
      fill(send, InstrKind::Send, send.getTo());
    else if (auto recv = dyn_cast<RecvOp>(op))
      fill(recv, InstrKind::Recv, recv.getFrom());
    else
      return std::optional<Instr>();
    if (sched::isVocabPass(instr.work.kind)) {
      // A shard pass names its shard and runs on this device (or, sent
      // or received, on the peer that produces it).
      bool input =
          instr.work.kind == PassKind::IF || instr.work.kind == PassKind::IB;
      StringRef expected = input ? shards.input : shards.output;
      if (expected.empty() || stageName != expected)
        return op.emitOpError("runs pass ")
               << stringifyPassKind(instr.work.kind) << " of @" << stageName
               << ", which is not the model's "
               << (input ? "input" : "output") << " vocabulary shard";
      instr.work.stage = instr.kind == InstrKind::Recv ? instr.peer : d;
      return std::optional(instr);
    }
    auto it = stageIndex.find(stageName);
    if (it == stageIndex.end())
      return op.emitOpError("names stage @")
             << stageName << ", which model @" << model.getSymName()
             << " does not have";
    instr.work.stage = it->second;
    return std::optional(instr);
  };
  size_t total = 0;
  for (DeviceOp device : program.getBody().getOps<DeviceOp>()) {
    int d = static_cast<int>(device.getIndex());
    view.devices[d] = device;
    std::vector<Instr> &instrs = view.program.devices[d];
    std::vector<Operation *> &ops = view.ops[d];
    auto append = [&](Operation &op) -> LogicalResult {
      FailureOr<std::optional<Instr>> instr = read(op, d);
      if (failed(instr))
        return failure();
      if (*instr) {
        instrs.push_back(**instr);
        ops.push_back(&op);
      }
      return success();
    };
    for (Operation &op : device.getBody().front()) {
      auto repeat = dyn_cast<RepeatOp>(op);
      if (!repeat) {
        if (failed(append(op)))
          return failure();
        continue;
      }
      // The body once, then its later runs from it.
      ProgramView::Repeat block{repeat, instrs.size(), 0, repeat.getCount()};
      for (Operation &inner : repeat.getBody().front())
        if (failed(append(inner)))
          return failure();
      block.length = instrs.size() - block.begin;
      if (block.length * size_t(block.count) + total > kMaxReadInstructions)
        return repeat.emitOpError("runs ")
               << block.count << " times " << block.length
               << " instructions: the program would hold more than "
               << kMaxReadInstructions << " instructions";
      for (int64_t run = 1; run < block.count; ++run) {
        auto step = static_cast<int32_t>(run * repeat.getMbStep());
        for (size_t i = 0; i < block.length; ++i) {
          Instr instr = instrs[block.begin + i];
          if (instr.kind == InstrKind::Collective)
            instr.collective.microbatch += step;
          else
            instr.work.microbatch += step;
          instrs.push_back(instr);
          ops.push_back(ops[block.begin + i]);
        }
      }
      view.repeats[d].push_back(block);
    }
    total += instrs.size();
    if (total > kMaxReadInstructions)
      return device.emitOpError("takes the program past ")
             << kMaxReadInstructions << " instructions";
  }
  return view;
}

/// The names of the slot attributes an instruction may carry (ODS:
/// sluice.exec's roles, a message's buffer).
static constexpr llvm::StringLiteral kSlotNames[] = {
    "state", "wstate", "rstate", "kv", "in", "out", "buffer"};

SmallVector<Operation *> mlir::sluice::cloneRun(OpBuilder &builder,
                                                RepeatOp repeat, int64_t run) {
  // The slot map applied `run` times, on the slots the body names.
  llvm::DenseMap<int64_t, int64_t> map;
  for (auto [from, to] : repeat.getSlotMap())
    map[from] = to;
  auto mapped = [&](int64_t slot) {
    for (int64_t i = 0; i < run; ++i)
      if (auto it = map.find(slot); it != map.end())
        slot = it->second;
    return slot;
  };
  SmallVector<Operation *> ops;
  for (Operation &op : repeat.getBody().front()) {
    Operation *copy = builder.clone(op);
    if (auto mb = copy->getAttrOfType<IntegerAttr>("mb"))
      copy->setAttr("mb", builder.getI64IntegerAttr(
                              mb.getInt() + run * repeat.getMbStep()));
    for (StringRef name : kSlotNames)
      if (auto slot = copy->getAttrOfType<IntegerAttr>(name))
        copy->setAttr(name, builder.getI64IntegerAttr(mapped(slot.getInt())));
    ops.push_back(copy);
  }
  return ops;
}

void mlir::sluice::expandRepeat(RepeatOp repeat) {
  OpBuilder builder(repeat);
  for (int64_t run = 0; run < repeat.getCount(); ++run)
    cloneRun(builder, repeat, run);
  repeat.erase();
}

void mlir::sluice::peelLastRun(RepeatOp repeat) {
  if (repeat.getCount() <= 2)
    return expandRepeat(repeat);
  OpBuilder builder(repeat.getContext());
  builder.setInsertionPointAfter(repeat);
  cloneRun(builder, repeat, repeat.getCount() - 1);
  repeat.setCount(repeat.getCount() - 1);
}

/// The stretches of a device's instructions that repeat with a positive
/// microbatch step (sluice.repeat's), found as the plan writer finds its
/// repeat blocks -- here without buffer slots, which come later.
static std::vector<rt::RepeatBlock>
findRepeatBlocks(const std::vector<Instr> &instrs) {
  std::vector<rt::RepeatFields> rows;
  rows.reserve(instrs.size());
  for (const Instr &instr : instrs) {
    rt::RepeatFields row;
    if (instr.kind == InstrKind::Collective) {
      const sched::CollectiveId &c = instr.collective;
      row.fixed = {int64_t(instr.kind), int64_t(c.shard), c.group, c.slice,
                   instr.blocking};
      row.mb = c.microbatch;
    } else if (instr.kind == InstrKind::GradSync) {
      row.fixed = {-1}; // never repeated: not an instruction written here
      row.fixed[1] = int64_t(rows.size());
    } else {
      const Work &w = instr.work;
      row.fixed = {int64_t(instr.kind), int64_t(w.kind), w.stage, w.slice,
                   instr.peer};
      row.mb = w.microbatch;
    }
    rows.push_back(row);
  }
  std::vector<rt::RepeatBlock> blocks = rt::findRepeats(rows, 0);
  llvm::erase_if(blocks,
                 [](const rt::RepeatBlock &b) { return b.mbStep < 1; });
  return blocks;
}

ProgramOp mlir::sluice::writeProgram(ModelOp model, StringRef name,
                                     ScheduleKind schedule,
                                     const Pipeline &pipeline,
                                     const Program &program, bool repeats) {
  OpBuilder builder(model.getContext());
  builder.setInsertionPointAfter(model);
  Location loc = model.getLoc();
  SmallVector<StringRef> stageNames;
  for (StageOp stage : getStages(model))
    stageNames.push_back(stage.getSymName());
  ShardNames shards = getShardNames(model);
  auto nameOf = [&](const Work &w) {
    if (!sched::isVocabPass(w.kind))
      return stageNames[w.stage];
    return w.kind == PassKind::IF || w.kind == PassKind::IB ? shards.input
                                                            : shards.output;
  };
  // Every attribute an instruction takes, made once: a deep pipeline has
  // hundreds of thousands of instructions and a handful of distinct
  // stages, kinds and numbers, and uniquing each anew (hashing the stage's
  // name) was most of this function.
  MLIRContext *context = model.getContext();
  llvm::StringMap<FlatSymbolRefAttr> stageAttrs;
  auto stageAttr = [&](const Work &w) {
    FlatSymbolRefAttr &attr = stageAttrs[nameOf(w)];
    if (!attr)
      attr = FlatSymbolRefAttr::get(context, nameOf(w));
    return attr;
  };
  std::vector<PassKindAttr> kindAttrs;
  auto kindAttr = [&](PassKind kind) {
    size_t at = size_t(kind);
    if (at >= kindAttrs.size())
      kindAttrs.resize(at + 1);
    if (!kindAttrs[at])
      kindAttrs[at] = PassKindAttr::get(context, kind);
    return kindAttrs[at];
  };
  std::vector<IntegerAttr> numbers;
  auto number = [&](int64_t value) {
    if (value < 0 || value >= (int64_t(1) << 24))
      return builder.getI64IntegerAttr(value);
    if (size_t(value) >= numbers.size())
      numbers.resize(size_t(value) + 1);
    if (!numbers[size_t(value)])
      numbers[size_t(value)] = builder.getI64IntegerAttr(value);
    return numbers[size_t(value)];
  };
  auto comm = StreamKindAttr::get(context, StreamKind::comm);

  auto emit = [&](const Instr &instr) {
    const Work &w = instr.work;
    switch (instr.kind) {
    case InstrKind::Collective: {
      const sched::CollectiveId &c = instr.collective;
      CollectiveInstrOp::create(
          builder, loc,
          c.shard == sched::ShardKind::Input ? shards.input : shards.output,
          c.group, c.microbatch, c.slice,
          instr.blocking ? StreamKind::compute : StreamKind::vocab);
      return;
    }
    case InstrKind::GradSync:
      return;
    case InstrKind::Exec:
      ExecOp::create(builder, loc, kindAttr(w.kind), stageAttr(w),
                     number(w.microbatch), number(w.slice),
                     /*state=*/nullptr, /*wstate=*/nullptr,
                     /*rstate=*/nullptr, /*kv=*/nullptr, /*in=*/nullptr,
                     /*out=*/nullptr,
                     instr.paired ? builder.getUnitAttr() : nullptr);
      return;
    case InstrKind::Send:
      SendOp::create(builder, loc, kindAttr(w.kind), stageAttr(w),
                     number(w.microbatch), number(w.slice), number(instr.peer),
                     comm, /*buffer=*/nullptr);
      return;
    case InstrKind::Recv:
      RecvOp::create(builder, loc, kindAttr(w.kind), stageAttr(w),
                     number(w.microbatch), number(w.slice), number(instr.peer),
                     comm, /*buffer=*/nullptr);
      return;
    }
  };

  auto result = ProgramOp::create(builder, loc, name, model.getSymName(),
                                  pipeline.devices, pipeline.microbatches,
                                  pipeline.slices, schedule);
  builder.createBlock(&result.getBody());
  for (int d = 0; d < pipeline.devices; ++d) {
    OpBuilder::InsertionGuard guard(builder);
    auto device = DeviceOp::create(builder, loc, d);
    builder.createBlock(&device.getBody());
    const std::vector<Instr> &instrs = program.devices[d];
    std::vector<rt::RepeatBlock> blocks;
    if (repeats)
      blocks = findRepeatBlocks(instrs);
    size_t next = 0;
    for (const rt::RepeatBlock &block : blocks) {
      for (; next < block.begin; ++next)
        emit(instrs[next]);
      OpBuilder::InsertionGuard inBlock(builder);
      auto repeat = RepeatOp::create(builder, loc, int64_t(block.count),
                                     block.mbStep);
      builder.createBlock(&repeat.getBody());
      for (size_t i = 0; i < block.length; ++i)
        emit(instrs[block.begin + i]);
      next = block.begin + block.length * block.count;
    }
    for (; next < instrs.size(); ++next)
      emit(instrs[next]);
  }
  return result;
}
