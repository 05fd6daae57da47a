// RUN: sluice-opt %s --sluice-partition-stages="pp=2" --sluice-partition-vocab="mode=vocab" | FileCheck %s --check-prefix=VOCAB --implicit-check-not=sluice.embedding --implicit-check-not=sluice.output_layer
// RUN: sluice-opt %s --sluice-partition-stages="pp=3" --sluice-partition-vocab="mode=vocab" | FileCheck %s --check-prefix=PAD6
// RUN: sluice-opt %s --sluice-partition-stages="pp=2 virtual=2 placement=vshape" --sluice-partition-vocab="mode=vocab" | FileCheck %s --check-prefix=VSHAPE
// RUN: sluice-opt %s --sluice-partition-stages="pp=2" --sluice-partition-vocab="mode=interlaced" | FileCheck %s --check-prefix=INTER
// RUN: sluice-opt %s --sluice-partition-stages="pp=2" --sluice-partition-vocab="mode=baseline" | FileCheck %s --check-prefix=BASE --implicit-check-not=sluice.vocab_
// RUN: sluice-opt %s --sluice-partition-stages="pp=2" --sluice-partition-vocab="mode=vocab" | sluice-opt | FileCheck %s --check-prefix=VOCAB --implicit-check-not=sluice.embedding --implicit-check-not=sluice.output_layer
// RUN: not sluice-opt %s --sluice-partition-stages="pp=2" --sluice-partition-vocab="mode=row" 2>&1 | FileCheck %s --check-prefix=MODE

// Six layers, vocabulary 101: not a multiple of 2p for any p.

// Two devices: padded to 104 (a multiple of 4), 52 rows per device. The
// embedding becomes an input shard that feeds stage 0 (its root); the output
// layer becomes the naive output shard rooted at the last stage's device.
// VOCAB:      %[[IN:.+]] = sluice.vocab_input @vin -> tensor<1x16x32xf32> attributes {devices = 2 : i64, padded_vocab = 104 : i64, positions = 16 : i64, root = 0 : i64, vocab = 101 : i64} {
// VOCAB-NEXT: ^bb0(%[[GRAD:.+]]: tensor<1x16x32xf32>):
// VOCAB-NEXT:   %[[PART:.+]] = sluice.shard_lookup : tensor<1x16x32xf32>
// VOCAB-NEXT:   %[[SUM:.+]] = sluice.reduce %[[PART]] root 0
// VOCAB-NEXT:   %[[POS:.+]] = sluice.add_positions %[[SUM]]
// VOCAB-NEXT:   %[[G:.+]] = sluice.broadcast %[[GRAD]] root 0
// VOCAB-NEXT:   sluice.shard_scatter_grad %[[G]]
// VOCAB-NEXT:   sluice.vocab_yield %[[POS]]
// VOCAB:      %[[S0:.+]] = sluice.stage @s0 device 0 chunk 0 (%[[IN]] : tensor<1x16x32xf32>)
// VOCAB:      %[[S1:.+]] = sluice.stage @s1 device 1 chunk 0 (%[[S0]] : tensor<1x16x32xf32>) -> tensor<1x16x32xf32> {
// VOCAB-COUNT-3: sluice.transformer_layer
// VOCAB-NEXT:   %[[N:.+]] = sluice.final_norm %{{.+}} {norm = layernorm}
// VOCAB-NEXT:   sluice.yield %[[N]]
// VOCAB:      %[[LOSS:.+]] = sluice.vocab_output @vout(%[[S1]] : tensor<1x16x32xf32>) -> tensor<f32> attributes {algorithm = 0 : i64, barriers = 3 : i64, devices = 2 : i64, padded_vocab = 104 : i64, root = 1 : i64, vocab = 101 : i64} {
// VOCAB:        sluice.broadcast %{{.+}} root 1
// VOCAB-NEXT:   sluice.shard_logits %{{.+}} : tensor<1x16x32xf32> -> tensor<1x16x52xf32>
// VOCAB-NEXT:   sluice.shard_max
// VOCAB-NEXT:   sluice.all_reduce <max>
// VOCAB-NEXT:   sluice.shard_sum_exp
// VOCAB-NEXT:   sluice.all_reduce <sum>
// VOCAB-NEXT:   sluice.shard_softmax
// VOCAB-NEXT:   sluice.shard_loss
// VOCAB-NEXT:   sluice.softmax_grad
// VOCAB-NEXT:   sluice.shard_input_grad
// VOCAB-NEXT:   sluice.reduce %{{.+}} root 1
// VOCAB-NEXT:   sluice.shard_weight_grad
// VOCAB-NEXT:   sluice.vocab_yield
// VOCAB:      sluice.return %[[LOSS]] : tensor<f32>

// Three devices: padded to 102 (a multiple of 6), 34 rows each.
// PAD6: sluice.vocab_input @vin {{.*}}devices = 3 : i64, padded_vocab = 102 : i64
// PAD6: sluice.vocab_output @vout{{.*}}devices = 3 : i64, padded_vocab = 102 : i64, root = 2 : i64
// PAD6: sluice.shard_logits %{{.+}} : tensor<1x16x32xf32> -> tensor<1x16x34xf32>

// V-shape: the last stage lives on device 0, so the output shard roots there.
// VSHAPE: sluice.vocab_input @vin {{.*}}root = 0 : i64
// VSHAPE: sluice.stage @s3 device 0 chunk 1
// VSHAPE: sluice.final_norm
// VSHAPE: sluice.vocab_output @vout{{.*}}root = 0 : i64
// VSHAPE: sluice.broadcast %{{.+}} root 0

// Interlaced: the same shards, marked synchronous.
// INTER: sluice.vocab_input @vin {{.*}}synchronous
// INTER: sluice.vocab_output @vout{{.*}}barriers = 3 : i64{{.*}}synchronous

// Baseline: nothing moves.
// BASE: sluice.embedding
// BASE: sluice.output_layer

// MODE: for the --mode option: Cannot find option named 'row'!

sluice.model @m {seq_len = 16, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 101, positions = 16} : tensor<1x16x32xf32>
  %x0 = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, ffn = 128, norm = layernorm, mlp = gelu} : tensor<1x16x32xf32>
  %x1 = sluice.transformer_layer %x0 {heads = 4, kv_heads = 4, ffn = 128, norm = layernorm, mlp = gelu} : tensor<1x16x32xf32>
  %x2 = sluice.transformer_layer %x1 {heads = 4, kv_heads = 4, ffn = 128, norm = layernorm, mlp = gelu} : tensor<1x16x32xf32>
  %x3 = sluice.transformer_layer %x2 {heads = 4, kv_heads = 4, ffn = 128, norm = layernorm, mlp = gelu} : tensor<1x16x32xf32>
  %x4 = sluice.transformer_layer %x3 {heads = 4, kv_heads = 4, ffn = 128, norm = layernorm, mlp = gelu} : tensor<1x16x32xf32>
  %x5 = sluice.transformer_layer %x4 {heads = 4, kv_heads = 4, ffn = 128, norm = layernorm, mlp = gelu} : tensor<1x16x32xf32>
  %loss = sluice.output_layer %x5 {vocab = 101, norm = layernorm} : tensor<1x16x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}
