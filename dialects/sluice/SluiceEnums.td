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

def Sluice_ScheduleKind : I32EnumAttr<"ScheduleKind",
    "the pipeline schedule a program was generated with", [
  I32EnumAttrCase<"GPipe", 0, "gpipe">,
  I32EnumAttrCase<"OneFOneB", 1, "1f1b">,
  I32EnumAttrCase<"Interleaved1F1B", 2, "interleaved-1f1b">,
  I32EnumAttrCase<"ZBH1", 3, "zb-h1">,
  I32EnumAttrCase<"ZBH2", 4, "zb-h2">,
  I32EnumAttrCase<"ZBV", 5, "zb-v">,
  I32EnumAttrCase<"VHalf", 6, "v-half">,
  I32EnumAttrCase<"VMin", 7, "v-min">,
  I32EnumAttrCase<"Seq1F1B", 8, "seq1f1b">,
  I32EnumAttrCase<"Seq1F1BI", 9, "seq1f1b-i">,
  I32EnumAttrCase<"TeraPipe", 10, "terapipe">,
  I32EnumAttrCase<"DualPipeV", 11, "dualpipev">
]> {
  let cppNamespace = "::mlir::sluice";
  let genSpecializedAttr = 0;
}

def Sluice_SlicingMethod : I32EnumAttr<"SlicingMethod",
    "how a sequence is cut into token slices", [
  I32EnumAttrCase<"Uniform", 0, "uniform">,
  I32EnumAttrCase<"Seq1F1B", 1, "seq1f1b">,
  I32EnumAttrCase<"TeraPipe", 2, "terapipe">
]> {
  let cppNamespace = "::mlir::sluice";
  let genSpecializedAttr = 0;
}

// Stored as the plain integer the textual IR has always used
// (`algorithm = 2 : i64`): ODS checks it is one of the cases and the
// accessor returns the enum.
def Sluice_SoftmaxAlgorithm : I64EnumAttr<"SoftmaxAlgorithm",
    "the form of a vocabulary-parallel softmax: 0 (naive, 3 barriers), "
    "1 (Algorithm 1, 2 barriers) or 2 (Algorithm 2, 1 barrier)", [
  I64EnumAttrCase<"Naive", 0, "naive">,
  I64EnumAttrCase<"Algorithm1", 1, "algorithm1">,
  I64EnumAttrCase<"Algorithm2", 2, "algorithm2">
]> {
  let cppNamespace = "::mlir::sluice";
  let genSpecializedAttr = 0;
  let returnType = "::mlir::sluice::SoftmaxAlgorithm";
  let convertFromStorage =
      "static_cast<::mlir::sluice::SoftmaxAlgorithm>($_self.getInt())";
  let constBuilderCall =
      "$_builder.getI64IntegerAttr(static_cast<int64_t>($0))";
}

// Not an attribute: what a tensor-parallel op communicates in one pass
// (TensorCollectiveOpInterface).
def Sluice_CollectiveKind : I32EnumAttr<"CollectiveKind",
    "the collective a tensor-parallel op issues in one pass", [
  I32EnumAttrCase<"none", 0>,
  I32EnumAttrCase<"all_reduce", 1>,
  I32EnumAttrCase<"all_gather", 2>,
  I32EnumAttrCase<"reduce_scatter", 3>,
  I32EnumAttrCase<"all_to_all", 4>
]> {
  let cppNamespace = "::mlir::sluice";
  let genSpecializedAttr = 0;
}

#endif // SLUICE_ENUMS_TD
