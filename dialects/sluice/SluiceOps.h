//===- SluiceOps.h - Sluice operations --------------------------*- C++ -*-===//

#ifndef SLUICE_SLUICEOPS_H
#define SLUICE_SLUICEOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "sluice/SluiceDialect.h"

#include "sluice/PlanFormat/ModelConfig.h"

namespace mlir::sluice {
/// Marks ops whose cost scales with a vocabulary shard: collectives
/// separated by one are separate communication barriers.
template <typename ConcreteType>
class HeavyCompute : public OpTrait::TraitBase<ConcreteType, HeavyCompute> {};

/// The transformer layer's spec property (Sluice_BlockSpecProp): its
/// assembly, generated from BlockFields.def (BlockSpecAsm.cpp).
ParseResult parseBlockSpec(OpAsmParser &parser,
                           ::sluice::rt::LayerConfig &spec);
void printBlockSpec(OpAsmPrinter &printer, Operation *op,
                    const ::sluice::rt::LayerConfig &spec);
llvm::hash_code hashBlockSpec(const ::sluice::rt::LayerConfig &spec);
} // namespace mlir::sluice

namespace mlir {
/// The spec's attribute form (the generic syntax, bytecode): the plan's
/// JSON object of the layer, as a string.
Attribute convertToAttribute(MLIRContext *context,
                             const ::sluice::rt::LayerConfig &spec);
LogicalResult
convertFromAttribute(::sluice::rt::LayerConfig &spec, Attribute attr,
                     function_ref<InFlightDiagnostic()> emitError);
} // namespace mlir

#include "sluice/SluiceInterfaces.h.inc"

#define GET_OP_CLASSES
#include "sluice/SluiceOps.h.inc"

namespace mlir::sluice {
/// The pipeline stages of `model` in chain order; empty at the model level.
SmallVector<StageOp> getStages(ModelOp model);

/// The communication barriers a vocabulary shard crosses: maximal runs of
/// all-reduces and reduces not separated by a HeavyCompute op (the
/// broadcast that hands the activation over is not one).
int64_t countBarriers(Region &shard);

/// One collective among a layer's tensor-parallel shards in one pass.
struct ShardCollective {
  CollectiveKind kind;
  /// Elements of the whole (gathered or reduced) tensor, and their size.
  int64_t elements = 0;
  int64_t elementBytes = 0;
};
/// The collectives a layer's shard body issues in F, B and W, in the order
/// they run (F's in program order, B's in reverse; W's: with sequence
/// parallelism, the all-gathers again of the sliced inputs the
/// column-parallel weight gradients need whole). Empty for a layer
/// without a body.
struct ShardTraffic {
  SmallVector<ShardCollective> forward, backward, weight;
};
ShardTraffic getShardTraffic(Operation *layer);
/// Whether `layer`'s shard body works on token slices (sequence
/// parallelism): it takes, or the embedding yields, a slice of the layer's
/// activation.
bool isSequenceParallel(Operation *layer);
} // namespace mlir::sluice

#endif // SLUICE_SLUICEOPS_H
