//===- SluiceOps.td - Sluice operations --------------------*- tablegen -*-===//
//
// Model-level operations: the description of a transformer language model
// that the partitioning, slicing and scheduling passes start from.
//
//===----------------------------------------------------------------------===//

#ifndef SLUICE_OPS_TD
#define SLUICE_OPS_TD

include "sluice/SluiceBase.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/IR/OpAsmInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"

class Sluice_Op<string mnemonic, list<Trait> traits = []>
    : Op<Sluice_Dialect, mnemonic, traits>;

// Layer ops own parameters: two layers with equal attributes are still two
// different computations, so none of them is `Pure` (CSE must never merge
// them).
class Sluice_LayerOp<string mnemonic, list<Trait> traits = []>
    : Sluice_Op<mnemonic, traits # [
        DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmResultNames"]>]> {
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// sluice.model
//===----------------------------------------------------------------------===//

def Sluice_ModelOp : Sluice_Op<"model", [
    Symbol, IsolatedFromAbove, SingleBlock]> {
  let summary = "a transformer language model trained on one microbatch shape";
  let description = [{
    The root of the model level. The single block holds exactly one
    `sluice.embedding`, any number of `sluice.transformer_layer`s and
    exactly one `sluice.output_layer`, chained in that order (each layer
    consumes the previous layer's activation), and ends in `sluice.return`
    of the loss.

    * `seq_len`: tokens per sequence;
    * `micro_batch`: sequences per microbatch;
    * `dtype`: the element type of activations and weights (for example
      `bf16`, `f32`).

    Every activation has type
    `tensor<micro_batch x seq_len x hidden x dtype>`; the verifier checks it.

    After `sluice-partition-stages` the layers sit inside `sluice.stage`
    ops, chained the same way; the model then is the partitioned level.

    `token_slices`, set by `sluice-slice-tokens`, lists the lengths of the
    token slices each sequence is cut into (TeraPipe, Seq1F1B); they sum to
    `seq_len`. `slicing` names the method that chose them. TeraPipe's
    dynamic programme also records `slicing_latency`, the step latency its
    cost model predicts for the cut (seconds), and `slicing_fit_error`, the
    largest relative error of the latency fits it used.

    The numerics every layer shares, which the runtime computes and the
    cost model ignores: `norm_eps` is the epsilon added to the variance
    (LayerNorm) or mean square (RMSNorm) of every norm, 1e-5 when absent;
    `exact_gelu` makes GELU (the `gelu` and `geglu` feed-forward kinds) the
    exact `x * Phi(x)` with the normal CDF instead of the tanh
    approximation (sliding-window attention is a layer's `window`).
    `embedding_scale` multiplies the embedding layer's output (Gemma's
    sqrt(hidden_size)); its gradient is scaled alike. `padding_token` is a
    token whose lookups add nothing to its table row's gradient, as
    PyTorch's `nn.Embedding(padding_idx=...)` computes (Llama's, Mistral's
    and Gemma's `pad_token_id`; the output layer's gradient of a tied
    table's row still does).
    `attention_scale` multiplies every attention score instead of
    1 / sqrt(head_dim) (Gemma-2's `query_pre_attn_scalar`^-0.5), and
    `attention_softcap` caps the scores to cap * tanh(score / cap) before
    the softmax (Gemma-2's `attn_logit_softcapping`); `final_softcap`
    caps the output layer's logits alike (`final_logit_softcapping`).
    `unmodelled` lists what the model it was imported from
    computes and these layers do not (Gemma's `1 + w` norm gain, soft-
    capping, ...): the costs hold, but the runtime refuses to train such a
    model, since it would be a different one.

    ```mlir
    sluice.model @llama {seq_len = 128, micro_batch = 1, dtype = f32}
        attributes {norm_eps = 1.0e-06 : f64} {
      ...
    }
    ```

    ```mlir
    sluice.model @gemma {seq_len = 128, micro_batch = 1, dtype = f32}
        attributes {embedding_scale = 45.254833995939045 : f64,
                    padding_token = 0 : i64} {
      ...
    }
    ```

    ```mlir
    sluice.model @m {seq_len = 4096, micro_batch = 1, dtype = bf16}
        attributes {slicing = #sluice.slicing<seq1f1b>,
                    token_slices = array<i64: 1240, 1060, 941, 855>} {
      ...
    }
    ```

    ```mlir
    sluice.model @tiny {seq_len = 16, micro_batch = 2, dtype = f32} {
      %emb = sluice.embedding {vocab = 256} : tensor<2x16x32xf32>
      %x = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, ffn = 128,
             norm = layernorm, mlp = gelu} : tensor<2x16x32xf32>
      %loss = sluice.output_layer %x {vocab = 256, norm = layernorm}
                : tensor<2x16x32xf32> -> tensor<f32>
      sluice.return %loss : tensor<f32>
    }
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, Sluice_SizeAttr:$seq_len,
                       Sluice_SizeAttr:$micro_batch, TypeAttr:$dtype,
                       OptionalAttr<DenseI64ArrayAttr>:$token_slices,
                       OptionalAttr<Sluice_SlicingMethodAttr>:$slicing,
                       OptionalAttr<Sluice_RealAttr>:$slicing_latency,
                       OptionalAttr<Sluice_RealAttr>:$slicing_fit_error,
                       OptionalAttr<Sluice_RealAttr>:$norm_eps,
                       UnitAttr:$exact_gelu,
                       OptionalAttr<Sluice_RealAttr>:$embedding_scale,
                       OptionalAttr<I64Attr>:$padding_token,
                       OptionalAttr<I64Attr>:$max_positions,
                       OptionalAttr<Sluice_RealAttr>:$attention_scale,
                       OptionalAttr<Sluice_RealAttr>:$attention_softcap,
                       OptionalAttr<Sluice_RealAttr>:$final_softcap,
                       OptionalAttr<StrArrayAttr>:$unmodelled);
  let regions = (region SizedRegion<1>:$body);
  let builders = [
    // A model before sluice-slice-tokens: one slice per sequence.
    OpBuilder<(ins "StringRef":$name, "int64_t":$seq_len,
                   "int64_t":$micro_batch, "Type":$dtype), [{
      build($_builder, $_state, name, seq_len, micro_batch, dtype,
            /*token_slices=*/nullptr, /*slicing=*/nullptr,
            /*slicing_latency=*/nullptr, /*slicing_fit_error=*/nullptr,
            /*norm_eps=*/nullptr, /*exact_gelu=*/false,
            /*embedding_scale=*/nullptr,
            /*padding_token=*/nullptr, /*max_positions=*/nullptr,
            /*attention_scale=*/nullptr,
            /*attention_softcap=*/nullptr, /*final_softcap=*/nullptr,
            /*unmodelled=*/nullptr);
    }]>
  ];
  let assemblyFormat = [{
    $sym_name ` ` `{` `seq_len` `=` $seq_len `,` `micro_batch` `=` $micro_batch
    `,` `dtype` `=` $dtype `}` attr-dict-with-keyword $body
  }];
  let hasVerifier = 1;
  let hasRegionVerifier = 1;
  let extraClassDeclaration = [{
    /// The model's single embedding, or null if the model has none.
    EmbeddingOp getEmbedding();
    /// The model's single output layer, or null if the model has none.
    OutputLayerOp getOutputLayer();
    /// The hidden size (last dimension of the activations).
    int64_t getHidden();
    /// `norm_eps`, or its default 1e-5.
    double getNormEpsOrDefault();
    /// The expected type of every activation between layers.
    RankedTensorType getActivationType();
    /// The lengths of `slices` token slices: the model's `token_slices` if
    /// it has that many, else near-equal lengths.
    SmallVector<int64_t> getSliceLengths(int64_t slices);
  }];
}

//===----------------------------------------------------------------------===//
// Layers
//===----------------------------------------------------------------------===//

def Sluice_EmbeddingOp : Sluice_LayerOp<"embedding", [
    IsolatedFromAbove, SingleBlock]> {
  let summary = "token (and learned position) embedding: the input layer";
  let description = [{
    Looks up each token of the microbatch in a `vocab x hidden` table; the
    hidden size is the result's last dimension. The tokens are the model's
    input and are not an SSA operand. With `positions = n` the layer also
    holds a learned `n x hidden` position table (GPT-2); models with rotary
    embeddings (Llama, Gemma) have none.

    The input layer carries as many parameters as the output layer but
    almost no FLOPs, which is what makes it a memory problem for the first
    pipeline stage (Yeung et al., 2024 §1, Figure 2).

    ```mlir
    %emb = sluice.embedding {vocab = 50257, positions = 2048}
             : tensor<1x2048x768xbf16>
    ```
  }];
  let arguments = (ins Sluice_SizeAttr:$vocab, OptionalAttr<Sluice_SizeAttr>:$positions,
                       OptionalAttr<Sluice_SizeAttr>:$shards);
  let results = (outs AnyRankedTensor:$result);
  let regions = (region AnyRegion:$body);
  let assemblyFormat = [{
    ` ` `{` `vocab` `=` $vocab (`,` `positions` `=` $positions^)? `}`
    attr-dict `:` type($result) (`shards` $shards^ $body)?
  }];
}

def Sluice_TransformerLayerOp : Sluice_LayerOp<"transformer_layer", [
    AllTypesMatch<["input", "result"]>, IsolatedFromAbove, SingleBlock]> {
  let summary = "one decoder block: causal attention and a feed-forward block";
  let description = [{
    `x + attn(norm(x))` followed by `x + mlp(norm(x))`, where attention is
    causal, with `heads` query heads and `kv_heads` key/value heads
    (grouped-query attention when `kv_heads < heads`) of size `head_dim`
    each (`hidden / heads` when absent), and the feed-forward block `ffn`
    wide. The braces hold the block's spec, a property (the C++ struct the
    plan and the runtime use): its fields are the rows of one table,
    `include/sluice/PlanFormat/BlockFields.def`, which also generates this
    syntax, the plan's JSON form and the rules below, so a new block
    feature is a row there and a folder under `lib/Blocks`. Entries are
    `key = value`, a flag by its key alone, in any order; the printer
    writes them in the table's order, the required ones always and the
    others when they are not their default. The fields, their values and
    what each means are generated from the table into
    [BlockFields.md](BlockFields.md): the block's shape (`heads`,
    `kv_heads`, `head_dim` -- `hidden / heads` when absent --, `ffn`,
    `norm`, `mlp`; required but `head_dim`), then its features (biases,
    norms of the queries and keys, the norms before and after each half,
    rotary positions and their scaling, sliding-window attention), each a
    folder under `lib/Blocks` that declares its parameters, state and FLOPs
    and computes its F, B and W at the block's slots.

    The cost model counts the parameters and FLOPs each feature declares
    and the keys a window leaves; rotary positions change no work.

    Rules checked by the verifier (the plan reader holds plans to the same
    function, lib/Blocks/Spec.cpp): all sizes positive; `kv_heads` divides
    `heads`; `heads` divides `hidden` when `head_dim` is absent;
    `rope_theta` positive and the head size even when it is given;
    `rope_scaling` only with `rope_theta`, its factors in range; not both
    `bias` and `qkv_bias`; `features` registered; each feature's own rules.

    ```mlir
    // Llama-3-8B: grouped-query attention, SwiGLU, rotary positions.
    %y = sluice.transformer_layer %x {heads = 32, kv_heads = 8, ffn = 14336,
           norm = rmsnorm, mlp = swiglu, rope_theta = 500000.0}
           : tensor<1x8192x4096xbf16>
    // Llama-3.2-1B: Llama 3.1's scaled rotary frequencies.
    %z = sluice.transformer_layer %x {heads = 32, kv_heads = 8, ffn = 8192,
           norm = rmsnorm, mlp = swiglu, rope_theta = 500000.0,
           rope_scaling = llama3<factor = 32.0, low_freq_factor = 1.0,
             high_freq_factor = 4.0, original_max_positions = 8192>}
           : tensor<1x8192x2048xbf16>
    // Qwen2.5-7B: biases on the query, key and value projections only.
    %q = sluice.transformer_layer %x {heads = 28, kv_heads = 4, ffn = 18944,
           norm = rmsnorm, mlp = swiglu, qkv_bias, rope_theta = 1000000.0}
           : tensor<1x8192x3584xbf16>
    // GPT-2 small: biases everywhere.
    %h = sluice.transformer_layer %g {heads = 12, kv_heads = 12, ffn = 3072,
           norm = layernorm, mlp = gelu, bias} : tensor<1x1024x768xbf16>
    // Gemma-2-9B: sandwich norms, and heads * head_dim = 4096 differs
    // from hidden = 3584.
    %w = sluice.transformer_layer %u {heads = 16, kv_heads = 8, head_dim = 256,
           ffn = 14336, norm = rmsnorm, mlp = geglu, rope_theta = 10000.0,
           post_norms} : tensor<1x8192x3584xbf16>
    // OLMo-2-7B's norms: after each half only (its query and key norms
    // are in BlockFields.md).
    %o = sluice.transformer_layer %x {heads = 32, kv_heads = 32, ffn = 11008,
           norm = rmsnorm, mlp = swiglu, rope_theta = 500000.0,
           pre_norms = false, post_norms} : tensor<1x4096x4096xbf16>
    // Mistral-7B: every layer attends over the last 4096 keys.
    %m = sluice.transformer_layer %x {heads = 32, kv_heads = 8, ffn = 14336,
           norm = rmsnorm, mlp = swiglu, rope_theta = 1000000.0,
           window = 4096} : tensor<1x8192x4096xbf16>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, Sluice_BlockSpecProp:$spec,
                       OptionalAttr<Sluice_SizeAttr>:$shards);
  let results = (outs AnyRankedTensor:$result);
  let regions = (region AnyRegion:$body);
  let assemblyFormat = [{
    $input custom<BlockSpec>($spec) attr-dict `:` type($input)
    (`shards` $shards^ $body)?
  }];
  let extraClassDeclaration = [{
    /// The hidden size, the last dimension of the input.
    int64_t getHidden();
    /// `head_dim` if given, `hidden / heads` otherwise.
    int64_t getHeadDimOrDefault();
  }];
}

def Sluice_OutputLayerOp : Sluice_LayerOp<"output_layer", [
    IsolatedFromAbove, SingleBlock]> {
  let summary = "final norm, LM head and softmax cross-entropy: the output layer";
  let description = [{
    Normalises the last activation (`norm`), projects it onto the
    vocabulary with a `hidden x vocab` matrix, and takes the softmax
    cross-entropy against the next tokens, producing the mean loss of the
    microbatch. With `tied` the projection is the transpose of the
    embedding table (no parameters of its own); the model then requires
    equal vocabularies.

    With a large vocabulary this one layer outweighs several transformer
    layers in parameters and FLOPs (Yeung et al., 2024
    Figure 2: about 5x for Gemma-2-9B), which is why later passes split it
    over all pipeline devices.

    ```mlir
    %loss = sluice.output_layer %x {vocab = 128256, norm = rmsnorm}
              : tensor<1x8192x4096xbf16> -> tensor<f32>
    %tied = sluice.output_layer %v {vocab = 256000, norm = rmsnorm, tied}
              : tensor<1x8192x3584xbf16> -> tensor<f32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$input, Sluice_SizeAttr:$vocab,
                       Sluice_NormKindAttr:$norm, UnitAttr:$tied,
                       OptionalAttr<Sluice_SizeAttr>:$shards);
  let results = (outs 0DTensorOf<[F32]>:$loss);
  let regions = (region AnyRegion:$body);
  let assemblyFormat = [{
    $input ` ` `{` `vocab` `=` $vocab `,` `norm` `=` `` $norm (`,` `tied` $tied^)? `}`
    attr-dict `:` type($input) `->` type($loss) (`shards` $shards^ $body)?
  }];
}

//===----------------------------------------------------------------------===//
// Partitioned level
//===----------------------------------------------------------------------===//

def Sluice_StageOp : Sluice_Op<"stage", [
    IsolatedFromAbove, SingleBlock, HasParent<"ModelOp">]> {
  let summary = "consecutive layers that one device runs as one pipeline stage";
  let description = [{
    Groups consecutive layers of a model into a pipeline stage placed on
    `device`, as its `chunk`-th chunk (interleaved and V-shape placements
    give a device several chunks). The stage takes the previous stage's
    activation as its block argument and yields its own; the first stage
    (with the embedding) takes none and the last (with the output layer)
    yields the loss.

    `@name` is unique within the model; program-level instructions name
    stages by it. (A stage is not an MLIR symbol: symbols cannot have
    results, and a stage yields the activation it passes on.)

    `sluice-split-passes` records the passes the schedule places for the
    stage: `passes` (F, B, W when the backward is split, F and BW
    otherwise), their forward-equivalent `flops` per microbatch in the same
    order, and `activation_bytes`, the activations one microbatch keeps
    alive from its F until its B (or BW). With activation recomputation
    (`recompute`), B's FLOPs include what it recomputes and
    `activation_bytes` only what F keeps.

    ```mlir
    %a = sluice.stage @s0 device 0 chunk 0 -> tensor<1x16x32xf32> {
      %emb = sluice.embedding {vocab = 100} : tensor<1x16x32xf32>
      %x = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, ffn = 128,
             norm = layernorm, mlp = gelu} : tensor<1x16x32xf32>
      sluice.yield %x : tensor<1x16x32xf32>
    }
    %loss = sluice.stage @s1 device 1 chunk 0 (%a : tensor<1x16x32xf32>)
        -> tensor<f32> attributes {activation_bytes = 40960 : i64,
        flops = array<i64: 1048576, 1064960, 1015808>,
        passes = [#sluice.pass<F>, #sluice.pass<B>, #sluice.pass<W>]} {
    ^bb0(%in: tensor<1x16x32xf32>):
      ...
    }
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, Sluice_SizeAttr:$device,
                       Sluice_SizeAttr:$chunk,
                       Optional<AnyRankedTensor>:$input,
                       OptionalAttr<TypedArrayAttrBase<Sluice_PassKindAttr,
                                    "pass kinds">>:$passes,
                       OptionalAttr<DenseI64ArrayAttr>:$flops,
                       OptionalAttr<Sluice_SizeAttr>:$activation_bytes,
                       OptionalAttr<Sluice_RecomputeKindAttr>:$recompute);
  let results = (outs AnyType:$result);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $sym_name `device` $device `chunk` $chunk
    (` ` `(` $input^ `:` type($input) `)`)? `->` type($result)
    attr-dict-with-keyword $body
  }];
  let hasVerifier = 1;
  let hasRegionVerifier = 1;
  let extraClassDeclaration = [{
    /// The layer ops of the stage, in order (the yield excluded).
    SmallVector<Operation *> getLayers();
    /// The number of transformer layers in the stage.
    int64_t getNumTransformerLayers();
  }];
}

def Sluice_YieldOp : Sluice_Op<"yield", [
    Pure, Terminator, ReturnLike, HasParent<"StageOp">]> {
  let summary = "yields a stage's activation";
  let description = [{
    Terminates a `sluice.stage` with the result of its last layer: the
    activation the next stage takes, the normalised activation a
    vocabulary-parallel output layer takes, or the loss.

    ```mlir
    sluice.yield %x : tensor<1x16x32xf32>
    ```
  }];
  let arguments = (ins AnyType:$value);
  let assemblyFormat = "$value `:` type($value) attr-dict";
}

//===----------------------------------------------------------------------===//
// Program level
//===----------------------------------------------------------------------===//

def Sluice_ProgramOp : Sluice_Op<"program", [
    Symbol, IsolatedFromAbove, SingleBlock, NoTerminator,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "one ordered instruction list per pipeline device";
  let description = [{
    The output of `sluice-schedule`: for the partitioned model `model`, one
    `sluice.device` region per device, each holding the exact order in
    which that device's runtime issues its instructions for one training
    step of `microbatches` microbatches, each cut into `slices` token
    slices. `schedule` names the schedule that produced it (written as a
    string: `schedule = "zb-h1"`).

    The program runs on a device mesh (docs/parallelism.md): `devices`
    pipeline devices, each split into `tp` tensor-parallel shards
    (`sluice-shard-tensors`) and replicated `dp` times for data
    parallelism. Shard t of replica r of pipeline device d is rank
    d * tp * dp + r * tp + t (tensor-parallel ranks innermost, as
    Megatron-LM orders them). Every replica runs the
    same program on its own microbatches; `sluice.grad_sync` instructions
    average the gradients over the replicas. Both are printed only when
    not 1. `zero 1` (ZeRO stage 1, Megatron-LM's distributed optimizer)
    shards the optimizer state over the replicas: each `sluice.grad_sync`
    reduce-scatters its gradients, each replica updates its part of the
    weights and the step ends by all-gathering them. `zero 2` shards the
    gradients too: the runtime reduce-scatters each layer's gradients
    after its W into the replica's part, and the `sluice.grad_sync`
    only marks where the stage's last one is done. `zero 3` (FSDP) shards
    the weights too: the runtime all-gathers each layer's working weights
    before each pass that uses them, into one of two layer-sized slots
    (re-sharding every pass); with `reshard_per_step` it gathers each
    layer once a step into a copy of the device's whole working weights,
    kept until the update.

    ```mlir
    sluice.program @plan for @gpt {devices = 2, microbatches = 4, slices = 1,
                                   schedule = "1f1b"} dp 2 zero 3 reshard_per_step {
      ...
    }
    ```

    `cp` (context parallelism) splits each replica's sequences over `cp`
    ranks: every slice is cut into 2 cp equal chunks and rank i of the `cp`
    holds chunks i and 2 cp - 1 - i (Megatron-LM's causal balance), so
    each runs the program on 1/cp of the tokens. Attention gathers the
    keys and values of the slice from the `cp` ranks in F and returns
    their gradients in B; everything else is per token. The gradients
    are summed over the dp x cp ranks of a device (the `sluice.grad_sync`
    instructions, ZeRO's shards); a pipeline device has dp x cp x tp
    ranks, replica r's context rank c of shard t being rank
    ((d dp + r) cp + c) tp + t.

    ```mlir
    sluice.program @plan for @llama {devices = 2, microbatches = 4,
                                     slices = 1, schedule = "1f1b"} dp 2 cp 2 {
      ...
    }
    ```

    `ep` (expert parallelism, Megatron-LM's expert-model-parallel size)
    splits the experts of every mixture-of-experts layer over `ep`
    consecutive replicas of the data-parallel group: replica r is member
    r mod ep of expert group r / ep and holds experts [j E/ep, (j+1) E/ep)
    of each sparse layer (j its member index, E the layer's experts). Each
    member routes its own tokens and sends each token's copies to the
    members holding their experts and back (an all-to-all with counts
    exchanged first, inside the layer's F and B); the experts' gradients
    are summed over the dp / ep replicas that hold the same experts, the
    other gradients over all `dp`. `ep` divides `dp` and every sparse
    layer's expert count. `capacity C` (at least 1) sizes what a member's
    experts compute on for C times the balanced share of copies (tokens x
    top_k) instead of the most any routing sends; a step whose routing
    sends a member more is refused.

    `sluice-simulate` records what it predicts for one step under the
    cost model: `step_time` (seconds), `bubble_ratio` (idle device time
    over total device time), `peak_activation` (per device, the most
    activations it holds at once from F to B, in microbatch units: one unit
    is one microbatch's activations of 1/p of the transformer layers, the
    unit the schedules' memory claims use), `peak_activation_until_w` (the
    same held until W, since W reads part of them), and `mfu` (model FLOPs
    utilisation, when the cost model knows the device's peak). The
    driver's report prints them.

    `sequence_parallel` (Megatron-LM's sequence parallelism, with `tp` of
    at least 2): between the layers' tensor-parallel regions each shard
    holds only its 1/tp of the tokens, so the layers' shard bodies take
    and yield token slices and their collectives are all-gathers and
    reduce-scatters (`sluice.tp_gather`, `sluice.tp_scatter`) instead of
    all-reduces; the norms, residuals and pipeline transfers work on the
    slice.

    ```mlir
    sluice.program @plan for @gpt {devices = 2, microbatches = 1, slices = 1,
                                   schedule = "1f1b"} {
      sluice.device 0 {
        sluice.exec F @s0 {mb = 0, slice = 0}
        sluice.send F @s0 {mb = 0, slice = 0} to 1
        sluice.recv BW @s1 {mb = 0, slice = 0} from 1
        sluice.exec BW @s0 {mb = 0, slice = 0}
      }
      sluice.device 1 {
        sluice.recv F @s0 {mb = 0, slice = 0} from 0
        sluice.exec F @s1 {mb = 0, slice = 0}
        sluice.exec BW @s1 {mb = 0, slice = 0}
        sluice.send BW @s1 {mb = 0, slice = 0} to 0
      }
    }
    ```

    With two data-parallel replicas of each device:

    ```mlir
    sluice.program @plan for @gpt {devices = 2, microbatches = 1, slices = 1,
                                   schedule = "1f1b"} dp 2 {
      ...
    }
    ```

    Four replicas, the experts of each sparse layer split over pairs:

    ```mlir
    sluice.program @plan for @moe {devices = 2, microbatches = 4, slices = 1,
                                   schedule = "1f1b"} dp 4 ep 2 {
      ...
    }
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, FlatSymbolRefAttr:$model,
                       Sluice_SizeAttr:$devices, Sluice_SizeAttr:$microbatches,
                       Sluice_SizeAttr:$slices,
                       Sluice_ScheduleKindAttr:$schedule,
                       DefaultValuedAttr<Sluice_SizeAttr, "1">:$tp,
                       DefaultValuedAttr<Sluice_SizeAttr, "1">:$dp,
                       DefaultValuedAttr<Sluice_SizeAttr, "1">:$cp,
                       DefaultValuedAttr<I64Attr, "0">:$zero,
                       UnitAttr:$reshard_per_step,
                       DefaultValuedAttr<Sluice_SizeAttr, "1">:$ep,
                       OptionalAttr<Sluice_RealAttr>:$expert_capacity,
                       UnitAttr:$sequence_parallel,
                       // Set by sluice-simulate.
                       OptionalAttr<Sluice_RealAttr>:$step_time,
                       OptionalAttr<Sluice_RealAttr>:$bubble_ratio,
                       OptionalAttr<DenseF64ArrayAttr>:$peak_activation,
                       OptionalAttr<DenseF64ArrayAttr>:$peak_activation_until_w,
                       OptionalAttr<Sluice_RealAttr>:$mfu);
  let regions = (region SizedRegion<1>:$body);
  let builders = [
    // A program as sluice-schedule writes it: on one replica of
    // unsharded devices, not yet simulated.
    OpBuilder<(ins "StringRef":$name, "StringRef":$model, "int64_t":$devices,
                   "int64_t":$microbatches, "int64_t":$slices,
                   "ScheduleKind":$schedule), [{
      build($_builder, $_state, name, model, devices, microbatches, slices,
            schedule, /*tp=*/1, /*dp=*/1, /*cp=*/1, /*zero=*/0,
            /*reshard_per_step=*/false, /*ep=*/1,
            /*expert_capacity=*/nullptr,
            /*sequence_parallel=*/false, /*step_time=*/nullptr,
            /*bubble_ratio=*/nullptr, /*peak_activation=*/nullptr,
            /*peak_activation_until_w=*/nullptr, /*mfu=*/nullptr);
    }]>
  ];
  let assemblyFormat = [{
    $sym_name `for` $model ` ` `{` `devices` `=` $devices `,`
    `microbatches` `=` $microbatches `,` `slices` `=` $slices `,`
    `schedule` `=` custom<ScheduleName>($schedule) `}` (`tp` $tp^)?
    (`sequence_parallel` $sequence_parallel^)? (`dp` $dp^)? (`cp` $cp^)? (`zero` $zero^)?
    (`reshard_per_step` $reshard_per_step^)? (`ep` $ep^)? (`capacity` $expert_capacity^)? attr-dict-with-keyword $body
  }];
  let hasVerifier = 1;
}

def Sluice_DeviceOp : Sluice_Op<"device", [
    SingleBlock, NoTerminator, HasParent<"ProgramOp">]> {
  let summary = "the instruction list of one device";
  let description = [{
    Holds, in execution order, the `sluice.exec`, `sluice.send`,
    `sluice.recv`, `sluice.collective` and `sluice.grad_sync` instructions
    of device `index`, with `sluice.repeat` blocks for stretches that run
    again for later microbatches.

    `sluice-plan-buffers` gives the device's activation memory as
    `buffers`: the size in bytes of each buffer slot, which the
    instructions' slot attributes index (docs/plan-format.md).

    ```mlir
    sluice.device 1 {
      sluice.recv F @s0 {mb = 0, slice = 0} from 0
      sluice.exec F @s1 {mb = 0, slice = 0}
    }
    sluice.device 0 attributes {buffers = array<i64: 6144, 4096>} {
      sluice.exec F @s0 {mb = 0, slice = 0} {out = 1 : i64, state = 0 : i64}
      sluice.send F @s0 {mb = 0, slice = 0} to 1 {buffer = 1 : i64}
    }
    ```
  }];
  let arguments = (ins Sluice_SizeAttr:$index,
                       OptionalAttr<DenseI64ArrayAttr>:$buffers);
  let builders = [
    OpBuilder<(ins "int64_t":$index), [{
      build($_builder, $_state, index, /*buffers=*/nullptr);
    }]>
  ];
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$index attr-dict-with-keyword $body";
}

def Sluice_RepeatOp : Sluice_Op<"repeat", [
    SingleBlock, NoTerminator, HasParent<"DeviceOp">]> {
  let summary = "a stretch of a device's instructions run several times";
  let description = [{
    Runs its body `count` times in a row. In run `i` (from 0) every
    instruction's microbatch is the body's plus `i * mb_step`, and every
    buffer slot `x` is the slot map applied `i` times; `slots` lists the
    map's entries `from -> to`, a slot it does not list maps to itself.
    Schedules are periodic -- after its warm-up a device runs the same few
    instructions for one microbatch after another -- so the program a
    deep pipeline needs grows with its devices, not with its microbatches
    (`sluice-schedule repeats=true`, which sluice-compile sets). The passes
    that read a program run the blocks out (readProgram); the buffer
    planner gives the body the slots of its first run and the map, or
    writes the runs out where its slots do not repeat; the plan writer
    writes a block as a plan repeat block (docs/plan-format.md).

    Repeats do not nest, and a body holds no `sluice.grad_sync` (it stands
    after a stage's last pass, once).

    ```mlir
    sluice.device 1 {
      sluice.recv F @s0 {mb = 0, slice = 0} from 0
      sluice.repeat 6 mb_step 1 {
        sluice.exec F @s1 {mb = 0, slice = 0}
        sluice.recv F @s0 {mb = 1, slice = 0} from 0
      }
    }
    sluice.device 0 attributes {buffers = array<i64: 4096, 4096>} {
      sluice.repeat 8 mb_step 1 slots [0 -> 1, 1 -> 0] {
        sluice.exec F @s0 {mb = 0, slice = 0} {out = 0 : i64}
        sluice.send F @s0 {mb = 0, slice = 0} to 1 {buffer = 0 : i64}
      }
    }
    ```
  }];
  let arguments = (ins Sluice_SizeAttr:$count, Sluice_SizeAttr:$mb_step,
                       OptionalAttr<DenseI64ArrayAttr>:$slots);
  let builders = [
    // Before sluice-plan-buffers: no slot map.
    OpBuilder<(ins "int64_t":$count, "int64_t":$mbStep), [{
      build($_builder, $_state, count, mbStep, /*slots=*/nullptr);
    }]>
  ];
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $count `mb_step` $mb_step (`slots` custom<SlotMap>($slots)^)?
    attr-dict-with-keyword $body
  }];
  let extraClassDeclaration = [{
    /// The slot map as (from, to) pairs, ascending; empty before
    /// sluice-plan-buffers.
    SmallVector<std::pair<int64_t, int64_t>> getSlotMap();
  }];
  let hasVerifier = 1;
}

// Instructions name a unit of work by (pass, stage, microbatch, slice); a
// send or receive names the unit whose result it carries, which is also the
// key that matches the two.
// The named stage or shard must exist in the program's model: checked with
// the other symbol uses when the module verifies, not only by the passes
// that read the program -- by the program's verifySymbolUses, which looks
// the model's names up once for all its instructions (each instruction
// scanning the model was a fifth of a p 64, m 512 compile).
class Sluice_InstrOp<string mnemonic, list<Trait> traits = []>
    : Sluice_Op<mnemonic, traits # [ParentOneOf<["DeviceOp", "RepeatOp"]>]> {
  let hasVerifier = 1;
}

// The unit of work a stage instruction names.
defvar Sluice_WorkArgs = (ins Sluice_PassKindAttr:$kind,
                              FlatSymbolRefAttr:$stage, Sluice_SizeAttr:$mb,
                              Sluice_SizeAttr:$slice);

// The buffer slot of the activation a send reads or a receive writes: an
// index into the device's `buffers`, set by sluice-plan-buffers.
defvar Sluice_MessageArgs = (ins DefaultValuedAttr<Sluice_StreamKindAttr,
                                     "StreamKind::comm">:$stream,
                                 OptionalAttr<Sluice_SizeAttr>:$buffer);

def Sluice_ExecOp : Sluice_InstrOp<"exec"> {
  let summary = "runs one pass of a stage for one microbatch slice";
  let description = [{
    Runs pass `kind` of stage `stage` for microbatch `mb`, token slice
    `slice`, on the device's compute stream. The passes of a vocabulary
    shard (S, S2, T, IF, IB) name the shard instead of a stage and run on
    the device whose region holds them.

    `sluice-plan-buffers` names the buffer slots (indices into the
    device's `buffers`) a stage pass reads and writes:

    * `state`: what F keeps for B and W (F writes it, B and W read it);
    * `wstate`: what B keeps for W (B or BW writes it, W reads it);
    * `rstate`: what a recomputing stage's B made again for W;
    * `kv`: the keys and values of earlier token slices of the microbatch
      (the first slice's F writes them, later slices and B read them);
    * `in`: the activation or gradient the pass takes from the stage
      before (F) or after (B, BW);
    * `out`: the activation or gradient it passes on.

    A pass without a role has no such value (the first stage has no `in`).

    `paired` joins the pass to the one after it in an overlapped group
    (DeepSeek-AI, 2024, §3.2.1, DualPipe): a forward beside another
    microbatch's backward -- B, B and its W, or BW -- on the same device,
    the members' receives before the group and their sends after it, so
    that each one's expert all-to-alls run while the other computes. The
    schedule verifier checks the group's shape and that no member needs
    another's result.

    ```mlir
    sluice.exec W @s3 {mb = 5, slice = 0}
    sluice.exec B @s1 {mb = 0, slice = 0} {in = 3 : i64, out = 4 : i64,
                                           state = 0 : i64, wstate = 2 : i64}
    sluice.exec F @s0 {mb = 6, slice = 0} {paired}
    sluice.exec B @s3 {mb = 2, slice = 0} {paired}
    sluice.exec W @s3 {mb = 2, slice = 0}
    ```
  }];
  let arguments = !con(Sluice_WorkArgs,
                       (ins OptionalAttr<Sluice_SizeAttr>:$state,
                            OptionalAttr<Sluice_SizeAttr>:$wstate,
                            OptionalAttr<Sluice_SizeAttr>:$rstate,
                            OptionalAttr<Sluice_SizeAttr>:$kv,
                            OptionalAttr<Sluice_SizeAttr>:$in,
                            OptionalAttr<Sluice_SizeAttr>:$out,
                            UnitAttr:$paired));
  let builders = [
    // Before sluice-plan-buffers: no slots.
    OpBuilder<(ins "PassKind":$kind, "StringRef":$stage, "int64_t":$mb,
                   "int64_t":$slice), [{
      build($_builder, $_state, kind, stage, mb, slice, nullptr, nullptr,
            nullptr, nullptr, nullptr, nullptr, /*paired=*/false);
    }]>
  ];
  let assemblyFormat = [{
    custom<PassKind>($kind) $stage ` ` `{` `mb` `=` $mb `,` `slice` `=` $slice
    `}` attr-dict
  }];
}

def Sluice_SendOp : Sluice_InstrOp<"send"> {
  let summary = "sends the result of a pass to another device";
  let description = [{
    Sends the activation (after F) or gradient (after B or BW) produced by
    pass `kind` of `stage` for microbatch `mb`, slice `slice`, to device
    `to`, on `stream` (the communication stream unless said). Non-blocking:
    the runtime waits for it only before reusing the buffer, slot `buffer`
    once `sluice-plan-buffers` has run.

    ```mlir
    sluice.send F @s0 {mb = 0, slice = 0} to 1
    sluice.send B @s1 {mb = 2, slice = 0} to 0 {buffer = 4 : i64}
    ```
  }];
  let arguments = !con(Sluice_WorkArgs, (ins Sluice_SizeAttr:$to),
                       Sluice_MessageArgs);
  let builders = [
    // Before sluice-plan-buffers: no slot.
    OpBuilder<(ins "PassKind":$kind, "StringRef":$stage, "int64_t":$mb,
                   "int64_t":$slice, "int64_t":$to, "StreamKind":$stream), [{
      build($_builder, $_state, kind, stage, mb, slice, to, stream,
            /*buffer=*/nullptr);
    }]>
  ];
  let assemblyFormat = [{
    custom<PassKind>($kind) $stage ` ` `{` `mb` `=` $mb `,` `slice` `=` $slice
    `}` `to` $to (`on` $stream^)? attr-dict
  }];
}

def Sluice_RecvOp : Sluice_InstrOp<"recv"> {
  let summary = "receives the result of a pass from another device";
  let description = [{
    Receives what the matching `sluice.send` (same pass, stage, microbatch
    and slice) on device `from` sends, into slot `buffer` once
    `sluice-plan-buffers` has run. The device's instruction stream waits
    here until the data has arrived.

    ```mlir
    sluice.recv F @s0 {mb = 0, slice = 0} from 0
    ```
  }];
  let arguments = !con(Sluice_WorkArgs, (ins Sluice_SizeAttr:$from),
                       Sluice_MessageArgs);
  let builders = [
    // Before sluice-plan-buffers: no slot.
    OpBuilder<(ins "PassKind":$kind, "StringRef":$stage, "int64_t":$mb,
                   "int64_t":$slice, "int64_t":$from, "StreamKind":$stream), [{
      build($_builder, $_state, kind, stage, mb, slice, from, stream,
            /*buffer=*/nullptr);
    }]>
  ];
  let assemblyFormat = [{
    custom<PassKind>($kind) $stage ` ` `{` `mb` `=` $mb `,` `slice` `=` $slice
    `}` `from` $from (`on` $stream^)? attr-dict
  }];
}

def Sluice_CollectiveInstrOp : Sluice_InstrOp<"collective"> {
  let summary = "issues one collective of a vocabulary shard";
  let description = [{
    Issues collective `group` of vocabulary shard `shard` (the symbol of a
    `sluice.vocab_output` or `sluice.vocab_input`) for microbatch `mb`,
    slice `slice`. The groups of an output shard are its broadcast of X
    (0) and its barriers in order (1 to `barriers`); those of an input
    shard its forward reduce (0) and backward broadcast (1). Every device
    issues the same collectives in the same order.

    On the `vocab` stream (the default) the collective is non-blocking: the
    device goes on, and only the passes that read its result wait for it.
    On `compute` it blocks the device until every device has joined (the
    interlaced baseline).

    ```mlir
    sluice.collective @vout 1 {mb = 3, slice = 0}
    sluice.collective @vout 0 {mb = 0, slice = 0} on compute
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$shard, Sluice_SizeAttr:$group,
                       Sluice_SizeAttr:$mb, Sluice_SizeAttr:$slice,
                       DefaultValuedAttr<Sluice_StreamKindAttr,
                                         "StreamKind::vocab">:$stream);
  let assemblyFormat = [{
    $shard $group ` ` `{` `mb` `=` $mb `,` `slice` `=` $slice `}`
    (`on` $stream^)? attr-dict
  }];
}

def Sluice_GradSyncOp : Sluice_InstrOp<"grad_sync"> {
  let summary = "averages a stage's gradients over the data-parallel replicas";
  let description = [{
    Starts the all-reduce that averages the weight gradients of `stage` (a
    stage, or a vocabulary shard's symbol) over the program's `dp`
    replicas of this device. It stands after the last pass of `stage` on
    the device, so the gradients are final; it does not block: the
    reduction overlaps the passes after it, and the optimizer step waits
    for it (Li, LLM Systems, data parallelism;
    `sluice-sync-gradients` places it).

    ```mlir
    sluice.exec W @s0 {mb = 7, slice = 0}
    sluice.grad_sync @s0
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$stage);
  let assemblyFormat = "$stage attr-dict";
}

include "sluice/SluiceVocabOps.td"
include "sluice/SluiceTensorOps.td"

def Sluice_ReturnOp : Sluice_Op<"return", [
    Pure, Terminator, ReturnLike, HasParent<"ModelOp">]> {
  let summary = "yields the loss of a model";
  let description = [{
    Terminates a `sluice.model`; its operand is the output layer's loss.

    ```mlir
    sluice.return %loss : tensor<f32>
    ```
  }];
  let arguments = (ins 0DTensorOf<[F32]>:$loss);
  let assemblyFormat = "$loss attr-dict `:` type($loss)";
}

#endif // SLUICE_OPS_TD
