//===- ProgramOps.cpp - The program level's verifiers ---------------------===//
//
// A program, its devices' instruction lists, and the symbols they name: the
// model, its stages and its vocabulary shards.
//
//===----------------------------------------------------------------------===//

#include "OpRules.h"

#include "sluice/SluiceOps.h"
#include "sluice/PlanFormat/Format.h"
#include "sluice/PlanFormat/TrainingState.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::sluice;
using namespace mlir::sluice::detail;

//===----------------------------------------------------------------------===//
// Program level
//===----------------------------------------------------------------------===//

LogicalResult ProgramOp::verify() {
  if (getDevices() < 1)
    return emitOpError("'devices' must be positive, got ") << getDevices();
  if (getMicrobatches() < 1)
    return emitOpError("'microbatches' must be positive, got ")
           << getMicrobatches();
  if (getSlices() < 1)
    return emitOpError("'slices' must be positive, got ") << getSlices();
  if (getTp() < 1)
    return emitOpError("'tp' must be positive, got ") << getTp();
  if (getDp() < 1)
    return emitOpError("'dp' must be positive, got ") << getDp();
  if (getCp() < 1)
    return emitOpError("'cp' must be positive, got ") << getCp();
  // The mesh's ZeRO rule (TrainingState.h): the optimizer state shards
  // over every rank that sums a device's gradients, dp x cp.
  if (std::string why = ::sluice::rt::checkZeroStage(getZero(),
                                                     getDp() * getCp());
      !why.empty())
    return emitOpError("'zero' = ") << getZero() << ": " << why;
  if (getReshardPerStep() && getZero() != 3)
    return emitOpError("'reshard_per_step' chooses when ZeRO-3 re-shards "
                       "the gathered weights, but 'zero' is ")
           << getZero();
  if (getSequenceParallel() && getTp() < 2)
    return emitOpError("'sequence_parallel' splits the tokens over the "
                       "tensor-parallel shards, but 'tp' is ")
           << getTp();
  if (getEp() < 1)
    return emitOpError("'ep' must be positive, got ") << getEp();
  if (std::optional<double> capacity = getExpertCapacity();
      capacity && (getEp() < 2 || !(*capacity >= 1)))
    return emitOpError("'capacity' = ")
           << *capacity
           << (getEp() < 2 ? " sizes expert parallelism's buffers, but 'ep' "
                             "is 1"
                           : " must be at least 1 (the balanced share)");
  if (getDp() % getEp() != 0)
    return emitOpError("'ep' = ")
           << getEp() << " splits the experts over that many data-parallel "
           << "replicas, which must divide 'dp' = " << getDp();
  // By index, not a table of `devices` entries: the count may be anything
  // a file says (2^31 - 1), the regions are what the file holds.
  llvm::DenseMap<int64_t, DeviceOp> seen;
  for (Operation &op : getBody().front()) {
    auto device = dyn_cast<DeviceOp>(op);
    if (!device)
      return op.emitOpError("cannot appear in a sluice.program: only "
                            "sluice.device regions can");
    int64_t index = device.getIndex();
    if (index < 0 || index >= getDevices())
      return device.emitOpError("index ")
             << index << " is outside the program's " << getDevices()
             << " devices";
    if (auto first = seen.find(index); first != seen.end())
      return device.emitOpError("duplicates device ")
          .append(index)
          .attachNote(first->second.getLoc())
          .append("first device ", index, " is here");
    seen[index] = device;
  }
  // The first missing index is at most the number of regions.
  for (int64_t index = 0; index < getDevices(); ++index)
    if (!seen.count(index))
      return emitOpError("has no sluice.device ") << index;
  return success();
}

/// Instructions of every kind name a microbatch and a slice, and those are
/// indices.
template <typename OpTy> static LogicalResult verifyInstrIndices(OpTy op) {
  if (op.getMb() < 0)
    return op.emitOpError("'mb' must be non-negative, got ") << op.getMb();
  if (op.getSlice() < 0)
    return op.emitOpError("'slice' must be non-negative, got ")
           << op.getSlice();
  return success();
}

/// The device whose region holds `op`.
static int64_t getOwnDevice(Operation *op) {
  return op->getParentOfType<DeviceOp>().getIndex();
}

LogicalResult ExecOp::verify() { return verifyInstrIndices(*this); }

LogicalResult SendOp::verify() {
  if (failed(verifyInstrIndices(*this)))
    return failure();
  if (getTo() < 0 || getTo() == getOwnDevice(*this))
    return emitOpError("'to' = ") << getTo() << " is not another device";
  return success();
}

LogicalResult GradSyncOp::verify() {
  auto program = (*this)->getParentOfType<ProgramOp>();
  // Over a device's replicas and, in each, its context-parallel ranks.
  if (program && program.getDp() * program.getCp() < 2)
    return emitOpError("averages gradients over data-parallel replicas, but "
                       "the program has none (dp = ")
           << program.getDp() << ")";
  return success();
}

SmallVector<std::pair<int64_t, int64_t>> RepeatOp::getSlotMap() {
  SmallVector<std::pair<int64_t, int64_t>> map;
  if (std::optional<ArrayRef<int64_t>> flat = getSlots())
    for (size_t i = 0; i + 1 < flat->size(); i += 2)
      map.push_back({(*flat)[i], (*flat)[i + 1]});
  return map;
}

LogicalResult RepeatOp::verify() {
  if (getCount() < 1)
    return emitOpError("'count' must be positive, got ") << getCount();
  // Every run must do other work than the one before it.
  if (getMbStep() < 1)
    return emitOpError("'mb_step' must be positive, got ") << getMbStep();
  Block &body = getBody().front();
  if (body.empty())
    return emitOpError("has an empty body");
  // Runs past the program's microbatches cannot be right, and bounding
  // them bounds what a reader runs out.
  auto program = (*this)->getParentOfType<ProgramOp>();
  int64_t span;
  if (__builtin_mul_overflow(getCount() - 1, getMbStep(), &span) ||
      (program && span >= program.getMicrobatches()))
    return emitOpError("runs ")
           << getCount() << " times " << getMbStep()
           << " microbatches apart, past the program's "
           << (program ? program.getMicrobatches() : 0) << " microbatches";
  for (Operation &op : body)
    if (isa<GradSyncOp>(op))
      return op.emitOpError("cannot repeat: it averages a stage's gradients "
                            "once, after the stage's last pass");
  std::optional<ArrayRef<int64_t>> flat = getSlots();
  if (!flat)
    return success();
  if (flat->size() % 2 != 0)
    return emitOpError("'slots' must list (from, to) pairs, got ")
           << flat->size() << " numbers";
  auto device = (*this)->getParentOfType<DeviceOp>();
  std::optional<ArrayRef<int64_t>> buffers =
      device ? device.getBuffers() : std::nullopt;
  llvm::SmallDenseSet<int64_t> froms;
  for (auto [from, to] : getSlotMap()) {
    for (int64_t slot : {from, to})
      if (slot < 0 || (buffers && slot >= int64_t(buffers->size())))
        return emitOpError("'slots' maps slot ")
               << slot << ", which is not one of the device's "
               << (buffers ? int64_t(buffers->size()) : 0) << " buffers";
    if (!froms.insert(from).second)
      return emitOpError("'slots' maps slot ") << from << " twice";
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Symbol uses: a program's @model, its instructions' @stage and @shard
//===----------------------------------------------------------------------===//

/// The sluice.model `program` is for, or null.
static ModelOp lookupProgramModel(ProgramOp program,
                                  SymbolTableCollection &tables) {
  return tables.lookupNearestSymbolFrom<ModelOp>(program,
                                                 program.getModelAttr());
}

/// Checks that every instruction names a stage or vocabulary shard of
/// `model` (a collective: a shard only), the model's names gathered once.
/// (Before 2026-11-27 each instruction scanned the model's ops.)
static LogicalResult verifyNamedWork(ProgramOp program, ModelOp model) {
  // Name -> whether it is a vocabulary shard.
  llvm::StringMap<bool> names;
  for (Operation &child : model.getBody().front()) {
    if (auto in = dyn_cast<VocabInputOp>(child))
      names[in.getSymName()] = true;
    else if (auto out = dyn_cast<VocabOutputOp>(child))
      names[out.getSymName()] = true;
    else if (auto stage = dyn_cast<StageOp>(child))
      names[stage.getSymName()] = false;
  }
  auto check = [&](Operation *op, StringRef name,
                   bool shardOnly) -> LogicalResult {
    auto found = names.find(name);
    if (found != names.end() && (found->second || !shardOnly))
      return success();
    if (shardOnly)
      return op->emitOpError("names @")
             << name << ", which is not a vocabulary shard of model @"
             << model.getSymName();
    return op->emitOpError("names stage @")
           << name << ", which model @" << model.getSymName()
           << " does not have";
  };
  auto checkInstr = [&](Operation &instr) {
    return TypeSwitch<Operation *, LogicalResult>(&instr)
        .Case<ExecOp, SendOp, RecvOp, GradSyncOp>(
            [&](auto op) { return check(op, op.getStage(), false); })
        .Case([&](CollectiveInstrOp op) {
          return check(op, op.getShard(), true);
        })
        .Default([](Operation *) { return success(); });
  };
  for (DeviceOp device : program.getBody().front().getOps<DeviceOp>())
    for (Operation &instr : device.getBody().front()) {
      // A repeat block's body names work like the device's own list.
      if (auto repeat = dyn_cast<RepeatOp>(instr)) {
        for (Operation &inner : repeat.getBody().front())
          if (failed(checkInstr(inner)))
            return failure();
      } else if (failed(checkInstr(instr))) {
        return failure();
      }
    }
  return success();
}

LogicalResult ProgramOp::verifySymbolUses(SymbolTableCollection &tables) {
  ModelOp model = lookupProgramModel(*this, tables);
  if (!model)
    return emitOpError("refers to @")
           << getModel() << ", which is not a sluice.model";
  // The program's shards run the model's shard bodies: with tp > 1 every
  // layer that splits spells its collectives (sluice-shard-tensors), for
  // that many shards.
  WalkResult walk = model.walk([&](Operation *layer) {
    if (!isa<TransformerLayerOp, EmbeddingOp, OutputLayerOp>(layer))
      return WalkResult::advance();
    auto shards = layer->getAttrOfType<IntegerAttr>("shards");
    int64_t count = shards ? shards.getValue().getSExtValue() : 1;
    if (count == getTp() && count > 1 &&
        isSequenceParallel(layer) != getSequenceParallel()) {
      InFlightDiagnostic diag =
          emitOpError(getSequenceParallel() ? "is" : "is not")
          << " sequence-parallel, but a '" << layer->getName()
          << "' shard body works on "
          << (getSequenceParallel() ? "whole sequences" : "token slices");
      diag.attachNote(layer->getLoc()) << "the layer is here";
      return WalkResult::interrupt();
    }
    if (count == getTp())
      return WalkResult::advance();
    InFlightDiagnostic diag = emitOpError("has ")
                              << getTp() << " tensor-parallel shards, but a '"
                              << layer->getName() << "' ";
    if (shards)
      diag << "is split for " << count;
    else
      diag << "has no shard body (run sluice-shard-tensors)";
    diag.attachNote(layer->getLoc()) << "the layer is here";
    return WalkResult::interrupt();
  });
  if (walk.wasInterrupted())
    return failure();
  // The experts' dispatch a sparse layer's body spells is over the
  // program's expert group.
  WalkResult members = model.walk([&](Operation *op) {
    auto dispatch = dyn_cast<ExpertDispatchOp>(op);
    auto combine = dyn_cast<ExpertCombineOp>(op);
    if (!dispatch && !combine)
      return WalkResult::advance();
    int64_t count = dispatch ? dispatch.getMembers() : combine.getMembers();
    if (count == getEp())
      return WalkResult::advance();
    InFlightDiagnostic diag = emitOpError("splits the experts over ")
                              << getEp() << " replicas ('ep'), but a '"
                              << op->getName() << "' moves tokens over "
                              << count;
    diag.attachNote(op->getLoc()) << "it is here";
    return WalkResult::interrupt();
  });
  if (members.wasInterrupted())
    return failure();
  // Context parallelism cuts every slice into 2 cp chunks.
  if (getCp() > 1)
    for (int64_t length : model.getSliceLengths(getSlices()))
      if (length % (2 * getCp()) != 0)
        return emitOpError("'cp' = ")
               << getCp() << " cuts every slice into " << 2 * getCp()
               << " equal chunks, but a slice has " << length << " tokens";
  if (getEp() > 1) {
    ::sluice::rt::ModelConfig layers;
    model.getBody().walk([&](TransformerLayerOp layer) {
      layers.layers.push_back(layer.getSpec());
    });
    if (std::string why = ::sluice::rt::checkExpertParallel(layers, getEp());
        !why.empty())
      return emitOpError(why);
  }
  return verifyNamedWork(*this, model);
}

LogicalResult CollectiveInstrOp::verify() {
  if (failed(verifyInstrIndices(*this)))
    return failure();
  if (getStream() == StreamKind::comm)
    return emitOpError("runs on the 'vocab' or 'compute' stream, not 'comm' "
                       "(the pipeline's point-to-point stream)");
  return success();
}

LogicalResult RecvOp::verify() {
  if (failed(verifyInstrIndices(*this)))
    return failure();
  if (getFrom() < 0 || getFrom() == getOwnDevice(*this))
    return emitOpError("'from' = ") << getFrom() << " is not another device";
  return success();
}

