//===- SluiceInterfaces.td - Sluice op interfaces ----------*- tablegen -*-===//
//
// Interfaces shared by several Sluice ops.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_INTERFACES_TD
#define SLUICE_INTERFACES_TD

include "mlir/IR/OpBase.td"

def Sluice_TensorCollectiveOpInterface
    : OpInterface<"TensorCollectiveOpInterface"> {
  let description = [{
    An op that communicates among the tensor-parallel shards of a layer.
    A shard body spells the layer's forward pass only; each collective
    says what it issues in F and what its conjugate issues in B, so the
    whole communication of a layer -- the blog's "Communication Overhead"
    table -- is read off its body (Megatron-LM's f and g operators, and
    with sequence parallelism their all-gather / reduce-scatter pairs).
    The volume is the larger of the operand's and the result's tensors.
  }];
  let cppNamespace = "::mlir::sluice";
  let methods = [
    InterfaceMethod<"The collective this op issues in the forward pass.",
                    "::mlir::sluice::CollectiveKind", "getForwardCollective">,
    InterfaceMethod<"The collective its gradient issues in the backward "
                    "pass.",
                    "::mlir::sluice::CollectiveKind", "getBackwardCollective">,
  ];
}

#endif // SLUICE_INTERFACES_TD
