// The layers and programs sluice-shard-tensors refuses, each named at the
// offending op. The inputs are written here, not made by earlier passes.
// RUN: sluice-opt %s -split-input-file -verify-diagnostics --sluice-shard-tensors="tensor-parallel=3"
// RUN: sluice-opt %inputs/shard-tensors-sequence-errors.mlir -split-input-file -verify-diagnostics --sluice-shard-tensors="tensor-parallel=3 sequence-parallel=true"

// Four attention heads among three shards.
sluice.model @m {seq_len = 6, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 30} : tensor<1x6x24xf32>
  // expected-error@+1 {{'sluice.transformer_layer' op 4 attention heads do not divide among 3 tensor-parallel shards}}
  %x = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, ffn = 48, norm = layernorm, mlp = gelu} : tensor<1x6x24xf32>
  %loss = sluice.output_layer %x {vocab = 30, norm = layernorm} : tensor<1x6x24xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}
sluice.program @plan for @m {devices = 1, microbatches = 1, slices = 1, schedule = "1f1b"} {
  sluice.device 0 {
  }
}

// -----

// A feed-forward width of 64 among three shards.
sluice.model @m {seq_len = 6, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 30} : tensor<1x6x24xf32>
  // expected-error@+1 {{'sluice.transformer_layer' op the feed-forward width 64 does not divide among 3 tensor-parallel shards}}
  %x = sluice.transformer_layer %emb {heads = 3, kv_heads = 3, ffn = 64, norm = layernorm, mlp = gelu} : tensor<1x6x24xf32>
  %loss = sluice.output_layer %x {vocab = 30, norm = layernorm} : tensor<1x6x24xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}
sluice.program @plan for @m {devices = 1, microbatches = 1, slices = 1, schedule = "1f1b"} {
  sluice.device 0 {
  }
}

// -----

// Two key/value heads: they neither divide among three shards nor divide
// three (to be replicated).
sluice.model @m {seq_len = 6, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 30} : tensor<1x6x24xf32>
  // expected-error@+1 {{'sluice.transformer_layer' op 2 key/value heads neither divide among 3 tensor-parallel shards nor divide 3 (to be replicated)}}
  %x = sluice.transformer_layer %emb {heads = 6, kv_heads = 2, ffn = 48, norm = rmsnorm, mlp = swiglu} : tensor<1x6x24xf32>
  %loss = sluice.output_layer %x {vocab = 30, norm = rmsnorm} : tensor<1x6x24xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}
sluice.program @plan for @m {devices = 1, microbatches = 1, slices = 1, schedule = "1f1b"} {
  sluice.device 0 {
  }
}

// -----

// A 4-row table: ceil(4 / 3) = 2 rows a shard leave the third none.
sluice.model @m {seq_len = 6, micro_batch = 1, dtype = f32} {
  // expected-error@+1 {{'sluice.embedding' op the 4-row table leaves the last of 3 tensor-parallel shards no rows}}
  %emb = sluice.embedding {vocab = 4} : tensor<1x6x24xf32>
  %x = sluice.transformer_layer %emb {heads = 3, kv_heads = 3, ffn = 48, norm = layernorm, mlp = gelu} : tensor<1x6x24xf32>
  %loss = sluice.output_layer %x {vocab = 4, norm = layernorm} : tensor<1x6x24xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}
sluice.program @plan for @m {devices = 1, microbatches = 1, slices = 1, schedule = "1f1b"} {
  sluice.device 0 {
  }
}

// -----

// A program that already has shards (its layers carry their bodies).
sluice.model @m {seq_len = 6, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 30} : tensor<1x6x24xf32> shards 3 {
    %0 = sluice.shard_lookup : tensor<1x6x24xf32>
    %1 = sluice.tp_reduce %0 : tensor<1x6x24xf32>
    sluice.layer_yield %1 : tensor<1x6x24xf32>
  }
  %loss = sluice.output_layer %emb {vocab = 30, norm = layernorm} : tensor<1x6x24xf32> -> tensor<f32> shards 3 {
  ^bb0(%in: tensor<1x6x24xf32>):
    %0 = sluice.shard_norm %in : tensor<1x6x24xf32>
    %1 = sluice.tp_copy %0 : tensor<1x6x24xf32>
    %2 = sluice.shard_logits %1 : tensor<1x6x24xf32> -> tensor<1x6x10xf32>
    %3 = sluice.shard_max %2 : tensor<1x6x10xf32> -> tensor<1x6xf32>
    %4 = sluice.shard_sum_exp %2, %3 : tensor<1x6x10xf32>, tensor<1x6xf32> -> tensor<1x6xf32>
    %5 = sluice.all_reduce <max> %3 : tensor<1x6xf32>
    %6 = sluice.rescale_sum %4, %3, %5 : tensor<1x6xf32>
    %7 = sluice.all_reduce <sum> %6 : tensor<1x6xf32>
    %8 = sluice.shard_loss %2, %5, %7 : tensor<1x6x10xf32>, tensor<1x6xf32> -> tensor<f32>
    sluice.layer_yield %8 : tensor<f32>
  }
  sluice.return %loss : tensor<f32>
}
// expected-error@+1 {{'sluice.program' op already has 3 tensor-parallel shards}}
sluice.program @plan for @m {devices = 1, microbatches = 1, slices = 1, schedule = "1f1b"} tp 3 {
  sluice.device 0 {
  }
}

