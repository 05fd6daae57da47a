//===- ForEachPass.h - A pass applying one transform to each op -*- C++ -*-===//
//
// Most of Sluice's passes run on the module and apply one transform -- the
// function the library also exports for callers without a pass manager --
// to each sluice.model or sluice.program in it, failing the pass at the
// first failure. ForEachPass is that loop, written once: a pass derives
// from it instead of from its generated base and says only
//
//   LogicalResult apply(OpT op);
//
// The passes stay on the module rather than nesting on sluice.model, so
// that `sluice-opt -sluice-<pass>` runs them on a file as it is.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_LIB_TRANSFORMS_FOREACHPASS_H
#define SLUICE_LIB_TRANSFORMS_FOREACHPASS_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/SmallVector.h"

namespace mlir::sluice {

/// `BaseT<DerivedT>` is the pass's generated base (impl::<Pass>Base).
template <typename OpT, typename DerivedT, template <typename> class BaseT>
class ForEachPass : public BaseT<DerivedT> {
public:
  using PassBase = BaseT<DerivedT>;
  using PassBase::PassBase;

  void runOnOperation() override {
    // A snapshot: a transform may add ops beside the one it transforms.
    ModuleOp module = this->getOperation();
    for (OpT op : llvm::to_vector(module.template getOps<OpT>()))
      if (failed(static_cast<DerivedT *>(this)->apply(op)))
        return this->signalPassFailure();
  }
};

} // namespace mlir::sluice

#endif // SLUICE_LIB_TRANSFORMS_FOREACHPASS_H
