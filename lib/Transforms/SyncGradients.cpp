//===- SyncGradients.cpp - Data-parallel replicas of a program ------------===//
//
// Data parallelism (Li, LLM Systems; Megatron-LM and
// torchtitan do the same): every pipeline device is replicated, each
// replica trains on its own microbatches, and the replicas average their
// gradients before the optimizer step. The average of a stage is issued as
// soon as the stage's gradients are final -- after its last pass on the
// device -- so that it overlaps the passes still to run there rather than
// all of it waiting for the end of the step.
//
//===----------------------------------------------------------------------===//

#include "sluice/PipelineIR/PipelineIR.h"
#include "sluice/PlanFormat/TrainingState.h"
#include "sluice/Target/Plan.h"
#include "sluice/Transforms/Passes.h"

#include "ForEachPass.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/MapVector.h"

namespace mlir::sluice {
#define GEN_PASS_DEF_SYNCGRADIENTS
#include "sluice/Transforms/Passes.h.inc"
} // namespace mlir::sluice

using namespace mlir;
using namespace mlir::sluice;

LogicalResult mlir::sluice::syncGradients(ProgramOp program,
                                          int64_t dataParallel, int64_t zero,
                                          int64_t expertParallel,
                                          double expertCapacity,
                                          bool reshardPerStep,
                                          int64_t contextParallel) {
  if (contextParallel < 1)
    return program.emitOpError("cannot split the sequences over ")
           << contextParallel
           << " context-parallel ranks: the count must be positive";
  // The mesh's rule (TrainingState.h), over the dp x cp ranks that sum a
  // device's gradients.
  if (std::string why = ::sluice::rt::checkZeroStage(
          zero, dataParallel * contextParallel);
      !why.empty())
    return program.emitOpError("cannot use ZeRO stage ") << zero << ": "
                                                           << why;
  if (reshardPerStep && zero != 3)
    return program.emitOpError("cannot re-shard per step under ZeRO stage ")
           << zero << ": the choice is ZeRO-3's (the gathered weights)";
  if (dataParallel < 1)
    return program.emitOpError("cannot have ")
           << dataParallel
           << " data-parallel replicas: the count must be positive";
  if (program.getDp() != 1 || program.getCp() != 1)
    return program.emitOpError("already has ")
           << program.getDp() << " data-parallel replicas"
           << (program.getCp() != 1
                   ? " of " + std::to_string(program.getCp()) +
                         " context-parallel ranks"
                   : std::string());
  if (expertParallel < 1 || dataParallel % expertParallel != 0)
    return program.emitOpError("cannot split the experts over ")
           << expertParallel << " expert-parallel replicas: ep must be "
           << "positive and divide the " << dataParallel
           << " data-parallel replicas (the expert groups are ep of them)";
  SymbolTableCollection tables;
  if (auto model = tables.lookupNearestSymbolFrom<ModelOp>(
          program, program.getModelAttr());
      model && (expertParallel > 1 || zero == 3 || contextParallel > 1)) {
    ::sluice::rt::ModelConfig layers = getModelConfig(model);
    SmallVector<int64_t> slices = model.getSliceLengths(program.getSlices());
    if (std::string why = ::sluice::rt::checkContextParallel(
            layers, contextParallel,
            std::vector<int64_t>(slices.begin(), slices.end()));
        !why.empty())
      return program.emitOpError("cannot split the sequences over ")
             << contextParallel << " context-parallel ranks: " << why;
    if (std::string why =
            ::sluice::rt::checkExpertParallel(layers, expertParallel);
        !why.empty())
      return program.emitOpError(why);
    if (zero == 3)
      if (std::string why = ::sluice::rt::checkShardedWeights(layers);
          !why.empty())
        return program.emitOpError("cannot use ZeRO stage 3: ") << why;
  }
  if (expertCapacity != 0 && (expertParallel < 2 || !(expertCapacity >= 1)))
    return program.emitOpError("cannot size the experts' copies at ")
           << expertCapacity << " times the balanced share: "
           << (expertParallel < 2 ? "there is no expert parallelism"
                                  : "it must be at least 1");
  OpBuilder builder(program.getContext());
  if (expertCapacity != 0)
    program.setExpertCapacityAttr(builder.getF64FloatAttr(expertCapacity));
  program.setDp(dataParallel);
  program.setCp(contextParallel);
  program.setZero(zero);
  program.setReshardPerStep(reshardPerStep);
  program.setEp(expertParallel);
  // The gradients sum over every rank of a device: its replicas and, in
  // each, the context-parallel ranks that saw other tokens.
  if (dataParallel * contextParallel == 1)
    return success();
  for (DeviceOp device : program.getBody().getOps<DeviceOp>()) {
    // The last pass of each stage or shard on this device, in the order
    // the stages finish. A stage whose last pass is in a repeat block's
    // last run gets that run written out after the block, so that its
    // sync can follow the pass (a block's body cannot hold one).
    auto findLast = [&] {
      llvm::MapVector<Attribute, Operation *> last;
      auto see = [&](Operation &op) {
        if (auto exec = dyn_cast<ExecOp>(op)) {
          last.erase(exec.getStageAttr());
          last[exec.getStageAttr()] = &op;
        }
      };
      for (Operation &op : device.getBody().front()) {
        if (auto repeat = dyn_cast<RepeatOp>(op))
          llvm::for_each(repeat.getBody().front(), see);
        else
          see(op);
      }
      return last;
    };
    llvm::MapVector<Attribute, Operation *> last = findLast();
    SmallVector<RepeatOp> peel;
    for (auto &entry : last)
      if (auto repeat = dyn_cast<RepeatOp>(entry.second->getParentOp());
          repeat && !llvm::is_contained(peel, repeat))
        peel.push_back(repeat);
    if (!peel.empty()) {
      llvm::for_each(peel, peelLastRun);
      last = findLast();
    }
    for (auto [stage, op] : last) {
      builder.setInsertionPointAfter(op);
      GradSyncOp::create(builder, op->getLoc(), cast<FlatSymbolRefAttr>(stage));
    }
  }
  return success();
}

namespace {
struct SyncGradientsPass : ForEachPass<ProgramOp, SyncGradientsPass,
                                       mlir::sluice::impl::SyncGradientsBase> {
  using ForEachPass::ForEachPass;
  LogicalResult apply(ProgramOp program) {
    return syncGradients(program, dataParallel, zero, expertParallel,
                         expertCapacity, reshardPerStep, contextParallel);
  }
};
} // namespace
