// RUN: sluice-opt %s --sluice-partition-stages="pp=2" --sluice-split-passes="split=false" --sluice-schedule="schedule=1f1b microbatches=2" --sluice-shard-tensors="tensor-parallel=4" --sluice-plan-buffers | FileCheck %s
// RUN: sluice-opt %s --sluice-partition-stages="pp=2" --sluice-split-passes="split=false" --sluice-schedule="schedule=1f1b microbatches=2" --sluice-plan-buffers | FileCheck %s --check-prefix=WHOLE
// RUN: sluice-opt %s --sluice-partition-stages="pp=2" --sluice-split-passes="split=false" --sluice-schedule="schedule=1f1b microbatches=2" --sluice-shard-tensors="tensor-parallel=1" | FileCheck %s --check-prefix=ONE
// RUN: not sluice-opt %s --sluice-partition-stages="pp=2" --sluice-split-passes="split=false" --sluice-schedule="schedule=1f1b microbatches=2" --sluice-shard-tensors="tensor-parallel=3" 2>&1 | FileCheck %s --check-prefix=HEADS
// RUN: not sluice-opt %s --sluice-partition-stages="pp=2" --sluice-split-passes="split=false" --sluice-schedule="schedule=1f1b microbatches=2" --sluice-shard-tensors="tensor-parallel=2" --sluice-shard-tensors="tensor-parallel=2" 2>&1 | FileCheck %s --check-prefix=TWICE
// RUN: not sluice-opt %s --sluice-partition-stages="pp=2" --sluice-split-passes="split=false" --sluice-schedule="schedule=1f1b microbatches=2" --sluice-shard-tensors="tensor-parallel=0" 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: not sluice-opt %inputs/shard-tensors-uneven.mlir --sluice-partition-stages="pp=1" --sluice-split-passes="split=false" --sluice-schedule="schedule=1f1b microbatches=1" --sluice-shard-tensors="tensor-parallel=3" 2>&1 | FileCheck %s --check-prefix=FFN
// RUN: not sluice-opt %inputs/shard-tensors-uneven.mlir --sluice-partition-stages="pp=1" --sluice-split-passes="split=false" --sluice-schedule="schedule=1f1b microbatches=1" --sluice-shard-tensors="tensor-parallel=2" 2>&1 | FileCheck %s --check-prefix=KV
// RUN: sed 's/vocab = 100}/vocab = 3}/' %s | not sluice-opt --sluice-partition-stages="pp=2" --sluice-split-passes="split=false" --sluice-schedule="schedule=1f1b microbatches=2" --sluice-shard-tensors="tensor-parallel=4" 2>&1 | FileCheck %s --check-prefix=VOCAB
// RUN: sed 's/vocab = 100, norm/vocab = 3, norm/' %s | not sluice-opt --sluice-partition-stages="pp=2" --sluice-split-passes="split=false" --sluice-schedule="schedule=1f1b microbatches=2" --sluice-shard-tensors="tensor-parallel=4" 2>&1 | FileCheck %s --check-prefix=OUTVOCAB

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

// HEADS: sluice-shard-tensors.mlir:{{[0-9]+}}:9: error: 'sluice.transformer_layer' op 4 attention heads do not divide among 3 tensor-parallel shards
// TWICE: error: 'sluice.program' op already has 2 tensor-parallel shards
// The vocabulary-parallel embedding's rows: ceil(3 / 4) = 1 each leaves
// the fourth shard none.
// VOCAB: error: 'sluice.embedding' op the 3-row table leaves the last of 4 tensor-parallel shards no rows
// OUTVOCAB: error: 'sluice.output_layer' op the 3-row table leaves the last of 4 tensor-parallel shards no rows
// ZERO: error: 'sluice.program' op cannot have 0 tensor-parallel shards: the count must be positive

// The layer that does not split is named, by its location: its
// feed-forward width 64 among three shards; its three key/value heads
// among two (neither divides the other).
// FFN: shard-tensors-uneven.mlir:4:9: error: 'sluice.transformer_layer' op feed-forward width 64 does not divide among 3 tensor-parallel shards
// KV: shard-tensors-uneven.mlir:4:9: error: 'sluice.transformer_layer' op 3 key/value heads neither divide among 2 tensor-parallel shards nor divide 2 (to be replicated)

sluice.model @m {seq_len = 16, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 100} : tensor<1x16x32xf32>
  %x0 = sluice.transformer_layer %emb {heads = 4, kv_heads = 2, ffn = 96, norm = rmsnorm, mlp = swiglu, rope_theta = 10000.0} : tensor<1x16x32xf32>
  %x1 = sluice.transformer_layer %x0 {heads = 4, kv_heads = 2, ffn = 96, norm = rmsnorm, mlp = swiglu, rope_theta = 10000.0} : tensor<1x16x32xf32>
  %loss = sluice.output_layer %x1 {vocab = 100, norm = rmsnorm} : tensor<1x16x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}
