//===- ProgramOps.cpp - The program level's verifiers ---------------------===//
//
// A program, its devices' instruction lists, and the symbols they name: the
// model, its stages and its vocabulary shards.
//
//===----------------------------------------------------------------------===//

#include "OpRules.h"

#include "sluice/SluiceOps.h"
#include "sluice/PlanFormat/Format.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
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
  if (getZero() != 0 && getZero() != 1)
    return emitOpError("'zero' must be a ZeRO stage Sluice runs (0 or 1), "
                       "got ")
           << getZero();
  if (getSequenceParallel() && getTp() < 2)
    return emitOpError("'sequence_parallel' splits the tokens over the "
                       "tensor-parallel shards, but 'tp' is ")
           << getTp();
  if (getZero() == 1 && getDp() < 2)
    return emitOpError("'zero' = 1 shards the optimizer state over the "
                       "data-parallel replicas, but 'dp' is ")
           << getDp();
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
  if (program && program.getDp() < 2)
    return emitOpError("averages gradients over data-parallel replicas, but "
                       "the program has none (dp = ")
           << program.getDp() << ")";
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
  for (DeviceOp device : program.getBody().front().getOps<DeviceOp>())
    for (Operation &instr : device->getRegion(0).front()) {
      LogicalResult named =
          TypeSwitch<Operation *, LogicalResult>(&instr)
              .Case<ExecOp, SendOp, RecvOp, GradSyncOp>(
                  [&](auto op) { return check(op, op.getStage(), false); })
              .Case([&](CollectiveInstrOp op) {
                return check(op, op.getShard(), true);
              })
              .Default([](Operation *) { return success(); });
      if (failed(named))
        return failure();
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

