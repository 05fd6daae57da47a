//===- Passes.td - Sluice compiler passes ------------------*- tablegen -*-===//

#ifndef SLUICE_TRANSFORMS_PASSES_TD
#define SLUICE_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def SetMicrobatchShape : Pass<"sluice-set-microbatch-shape", "ModuleOp"> {
  let summary = "Set the sequence length, micro-batch size and element type of every model";
  let description = [{
    Rewrites the `seq_len` and `micro_batch` attributes of each
    `sluice.model` and the types of all its activations to match, so that
    one model description serves any training shape. `dtype` (`bf16` or
    `f32`) sets the element type the same way: the precision a plan trains
    in (docs/precision.md). This is what `sluice-compile --seq-len S
    --micro-batch B --precision bf16|fp32` runs. A zero or empty option
    keeps the model's value.

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
           "sequences per microbatch (0 keeps the model's)">,
    Option<"dtype", "dtype", "std::string", /*default=*/"\"\"",
           "element type of activations and weights: bf16 or f32 (empty "
           "keeps the model's)">
  ];
}

def PartitionStages : Pass<"sluice-partition-stages", "ModuleOp"> {
  let summary = "Group a model's layers into pipeline stages on devices";
  let description = [{
    Cuts each model-level `sluice.model` into `pp * virtual` consecutive
    `sluice.stage`s and places them on `pp` devices:

    * `placement=loop`: stage `i` on device `i` (1F1B; `virtual` = 1);
    * `placement=interleaved`: stage `i` on device `i mod pp`, chunk
      `i / pp` (Megatron's interleaved 1F1B);
    * `placement=vshape`: `virtual` = 2, device `i` holds stages `i` and
      `2 pp - 1 - i` (ZB-V, V-Half, V-Min).

    `balance=uniform` gives every stage the same number of transformer
    layers (the spare ones to stages 1, 2, ...); `balance=compute` moves
    whole layers to even out forward FLOPs, vocabulary layers included --
    the vocabulary-parallelism paper's "Redis" baseline; `balance=auto`
    (sluice-compile's default) is `uniform` unless a cut by FLOPs with at
    least one layer per stage makes the costliest stage 5% cheaper (a
    large vocabulary's head on a shallow pipeline). The embedding sits
    on the first stage and the output layer on the last (the paper's
    "Baseline").

    Before, with `pp=2`:

    ```mlir
    sluice.model @m {seq_len = 16, micro_batch = 1, dtype = f32} {
      %emb = sluice.embedding {vocab = 100} : tensor<1x16x32xf32>
      %x = sluice.transformer_layer %emb {...} : tensor<1x16x32xf32>
      %x_0 = sluice.transformer_layer %x {...} : tensor<1x16x32xf32>
      %loss = sluice.output_layer %x_0 {...} : tensor<1x16x32xf32> -> tensor<f32>
      sluice.return %loss : tensor<f32>
    }
    ```

    After:

    ```mlir
    sluice.model @m {seq_len = 16, micro_batch = 1, dtype = f32} {
      %0 = sluice.stage @s0 device 0 chunk 0 -> tensor<1x16x32xf32> {
        %emb = sluice.embedding {vocab = 100} : tensor<1x16x32xf32>
        %x = sluice.transformer_layer %emb {...} : tensor<1x16x32xf32>
        sluice.yield %x : tensor<1x16x32xf32>
      }
      %1 = sluice.stage @s1 device 1 chunk 0 (%0 : tensor<1x16x32xf32>) -> tensor<f32> {
      ^bb0(%arg0: tensor<1x16x32xf32>):
        %x = sluice.transformer_layer %arg0 {...} : tensor<1x16x32xf32>
        %loss = sluice.output_layer %x {...} : tensor<1x16x32xf32> -> tensor<f32>
        sluice.yield %loss : tensor<f32>
      }
      sluice.return %1 : tensor<f32>
    }
    ```
  }];
  let dependentDialects = ["::mlir::sluice::SluiceDialect"];
  let options = [
    Option<"pp", "pp", "int64_t", /*default=*/"1", "pipeline devices">,
    Option<"virtualChunks", "virtual", "int64_t", /*default=*/"1",
           "stages (chunks) per device">,
    Option<"placement", "placement", "::mlir::sluice::PlacementKind",
           /*default=*/"::mlir::sluice::PlacementKind::loop",
           "stage placement", [{::llvm::cl::values(
             clEnumValN(::mlir::sluice::PlacementKind::loop, "loop",
                        "one chunk per device"),
             clEnumValN(::mlir::sluice::PlacementKind::interleaved,
                        "interleaved", "chunk c of device d is stage c p + d"),
             clEnumValN(::mlir::sluice::PlacementKind::vshape, "vshape",
                        "two chunks, the second in reverse device order"))}]>,
    Option<"balance", "balance", "::mlir::sluice::sched::Balance",
           /*default=*/"::mlir::sluice::sched::Balance::Uniform",
           "layers per stage",
           [{::mlir::sluice::getBalanceValues()}]>
  ];
}

def PartitionVocab : Pass<"sluice-partition-vocab", "ModuleOp"> {
  let summary = "Split the vocabulary layers over all pipeline devices";
  let description = [{
    Runs on a model partitioned into stages. `mode=baseline` leaves the
    embedding on the first stage and the output layer on the last (the
    paper's Baseline; with `balance=compute` stage partitioning, Redis).
    `mode=vocab` (Yeung et al., 2024 §3-4) replaces them with
    a `sluice.vocab_input` and a `sluice.vocab_output` shard that every
    device runs on its slice of the vocabulary, padded to a multiple of 2p
    (§6.1); the output layer's norm stays on the last stage as
    `sluice.final_norm`. The output shard is written in its naive form, with
    3 communication barriers (Figure 4). A tied output layer shares the
    input shard's table. `mode=interlaced` builds the same shards marked
    `synchronous`: the nnScaler baseline, whose collectives stop every
    device.

    After, with 2 devices and vocabulary 101 (padded to 104):

    ```mlir
    %x = sluice.vocab_input @vin -> tensor<1x16x32xf32> attributes {
        devices = 2 : i64, padded_vocab = 104 : i64, root = 0 : i64, vocab = 101 : i64} {...}
    %0 = sluice.stage @s0 device 0 chunk 0 (%x : tensor<1x16x32xf32>) -> ...
    %1 = sluice.stage @s1 device 1 chunk 0 (%0 : ...) -> tensor<1x16x32xf32> {
      ...
      %normed = sluice.final_norm %x {norm = layernorm} : tensor<1x16x32xf32>
      sluice.yield %normed : tensor<1x16x32xf32>
    }
    %loss = sluice.vocab_output @vout (%1 : tensor<1x16x32xf32>) -> tensor<f32>
        attributes {algorithm = 0 : i64, barriers = 3 : i64, ...} {...}
    ```
  }];
  let dependentDialects = ["::mlir::sluice::SluiceDialect"];
  let options = [
    Option<"mode", "mode", "::mlir::sluice::VocabPartition",
           /*default=*/"::mlir::sluice::VocabPartition::Vocab",
           "where the vocabulary layers go", [{::llvm::cl::values(
             clEnumValN(::mlir::sluice::VocabPartition::Baseline, "baseline",
                        "leave them on the first and last stages"),
             clEnumValN(::mlir::sluice::VocabPartition::Vocab, "vocab",
                        "shard them over every device"),
             clEnumValN(::mlir::sluice::VocabPartition::Interlaced,
                        "interlaced",
                        "shard them with blocking collectives"))}]>
  ];
}

def ReorderSoftmaxBarriers : Pass<"sluice-reorder-softmax-barriers", "ModuleOp"> {
  let summary = "Move the softmax's collectives after the local work: 3 -> 2 -> 1 barriers";
  let description = [{
    Rewrites each `sluice.vocab_output` from its naive form.

    `algorithm=1` (Yeung et al., 2024 §4.3, equation 5):
    each shard computes its softmax with its local maximum m' and sum s',
    then one barrier all-reduces the maximum, rescales the local sum by
    exp(m' - m) and all-reduces it, and the probabilities are rescaled by
    s' / s. The input gradient's reduce is the second barrier.

    `algorithm=2` (§4.4, equation 6): additionally computes A = softmax' W
    and B = G W before the barrier; inside it only the light combination
    A s' / s - B remains, so the reduce joins the same barrier: 1 barrier,
    and the weight gradient (pass T) can be delayed freely.

    Naive (3 barriers):

    ```mlir
    %m = sluice.shard_max %y ...
    %gm = sluice.all_reduce <max> %m ...
    %s = sluice.shard_sum_exp %y, %gm ...
    %gs = sluice.all_reduce <sum> %s ...
    %p = sluice.shard_softmax %y, %gm, %gs ...
    ```

    Algorithm 1 (2 barriers):

    ```mlir
    %m = sluice.shard_max %y ...
    %s1 = sluice.shard_sum_exp %y, %m ...
    %p1 = sluice.shard_softmax %y, %m, %s1 ...
    %gm = sluice.all_reduce <max> %m ...
    %s2 = sluice.rescale_sum %s1, %m, %gm ...
    %gs = sluice.all_reduce <sum> %s2 ...
    %p = sluice.rescale_probs %p1, %s2, %gs ...
    ```
  }];
  let dependentDialects = ["::mlir::sluice::SluiceDialect"];
  let options = [
    Option<"algorithm", "algorithm", "int64_t", /*default=*/"2",
           "1: two barriers; 2: one barrier">
  ];
}

def SliceTokens : Pass<"sluice-slice-tokens", "ModuleOp"> {
  let summary = "Choose where each sequence is cut into token slices";
  let description = [{
    Sets the model's `token_slices` (and `slicing`, the method) for the
    token-sliced schedules (`seq1f1b`, `seq1f1b-i`, `terapipe`):

    * `method=uniform`: `slices` near-equal lengths (they differ by at most
      one token);
    * `method=seq1f1b`: Sun et al., 2024 §3.4's computation-wise
      partition -- `slices` segments of equal FLOPs (forward and backward of
      every layer), which makes the first segment the longest since
      attention grows with the prefix;
    * `method=terapipe`: Li et al., 2021 §3.3's dynamic programme over
      the partitioned model's stages, minimising sum t_i + (K - 1) max t_i
      with t(i, j) the slowest stage's F and backward of a slice of i
      tokens after j, plus its two transfers, from the `costs` model
      (`a100`, `h100`, `v100`) through equation 9's fitted latency model
      (its relative error is recorded as `slicing_fit_error`). `slices` may
      be `auto`: the number of slices is then the DP's too. `epsilon`
      (seconds) and `granularity` (tokens; every slice a multiple of it,
      which must divide the sequence; 0 picks the smallest divisor of the
      sequence of at least seq_len / 2048) bound its work.

    A `granularity` other than 0 makes every method's slices multiples of
    it (the uniform and Seq1F1B cuts are made in its units): context
    parallelism cuts each slice into 2 cp chunks, and sluice-compile
    --cp sets it to 2 cp.

    ```mlir
    sluice.model @m {seq_len = 2048, micro_batch = 1, dtype = bf16}
        attributes {slicing = "seq1f1b",
                    token_slices = array<i64: 701, 503, 446, 398>} {...}
    ```
  }];
  let dependentDialects = ["::mlir::sluice::SluiceDialect"];
  let options = [
    Option<"slices", "slices", "std::string", /*default=*/"\"1\"",
           "number of slices, or auto (terapipe)">,
    Option<"method", "method", "::mlir::sluice::SlicingMethod",
           /*default=*/"::mlir::sluice::SlicingMethod::Uniform",
           "where slices cut a sequence",
           [{::mlir::sluice::getSlicingMethodValues()}]>,
    Option<"costs", "costs", "std::string", /*default=*/"\"a100\"",
           "cost model of the terapipe method">,
    Option<"epsilon", "epsilon", "double", /*default=*/"1e-4",
           "terapipe: the least step between bounds t_max, seconds">,
    Option<"granularity", "granularity", "int64_t", /*default=*/"0",
           "slice lengths are multiples of this (0: terapipe's automatic, "
           "any length for the others)">
  ];
}

def SplitPasses : Pass<"sluice-split-passes", "ModuleOp"> {
  let summary = "Record the passes each stage runs, their FLOPs and memory";
  let description = [{
    Gives every `sluice.stage` the passes a schedule places for it: F, B
    (input gradient) and W (weight gradient) with `split=true`, the form
    zero-bubble and V-shape schedules need; F and BW otherwise. Each pass
    gets its FLOPs per microbatch (`flops`, in the order of `passes`: B
    repeats the forward matmuls and doubles attention, W repeats the
    matmuls) and the stage its `activation_bytes`: what one microbatch keeps
    alive from its F to its B.

    With `recompute=selective` or `recompute=full` every stage gets that
    `recompute` (activation recomputation, Li, LLM Systems):
    B's (and BW's) FLOPs add what it recomputes -- the
    attention core, or the whole forward -- and `activation_bytes` counts
    only what F keeps: without the attention output, its statistics and
    the MLP activation, or only the stage's input (none for a stage that
    embeds: B looks the tokens up again).

    ```mlir
    %0 = sluice.stage @s0 device 0 chunk 0 -> tensor<1x16x32xf32> attributes {
        activation_bytes = 30720 : i64,
        flops = array<i64: 821248, 837632, 804864>,
        passes = [#sluice.pass<F>, #sluice.pass<B>, #sluice.pass<W>]} {
    ```
  }];
  let dependentDialects = ["::mlir::sluice::SluiceDialect"];
  let options = [
    Option<"split", "split", "bool", /*default=*/"true",
           "split the backward into B and W">,
    Option<"recompute", "recompute", "::mlir::sluice::RecomputeKind",
           /*default=*/"::mlir::sluice::RecomputeKind::none",
           "activation recomputation of every stage",
           [{::mlir::sluice::getRecomputeValues()}]>
  ];
}

def Schedule : Pass<"sluice-schedule", "ModuleOp"> {
  let summary = "Order every device's work: the program level";
  let description = [{
    Builds a `sluice.program` for the module's partitioned model: for each
    device, the order of its passes for `microbatches` microbatches cut
    into `slices` uniform token slices, with a send after every pass whose
    result another device needs and a receive before its consumer.

    Schedules: `gpipe`, `1f1b`, `interleaved-1f1b`, `zb-h1`, `zb-h2`,
    `zb-v`, `v-half`, `v-min`, `seq1f1b`, `seq1f1b-i`, `terapipe`,
    `dualpipev`. 1F1B and the zero-bubble and V-shape families are built
    from building blocks (Yeung et al., 2024 §5.2): one microbatch's
    pattern, repeated every interval; W passes fill the bubbles. `costs`
    (as in `sluice-simulate`) decides where the W passes go. `dualpipev`
    (DeepSeek-AI, 2024, §3.2.1) marks its overlapped groups: an F with
    `paired` runs beside the backward after it.

    ```mlir
    sluice.program @plan for @m {devices = 2, microbatches = 2, slices = 1, schedule = "1f1b"} {
      sluice.device 0 {
        sluice.exec F @s0 {mb = 0, slice = 0}
        sluice.send F @s0 {mb = 0, slice = 0} to 1
        ...
    ```

    A microbatch count a schedule cannot take is reported with the
    schedules that can.
  }];
  let dependentDialects = ["::mlir::sluice::SluiceDialect"];
  let options = [
    Option<"schedule", "schedule", "::mlir::sluice::ScheduleKind",
           /*default=*/"::mlir::sluice::ScheduleKind::OneFOneB",
           "pipeline schedule",
           [{::mlir::sluice::getScheduleValues()}]>,
    Option<"microbatches", "microbatches", "int64_t", /*default=*/"1",
           "microbatches per step">,
    Option<"slices", "slices", "int64_t", /*default=*/"0",
           "token slices per microbatch (0: the model's token_slices, or 1)">,
    Option<"costs", "costs", "std::string", /*default=*/"\"unit\"",
           "cost model used to place W passes">,
    Option<"programName", "name", "std::string", /*default=*/"\"plan\"",
           "symbol of the program">,
    Option<"tensorParallel", "tensor-parallel", "int64_t", /*default=*/"1",
           "tensor-parallel shards the program will run on: a cost-driven "
           "schedule orders one shard's passes, collectives included">,
    Option<"sequenceParallel", "sequence-parallel", "bool",
           /*default=*/"false",
           "with Megatron-LM's sequence parallelism over those shards">,
    Option<"repeats", "repeats", "bool", /*default=*/"false",
           "write each device's periodic stretches once, as sluice.repeat "
           "blocks (sluice-compile does)">,
    Option<"overlap", "overlap", "bool", /*default=*/"true",
           "dualpipev: mark its overlapped groups `paired` (false: the "
           "same order, every pass on its own)">
  ];
}

def VerifySchedule : Pass<"sluice-verify-schedule", "ModuleOp"> {
  let summary = "Check that a program runs every unit once, in order, without deadlock";
  let description = [{
    Checks every `sluice.program` against its model: each (pass, stage,
    microbatch, slice) runs exactly once, on the stage's device; F before B
    before W on a stage; stage order across devices, through matched
    sends and receives; forward slices in order and backward slices in
    reverse; every send received once and every receive sent; and no
    deadlock when each receive blocks until its send has been issued.
    Errors point at the offending instruction, with a note at the one it
    conflicts with; a program that passes gets a remark saying so
    (`remark: verified: 412 instructions of schedule 'zb-h1' on 4 devices
    run every pass once, in order, without deadlock`).

    ```mlir
    sluice.device 1 {
      // error: runs F of stage 1, microbatch 0, slice 0 without first
      // receiving F of stage 0, microbatch 0, slice 0 from device 0
      sluice.exec F @s1 {mb = 0, slice = 0}
    ```
  }];
}

def Simulate : Pass<"sluice-simulate", "ModuleOp"> {
  let summary = "Predict step time, bubbles and memory of every program";
  let description = [{
    Verifies each `sluice.program`, then simulates it under a cost model and
    records the prediction on the program (`step_time`, `bubble_ratio`,
    `peak_activation`: per device, in microbatch units, from F to B;
    `peak_activation_until_w`: the same until W, what weight passes still
    read; `mfu` with a hardware profile). `costs` is `unit`
    (F = B = W = 1 per device and microbatch, BW = 2, divided over chunks
    and slices; vocabulary passes and transfers free), explicit costs
    (`F=1,B=1,W=1,S=0.2,T=0.2,comm=0.1`), or a hardware profile (`a100`,
    `h100`, `v100`: analytic FLOPs, seconds). The pass writes no files:
    `sluice-compile --report/--trace/--svg` writes the JSON report, a
    Chrome trace (Perfetto) and an SVG timeline from the same simulation
    (lib/Target).

    A program's mesh (`tp`, `dp`) is priced too, under a hardware profile:
    each pass of one tensor-parallel shard computes its slice of the layers
    and waits for the layers' all-reduces; each `sluice.grad_sync` runs
    the stage's gradient all-reduce over the replicas on the device's
    data-parallel stream once the pass before it ends, beside the passes
    after it, and the step ends when the last one does. Ranks fill nodes
    of eight GPUs in Megatron-LM's order, and each kind of traffic runs
    over NVLink when its groups fit in a node, over the network otherwise;
    the report names the link of each (`links`), the mesh, and per device
    the all-reduces' time, how much of the gradients' is exposed, and the
    optimizer state's bytes. MFU counts the model's FLOPs over all
    pp x tp GPUs of a replica.

    ```mlir
    sluice.program @plan for @m {devices = 4, microbatches = 8, slices = 1, schedule = "1f1b"}
        attributes {bubble_ratio = 0.2727, peak_activation = array<f64: 4.0, 3.0, 2.0, 1.0>,
                    peak_activation_until_w = array<f64: 4.0, 3.0, 2.0, 1.0>, step_time = 33.0} {
    ```
  }];
  let options = [
    Option<"costs", "costs", "std::string", /*default=*/"\"unit\"",
           "unit, a100, h100, h200, v100 (NAME:key=value,... overrides its node), or F=..,B=..,W=..,comm=..">
  ];
}

def PlanBuffers : Pass<"sluice-plan-buffers", "ModuleOp"> {
  let summary = "Give every value a program keeps a buffer, reusing freed ones";
  let description = [{
    For each device of each `sluice.program`, finds what its instructions
    keep and for how long, and assigns each such value a buffer slot,
    reusing slots whose values are dead:

    * a pass's forward state, from its F to the last of its B and W;
    * the weight state B leaves for W (within the instruction for BW);
    * a microbatch's keys and values, from its first slice's F to its first
      slice's B (later slices read them and add into their gradients);
    * an activation or gradient on its way to the next stage: from the pass
      that produces it until its send has surely completed, or to the
      consuming pass when the next stage is on the same device; and a
      received one, from the receive to the pass that consumes it.

    Sends copy nothing, so the runtime waits for a send before its slot is
    written again. That wait must not deadlock: a sent slot is freed only
    after this device has consumed a message that the peer sent later in
    its program than its receive of this one (so the peer has posted that
    receive), else at the end of the step.

    A value takes a free slot of its own size (the one freed first), or a
    new one. The planner also tries letting a value take the smallest
    larger free slot when none of its size is free, and keeps whichever
    needs fewer bytes on the device (on a tie, the first). Taking a larger
    slot saves one now but leaves the next value of that size without
    one: the first rule needs less on most schedules, and it is periodic
    -- a steady state maps a device's slots the same way each microbatch,
    so the plan's repeat blocks cover it.

    Sizes and element types follow the runtime's layout (sluice/PlanFormat/Layout.h,
    for the model's dtype: bf16 or f32) so the runtime can carve its typed
    tensors from the slots and check them. Each device gets
    `buffers` (bytes per slot); each instruction names its slots (`state`,
    `wstate`, `kv`, `in`, `out` on `sluice.exec`, `buffer` on send and
    receive). Passes run on the compute stream, sends and receives on the
    communication stream.

    ```mlir
    sluice.device 0 attributes {buffers = array<i64: 30720, 2048, 4096>} {
      sluice.exec F @s0 {mb = 0, slice = 0} {kv = 1 : i64, out = 2 : i64, state = 0 : i64}
      sluice.send F @s0 {mb = 0, slice = 0} to 1 {buffer = 2 : i64}
    ```
  }];
}

def SyncGradients : Pass<"sluice-sync-gradients", "ModuleOp"> {
  let summary = "Replicate every program for data parallelism and average its gradients";
  let description = [{
    Sets each `sluice.program`'s `dp` to `data-parallel` (the replicas of
    every pipeline device; docs/parallelism.md) and, when that is more than
    one, places a `sluice.grad_sync` of each stage and vocabulary shard
    right after its last pass on its device: from there its gradients are
    final, so their all-reduce over the replicas overlaps whatever the
    device still runs (the other stages' backward passes, a V-shape's
    first chunk) instead of waiting for the end of the step, as
    data-parallel training overlaps gradient reduction with the backward
    pass (Li, LLM Systems). The replicas run the same
    program on different microbatches; the loss of a step is the mean over
    all `dp` x `microbatches` microbatches.

    With `data-parallel=2`, a 1F1B device 0 of two stages:

    ```mlir
    sluice.program @plan for @m {devices = 2, microbatches = 2, slices = 1, schedule = "1f1b"} dp 2 {
      sluice.device 0 {
        ...
        sluice.exec BW @s0 {mb = 1, slice = 0}
        sluice.grad_sync @s0
      }
    ```

    With `zero=1` (ZeRO stage 1, Megatron-LM's distributed optimizer) the
    program also records that the optimizer state is sharded over the
    replicas: each `sluice.grad_sync` then reduce-scatters its gradients
    instead of all-reducing them, each replica updates its part of the
    weights, and the step ends by all-gathering them (docs/parallelism.md).
    `zero=2` shards the gradients too and `zero=3` the weights (FSDP); with
    `reshard-per-step` a ZeRO-3 program records `reshard_per_step`: each
    layer's weights are gathered once a step instead of before every pass.

    With `expert-parallel=E` (Megatron-LM's expert-model-parallel size)
    the program records that each mixture-of-experts layer's experts split
    over E consecutive replicas (`ep E`): E divides the replicas and every
    sparse layer's expert count, and the model has a sparse layer. The
    grad_syncs stay where they are; the runtime sums a stage's expert
    gradients over the dp / E replicas holding the same experts and its
    other gradients over all of them, and ZeRO-1 shards each group's
    optimizer state within it (docs/moe.md).

    ```mlir
    sluice.program @plan for @moe {devices = 2, microbatches = 2, slices = 1, schedule = "1f1b"} dp 4 ep 2 {
    ```

    With `context-parallel=C` each replica's sequences split over C ranks
    (`cp C`; docs/parallelism.md): every slice cuts into 2C chunks, so 2C
    divides every slice; the model may not have learned positions,
    multi-head latent attention or mixtures of experts yet. Its gradients
    are summed over all dp x C ranks of a device, so a program with one
    replica of C > 1 ranks gets its `sluice.grad_sync`s too, and ZeRO
    shards over dp x C.

    ```mlir
    sluice.program @plan for @m {devices = 2, microbatches = 2, slices = 1, schedule = "1f1b"} cp 2 {
    ```

    A program that already has replicas is refused: run the pass once.
  }];
  let dependentDialects = ["::mlir::sluice::SluiceDialect"];
  let options = [
    Option<"dataParallel", "data-parallel", "int64_t", /*default=*/"1",
           "replicas of each pipeline device">,
    Option<"zero", "zero", "int64_t", /*default=*/"0",
           "ZeRO stage: 1 shards the optimizer state over the replicas, "
           "2 the gradients too, 3 the weights too">,
    Option<"expertParallel", "expert-parallel", "int64_t", /*default=*/"1",
           "replicas each sparse layer's experts split over">,
    Option<"expertCapacity", "expert-capacity", "double", /*default=*/"0",
           "a member's experts' copies as a multiple of the balanced share "
           "(0: the most any routing sends)">,
    Option<"reshardPerStep", "reshard-per-step", "bool", /*default=*/"false",
           "ZeRO-3: gather each layer once a step and keep it to the "
           "update (default: gather before every pass, drop after)">,
    Option<"contextParallel", "context-parallel", "int64_t",
           /*default=*/"1",
           "ranks each replica's sequences split over (context "
           "parallelism)">,
  ];
}

#endif // SLUICE_TRANSFORMS_PASSES_TD

def ShardTensors : Pass<"sluice-shard-tensors", "ModuleOp"> {
  let summary = "Split every pipeline device of a program into tensor-parallel shards";
  let description = [{
    Sets each `sluice.program`'s `tp` to `tensor-parallel`: every pipeline
    device becomes that many shards that split each transformer layer as
    Megatron-LM does (Weitkamp, 2024;
    docs/parallelism.md). The QKV, up and gate projections are
    column-parallel -- a shard holds its query heads, the key/value heads
    they read and its share of the feed-forward width -- and the attention
    output and down projections row-parallel. Each layer gets a shard
    body (`shards N { ... }`) that spells one shard's work and its
    collectives as ops: `sluice.tp_copy` before a column-parallel
    projection (identity in F, all-reduce of the input gradient in B),
    `sluice.tp_reduce` after a row-parallel one (all-reduce of the partial
    sums in F, before the whole biases are added; identity in B); none in
    W. The embedding table and the LM head split by rows, a tied table
    alike at both ends (the vocabulary-parallel embedding: a masked
    lookup, then `sluice.tp_reduce`; the vocabulary-parallel
    cross-entropy: `sluice.all_reduce` of each token's maximum and of its
    rescaled sum of exponentials in F, `sluice.tp_copy`'s all-reduce of the
    final norm's input gradient in B), unless Vocabulary Parallelism's
    shards hold them. The layer verifiers check each body's widths against
    the split; the cost model reads the bodies' collectives
    (`getShardTraffic`). The shards of a device run its instruction list
    in lockstep.

    Under expert parallelism (the program's `ep`, set by
    `sluice-sync-gradients`) each mixture-of-experts layer's body also
    spells the experts' dispatch: `sluice.expert_dispatch` sends each
    token's copies to its experts' members before the experts' maps
    (an all-to-all in F and in B) and `sluice.expert_combine` returns
    their outputs after them; with one shard only the sparse layers get a
    body (`shards 1`), and it holds just that.

    ```mlir
    %c = sluice.tp_copy %n : tensor<1x16x32xf32>
    %d = sluice.expert_dispatch %c over 2 : tensor<1x16x32xf32> -> tensor<1x64x32xf32>
    %u = sluice.column_parallel <up> %d : tensor<1x64x32xf32> -> tensor<1x64x12xf32>
    ...
    %r = sluice.row_parallel <down> %a : tensor<1x64x12xf32> -> tensor<1x64x32xf32>
    %y = sluice.expert_combine %r over 2 : tensor<1x64x32xf32> -> tensor<1x16x32xf32>
    %s = sluice.tp_reduce %y : tensor<1x16x32xf32>
    ```

    Every transformer layer must split: its heads and feed-forward width
    divide by `tensor-parallel`, and its key/value heads either divide by
    it or divide it -- with fewer key/value heads than shards each shard
    holds the head its query heads share, replicated, as the blog's
    "Grouped/Multi-Query Attention" section does, and the replicas' weight
    gradients are summed before the update. A layer that does not split
    is an error at that layer; so is a program that already has shards.

    With `sequence-parallel` (Megatron-LM's sequence parallelism; the
    tensor-parallelism blog's "Sequence Parallelism"), the activation
    between the tensor-parallel regions -- the norms, the residual adds,
    the pipeline transfers -- is each shard's 1/tp of the tokens: a body
    takes and yields `tensor<b x s/tp x h>`, the column-parallel
    projections enter through `sluice.tp_gather` (all-gather in F,
    reduce-scatter in B) and the row-parallel ones leave through
    `sluice.tp_scatter` (reduce-scatter in F, all-gather in B). The same
    bytes cross the links as with the all-reduces; the activations kept
    for the norms and residuals shrink by tp. `seq_len` must divide by
    `tensor-parallel`, and the program must not slice microbatches into
    tokens. The program prints `sequence_parallel`.

    With `tensor-parallel=2`, a GPT layer (4 heads of 8, feed-forward 64)
    becomes:

    ```mlir
    %x = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, ffn = 64, norm = layernorm, mlp = gelu} : tensor<1x16x32xf32> shards 2 {
    ^bb0(%in: tensor<1x16x32xf32>):
      %0 = sluice.shard_norm %in : tensor<1x16x32xf32>
      %1 = sluice.tp_copy %0 : tensor<1x16x32xf32>
      %2 = sluice.column_parallel <qkv> %1 : tensor<1x16x32xf32> -> tensor<1x16x48xf32>
      %3 = sluice.shard_attention %2 : tensor<1x16x48xf32> -> tensor<1x16x16xf32>
      %4 = sluice.row_parallel <out> %3 : tensor<1x16x16xf32> -> tensor<1x16x32xf32>
      %5 = sluice.tp_reduce %4 : tensor<1x16x32xf32>
      %6 = sluice.residual_add %in, %5 : tensor<1x16x32xf32>
      ... the MLP alike ...
      sluice.layer_yield %13 : tensor<1x16x32xf32>
    }
    ...
    sluice.program @plan for @m {devices = 2, microbatches = 4, slices = 1, schedule = "1f1b"} tp 2 {
    ```
  }];
  let dependentDialects = ["::mlir::sluice::SluiceDialect"];
  let options = [
    Option<"tensorParallel", "tensor-parallel", "int64_t", /*default=*/"1",
           "tensor-parallel shards of each pipeline device">,
    Option<"sequenceParallel", "sequence-parallel", "bool",
           /*default=*/"false",
           "keep each shard's token slice between the tensor-parallel "
           "regions (all-gather / reduce-scatter instead of all-reduce)">,
  ];
}
