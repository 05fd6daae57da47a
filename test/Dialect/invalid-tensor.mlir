// One case per verifier rule of the tensor-parallel shard bodies, named
// after the rule.
// RUN: sluice-opt %s -split-input-file -verify-diagnostics -allow-unregistered-dialect

// row-parallel-partials-used-unreduced
sluice.model @m {seq_len = 16, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 64} : tensor<1x16x32xf32>
  %x = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, ffn = 64, norm = layernorm, mlp = gelu} : tensor<1x16x32xf32> shards 2 {
  ^bb0(%in: tensor<1x16x32xf32>):
    %0 = sluice.shard_norm %in : tensor<1x16x32xf32>
    %1 = sluice.tp_copy %0 : tensor<1x16x32xf32>
    %2 = sluice.column_parallel <qkv> %1 : tensor<1x16x32xf32> -> tensor<1x16x48xf32>
    %3 = sluice.shard_attention %2 : tensor<1x16x48xf32> -> tensor<1x16x16xf32>
    // expected-error@+1 {{'sluice.row_parallel' op partial sums are used by 'sluice.residual_add' before sluice.tp_reduce or sluice.tp_scatter sums them over the shards}}
    %4 = sluice.row_parallel <out> %3 : tensor<1x16x16xf32> -> tensor<1x16x32xf32>
    %5 = sluice.tp_reduce %4 : tensor<1x16x32xf32>
    %6 = sluice.residual_add %in, %4 : tensor<1x16x32xf32>
    %7 = sluice.shard_norm %6 : tensor<1x16x32xf32>
    %8 = sluice.tp_copy %7 : tensor<1x16x32xf32>
    %9 = sluice.column_parallel <up> %8 : tensor<1x16x32xf32> -> tensor<1x16x32xf32>
    %10 = sluice.shard_activation %9 : tensor<1x16x32xf32>
    %11 = sluice.row_parallel <down> %10 : tensor<1x16x32xf32> -> tensor<1x16x32xf32>
    %12 = sluice.tp_reduce %11 : tensor<1x16x32xf32>
    %13 = sluice.residual_add %6, %12 : tensor<1x16x32xf32>
    sluice.layer_yield %13 : tensor<1x16x32xf32>
  }
  %loss = sluice.output_layer %x {vocab = 64, norm = layernorm} : tensor<1x16x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// column-parallel-input-without-tp-copy
sluice.model @m {seq_len = 16, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 64} : tensor<1x16x32xf32>
  %x = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, ffn = 64, norm = layernorm, mlp = gelu} : tensor<1x16x32xf32> shards 2 {
  ^bb0(%in: tensor<1x16x32xf32>):
    %0 = sluice.shard_norm %in : tensor<1x16x32xf32>
    %1 = sluice.tp_copy %0 : tensor<1x16x32xf32>
    // expected-error@+1 {{'sluice.column_parallel' op input must enter through sluice.tp_copy or sluice.tp_gather, whose backward sums the shards' partial input gradients}}
    %2 = sluice.column_parallel <qkv> %0 : tensor<1x16x32xf32> -> tensor<1x16x48xf32>
    %3 = sluice.shard_attention %2 : tensor<1x16x48xf32> -> tensor<1x16x16xf32>
    %4 = sluice.row_parallel <out> %3 : tensor<1x16x16xf32> -> tensor<1x16x32xf32>
    %5 = sluice.tp_reduce %4 : tensor<1x16x32xf32>
    %6 = sluice.residual_add %in, %5 : tensor<1x16x32xf32>
    %7 = sluice.shard_norm %6 : tensor<1x16x32xf32>
    %8 = sluice.tp_copy %7 : tensor<1x16x32xf32>
    %9 = sluice.column_parallel <up> %8 : tensor<1x16x32xf32> -> tensor<1x16x32xf32>
    %10 = sluice.shard_activation %9 : tensor<1x16x32xf32>
    %11 = sluice.row_parallel <down> %10 : tensor<1x16x32xf32> -> tensor<1x16x32xf32>
    %12 = sluice.tp_reduce %11 : tensor<1x16x32xf32>
    %13 = sluice.residual_add %6, %12 : tensor<1x16x32xf32>
    sluice.layer_yield %13 : tensor<1x16x32xf32>
  }
  %loss = sluice.output_layer %x {vocab = 64, norm = layernorm} : tensor<1x16x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// column-parallel-row-projection
sluice.model @m {seq_len = 16, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 64} : tensor<1x16x32xf32>
  %x = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, ffn = 64, norm = layernorm, mlp = gelu} : tensor<1x16x32xf32> shards 2 {
  ^bb0(%in: tensor<1x16x32xf32>):
    %0 = sluice.shard_norm %in : tensor<1x16x32xf32>
    %1 = sluice.tp_copy %0 : tensor<1x16x32xf32>
    %2 = sluice.column_parallel <qkv> %1 : tensor<1x16x32xf32> -> tensor<1x16x48xf32>
    %3 = sluice.shard_attention %2 : tensor<1x16x48xf32> -> tensor<1x16x16xf32>
    %4 = sluice.row_parallel <out> %3 : tensor<1x16x16xf32> -> tensor<1x16x32xf32>
    %5 = sluice.tp_reduce %4 : tensor<1x16x32xf32>
    %6 = sluice.residual_add %in, %5 : tensor<1x16x32xf32>
    %7 = sluice.shard_norm %6 : tensor<1x16x32xf32>
    %8 = sluice.tp_copy %7 : tensor<1x16x32xf32>
    // expected-error@+1 {{'sluice.column_parallel' op the down projection is row-parallel}}
    %9 = sluice.column_parallel <down> %8 : tensor<1x16x32xf32> -> tensor<1x16x32xf32>
    %10 = sluice.shard_activation %9 : tensor<1x16x32xf32>
    %11 = sluice.row_parallel <down> %10 : tensor<1x16x32xf32> -> tensor<1x16x32xf32>
    %12 = sluice.tp_reduce %11 : tensor<1x16x32xf32>
    %13 = sluice.residual_add %6, %12 : tensor<1x16x32xf32>
    sluice.layer_yield %13 : tensor<1x16x32xf32>
  }
  %loss = sluice.output_layer %x {vocab = 64, norm = layernorm} : tensor<1x16x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// row-parallel-column-projection
sluice.model @m {seq_len = 16, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 64} : tensor<1x16x32xf32>
  %x = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, ffn = 64, norm = layernorm, mlp = gelu} : tensor<1x16x32xf32> shards 2 {
  ^bb0(%in: tensor<1x16x32xf32>):
    %0 = sluice.shard_norm %in : tensor<1x16x32xf32>
    %1 = sluice.tp_copy %0 : tensor<1x16x32xf32>
    %2 = sluice.column_parallel <qkv> %1 : tensor<1x16x32xf32> -> tensor<1x16x48xf32>
    %3 = sluice.shard_attention %2 : tensor<1x16x48xf32> -> tensor<1x16x16xf32>
    %4 = sluice.row_parallel <out> %3 : tensor<1x16x16xf32> -> tensor<1x16x32xf32>
    %5 = sluice.tp_reduce %4 : tensor<1x16x32xf32>
    %6 = sluice.residual_add %in, %5 : tensor<1x16x32xf32>
    %7 = sluice.shard_norm %6 : tensor<1x16x32xf32>
    %8 = sluice.tp_copy %7 : tensor<1x16x32xf32>
    %9 = sluice.column_parallel <up> %8 : tensor<1x16x32xf32> -> tensor<1x16x32xf32>
    %10 = sluice.shard_activation %9 : tensor<1x16x32xf32>
    // expected-error@+1 {{'sluice.row_parallel' op the gate projection is column-parallel}}
    %11 = sluice.row_parallel <gate> %10 : tensor<1x16x32xf32> -> tensor<1x16x32xf32>
    %12 = sluice.tp_reduce %11 : tensor<1x16x32xf32>
    %13 = sluice.residual_add %6, %12 : tensor<1x16x32xf32>
    sluice.layer_yield %13 : tensor<1x16x32xf32>
  }
  %loss = sluice.output_layer %x {vocab = 64, norm = layernorm} : tensor<1x16x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// qkv-width-not-the-shards-heads
sluice.model @m {seq_len = 16, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 64} : tensor<1x16x32xf32>
  %x = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, ffn = 64, norm = layernorm, mlp = gelu} : tensor<1x16x32xf32> shards 2 {
  ^bb0(%in: tensor<1x16x32xf32>):
    %0 = sluice.shard_norm %in : tensor<1x16x32xf32>
    %1 = sluice.tp_copy %0 : tensor<1x16x32xf32>
    // expected-error@+1 {{'sluice.column_parallel' op yields 40 columns, but one of 2 shards of 4 heads (4 key/value) and feed-forward width 64 has 48}}
    %2 = sluice.column_parallel <qkv> %1 : tensor<1x16x32xf32> -> tensor<1x16x40xf32>
    %3 = sluice.shard_attention %2 : tensor<1x16x40xf32> -> tensor<1x16x16xf32>
    %4 = sluice.row_parallel <out> %3 : tensor<1x16x16xf32> -> tensor<1x16x32xf32>
    %5 = sluice.tp_reduce %4 : tensor<1x16x32xf32>
    %6 = sluice.residual_add %in, %5 : tensor<1x16x32xf32>
    %7 = sluice.shard_norm %6 : tensor<1x16x32xf32>
    %8 = sluice.tp_copy %7 : tensor<1x16x32xf32>
    %9 = sluice.column_parallel <up> %8 : tensor<1x16x32xf32> -> tensor<1x16x32xf32>
    %10 = sluice.shard_activation %9 : tensor<1x16x32xf32>
    %11 = sluice.row_parallel <down> %10 : tensor<1x16x32xf32> -> tensor<1x16x32xf32>
    %12 = sluice.tp_reduce %11 : tensor<1x16x32xf32>
    %13 = sluice.residual_add %6, %12 : tensor<1x16x32xf32>
    sluice.layer_yield %13 : tensor<1x16x32xf32>
  }
  %loss = sluice.output_layer %x {vocab = 64, norm = layernorm} : tensor<1x16x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// qkv-width-with-replicated-kv-heads
sluice.model @m {seq_len = 16, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 64} : tensor<1x16x32xf32>
  %x = sluice.transformer_layer %emb {heads = 4, kv_heads = 1, ffn = 64, norm = layernorm, mlp = gelu} : tensor<1x16x32xf32> shards 2 {
  ^bb0(%in: tensor<1x16x32xf32>):
    %0 = sluice.shard_norm %in : tensor<1x16x32xf32>
    %1 = sluice.tp_copy %0 : tensor<1x16x32xf32>
    // expected-error@+1 {{'sluice.column_parallel' op yields 48 columns, but one of 2 shards of 4 heads (1 key/value) and feed-forward width 64 has 32}}
    %2 = sluice.column_parallel <qkv> %1 : tensor<1x16x32xf32> -> tensor<1x16x48xf32>
    %3 = sluice.shard_attention %2 : tensor<1x16x48xf32> -> tensor<1x16x16xf32>
    %4 = sluice.row_parallel <out> %3 : tensor<1x16x16xf32> -> tensor<1x16x32xf32>
    %5 = sluice.tp_reduce %4 : tensor<1x16x32xf32>
    %6 = sluice.residual_add %in, %5 : tensor<1x16x32xf32>
    %7 = sluice.shard_norm %6 : tensor<1x16x32xf32>
    %8 = sluice.tp_copy %7 : tensor<1x16x32xf32>
    %9 = sluice.column_parallel <up> %8 : tensor<1x16x32xf32> -> tensor<1x16x32xf32>
    %10 = sluice.shard_activation %9 : tensor<1x16x32xf32>
    %11 = sluice.row_parallel <down> %10 : tensor<1x16x32xf32> -> tensor<1x16x32xf32>
    %12 = sluice.tp_reduce %11 : tensor<1x16x32xf32>
    %13 = sluice.residual_add %6, %12 : tensor<1x16x32xf32>
    sluice.layer_yield %13 : tensor<1x16x32xf32>
  }
  %loss = sluice.output_layer %x {vocab = 64, norm = layernorm} : tensor<1x16x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// attention-width-not-the-shards-heads
sluice.model @m {seq_len = 16, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 64} : tensor<1x16x32xf32>
  %x = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, ffn = 64, norm = layernorm, mlp = gelu} : tensor<1x16x32xf32> shards 2 {
  ^bb0(%in: tensor<1x16x32xf32>):
    %0 = sluice.shard_norm %in : tensor<1x16x32xf32>
    %1 = sluice.tp_copy %0 : tensor<1x16x32xf32>
    %2 = sluice.column_parallel <qkv> %1 : tensor<1x16x32xf32> -> tensor<1x16x48xf32>
    // expected-error@+1 {{'sluice.shard_attention' op yields 32 columns, but one of 2 shards of 4 heads (4 key/value) and feed-forward width 64 has 16}}
    %3 = sluice.shard_attention %2 : tensor<1x16x48xf32> -> tensor<1x16x32xf32>
    %4 = sluice.row_parallel <out> %3 : tensor<1x16x32xf32> -> tensor<1x16x32xf32>
    %5 = sluice.tp_reduce %4 : tensor<1x16x32xf32>
    %6 = sluice.residual_add %in, %5 : tensor<1x16x32xf32>
    %7 = sluice.shard_norm %6 : tensor<1x16x32xf32>
    %8 = sluice.tp_copy %7 : tensor<1x16x32xf32>
    %9 = sluice.column_parallel <up> %8 : tensor<1x16x32xf32> -> tensor<1x16x32xf32>
    %10 = sluice.shard_activation %9 : tensor<1x16x32xf32>
    %11 = sluice.row_parallel <down> %10 : tensor<1x16x32xf32> -> tensor<1x16x32xf32>
    %12 = sluice.tp_reduce %11 : tensor<1x16x32xf32>
    %13 = sluice.residual_add %6, %12 : tensor<1x16x32xf32>
    sluice.layer_yield %13 : tensor<1x16x32xf32>
  }
  %loss = sluice.output_layer %x {vocab = 64, norm = layernorm} : tensor<1x16x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// ffn-width-not-the-shards-share
sluice.model @m {seq_len = 16, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 64} : tensor<1x16x32xf32>
  %x = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, ffn = 64, norm = layernorm, mlp = gelu} : tensor<1x16x32xf32> shards 2 {
  ^bb0(%in: tensor<1x16x32xf32>):
    %0 = sluice.shard_norm %in : tensor<1x16x32xf32>
    %1 = sluice.tp_copy %0 : tensor<1x16x32xf32>
    %2 = sluice.column_parallel <qkv> %1 : tensor<1x16x32xf32> -> tensor<1x16x48xf32>
    %3 = sluice.shard_attention %2 : tensor<1x16x48xf32> -> tensor<1x16x16xf32>
    %4 = sluice.row_parallel <out> %3 : tensor<1x16x16xf32> -> tensor<1x16x32xf32>
    %5 = sluice.tp_reduce %4 : tensor<1x16x32xf32>
    %6 = sluice.residual_add %in, %5 : tensor<1x16x32xf32>
    %7 = sluice.shard_norm %6 : tensor<1x16x32xf32>
    %8 = sluice.tp_copy %7 : tensor<1x16x32xf32>
    // expected-error@+1 {{'sluice.column_parallel' op yields 64 columns, but one of 2 shards of 4 heads (4 key/value) and feed-forward width 64 has 32}}
    %9 = sluice.column_parallel <up> %8 : tensor<1x16x32xf32> -> tensor<1x16x64xf32>
    %10 = sluice.shard_activation %9 : tensor<1x16x64xf32>
    %11 = sluice.row_parallel <down> %10 : tensor<1x16x64xf32> -> tensor<1x16x32xf32>
    %12 = sluice.tp_reduce %11 : tensor<1x16x32xf32>
    %13 = sluice.residual_add %6, %12 : tensor<1x16x32xf32>
    sluice.layer_yield %13 : tensor<1x16x32xf32>
  }
  %loss = sluice.output_layer %x {vocab = 64, norm = layernorm} : tensor<1x16x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// shards-without-body
sluice.model @m {seq_len = 16, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 64} : tensor<1x16x32xf32>
  // expected-error@+1 {{'sluice.transformer_layer' op 'shards' = 2 needs a shard body}}
  %x = "sluice.transformer_layer"(%emb) <{shards = 2 : i64, spec = "{\"kind\": \"transformer\", \"heads\": 4, \"kv_heads\": 4, \"ffn\": 64, \"norm\": \"layernorm\", \"mlp\": \"gelu\"}"}> ({}) : (tensor<1x16x32xf32>) -> tensor<1x16x32xf32>
  %loss = sluice.output_layer %x {vocab = 64, norm = layernorm} : tensor<1x16x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// one-shard
sluice.model @m {seq_len = 16, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 64} : tensor<1x16x32xf32>
  // expected-error@+1 {{'sluice.transformer_layer' op 'shards' must be at least 2, got 1}}
  %x = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, ffn = 64, norm = layernorm, mlp = gelu} : tensor<1x16x32xf32> shards 1 {
  ^bb0(%in: tensor<1x16x32xf32>):
    %0 = sluice.shard_norm %in : tensor<1x16x32xf32>
    %1 = sluice.tp_copy %0 : tensor<1x16x32xf32>
    %2 = sluice.column_parallel <qkv> %1 : tensor<1x16x32xf32> -> tensor<1x16x48xf32>
    %3 = sluice.shard_attention %2 : tensor<1x16x48xf32> -> tensor<1x16x16xf32>
    %4 = sluice.row_parallel <out> %3 : tensor<1x16x16xf32> -> tensor<1x16x32xf32>
    %5 = sluice.tp_reduce %4 : tensor<1x16x32xf32>
    %6 = sluice.residual_add %in, %5 : tensor<1x16x32xf32>
    %7 = sluice.shard_norm %6 : tensor<1x16x32xf32>
    %8 = sluice.tp_copy %7 : tensor<1x16x32xf32>
    %9 = sluice.column_parallel <up> %8 : tensor<1x16x32xf32> -> tensor<1x16x32xf32>
    %10 = sluice.shard_activation %9 : tensor<1x16x32xf32>
    %11 = sluice.row_parallel <down> %10 : tensor<1x16x32xf32> -> tensor<1x16x32xf32>
    %12 = sluice.tp_reduce %11 : tensor<1x16x32xf32>
    %13 = sluice.residual_add %6, %12 : tensor<1x16x32xf32>
    sluice.layer_yield %13 : tensor<1x16x32xf32>
  }
  %loss = sluice.output_layer %x {vocab = 64, norm = layernorm} : tensor<1x16x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// body-without-shards
sluice.model @m {seq_len = 16, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 64} : tensor<1x16x32xf32>
  // expected-error@+1 {{'sluice.transformer_layer' op has a shard body but no 'shards'}}
  %x = "sluice.transformer_layer"(%emb) <{spec = "{\"kind\": \"transformer\", \"heads\": 4, \"kv_heads\": 4, \"ffn\": 64, \"norm\": \"layernorm\", \"mlp\": \"gelu\"}"}> ({
  ^bb0(%in: tensor<1x16x32xf32>):
    sluice.layer_yield %in : tensor<1x16x32xf32>
  }) : (tensor<1x16x32xf32>) -> tensor<1x16x32xf32>
  %loss = sluice.output_layer %x {vocab = 64, norm = layernorm} : tensor<1x16x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// body-yields-a-slice-of-a-whole-input
sluice.model @m {seq_len = 16, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 64} : tensor<1x16x32xf32>
  // expected-error@+1 {{'sluice.transformer_layer' op shard body yields 'tensor<1x8x32xf32>' but takes 'tensor<1x16x32xf32>': the activation must stay whole or stay sliced}}
  %x = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, ffn = 64, norm = layernorm, mlp = gelu} : tensor<1x16x32xf32> shards 2 {
  ^bb0(%in: tensor<1x16x32xf32>):
    %0 = sluice.tp_scatter %in : tensor<1x16x32xf32> -> tensor<1x8x32xf32>
    sluice.layer_yield %0 : tensor<1x8x32xf32>
  }
  %loss = sluice.output_layer %x {vocab = 64, norm = layernorm} : tensor<1x16x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// body-input-not-a-token-slice
sluice.model @m {seq_len = 16, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 64} : tensor<1x16x32xf32>
  // expected-error@+1 {{'sluice.transformer_layer' op shard body takes 'tensor<1x5x32xf32>', neither 'tensor<1x16x32xf32>' nor its token slice for 2 shards}}
  %x = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, ffn = 64, norm = layernorm, mlp = gelu} : tensor<1x16x32xf32> shards 2 {
  ^bb0(%in: tensor<1x5x32xf32>):
    sluice.layer_yield %in : tensor<1x5x32xf32>
  }
  %loss = sluice.output_layer %x {vocab = 64, norm = layernorm} : tensor<1x16x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// gather-not-over-the-shards
sluice.model @m {seq_len = 16, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 64} : tensor<1x16x32xf32>
  %x = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, ffn = 64, norm = layernorm, mlp = gelu} : tensor<1x16x32xf32> shards 2 {
  ^bb0(%in: tensor<1x16x32xf32>):
    // expected-error@+1 {{'sluice.tp_gather' op result 'tensor<1x48x32xf32>' is not the operand 'tensor<1x16x32xf32>' gathered over 2 shards along the tokens}}
    %0 = sluice.tp_gather %in : tensor<1x16x32xf32> -> tensor<1x48x32xf32>
    sluice.layer_yield %in : tensor<1x16x32xf32>
  }
  %loss = sluice.output_layer %x {vocab = 64, norm = layernorm} : tensor<1x16x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// scatter-not-over-the-shards
sluice.model @m {seq_len = 16, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 64} : tensor<1x16x32xf32>
  %x = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, ffn = 64, norm = layernorm, mlp = gelu} : tensor<1x16x32xf32> shards 2 {
  ^bb0(%in: tensor<1x16x32xf32>):
    // expected-error@+1 {{'sluice.tp_scatter' op result 'tensor<1x4x32xf32>' is not a token slice of the operand 'tensor<1x16x32xf32>' for 2 shards}}
    %0 = sluice.tp_scatter %in : tensor<1x16x32xf32> -> tensor<1x4x32xf32>
    sluice.layer_yield %in : tensor<1x16x32xf32>
  }
  %loss = sluice.output_layer %x {vocab = 64, norm = layernorm} : tensor<1x16x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// activation-gate-differs-from-up
sluice.model @m {seq_len = 16, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 64} : tensor<1x16x32xf32>
  %x = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, ffn = 64, norm = layernorm, mlp = gelu} : tensor<1x16x32xf32> shards 2 {
  ^bb0(%in: tensor<1x16x32xf32>):
    %0 = sluice.shard_norm %in : tensor<1x16x32xf32>
    %1 = sluice.tp_copy %0 : tensor<1x16x32xf32>
    %2 = sluice.column_parallel <qkv> %1 : tensor<1x16x32xf32> -> tensor<1x16x48xf32>
    %3 = sluice.shard_attention %2 : tensor<1x16x48xf32> -> tensor<1x16x16xf32>
    %4 = sluice.row_parallel <out> %3 : tensor<1x16x16xf32> -> tensor<1x16x32xf32>
    %5 = sluice.tp_reduce %4 : tensor<1x16x32xf32>
    %6 = sluice.residual_add %in, %5 : tensor<1x16x32xf32>
    %7 = sluice.shard_norm %6 : tensor<1x16x32xf32>
    %8 = sluice.tp_copy %7 : tensor<1x16x32xf32>
    %9 = sluice.column_parallel <up> %8 : tensor<1x16x32xf32> -> tensor<1x16x32xf32>
    %g = sluice.column_parallel <gate> %8 : tensor<1x16x32xf32> -> tensor<1x16x32xf16>
    // expected-error@+1 {{'sluice.shard_activation' op gate 'tensor<1x16x32xf16>' differs from up 'tensor<1x16x32xf32>'}}
    %10 = sluice.shard_activation %9, %g : tensor<1x16x32xf32>, tensor<1x16x32xf16>
    %11 = sluice.row_parallel <down> %10 : tensor<1x16x32xf32> -> tensor<1x16x32xf32>
    %12 = sluice.tp_reduce %11 : tensor<1x16x32xf32>
    %13 = sluice.residual_add %6, %12 : tensor<1x16x32xf32>
    sluice.layer_yield %13 : tensor<1x16x32xf32>
  }
  %loss = sluice.output_layer %x {vocab = 64, norm = layernorm} : tensor<1x16x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// tensor-op-outside-a-layer
sluice.model @m {seq_len = 16, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 64} : tensor<1x16x32xf32>
  // expected-error@+1 {{'sluice.tp_copy' op expects parent op to be one of 'sluice.transformer_layer, sluice.embedding, sluice.output_layer'}}
  %c = sluice.tp_copy %emb : tensor<1x16x32xf32>
  %x = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, ffn = 64, norm = layernorm, mlp = gelu} : tensor<1x16x32xf32>
  %loss = sluice.output_layer %x {vocab = 64, norm = layernorm} : tensor<1x16x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// output-shard-logits-not-the-shards-rows
sluice.model @m {seq_len = 16, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 64} : tensor<1x16x32xf32>
  %x = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, ffn = 64, norm = layernorm, mlp = gelu} : tensor<1x16x32xf32>
  %loss = sluice.output_layer %x {vocab = 63, norm = layernorm} : tensor<1x16x32xf32> -> tensor<f32> shards 2 {
  ^bb0(%in: tensor<1x16x32xf32>):
    %0 = sluice.shard_norm %in : tensor<1x16x32xf32>
    %1 = sluice.tp_copy %0 : tensor<1x16x32xf32>
    // expected-error@+1 {{'sluice.shard_logits' op yields 31 logits per token, but one of 2 shards of a 63-row LM head holds 32}}
    %2 = sluice.shard_logits %1 : tensor<1x16x32xf32> -> tensor<1x16x31xf32>
    %3 = sluice.shard_max %2 : tensor<1x16x31xf32> -> tensor<1x16xf32>
    %4 = sluice.shard_sum_exp %2, %3 : tensor<1x16x31xf32>, tensor<1x16xf32> -> tensor<1x16xf32>
    %5 = sluice.all_reduce <max> %3 : tensor<1x16xf32>
    %6 = sluice.rescale_sum %4, %3, %5 : tensor<1x16xf32>
    %7 = sluice.all_reduce <sum> %6 : tensor<1x16xf32>
    %8 = sluice.shard_loss %2, %5, %7 : tensor<1x16x31xf32>, tensor<1x16xf32> -> tensor<f32>
    sluice.layer_yield %8 : tensor<f32>
  }
  sluice.return %loss : tensor<f32>
}

// -----

// program-tp-without-shard-bodies
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  // expected-note@+1 {{the layer is here}}
  %e = sluice.embedding {vocab = 10} : tensor<1x4x8xf32>
  %l = sluice.output_layer %e {vocab = 10, norm = layernorm} : tensor<1x4x8xf32> -> tensor<f32>
  sluice.return %l : tensor<f32>
}
// expected-error@+1 {{'sluice.program' op has 2 tensor-parallel shards, but a 'sluice.embedding' has no shard body (run sluice-shard-tensors)}}
sluice.program @plan for @m {devices = 1, microbatches = 1, slices = 1, schedule = "1f1b"} tp 2 {
  sluice.device 0 {
  }
}

// -----

// program-sequence-parallel-without-shards
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %e = sluice.embedding {vocab = 10} : tensor<1x4x8xf32>
  %l = sluice.output_layer %e {vocab = 10, norm = layernorm} : tensor<1x4x8xf32> -> tensor<f32>
  sluice.return %l : tensor<f32>
}
// expected-error@+1 {{'sluice.program' op 'sequence_parallel' splits the tokens over the tensor-parallel shards, but 'tp' is 1}}
sluice.program @plan for @m {devices = 1, microbatches = 1, slices = 1, schedule = "1f1b"} sequence_parallel {
  sluice.device 0 {
  }
}

// -----

// program-sequence-parallel-with-whole-bodies
sluice.model @m {seq_len = 16, micro_batch = 1, dtype = f32} {
  // expected-note@+1 {{the layer is here}}
  %emb = sluice.embedding {vocab = 64} : tensor<1x16x32xf32> shards 2 {
    %0 = sluice.shard_lookup : tensor<1x16x32xf32>
    %1 = sluice.tp_reduce %0 : tensor<1x16x32xf32>
    sluice.layer_yield %1 : tensor<1x16x32xf32>
  }
  %loss = sluice.output_layer %emb {vocab = 64, norm = layernorm} : tensor<1x16x32xf32> -> tensor<f32> shards 2 {
  ^bb0(%in: tensor<1x16x32xf32>):
    %0 = sluice.shard_norm %in : tensor<1x16x32xf32>
    %1 = sluice.tp_copy %0 : tensor<1x16x32xf32>
    %2 = sluice.shard_logits %1 : tensor<1x16x32xf32> -> tensor<1x16x32xf32>
    %3 = sluice.shard_max %2 : tensor<1x16x32xf32> -> tensor<1x16xf32>
    %4 = sluice.shard_sum_exp %2, %3 : tensor<1x16x32xf32>, tensor<1x16xf32> -> tensor<1x16xf32>
    %5 = sluice.all_reduce <max> %3 : tensor<1x16xf32>
    %6 = sluice.rescale_sum %4, %3, %5 : tensor<1x16xf32>
    %7 = sluice.all_reduce <sum> %6 : tensor<1x16xf32>
    %8 = sluice.shard_loss %2, %5, %7 : tensor<1x16x32xf32>, tensor<1x16xf32> -> tensor<f32>
    sluice.layer_yield %8 : tensor<f32>
  }
  sluice.return %loss : tensor<f32>
}
// expected-error@+1 {{'sluice.program' op is sequence-parallel, but a 'sluice.embedding' shard body works on whole sequences}}
sluice.program @plan for @m {devices = 1, microbatches = 1, slices = 1, schedule = "1f1b"} tp 2 sequence_parallel {
  sluice.device 0 {
  }
}

// -----

// shard-body-without-the-layer-input
sluice.model @m {seq_len = 16, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 64} : tensor<1x16x32xf32>
  // expected-error@+1 {{'sluice.transformer_layer' op shard body must take the layer's input}}
  %x = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, ffn = 64, norm = layernorm, mlp = gelu} : tensor<1x16x32xf32> shards 2 {
    %0 = sluice.shard_lookup : tensor<1x16x32xf32>
    sluice.layer_yield %0 : tensor<1x16x32xf32>
  }
  %loss = sluice.output_layer %x {vocab = 64, norm = layernorm} : tensor<1x16x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// shard-body-not-ended-by-layer-yield
sluice.model @m {seq_len = 16, micro_batch = 1, dtype = f32} {
  // expected-error@+1 {{'sluice.embedding' op shard body must end in sluice.layer_yield}}
  %emb = sluice.embedding {vocab = 64} : tensor<1x16x32xf32> shards 2 {
    %0 = sluice.shard_lookup : tensor<1x16x32xf32>
    "test.terminator"(%0) : (tensor<1x16x32xf32>) -> ()
  }
  %loss = sluice.output_layer %emb {vocab = 64, norm = layernorm} : tensor<1x16x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// expert-dispatch-in-a-dense-layer
sluice.model @m {seq_len = 16, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 64} : tensor<1x16x32xf32>
  %x = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, ffn = 24, norm = rmsnorm, mlp = swiglu} : tensor<1x16x32xf32> shards 2 {
  ^bb0(%in: tensor<1x16x32xf32>):
    %0 = sluice.shard_norm %in : tensor<1x16x32xf32>
    %1 = sluice.tp_copy %0 : tensor<1x16x32xf32>
    %2 = sluice.column_parallel <qkv> %1 : tensor<1x16x32xf32> -> tensor<1x16x48xf32>
    %3 = sluice.shard_attention %2 : tensor<1x16x48xf32> -> tensor<1x16x16xf32>
    %4 = sluice.row_parallel <out> %3 : tensor<1x16x16xf32> -> tensor<1x16x32xf32>
    %5 = sluice.tp_reduce %4 : tensor<1x16x32xf32>
    %6 = sluice.residual_add %in, %5 : tensor<1x16x32xf32>
    %7 = sluice.shard_norm %6 : tensor<1x16x32xf32>
    %8 = sluice.tp_copy %7 : tensor<1x16x32xf32>
    // expected-error@+1 {{'sluice.expert_dispatch' op moves tokens to experts, but its layer has none ('experts')}}
    %9 = sluice.expert_dispatch %8 over 2 : tensor<1x16x32xf32> -> tensor<1x64x32xf32>
    %10 = sluice.column_parallel <up> %9 : tensor<1x64x32xf32> -> tensor<1x64x12xf32>
    %11 = sluice.column_parallel <gate> %9 : tensor<1x64x32xf32> -> tensor<1x64x12xf32>
    %12 = sluice.shard_activation %10, %11 : tensor<1x64x12xf32>, tensor<1x64x12xf32>
    %13 = sluice.row_parallel <down> %12 : tensor<1x64x12xf32> -> tensor<1x64x32xf32>
    %14 = sluice.expert_combine %13 over 2 : tensor<1x64x32xf32> -> tensor<1x16x32xf32>
    %15 = sluice.tp_reduce %14 : tensor<1x16x32xf32>
    %16 = sluice.residual_add %6, %15 : tensor<1x16x32xf32>
    sluice.layer_yield %16 : tensor<1x16x32xf32>
  }
  %loss = sluice.output_layer %x {vocab = 64, norm = rmsnorm} : tensor<1x16x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// expert-members-do-not-divide-the-experts
sluice.model @m {seq_len = 16, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 64} : tensor<1x16x32xf32>
  %x = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, ffn = 24, norm = rmsnorm, mlp = swiglu, experts = 4, top_k = 2} : tensor<1x16x32xf32> shards 2 {
  ^bb0(%in: tensor<1x16x32xf32>):
    %0 = sluice.shard_norm %in : tensor<1x16x32xf32>
    %1 = sluice.tp_copy %0 : tensor<1x16x32xf32>
    %2 = sluice.column_parallel <qkv> %1 : tensor<1x16x32xf32> -> tensor<1x16x48xf32>
    %3 = sluice.shard_attention %2 : tensor<1x16x48xf32> -> tensor<1x16x16xf32>
    %4 = sluice.row_parallel <out> %3 : tensor<1x16x16xf32> -> tensor<1x16x32xf32>
    %5 = sluice.tp_reduce %4 : tensor<1x16x32xf32>
    %6 = sluice.residual_add %in, %5 : tensor<1x16x32xf32>
    %7 = sluice.shard_norm %6 : tensor<1x16x32xf32>
    %8 = sluice.tp_copy %7 : tensor<1x16x32xf32>
    // expected-error@+1 {{'sluice.expert_dispatch' op 'members' = 3 does not divide the layer's 4 experts}}
    %9 = sluice.expert_dispatch %8 over 3 : tensor<1x16x32xf32> -> tensor<1x96x32xf32>
    %10 = sluice.column_parallel <up> %9 : tensor<1x96x32xf32> -> tensor<1x96x12xf32>
    %11 = sluice.column_parallel <gate> %9 : tensor<1x96x32xf32> -> tensor<1x96x12xf32>
    %12 = sluice.shard_activation %10, %11 : tensor<1x96x12xf32>, tensor<1x96x12xf32>
    %13 = sluice.row_parallel <down> %12 : tensor<1x96x12xf32> -> tensor<1x96x32xf32>
    %14 = sluice.expert_combine %13 over 3 : tensor<1x96x32xf32> -> tensor<1x16x32xf32>
    %15 = sluice.tp_reduce %14 : tensor<1x16x32xf32>
    %16 = sluice.residual_add %6, %15 : tensor<1x16x32xf32>
    sluice.layer_yield %16 : tensor<1x16x32xf32>
  }
  %loss = sluice.output_layer %x {vocab = 64, norm = rmsnorm} : tensor<1x16x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// expert-dispatch-rows-below-the-balanced-share
sluice.model @m {seq_len = 16, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 64} : tensor<1x16x32xf32>
  %x = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, ffn = 24, norm = rmsnorm, mlp = swiglu, experts = 4, top_k = 2} : tensor<1x16x32xf32> shards 2 {
  ^bb0(%in: tensor<1x16x32xf32>):
    %0 = sluice.shard_norm %in : tensor<1x16x32xf32>
    %1 = sluice.tp_copy %0 : tensor<1x16x32xf32>
    %2 = sluice.column_parallel <qkv> %1 : tensor<1x16x32xf32> -> tensor<1x16x48xf32>
    %3 = sluice.shard_attention %2 : tensor<1x16x48xf32> -> tensor<1x16x16xf32>
    %4 = sluice.row_parallel <out> %3 : tensor<1x16x16xf32> -> tensor<1x16x32xf32>
    %5 = sluice.tp_reduce %4 : tensor<1x16x32xf32>
    %6 = sluice.residual_add %in, %5 : tensor<1x16x32xf32>
    %7 = sluice.shard_norm %6 : tensor<1x16x32xf32>
    %8 = sluice.tp_copy %7 : tensor<1x16x32xf32>
    // expected-error@+1 {{'sluice.expert_dispatch' op the received rows 'tensor<1x8x32xf32>' are not 'tensor<1x16x32xf32>''s rows: between its tokens x 2 copies (the balanced share, 32) and 2 x its tokens x 2 (every routing, 64)}}
    %9 = sluice.expert_dispatch %8 over 2 : tensor<1x16x32xf32> -> tensor<1x8x32xf32>
    %10 = sluice.column_parallel <up> %9 : tensor<1x8x32xf32> -> tensor<1x8x12xf32>
    %11 = sluice.column_parallel <gate> %9 : tensor<1x8x32xf32> -> tensor<1x8x12xf32>
    %12 = sluice.shard_activation %10, %11 : tensor<1x8x12xf32>, tensor<1x8x12xf32>
    %13 = sluice.row_parallel <down> %12 : tensor<1x8x12xf32> -> tensor<1x8x32xf32>
    %14 = sluice.expert_combine %13 over 2 : tensor<1x8x32xf32> -> tensor<1x16x32xf32>
    %15 = sluice.tp_reduce %14 : tensor<1x16x32xf32>
    %16 = sluice.residual_add %6, %15 : tensor<1x16x32xf32>
    sluice.layer_yield %16 : tensor<1x16x32xf32>
  }
  %loss = sluice.output_layer %x {vocab = 64, norm = rmsnorm} : tensor<1x16x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// -----

// one-shard-body-without-experts
sluice.model @m {seq_len = 16, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 64} : tensor<1x16x32xf32>
  // expected-error@+1 {{'sluice.transformer_layer' op 'shards' must be at least 2, got 1 (a body of one shard must dispatch tokens to experts: sluice.expert_dispatch)}}
  %x = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, ffn = 24, norm = rmsnorm, mlp = swiglu, experts = 4, top_k = 2} : tensor<1x16x32xf32> shards 1 {
  ^bb0(%in: tensor<1x16x32xf32>):
    sluice.layer_yield %in : tensor<1x16x32xf32>
  }
  %loss = sluice.output_layer %x {vocab = 64, norm = rmsnorm} : tensor<1x16x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}
