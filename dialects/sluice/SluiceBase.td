//===- SluiceBase.td - Sluice dialect definition -----------*- tablegen -*-===//
//
// The dialect and the enum attributes shared by every IR level.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_BASE_TD
#define SLUICE_BASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"
include "sluice/SluiceEnums.td"

def Sluice_Dialect : Dialect {
  let name = "sluice";
  let cppNamespace = "::mlir::sluice";
  let summary = "Pipeline-parallel training of transformer language models";
  let description = [{
    The `sluice` dialect describes a transformer language model and how its
    training step is spread over the devices of a pipeline. One dialect holds
    three levels, each produced from the previous one by compiler passes:

    1. **Model level** (`sluice.model`,
       `sluice.embedding`, `sluice.transformer_layer`, `sluice.output_layer`,
       `sluice.return`). What the user writes or what `sluice-compile`
       imports from a Hugging Face `config.json`. Activations are builtin
       tensors `tensor<micro_batch x seq_len x hidden x dtype>` so memory can
       be counted from types.
    2. **Partitioned level**: layers grouped into pipeline stages, the
       vocabulary layers split across devices into fine-grained ops with
       explicit collectives, each layer's work cut into passes (F, B, W, S,
       T, ...).
    3. **Program level**: one ordered instruction list per device, compute
       and communication, which the runtime executes.

    The enum attributes below (pass kinds, reductions) are used by the later
    levels; they are defined now so that the textual IR stays stable.
  }];
  let useDefaultAttributePrinterParser = 1;
}

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

// A size written as a plain integer (`heads = 32`). Read back as a signed
// value so that the verifiers can report a negative size as what the user
// wrote; I64Attr would read it as a huge unsigned number.
def Sluice_SizeAttr : TypedSignlessIntegerAttrBase<I64, "int64_t",
                                                   "64-bit integer size"> {
  let convertFromStorage = "$_self.getValue().getSExtValue()";
}

// A real number the compiler computed (a time, a ratio), read back as a
// double rather than an APFloat.
def Sluice_RealAttr : FloatAttrBase<F64, "64-bit float"> {
  let returnType = "double";
  let convertFromStorage = "$_self.getValueAsDouble()";
}

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

def Sluice_PassKindAttr : EnumAttr<Sluice_Dialect, Sluice_PassKind, "pass"> {
  let summary = "pipeline pass kind";
  let description = [{
    The kind of a pipeline pass:

    * `F`: forward of a transformer stage;
    * `B`: input gradient (activation gradient) of a stage;
    * `W`: weight gradient of a stage, split from `B` by zero-bubble
      schedules so that it can fill bubbles;
    * `BW`: the unsplit backward (`B` and `W` together);
    * `S`, `T`: the two passes of a vocabulary-parallel output-layer shard,
      cut at its communication barriers (Yeung et al., 2024
      §4–5);
    * `IF`, `IB`: forward and backward of a vocabulary-parallel input-layer
      shard (the paper's Appendix C, summarised in DESIGN.md);
    * `S2`: the middle pass of the naive (3-barrier) output shard, the sum
      of exponentials between its two all-reduces (Figure 6); Algorithms 1
      and 2 have no such pass.

    ```mlir
    #sluice.pass<W>
    ```
  }];
  let assemblyFormat = "`<` $value `>`";
}

def Sluice_ReductionAttr : EnumAttr<Sluice_Dialect, Sluice_Reduction,
                                    "reduction"> {
  let summary = "reduction of a collective";
  let description = [{
    How a collective combines the contributions of the devices: `max` for
    the softmax's running maximum, `sum` for its normaliser and for
    gradients.

    ```mlir
    #sluice.reduction<max>
    ```
  }];
  let assemblyFormat = "`<` $value `>`";
}

def Sluice_NormKindAttr : EnumAttr<Sluice_Dialect, Sluice_NormKind, "norm"> {
  let summary = "layer normalisation kind";
  let description = [{
    `layernorm` (GPT: mean and variance, weight and bias) or `rmsnorm`
    (Llama, Gemma: root mean square, weight only).
  }];
}

def Sluice_RecomputeKindAttr : EnumAttr<Sluice_Dialect, Sluice_RecomputeKind,
                                        "recompute"> {
  let summary = "activation recomputation of a stage";
  let description = [{
    `none`: F keeps everything B and W read. `selective`: F keeps the
    norms' and projections' tensors and drops the attention output and the
    MLP activation, which B recomputes (Korthikanti et al.'s selective
    recomputation). `full`: F keeps only the stage's input, and B runs F
    again from it. Recomputed tensors live from B to W.
  }];
}

def Sluice_MlpKindAttr : EnumAttr<Sluice_Dialect, Sluice_MlpKind, "mlp"> {
  let summary = "feed-forward block kind";
  let description = [{
    `gelu`: two matrices, `down(gelu(up(x)))` (GPT). `swiglu`: three
    matrices, `down(silu(gate(x)) * up(x))` (Llama). `geglu`: the same gated
    form with GELU (Gemma). Gated blocks hold three `hidden x ffn` matrices,
    plain ones two.
  }];
}

def Sluice_PlacementKindAttr : EnumAttr<Sluice_Dialect, Sluice_PlacementKind,
                                        "placement"> {
  let summary = "stage-to-device placement";
  let description = [{
    With `p` devices and `v` chunks per device, stage `i` of `p * v` sits on
    device `i` (`loop`, one chunk: 1F1B), device `i mod p` (`interleaved`,
    Megatron's interleaved 1F1B) or, for `v = 2`, device `i` for `i < p` and
    `2p - 1 - i` otherwise (`vshape`: ZB-V, V-Half, V-Min).
  }];
}

def Sluice_StreamKindAttr : EnumAttr<Sluice_Dialect, Sluice_StreamKind,
                                     "stream"> {
  let summary = "execution stream";
  let description = [{
    `compute` runs passes; `comm` carries pipeline sends and receives so they
    overlap compute; `vocab` is the high-priority stream of the vocabulary
    collectives (Yeung et al., 2024 §6.1); `data` carries the
    data-parallel gradient all-reduces (`sluice.grad_sync`) beside the
    passes still to run.
  }];
}

def Sluice_ProjectionAttr : EnumAttr<Sluice_Dialect, Sluice_Projection,
                                     "projection"> {
  let summary = "linear map of a transformer layer";
  let description = [{
    The weight matrix a tensor-parallel projection multiplies by: `qkv`
    (queries, keys and values), `out` (attention output), `up` and `gate`
    (the feed-forward block's input maps; `gate` only in gated blocks) and
    `down` (its output map).

    ```mlir
    #sluice.projection<qkv>
    ```
  }];
  let assemblyFormat = "`<` $value `>`";
}

// Schedule names such as `1f1b` and `zb-h1` are not MLIR keywords: print
// them quoted where needed, so that the attribute's generic form
// (`#sluice.schedule<"zb-h1">`) parses back.
def Sluice_ScheduleKindParameter : EnumParameter<Sluice_ScheduleKind> {
  let printer = "$_printer.printKeywordOrString(stringifyScheduleKind($_self))";
}

def Sluice_ScheduleKindAttr : EnumAttr<Sluice_Dialect, Sluice_ScheduleKind,
                                       "schedule"> {
  let summary = "pipeline schedule";
  let description = [{
    The schedule `sluice-schedule` generated a program with: `gpipe`,
    `1f1b`, `interleaved-1f1b`, `zb-h1`, `zb-h2`, `zb-v`, `v-half`,
    `v-min`, `seq1f1b`, `seq1f1b-i`, `terapipe` or `dualpipev`
    (docs/schedules.md).
    `sluice.program` spells it as a string (`schedule = "zb-h1"`).

    ```mlir
    #sluice.schedule<"zb-h1">
    ```
  }];
  let parameters = (ins Sluice_ScheduleKindParameter:$value);
  let assemblyFormat = "`<` $value `>`";
}

def Sluice_SlicingMethodAttr : EnumAttr<Sluice_Dialect, Sluice_SlicingMethod,
                                        "slicing"> {
  let summary = "token slicing method";
  let description = [{
    How `sluice-slice-tokens` cut each sequence: `uniform` (equal
    lengths), `seq1f1b` (equal FLOPs, Sun et al., 2024 §3.3) or
    `terapipe` (the dynamic programme of Li et al., 2021 §3.3).

    ```mlir
    #sluice.slicing<seq1f1b>
    ```
  }];
  let assemblyFormat = "`<` $value `>`";
}

//===----------------------------------------------------------------------===//
// Structured attributes
//===----------------------------------------------------------------------===//

// A real-number parameter written as a plain float (`factor = 32.0`).
// A transformer block's spec (rt::LayerConfig) held as the op's property:
// the C++ struct the plan and the runtime use, its fields and their
// assembly generated from one table (include/sluice/PlanFormat/
// BlockFields.def; dialects/sluice/BlockSpecAsm.cpp, the op's
// custom<BlockSpec>). Its attribute form (the generic syntax, bytecode) is
// the plan's JSON object of the layer.
def Sluice_BlockSpecProp : Property<"::sluice::rt::LayerConfig",
    "a transformer block's spec", "const ::sluice::rt::LayerConfig &"> {
  let hashProperty = "::mlir::sluice::hashBlockSpec($_storage)";
  let writeToMlirBytecode = writeMlirBytecodeWithConvertToAttribute;
  let readFromMlirBytecode = readMlirBytecodeUsingConvertFromAttribute;
}

#endif // SLUICE_BASE_TD
