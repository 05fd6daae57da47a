// RUN: sluice-opt %s --sluice-partition-stages="pp=2" --sluice-split-passes="split=false" --sluice-schedule="schedule=1f1b microbatches=2" --sluice-shard-tensors="tensor-parallel=4" --sluice-plan-buffers | FileCheck %s
// RUN: sluice-opt %s --sluice-partition-stages="pp=2" --sluice-split-passes="split=false" --sluice-schedule="schedule=1f1b microbatches=2" --sluice-plan-buffers | FileCheck %s --check-prefix=WHOLE
// RUN: sluice-opt %s --sluice-partition-stages="pp=2" --sluice-split-passes="split=false" --sluice-schedule="schedule=1f1b microbatches=2" --sluice-shard-tensors="tensor-parallel=4" | FileCheck %s --check-prefix=BODY
// RUN: sluice-opt %s --sluice-partition-stages="pp=2" --sluice-split-passes="split=false" --sluice-schedule="schedule=1f1b microbatches=2" --sluice-shard-tensors="tensor-parallel=1" | FileCheck %s --check-prefix=ONE
// RUN: not sluice-opt %s --sluice-partition-stages="pp=2" --sluice-split-passes="split=false" --sluice-schedule="schedule=1f1b microbatches=2" --sluice-shard-tensors="tensor-parallel=2" --sluice-shard-tensors="tensor-parallel=2" 2>&1 | FileCheck %s --check-prefix=TWICE
// RUN: not sluice-opt %s --sluice-partition-stages="pp=2" --sluice-split-passes="split=false" --sluice-schedule="schedule=1f1b microbatches=2" --sluice-shard-tensors="tensor-parallel=0" 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: sed 's/vocab = 100}/vocab = 7}/; s/vocab = 100, norm/vocab = 9, norm/' %s | not sluice-opt --sluice-partition-stages="pp=2" --sluice-split-passes="split=false" --sluice-schedule="schedule=1f1b microbatches=2" --sluice-shard-tensors="tensor-parallel=4" 2>&1 | FileCheck %s --check-prefix=OUTVOCAB
// RUN: sluice-opt %s --sluice-partition-stages="pp=2" --sluice-split-passes="split=false" --sluice-schedule="schedule=1f1b microbatches=2" --sluice-shard-tensors="tensor-parallel=4 sequence-parallel=true" | FileCheck %s --check-prefix=SP
// RUN: not sluice-opt %s --sluice-partition-stages="pp=2" --sluice-split-passes="split=false" --sluice-schedule="schedule=1f1b microbatches=2" --sluice-shard-tensors="tensor-parallel=1 sequence-parallel=true" 2>&1 | FileCheck %s --check-prefix=SPONE
// RUN: sluice-opt %inputs/tiny-moe.mlir --sluice-partition-stages="pp=2" --sluice-split-passes="split=false" --sluice-schedule="schedule=1f1b microbatches=2" --sluice-sync-gradients="data-parallel=2 expert-parallel=2" --sluice-shard-tensors="tensor-parallel=1" | FileCheck %s --check-prefix=EXPERTS
// RUN: sluice-opt %inputs/tiny-moe.mlir --sluice-partition-stages="pp=2" --sluice-split-passes="split=false" --sluice-schedule="schedule=1f1b microbatches=2" --sluice-sync-gradients="data-parallel=2 expert-parallel=2" --sluice-shard-tensors="tensor-parallel=2 sequence-parallel=true" | FileCheck %s --check-prefix=EXPERTSTP
// RUN: not sluice-opt %inputs/tiny-moe.mlir --sluice-partition-stages="pp=2" --sluice-split-passes="split=false" --sluice-schedule="schedule=1f1b microbatches=2" --sluice-sync-gradients="data-parallel=2 expert-parallel=2" --sluice-shard-tensors="tensor-parallel=1" --sluice-shard-tensors="tensor-parallel=1" 2>&1 | FileCheck %s --check-prefix=EXPERTSTWICE
// RUN: sluice-opt %inputs/tiny-moe.mlir --sluice-partition-stages="pp=2" --sluice-split-passes="split=false" --sluice-schedule="schedule=1f1b microbatches=2" --sluice-sync-gradients="data-parallel=2 expert-parallel=2 expert-capacity=1.5" --sluice-shard-tensors="tensor-parallel=1" | FileCheck %s --check-prefix=CAPACITY
// RUN: sed 's/kv_heads = 2,/kv_heads = 2, head_dim = 12, v_head_dim = 6,/' %s | sluice-opt --sluice-partition-stages="pp=2" --sluice-split-passes="split=false" --sluice-schedule="schedule=1f1b microbatches=2" --sluice-shard-tensors="tensor-parallel=4" | FileCheck %s --check-prefix=VALUES

// Every layer spells its shard's work and its collectives (Megatron's
// f and g, tensor-parallelism blog, "Tensor parallelism in the
// transformer block"). The embedding's masked lookups sum over the shards.
// BODY:      sluice.embedding {vocab = 100} : tensor<1x16x32xf32> shards 4 {
// BODY-NEXT:   %[[LOOK:.+]] = sluice.shard_lookup : tensor<1x16x32xf32>
// BODY-NEXT:   %[[EMB:.+]] = sluice.tp_reduce %[[LOOK]] : tensor<1x16x32xf32>
// BODY-NEXT:   sluice.layer_yield %[[EMB]] : tensor<1x16x32xf32>
// BODY-NEXT: }
// Attention: one query head of 8 per shard and one of the two key/value
// heads, replicated: (1 + 2 * 1) * 8 = 24 columns of the fused QKV. The
// identity in F / all-reduce in B (tp_copy) before the column-parallel
// projection, the all-reduce in F / identity in B (tp_reduce) after the
// row-parallel one.
// BODY:      sluice.transformer_layer %emb {{.+}} shards 4 {
// BODY-NEXT: ^bb0(%[[IN:.+]]: tensor<1x16x32xf32>):
// BODY-NEXT:   %[[N1:.+]] = sluice.shard_norm %[[IN]]
// BODY-NEXT:   %[[C1:.+]] = sluice.tp_copy %[[N1]]
// BODY-NEXT:   %[[QKV:.+]] = sluice.column_parallel <qkv> %[[C1]] : tensor<1x16x32xf32> -> tensor<1x16x24xf32>
// BODY-NEXT:   %[[ATT:.+]] = sluice.shard_attention %[[QKV]] : tensor<1x16x24xf32> -> tensor<1x16x8xf32>
// BODY-NEXT:   %[[OUT:.+]] = sluice.row_parallel <out> %[[ATT]] : tensor<1x16x8xf32> -> tensor<1x16x32xf32>
// BODY-NEXT:   %[[R1:.+]] = sluice.tp_reduce %[[OUT]]
// BODY-NEXT:   %[[H:.+]] = sluice.residual_add %[[IN]], %[[R1]]
// The SwiGLU MLP: a quarter of the 96 feed-forward columns, up and gate.
// BODY-NEXT:   %[[N2:.+]] = sluice.shard_norm %[[H]]
// BODY-NEXT:   %[[C2:.+]] = sluice.tp_copy %[[N2]]
// BODY-NEXT:   %[[UP:.+]] = sluice.column_parallel <up> %[[C2]] : tensor<1x16x32xf32> -> tensor<1x16x24xf32>
// BODY-NEXT:   %[[GATE:.+]] = sluice.column_parallel <gate> %[[C2]] : tensor<1x16x32xf32> -> tensor<1x16x24xf32>
// BODY-NEXT:   %[[ACT:.+]] = sluice.shard_activation %[[UP]], %[[GATE]]
// BODY-NEXT:   %[[DOWN:.+]] = sluice.row_parallel <down> %[[ACT]] : tensor<1x16x24xf32> -> tensor<1x16x32xf32>
// BODY-NEXT:   %[[R2:.+]] = sluice.tp_reduce %[[DOWN]]
// BODY-NEXT:   %[[Y:.+]] = sluice.residual_add %[[H]], %[[R2]]
// BODY-NEXT:   sluice.layer_yield %[[Y]]
// BODY-NEXT: }
// Value heads of their own size (v_head_dim, DeepSeek's): one query head
// of 12, its key/value head's key of 12 and value of 6 -- 30 columns of
// the QKV projection -- and a context of 6 per shard.
// VALUES:      sluice.column_parallel <qkv> %{{.+}} : tensor<1x16x32xf32> -> tensor<1x16x30xf32>
// VALUES-NEXT: sluice.shard_attention %{{.+}} : tensor<1x16x30xf32> -> tensor<1x16x6xf32>
// VALUES-NEXT: sluice.row_parallel <out> %{{.+}} : tensor<1x16x6xf32> -> tensor<1x16x32xf32>
// The output layer: each shard's ceil(100 / 4) = 25 logits per token, the
// group's maximum and rescaled sum of exponentials (two all-reduces of
// one fp32 per token), and the shard's part of the loss.
// BODY:      sluice.output_layer %{{.+}} shards 4 {
// BODY:        %[[LOGITS:.+]] = sluice.shard_logits %{{.+}} : tensor<1x16x32xf32> -> tensor<1x16x25xf32>
// BODY-NEXT:   %[[MAX:.+]] = sluice.shard_max %[[LOGITS]]
// BODY-NEXT:   %[[SUM:.+]] = sluice.shard_sum_exp %[[LOGITS]], %[[MAX]]
// BODY-NEXT:   %[[GMAX:.+]] = sluice.all_reduce <max> %[[MAX]] : tensor<1x16xf32>
// BODY-NEXT:   %[[RS:.+]] = sluice.rescale_sum %[[SUM]], %[[MAX]], %[[GMAX]]
// BODY-NEXT:   %[[GSUM:.+]] = sluice.all_reduce <sum> %[[RS]] : tensor<1x16xf32>
// BODY-NEXT:   %[[LOSS:.+]] = sluice.shard_loss %[[LOGITS]], %[[GMAX]], %[[GSUM]]
// BODY-NEXT:   sluice.layer_yield %[[LOSS]] : tensor<f32>
// BODY:      sluice.program @plan for @m {{.+}} tp 4

// Sequence parallelism: between the tensor-parallel regions each shard
// holds 16 / 4 = 4 of the tokens. The embedding reduce-scatters its
// lookups into the slice; each layer's norms and residual adds work on
// the slice, the column-parallel projections enter through an all-gather
// and the row-parallel ones leave through a reduce-scatter; the output
// layer gathers its normed slices.
// SP:      sluice.embedding {vocab = 100} : tensor<1x16x32xf32> shards 4 {
// SP-NEXT:   %[[LOOK:.+]] = sluice.shard_lookup : tensor<1x16x32xf32>
// SP-NEXT:   %[[EMB:.+]] = sluice.tp_scatter %[[LOOK]] : tensor<1x16x32xf32> -> tensor<1x4x32xf32>
// SP-NEXT:   sluice.layer_yield %[[EMB]] : tensor<1x4x32xf32>
// SP:      sluice.transformer_layer %emb {{.+}} shards 4 {
// SP-NEXT: ^bb0(%[[IN:.+]]: tensor<1x4x32xf32>):
// SP-NEXT:   %[[N1:.+]] = sluice.shard_norm %[[IN]] : tensor<1x4x32xf32>
// SP-NEXT:   %[[G1:.+]] = sluice.tp_gather %[[N1]] : tensor<1x4x32xf32> -> tensor<1x16x32xf32>
// SP-NEXT:   %[[QKV:.+]] = sluice.column_parallel <qkv> %[[G1]] : tensor<1x16x32xf32> -> tensor<1x16x24xf32>
// SP-NEXT:   %[[ATT:.+]] = sluice.shard_attention %[[QKV]]
// SP-NEXT:   %[[OUT:.+]] = sluice.row_parallel <out> %[[ATT]] : tensor<1x16x8xf32> -> tensor<1x16x32xf32>
// SP-NEXT:   %[[S1:.+]] = sluice.tp_scatter %[[OUT]] : tensor<1x16x32xf32> -> tensor<1x4x32xf32>
// SP-NEXT:   %[[H:.+]] = sluice.residual_add %[[IN]], %[[S1]] : tensor<1x4x32xf32>
// SP-NEXT:   %[[N2:.+]] = sluice.shard_norm %[[H]] : tensor<1x4x32xf32>
// SP-NEXT:   %[[G2:.+]] = sluice.tp_gather %[[N2]] : tensor<1x4x32xf32> -> tensor<1x16x32xf32>
// SP:        %[[DOWN:.+]] = sluice.row_parallel <down>
// SP-NEXT:   %[[S2:.+]] = sluice.tp_scatter %[[DOWN]] : tensor<1x16x32xf32> -> tensor<1x4x32xf32>
// SP-NEXT:   %[[Y:.+]] = sluice.residual_add %[[H]], %[[S2]] : tensor<1x4x32xf32>
// SP-NEXT:   sluice.layer_yield %[[Y]] : tensor<1x4x32xf32>
// SP:      sluice.output_layer %{{.+}} shards 4 {
// SP-NEXT: ^bb0(%[[XIN:.+]]: tensor<1x4x32xf32>):
// SP-NEXT:   %[[XN:.+]] = sluice.shard_norm %[[XIN]] : tensor<1x4x32xf32>
// SP-NEXT:   %[[XG:.+]] = sluice.tp_gather %[[XN]] : tensor<1x4x32xf32> -> tensor<1x16x32xf32>
// SP-NEXT:   sluice.shard_logits %[[XG]] : tensor<1x16x32xf32> -> tensor<1x16x25xf32>
// SP:      sluice.program @plan for @m {{.+}} tp 4 sequence_parallel {
// SPONE: error: 'sluice.program' op sequence parallelism splits the tokens over the tensor-parallel shards, but there are 1

// Four shards of each device: one query head each, and the key/value head
// it shares with the next shard (2 heads, replicated); a quarter of the
// feed-forward width. The buffers hold one shard's state: device 0's
// forward state (the embedding keeps none; one layer) is
//   Xhat1 16x32, Rstd1 16, Q 16x8, Lse 1x1x16, Context 16x8, Xhat2 16x32,
//   Rstd2 16, Up, Act and Gate 16x24 floats,
// each region aligned to 256 bytes: 10496 bytes, against the whole
// layer's 27392 (four heads, width 96).
// CHECK-LABEL: sluice.program @plan for @m {devices = 2, microbatches = 2, slices = 1, schedule = "1f1b"} tp 4
// CHECK:         sluice.device 0 attributes {buffers = array<i64: 10496,
// WHOLE:         sluice.device 0 attributes {buffers = array<i64: 27392,
// Device 1 ends with the vocabulary-parallel output layer: after its
// layer's 10496 bytes, OutXhat 16x32, OutRstd 16, the shard's logits
// 16 x ceil(100 / 4) = 16x25 and the group's maximum and sum, 16 each:
// the forward state ends at byte 14912, against 36160 with the whole
// layer's 16x100 logits.
// CHECK:         sluice.device 1 attributes {buffers = array<i64: 2048, 14912,
// WHOLE:         sluice.device 1 attributes {buffers = array<i64: 2048, 36160,

// One shard: the program is unchanged.
// ONE-LABEL: schedule = "1f1b"} {

// TWICE: error: 'sluice.program' op already has 2 tensor-parallel shards
// The vocabulary-parallel output layer's rows: ceil(9 / 4) = 3 each
// leaves the fourth shard none (the embedding's 7 rows, 2 each, leave it
// one; an output layer may not have fewer rows than the embedding). (The layers and programs the pass refuses
// are in sluice-shard-tensors-errors.mlir, with -verify-diagnostics.)
// OUTVOCAB: error: 'sluice.output_layer' op the 9-row table leaves the last of 4 tensor-parallel shards no rows
// ZERO: error: 'sluice.program' op cannot have 0 tensor-parallel shards: the count must be positive


sluice.model @m {seq_len = 16, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 100} : tensor<1x16x32xf32>
  %x0 = sluice.transformer_layer %emb {heads = 4, kv_heads = 2, ffn = 96, norm = rmsnorm, mlp = swiglu, rope_theta = 10000.0} : tensor<1x16x32xf32>
  %x1 = sluice.transformer_layer %x0 {heads = 4, kv_heads = 2, ffn = 96, norm = rmsnorm, mlp = swiglu, rope_theta = 10000.0} : tensor<1x16x32xf32>
  %loss = sluice.output_layer %x1 {vocab = 100, norm = rmsnorm} : tensor<1x16x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// Expert parallelism (the program's ep, from sluice-sync-gradients): each
// sparse layer's body spells the dispatch of its tokens' copies to the
// experts' members before the experts' maps and their return after; with
// one shard only the sparse layers get a body (tiny-moe's layer 3 is
// dense), with sequence parallelism the dispatch follows the gather and
// the return precedes the scatter.
// EXPERTS:      sluice.transformer_layer {{.+}}experts = 4{{.+}} shards 1 {
// EXPERTS:        sluice.expert_dispatch %{{.+}} over 2 : tensor<2x16x32xf32> -> tensor<2x64x32xf32>
// EXPERTS:        sluice.expert_combine %{{.+}} over 2 : tensor<2x64x32xf32> -> tensor<2x16x32xf32>
// EXPERTS:      sluice.transformer_layer {{.+}}ffn = 48{{.+}} : tensor<2x16x32xf32>{{$}}
// EXPERTS:      sluice.program @plan for @tiny_moe {{.+}} dp 2 ep 2 {
// EXPERTSTP:    sluice.shard_attention
// EXPERTSTP:    sluice.tp_gather %{{.+}} : tensor<2x8x32xf32> -> tensor<2x16x32xf32>
// EXPERTSTP-NEXT: sluice.expert_dispatch %{{.+}} over 2 : tensor<2x16x32xf32> -> tensor<2x64x32xf32>
// EXPERTSTP:    sluice.expert_combine %{{.+}} over 2 : tensor<2x64x32xf32> -> tensor<2x16x32xf32>
// EXPERTSTP-NEXT: sluice.tp_scatter
// EXPERTSTWICE: error: 'sluice.program' op already has the experts' dispatch spelled in its layers' bodies
// With an expert capacity the received rows are that many times the
// balanced share (1.5 x 16 tokens x 2 copies), not the dropless bound.
// CAPACITY:     sluice.expert_dispatch %{{.+}} over 2 : tensor<2x16x32xf32> -> tensor<2x48x32xf32>
// CAPACITY:     sluice.program @plan for @tiny_moe {{.+}} dp 2 ep 2 capacity 1.500000e+00 {
