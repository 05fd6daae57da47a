// RUN: sluice-opt %s --sluice-partition-stages="pp=4" --sluice-partition-vocab="mode=vocab" | FileCheck %s

// Tied input and output embeddings share one shard: both shards are marked
// tied and cut the same 104 rows (a multiple of 2p = 8) the same way, so
// each device holds one table slice and one gradient for it.
// CHECK: sluice.vocab_input @vin -> tensor<1x8x32xbf16> attributes {devices = 4 : i64, padded_vocab = 104 : i64, root = 0 : i64, tied, vocab = 100 : i64}
// CHECK: sluice.vocab_output @vout({{.+}}) -> tensor<f32> attributes {algorithm = 0 : i64, barriers = 3 : i64, devices = 4 : i64, padded_vocab = 104 : i64, root = 3 : i64, tied, vocab = 100 : i64}
// CHECK: sluice.shard_logits %{{.+}} : tensor<1x8x32xbf16> -> tensor<1x8x26xf32>

sluice.model @tied {seq_len = 8, micro_batch = 1, dtype = bf16} {
  %emb = sluice.embedding {vocab = 100} : tensor<1x8x32xbf16>
  %x0 = sluice.transformer_layer %emb {heads = 4, kv_heads = 2, ffn = 64, norm = rmsnorm, mlp = swiglu} : tensor<1x8x32xbf16>
  %x1 = sluice.transformer_layer %x0 {heads = 4, kv_heads = 2, ffn = 64, norm = rmsnorm, mlp = swiglu} : tensor<1x8x32xbf16>
  %x2 = sluice.transformer_layer %x1 {heads = 4, kv_heads = 2, ffn = 64, norm = rmsnorm, mlp = swiglu} : tensor<1x8x32xbf16>
  %x3 = sluice.transformer_layer %x2 {heads = 4, kv_heads = 2, ffn = 64, norm = rmsnorm, mlp = swiglu} : tensor<1x8x32xbf16>
  %loss = sluice.output_layer %x3 {vocab = 100, norm = rmsnorm, tied} : tensor<1x8x32xbf16> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}
