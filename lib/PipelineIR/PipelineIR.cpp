//===- PipelineIR.cpp - Between the program level and sched:: -------------===//

#include "sluice/PipelineIR/PipelineIR.h"

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
  for (DeviceOp device : program.getBody().getOps<DeviceOp>()) {
    int d = static_cast<int>(device.getIndex());
    view.devices[d] = device;
    for (Operation &op : device.getBody().front()) {
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
        if (shard.empty() ||
            (shard != shards.input && shard != shards.output)) {
          op.emitOpError("names @")
              << shard << ", which is not a vocabulary shard of model @"
              << model.getSymName();
          return failure();
        }
        instr.kind = InstrKind::Collective;
        instr.collective = {shard == shards.input ? sched::ShardKind::Input
                                                  : sched::ShardKind::Output,
                            static_cast<int32_t>(coll.getGroup()),
                            static_cast<int32_t>(coll.getMb()),
                            static_cast<int32_t>(coll.getSlice())};
        instr.blocking = coll.getStream() == StreamKind::compute;
        view.program.devices[d].push_back(instr);
        view.ops[d].push_back(&op);
        continue;
      }
      if (auto exec = dyn_cast<ExecOp>(op))
        fill(exec, InstrKind::Exec, -1);
      else if (auto send = dyn_cast<SendOp>(op))
        fill(send, InstrKind::Send, send.getTo());
      else if (auto recv = dyn_cast<RecvOp>(op))
        fill(recv, InstrKind::Recv, recv.getFrom());
      else
        continue;
      if (sched::isVocabPass(instr.work.kind)) {
        // A shard pass names its shard and runs on this device (or, sent
        // or received, on the peer that produces it).
        bool input =
            instr.work.kind == PassKind::IF || instr.work.kind == PassKind::IB;
        StringRef expected = input ? shards.input : shards.output;
        if (expected.empty() || stageName != expected) {
          op.emitOpError("runs pass ")
              << stringifyPassKind(instr.work.kind) << " of @" << stageName
              << ", which is not the model's " << (input ? "input" : "output")
              << " vocabulary shard";
          return failure();
        }
        instr.work.stage = instr.kind == InstrKind::Recv ? instr.peer : d;
        view.program.devices[d].push_back(instr);
        view.ops[d].push_back(&op);
        continue;
      }
      auto it = stageIndex.find(stageName);
      if (it == stageIndex.end()) {
        op.emitOpError("names stage @")
            << stageName << ", which model @" << model.getSymName()
            << " does not have";
        return failure();
      }
      instr.work.stage = it->second;
      view.program.devices[d].push_back(instr);
      view.ops[d].push_back(&op);
    }
  }
  return view;
}

ProgramOp mlir::sluice::writeProgram(ModelOp model, StringRef name,
                                     ScheduleKind schedule,
                                     const Pipeline &pipeline,
                                     const Program &program) {
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

  auto result = ProgramOp::create(builder, loc, name, model.getSymName(),
                                  pipeline.devices, pipeline.microbatches,
                                  pipeline.slices, schedule);
  builder.createBlock(&result.getBody());
  for (int d = 0; d < pipeline.devices; ++d) {
    OpBuilder::InsertionGuard guard(builder);
    auto device = DeviceOp::create(builder, loc, d);
    builder.createBlock(&device.getBody());
    for (const Instr &instr : program.devices[d]) {
      const Work &w = instr.work;
      switch (instr.kind) {
      case InstrKind::Collective: {
        const sched::CollectiveId &c = instr.collective;
        CollectiveInstrOp::create(
            builder, loc,
            c.shard == sched::ShardKind::Input ? shards.input : shards.output,
            c.group, c.microbatch, c.slice,
            instr.blocking ? StreamKind::compute : StreamKind::vocab);
        continue;
      }
      case InstrKind::GradSync:
        continue;
      case InstrKind::Exec:
        ExecOp::create(builder, loc, kindAttr(w.kind), stageAttr(w),
                       number(w.microbatch), number(w.slice),
                       /*state=*/nullptr, /*wstate=*/nullptr,
                       /*rstate=*/nullptr, /*kv=*/nullptr, /*in=*/nullptr,
                       /*out=*/nullptr);
        break;
      case InstrKind::Send:
        SendOp::create(builder, loc, kindAttr(w.kind), stageAttr(w),
                       number(w.microbatch), number(w.slice),
                       number(instr.peer), comm, /*buffer=*/nullptr);
        break;
      case InstrKind::Recv:
        RecvOp::create(builder, loc, kindAttr(w.kind), stageAttr(w),
                       number(w.microbatch), number(w.slice),
                       number(instr.peer), comm, /*buffer=*/nullptr);
        break;
      }
    }
  }
  return result;
}
