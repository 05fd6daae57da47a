//===- Passes.td - Sluice compiler passes ------------------*- tablegen -*-===//

#ifndef SLUICE_TRANSFORMS_PASSES_TD
#define SLUICE_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def SetMicrobatchShape : Pass<"sluice-set-microbatch-shape", "ModuleOp"> {
  let summary = "Set the sequence length and micro-batch size of every model";
  let description = [{
    Rewrites the `seq_len` and `micro_batch` attributes of each
    `sluice.model` and the types of all its activations to match, so that
    one model description serves any training shape. This is what
    `sluice-compile --seq-len S --micro-batch B` runs. A zero option keeps
    the model's value.

    Before, with `seq-len=4096`:

    ```mlir
    sluice.model @m {seq_len = 2048, micro_batch = 1, dtype = bf16} {
      %emb = sluice.embedding {vocab = 32000} : tensor<1x2048x512xbf16>
      ...
    ```

    After:

    ```mlir
    sluice.model @m {seq_len = 4096, micro_batch = 1, dtype = bf16} {
      %emb = sluice.embedding {vocab = 32000} : tensor<1x4096x512xbf16>
      ...
    ```

    A learned position table shorter than the new sequence is rejected by
    the model's verifier after the pass.
  }];
  let dependentDialects = ["::mlir::sluice::SluiceDialect"];
  let options = [
    Option<"seqLen", "seq-len", "int64_t", /*default=*/"0",
           "tokens per sequence (0 keeps the model's)">,
    Option<"microBatch", "micro-batch", "int64_t", /*default=*/"0",
           "sequences per microbatch (0 keeps the model's)">
  ];
}

#endif // SLUICE_TRANSFORMS_PASSES_TD
