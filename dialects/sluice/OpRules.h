//===- OpRules.h - What the op verifiers share ------------------*- C++ -*-===//
//
// Private to dialects/sluice: the rules every size and activation is held
// to, and the shard bodies' check the layer ops call (ShardOps.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_DIALECT_OPRULES_H
#define SLUICE_DIALECT_OPRULES_H

#include "sluice/SluiceOps.h"
#include "sluice/PlanFormat/Format.h"

namespace mlir::sluice::detail {

//===----------------------------------------------------------------------===//
// Shared rules
//===----------------------------------------------------------------------===//

/// Sizes are kept as plain I64Attr (not ConfinedAttr) so that the diagnostic
/// can carry the offending value, which the ODS-generated message cannot.
inline LogicalResult verifyPositive(Operation *op, StringRef name,
                                    int64_t value) {
  if (value >= 1)
    return success();
  return op->emitOpError("'") << name << "' must be positive, got " << value;
}

/// A model size: positive, and at most kMaxDimension, so that the cost
/// model's and the runtime's products of sizes cannot overflow (a config's
/// n_inner = 2^62 printed a wrapped parameter count).
inline LogicalResult verifySize(Operation *op, StringRef name, int64_t value,
                                int64_t limit = ::sluice::rt::kMaxDimension) {
  if (failed(verifyPositive(op, name, value)))
    return failure();
  if (value <= limit)
    return success();
  return op->emitOpError("'") << name << "' = " << value
                              << " is larger than any size Sluice takes ("
                              << limit << ")";
}

/// Activations are `tensor<micro_batch x seq_len x hidden x dtype>` with
/// static, positive sizes.
inline LogicalResult verifyActivationType(Operation *op, StringRef what,
                                          Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || tensor.getRank() != 3 || !tensor.hasStaticShape() ||
      llvm::any_of(tensor.getShape(), [](int64_t d) { return d < 1; }))
    return op->emitOpError() << what
                             << " must be a static tensor<micro_batch x "
                                "seq_len x hidden> with positive sizes, got "
                             << type;
  if (llvm::any_of(tensor.getShape(),
                   [](int64_t d) { return d > ::sluice::rt::kMaxDimension; }))
    return op->emitOpError() << what << " " << type
                             << " has a size larger than any Sluice takes ("
                             << ::sluice::rt::kMaxDimension << ")";
  return success();
}


/// A layer's shard body (sluice-shard-tensors): `shards` given exactly when
/// there is a body, the body's signature and yield against the layer's.
LogicalResult verifyShardBody(Operation *layer, std::optional<int64_t> shards,
                              Region &body, bool hasInput, Type whole,
                              Type loss);
/// The last dimension of a value's ranked tensor type.
int64_t getWidth(Value value);

} // namespace mlir::sluice::detail

#endif // SLUICE_DIALECT_OPRULES_H
