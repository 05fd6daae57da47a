//===- SluiceEnums.td - The dialect's enums ---------------*- tablegen -*-===//
//
// The plain enums of the dialect: PassKind, PlacementKind, ... as C++ enum
// classes with their string conversions. They are generated apart from the
// dialect (SluiceEnums.h) so that the IR-free libraries (lib/Schedule)
// share them without linking MLIR; SluiceBase.td wraps them in attributes.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_ENUMS_TD
#define SLUICE_ENUMS_TD

include "mlir/IR/EnumAttr.td"

def Sluice_PassKind : I32EnumAttr<"PassKind",
    "a unit of per-microbatch work that a pipeline schedule places", [
  I32EnumAttrCase<"F", 0>,
  I32EnumAttrCase<"B", 1>,
  I32EnumAttrCase<"W", 2>,
  I32EnumAttrCase<"BW", 3>,
  I32EnumAttrCase<"S", 4>,
  I32EnumAttrCase<"T", 5>,
  I32EnumAttrCase<"IF", 6>,
  I32EnumAttrCase<"IB", 7>,
  I32EnumAttrCase<"S2", 8>
]> {
  let cppNamespace = "::mlir::sluice";
  let genSpecializedAttr = 0;
}

def Sluice_Reduction : I32EnumAttr<"Reduction",
    "the combining function of a reducing collective", [
  I32EnumAttrCase<"max", 0>,
  I32EnumAttrCase<"sum", 1>
]> {
  let cppNamespace = "::mlir::sluice";
  let genSpecializedAttr = 0;
}

def Sluice_NormKind : I32EnumAttr<"NormKind",
    "normalisation used by a transformer layer", [
  I32EnumAttrCase<"layernorm", 0>,
  I32EnumAttrCase<"rmsnorm", 1>
]> {
  let cppNamespace = "::mlir::sluice";
  let genSpecializedAttr = 0;
}

def Sluice_RecomputeKind : I32EnumAttr<"RecomputeKind",
    "what a stage's backward pass recomputes", [
  I32EnumAttrCase<"none", 0>,
  I32EnumAttrCase<"selective", 1>,
  I32EnumAttrCase<"full", 2>
]> {
  let cppNamespace = "::mlir::sluice";
  let genSpecializedAttr = 0;
}

def Sluice_MlpKind : I32EnumAttr<"MlpKind",
    "feed-forward block of a transformer layer", [
  I32EnumAttrCase<"gelu", 0>,
  I32EnumAttrCase<"swiglu", 1>,
  I32EnumAttrCase<"geglu", 2>
]> {
  let cppNamespace = "::mlir::sluice";
  let genSpecializedAttr = 0;
}

def Sluice_PlacementKind : I32EnumAttr<"PlacementKind",
    "how pipeline stages are assigned to devices", [
  I32EnumAttrCase<"loop", 0>,
  I32EnumAttrCase<"interleaved", 1>,
  I32EnumAttrCase<"vshape", 2>
]> {
  let cppNamespace = "::mlir::sluice";
  let genSpecializedAttr = 0;
}

def Sluice_StreamKind : I32EnumAttr<"StreamKind",
    "the device stream an instruction runs on", [
  I32EnumAttrCase<"compute", 0>,
  I32EnumAttrCase<"comm", 1>,
  I32EnumAttrCase<"vocab", 2>,
  I32EnumAttrCase<"data", 3>
]> {
  let cppNamespace = "::mlir::sluice";
  let genSpecializedAttr = 0;
}

def Sluice_Projection : I32EnumAttr<"Projection",
    "a linear map of a transformer layer", [
  I32EnumAttrCase<"qkv", 0>,
  I32EnumAttrCase<"out", 1>,
  I32EnumAttrCase<"up", 2>,
  I32EnumAttrCase<"gate", 3>,
  I32EnumAttrCase<"down", 4>
]> {
  let cppNamespace = "::mlir::sluice";
  let genSpecializedAttr = 0;
}

// Not an attribute: what a tensor-parallel op communicates in one pass
// (TensorCollectiveOpInterface).
def Sluice_CollectiveKind : I32EnumAttr<"CollectiveKind",
    "the collective a tensor-parallel op issues in one pass", [
  I32EnumAttrCase<"none", 0>,
  I32EnumAttrCase<"all_reduce", 1>,
  I32EnumAttrCase<"all_gather", 2>,
  I32EnumAttrCase<"reduce_scatter", 3>
]> {
  let cppNamespace = "::mlir::sluice";
  let genSpecializedAttr = 0;
}

#endif // SLUICE_ENUMS_TD
