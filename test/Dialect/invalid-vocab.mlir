// One case per verifier rule of the vocabulary shards, named after the rule.
// RUN: sluice-opt %s -split-input-file -verify-diagnostics

// barriers-attribute-disagrees-with-body
sluice.model @a {seq_len = 4, micro_batch = 1, dtype = f32} {
  %0 = sluice.vocab_input @vin -> tensor<1x4x8xf32> attributes {devices = 2 : i64, padded_vocab = 12 : i64, positions = 4 : i64, root = 0 : i64, vocab = 10 : i64} {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %4 = sluice.shard_lookup : tensor<1x4x8xf32>
    %5 = sluice.reduce %4 root 0 : tensor<1x4x8xf32>
    %6 = sluice.add_positions %5 : tensor<1x4x8xf32>
    %7 = sluice.broadcast %arg0 root 0 : tensor<1x4x8xf32>
    sluice.shard_scatter_grad %7 : tensor<1x4x8xf32>
    sluice.vocab_yield %6 : tensor<1x4x8xf32>
  }
  %1 = sluice.stage @s0 device 0 chunk 0 (%0 : tensor<1x4x8xf32>) -> tensor<1x4x8xf32> {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %x = sluice.transformer_layer %arg0 {heads = 2, kv_heads = 2, ffn = 16, norm = layernorm, mlp = gelu} : tensor<1x4x8xf32>
    sluice.yield %x : tensor<1x4x8xf32>
  }
  %2 = sluice.stage @s1 device 1 chunk 0 (%1 : tensor<1x4x8xf32>) -> tensor<1x4x8xf32> {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %x = sluice.transformer_layer %arg0 {heads = 2, kv_heads = 2, ffn = 16, norm = layernorm, mlp = gelu} : tensor<1x4x8xf32>
    %normed = sluice.final_norm %x {norm = layernorm} : tensor<1x4x8xf32>
    sluice.yield %normed : tensor<1x4x8xf32>
  }
  // expected-error@+1 {{says it crosses 'barriers' = 2 communication barriers, its body crosses 3}}
  %3 = sluice.vocab_output @vout(%2 : tensor<1x4x8xf32>) -> tensor<f32> attributes {algorithm = 0 : i64, barriers = 2 : i64, devices = 2 : i64, padded_vocab = 12 : i64, root = 1 : i64, vocab = 10 : i64} {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %4 = sluice.broadcast %arg0 root 1 : tensor<1x4x8xf32>
    %5 = sluice.shard_logits %4 : tensor<1x4x8xf32> -> tensor<1x4x6xf32>
    %6 = sluice.shard_max %5 : tensor<1x4x6xf32> -> tensor<1x4xf32>
    %7 = sluice.all_reduce <max> %6 : tensor<1x4xf32>
    %8 = sluice.shard_sum_exp %5, %7 : tensor<1x4x6xf32>, tensor<1x4xf32> -> tensor<1x4xf32>
    %9 = sluice.all_reduce <sum> %8 : tensor<1x4xf32>
    %10 = sluice.shard_softmax %5, %7, %9 : tensor<1x4x6xf32>, tensor<1x4xf32>
    %11 = sluice.shard_loss %5, %7, %9 : tensor<1x4x6xf32>, tensor<1x4xf32> -> tensor<f32>
    %12 = sluice.softmax_grad %10 : tensor<1x4x6xf32>
    %13 = sluice.shard_input_grad %12 : tensor<1x4x6xf32> -> tensor<1x4x8xf32>
    %14 = sluice.reduce %13 root 1 : tensor<1x4x8xf32>
    sluice.shard_weight_grad %12, %4 : tensor<1x4x6xf32>, tensor<1x4x8xf32>
    sluice.vocab_yield %11, %14 : tensor<f32>, tensor<1x4x8xf32>
  }
  sluice.return %3 : tensor<f32>
}


// -----

// unknown-algorithm
sluice.model @a {seq_len = 4, micro_batch = 1, dtype = f32} {
  %0 = sluice.vocab_input @vin -> tensor<1x4x8xf32> attributes {devices = 2 : i64, padded_vocab = 12 : i64, positions = 4 : i64, root = 0 : i64, vocab = 10 : i64} {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %4 = sluice.shard_lookup : tensor<1x4x8xf32>
    %5 = sluice.reduce %4 root 0 : tensor<1x4x8xf32>
    %6 = sluice.add_positions %5 : tensor<1x4x8xf32>
    %7 = sluice.broadcast %arg0 root 0 : tensor<1x4x8xf32>
    sluice.shard_scatter_grad %7 : tensor<1x4x8xf32>
    sluice.vocab_yield %6 : tensor<1x4x8xf32>
  }
  %1 = sluice.stage @s0 device 0 chunk 0 (%0 : tensor<1x4x8xf32>) -> tensor<1x4x8xf32> {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %x = sluice.transformer_layer %arg0 {heads = 2, kv_heads = 2, ffn = 16, norm = layernorm, mlp = gelu} : tensor<1x4x8xf32>
    sluice.yield %x : tensor<1x4x8xf32>
  }
  %2 = sluice.stage @s1 device 1 chunk 0 (%1 : tensor<1x4x8xf32>) -> tensor<1x4x8xf32> {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %x = sluice.transformer_layer %arg0 {heads = 2, kv_heads = 2, ffn = 16, norm = layernorm, mlp = gelu} : tensor<1x4x8xf32>
    %normed = sluice.final_norm %x {norm = layernorm} : tensor<1x4x8xf32>
    sluice.yield %normed : tensor<1x4x8xf32>
  }
  // expected-error@+1 {{attribute 'algorithm' failed to satisfy constraint: the form of a vocabulary-parallel softmax: 0 (naive, 3 barriers), 1 (Algorithm 1, 2 barriers) or 2 (Algorithm 2, 1 barrier)}}
  %3 = sluice.vocab_output @vout(%2 : tensor<1x4x8xf32>) -> tensor<f32> attributes {algorithm = 5 : i64, barriers = 3 : i64, devices = 2 : i64, padded_vocab = 12 : i64, root = 1 : i64, vocab = 10 : i64} {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %4 = sluice.broadcast %arg0 root 1 : tensor<1x4x8xf32>
    %5 = sluice.shard_logits %4 : tensor<1x4x8xf32> -> tensor<1x4x6xf32>
    %6 = sluice.shard_max %5 : tensor<1x4x6xf32> -> tensor<1x4xf32>
    %7 = sluice.all_reduce <max> %6 : tensor<1x4xf32>
    %8 = sluice.shard_sum_exp %5, %7 : tensor<1x4x6xf32>, tensor<1x4xf32> -> tensor<1x4xf32>
    %9 = sluice.all_reduce <sum> %8 : tensor<1x4xf32>
    %10 = sluice.shard_softmax %5, %7, %9 : tensor<1x4x6xf32>, tensor<1x4xf32>
    %11 = sluice.shard_loss %5, %7, %9 : tensor<1x4x6xf32>, tensor<1x4xf32> -> tensor<f32>
    %12 = sluice.softmax_grad %10 : tensor<1x4x6xf32>
    %13 = sluice.shard_input_grad %12 : tensor<1x4x6xf32> -> tensor<1x4x8xf32>
    %14 = sluice.reduce %13 root 1 : tensor<1x4x8xf32>
    sluice.shard_weight_grad %12, %4 : tensor<1x4x6xf32>, tensor<1x4x8xf32>
    sluice.vocab_yield %11, %14 : tensor<f32>, tensor<1x4x8xf32>
  }
  sluice.return %3 : tensor<f32>
}


// -----

// padded-vocab-not-multiple-of-2p
sluice.model @a {seq_len = 4, micro_batch = 1, dtype = f32} {
  %0 = sluice.vocab_input @vin -> tensor<1x4x8xf32> attributes {devices = 2 : i64, padded_vocab = 12 : i64, positions = 4 : i64, root = 0 : i64, vocab = 10 : i64} {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %4 = sluice.shard_lookup : tensor<1x4x8xf32>
    %5 = sluice.reduce %4 root 0 : tensor<1x4x8xf32>
    %6 = sluice.add_positions %5 : tensor<1x4x8xf32>
    %7 = sluice.broadcast %arg0 root 0 : tensor<1x4x8xf32>
    sluice.shard_scatter_grad %7 : tensor<1x4x8xf32>
    sluice.vocab_yield %6 : tensor<1x4x8xf32>
  }
  %1 = sluice.stage @s0 device 0 chunk 0 (%0 : tensor<1x4x8xf32>) -> tensor<1x4x8xf32> {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %x = sluice.transformer_layer %arg0 {heads = 2, kv_heads = 2, ffn = 16, norm = layernorm, mlp = gelu} : tensor<1x4x8xf32>
    sluice.yield %x : tensor<1x4x8xf32>
  }
  %2 = sluice.stage @s1 device 1 chunk 0 (%1 : tensor<1x4x8xf32>) -> tensor<1x4x8xf32> {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %x = sluice.transformer_layer %arg0 {heads = 2, kv_heads = 2, ffn = 16, norm = layernorm, mlp = gelu} : tensor<1x4x8xf32>
    %normed = sluice.final_norm %x {norm = layernorm} : tensor<1x4x8xf32>
    sluice.yield %normed : tensor<1x4x8xf32>
  }
  // expected-error@+1 {{'padded_vocab' = 10 must be a multiple of 2 * devices = 4 no smaller than 'vocab' = 10}}
  %3 = sluice.vocab_output @vout(%2 : tensor<1x4x8xf32>) -> tensor<f32> attributes {algorithm = 0 : i64, barriers = 3 : i64, devices = 2 : i64, padded_vocab = 10 : i64, root = 1 : i64, vocab = 10 : i64} {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %4 = sluice.broadcast %arg0 root 1 : tensor<1x4x8xf32>
    %5 = sluice.shard_logits %4 : tensor<1x4x8xf32> -> tensor<1x4x6xf32>
    %6 = sluice.shard_max %5 : tensor<1x4x6xf32> -> tensor<1x4xf32>
    %7 = sluice.all_reduce <max> %6 : tensor<1x4xf32>
    %8 = sluice.shard_sum_exp %5, %7 : tensor<1x4x6xf32>, tensor<1x4xf32> -> tensor<1x4xf32>
    %9 = sluice.all_reduce <sum> %8 : tensor<1x4xf32>
    %10 = sluice.shard_softmax %5, %7, %9 : tensor<1x4x6xf32>, tensor<1x4xf32>
    %11 = sluice.shard_loss %5, %7, %9 : tensor<1x4x6xf32>, tensor<1x4xf32> -> tensor<f32>
    %12 = sluice.softmax_grad %10 : tensor<1x4x6xf32>
    %13 = sluice.shard_input_grad %12 : tensor<1x4x6xf32> -> tensor<1x4x8xf32>
    %14 = sluice.reduce %13 root 1 : tensor<1x4x8xf32>
    sluice.shard_weight_grad %12, %4 : tensor<1x4x6xf32>, tensor<1x4x8xf32>
    sluice.vocab_yield %11, %14 : tensor<f32>, tensor<1x4x8xf32>
  }
  sluice.return %3 : tensor<f32>
}


// -----

// padded-vocab-below-vocab
sluice.model @a {seq_len = 4, micro_batch = 1, dtype = f32} {
  // expected-error@+1 {{'padded_vocab' = 8 must be a multiple of 2 * devices = 4 no smaller than 'vocab' = 10}}
  %0 = sluice.vocab_input @vin -> tensor<1x4x8xf32> attributes {devices = 2 : i64, padded_vocab = 8 : i64, positions = 4 : i64, root = 0 : i64, vocab = 10 : i64} {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %4 = sluice.shard_lookup : tensor<1x4x8xf32>
    %5 = sluice.reduce %4 root 0 : tensor<1x4x8xf32>
    %6 = sluice.add_positions %5 : tensor<1x4x8xf32>
    %7 = sluice.broadcast %arg0 root 0 : tensor<1x4x8xf32>
    sluice.shard_scatter_grad %7 : tensor<1x4x8xf32>
    sluice.vocab_yield %6 : tensor<1x4x8xf32>
  }
  %1 = sluice.stage @s0 device 0 chunk 0 (%0 : tensor<1x4x8xf32>) -> tensor<1x4x8xf32> {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %x = sluice.transformer_layer %arg0 {heads = 2, kv_heads = 2, ffn = 16, norm = layernorm, mlp = gelu} : tensor<1x4x8xf32>
    sluice.yield %x : tensor<1x4x8xf32>
  }
  %2 = sluice.stage @s1 device 1 chunk 0 (%1 : tensor<1x4x8xf32>) -> tensor<1x4x8xf32> {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %x = sluice.transformer_layer %arg0 {heads = 2, kv_heads = 2, ffn = 16, norm = layernorm, mlp = gelu} : tensor<1x4x8xf32>
    %normed = sluice.final_norm %x {norm = layernorm} : tensor<1x4x8xf32>
    sluice.yield %normed : tensor<1x4x8xf32>
  }
  %3 = sluice.vocab_output @vout(%2 : tensor<1x4x8xf32>) -> tensor<f32> attributes {algorithm = 0 : i64, barriers = 3 : i64, devices = 2 : i64, padded_vocab = 12 : i64, root = 1 : i64, vocab = 10 : i64} {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %4 = sluice.broadcast %arg0 root 1 : tensor<1x4x8xf32>
    %5 = sluice.shard_logits %4 : tensor<1x4x8xf32> -> tensor<1x4x6xf32>
    %6 = sluice.shard_max %5 : tensor<1x4x6xf32> -> tensor<1x4xf32>
    %7 = sluice.all_reduce <max> %6 : tensor<1x4xf32>
    %8 = sluice.shard_sum_exp %5, %7 : tensor<1x4x6xf32>, tensor<1x4xf32> -> tensor<1x4xf32>
    %9 = sluice.all_reduce <sum> %8 : tensor<1x4xf32>
    %10 = sluice.shard_softmax %5, %7, %9 : tensor<1x4x6xf32>, tensor<1x4xf32>
    %11 = sluice.shard_loss %5, %7, %9 : tensor<1x4x6xf32>, tensor<1x4xf32> -> tensor<f32>
    %12 = sluice.softmax_grad %10 : tensor<1x4x6xf32>
    %13 = sluice.shard_input_grad %12 : tensor<1x4x6xf32> -> tensor<1x4x8xf32>
    %14 = sluice.reduce %13 root 1 : tensor<1x4x8xf32>
    sluice.shard_weight_grad %12, %4 : tensor<1x4x6xf32>, tensor<1x4x8xf32>
    sluice.vocab_yield %11, %14 : tensor<f32>, tensor<1x4x8xf32>
  }
  sluice.return %3 : tensor<f32>
}


// -----

// root-outside-devices
sluice.model @a {seq_len = 4, micro_batch = 1, dtype = f32} {
  %0 = sluice.vocab_input @vin -> tensor<1x4x8xf32> attributes {devices = 2 : i64, padded_vocab = 12 : i64, positions = 4 : i64, root = 0 : i64, vocab = 10 : i64} {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %4 = sluice.shard_lookup : tensor<1x4x8xf32>
    %5 = sluice.reduce %4 root 0 : tensor<1x4x8xf32>
    %6 = sluice.add_positions %5 : tensor<1x4x8xf32>
    %7 = sluice.broadcast %arg0 root 0 : tensor<1x4x8xf32>
    sluice.shard_scatter_grad %7 : tensor<1x4x8xf32>
    sluice.vocab_yield %6 : tensor<1x4x8xf32>
  }
  %1 = sluice.stage @s0 device 0 chunk 0 (%0 : tensor<1x4x8xf32>) -> tensor<1x4x8xf32> {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %x = sluice.transformer_layer %arg0 {heads = 2, kv_heads = 2, ffn = 16, norm = layernorm, mlp = gelu} : tensor<1x4x8xf32>
    sluice.yield %x : tensor<1x4x8xf32>
  }
  %2 = sluice.stage @s1 device 1 chunk 0 (%1 : tensor<1x4x8xf32>) -> tensor<1x4x8xf32> {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %x = sluice.transformer_layer %arg0 {heads = 2, kv_heads = 2, ffn = 16, norm = layernorm, mlp = gelu} : tensor<1x4x8xf32>
    %normed = sluice.final_norm %x {norm = layernorm} : tensor<1x4x8xf32>
    sluice.yield %normed : tensor<1x4x8xf32>
  }
  // expected-error@+1 {{'root' = 2 is not one of the 2 devices}}
  %3 = sluice.vocab_output @vout(%2 : tensor<1x4x8xf32>) -> tensor<f32> attributes {algorithm = 0 : i64, barriers = 3 : i64, devices = 2 : i64, padded_vocab = 12 : i64, root = 2 : i64, vocab = 10 : i64} {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %4 = sluice.broadcast %arg0 root 1 : tensor<1x4x8xf32>
    %5 = sluice.shard_logits %4 : tensor<1x4x8xf32> -> tensor<1x4x6xf32>
    %6 = sluice.shard_max %5 : tensor<1x4x6xf32> -> tensor<1x4xf32>
    %7 = sluice.all_reduce <max> %6 : tensor<1x4xf32>
    %8 = sluice.shard_sum_exp %5, %7 : tensor<1x4x6xf32>, tensor<1x4xf32> -> tensor<1x4xf32>
    %9 = sluice.all_reduce <sum> %8 : tensor<1x4xf32>
    %10 = sluice.shard_softmax %5, %7, %9 : tensor<1x4x6xf32>, tensor<1x4xf32>
    %11 = sluice.shard_loss %5, %7, %9 : tensor<1x4x6xf32>, tensor<1x4xf32> -> tensor<f32>
    %12 = sluice.softmax_grad %10 : tensor<1x4x6xf32>
    %13 = sluice.shard_input_grad %12 : tensor<1x4x6xf32> -> tensor<1x4x8xf32>
    %14 = sluice.reduce %13 root 1 : tensor<1x4x8xf32>
    sluice.shard_weight_grad %12, %4 : tensor<1x4x6xf32>, tensor<1x4x8xf32>
    sluice.vocab_yield %11, %14 : tensor<f32>, tensor<1x4x8xf32>
  }
  sluice.return %3 : tensor<f32>
}


// -----

// tied-input-without-tied-output
sluice.model @a {seq_len = 4, micro_batch = 1, dtype = f32} {
  // expected-error@+1 {{is 'tied' but the model has no tied sluice.vocab_output to share its shard with}}
  %0 = sluice.vocab_input @vin -> tensor<1x4x8xf32> attributes {devices = 2 : i64, padded_vocab = 12 : i64, positions = 4 : i64, root = 0 : i64, tied, vocab = 10 : i64} {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %4 = sluice.shard_lookup : tensor<1x4x8xf32>
    %5 = sluice.reduce %4 root 0 : tensor<1x4x8xf32>
    %6 = sluice.add_positions %5 : tensor<1x4x8xf32>
    %7 = sluice.broadcast %arg0 root 0 : tensor<1x4x8xf32>
    sluice.shard_scatter_grad %7 : tensor<1x4x8xf32>
    sluice.vocab_yield %6 : tensor<1x4x8xf32>
  }
  %1 = sluice.stage @s0 device 0 chunk 0 (%0 : tensor<1x4x8xf32>) -> tensor<1x4x8xf32> {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %x = sluice.transformer_layer %arg0 {heads = 2, kv_heads = 2, ffn = 16, norm = layernorm, mlp = gelu} : tensor<1x4x8xf32>
    sluice.yield %x : tensor<1x4x8xf32>
  }
  %2 = sluice.stage @s1 device 1 chunk 0 (%1 : tensor<1x4x8xf32>) -> tensor<1x4x8xf32> {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %x = sluice.transformer_layer %arg0 {heads = 2, kv_heads = 2, ffn = 16, norm = layernorm, mlp = gelu} : tensor<1x4x8xf32>
    %normed = sluice.final_norm %x {norm = layernorm} : tensor<1x4x8xf32>
    sluice.yield %normed : tensor<1x4x8xf32>
  }
  %3 = sluice.vocab_output @vout(%2 : tensor<1x4x8xf32>) -> tensor<f32> attributes {algorithm = 0 : i64, barriers = 3 : i64, devices = 2 : i64, padded_vocab = 12 : i64, root = 1 : i64, vocab = 10 : i64} {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %4 = sluice.broadcast %arg0 root 1 : tensor<1x4x8xf32>
    %5 = sluice.shard_logits %4 : tensor<1x4x8xf32> -> tensor<1x4x6xf32>
    %6 = sluice.shard_max %5 : tensor<1x4x6xf32> -> tensor<1x4xf32>
    %7 = sluice.all_reduce <max> %6 : tensor<1x4xf32>
    %8 = sluice.shard_sum_exp %5, %7 : tensor<1x4x6xf32>, tensor<1x4xf32> -> tensor<1x4xf32>
    %9 = sluice.all_reduce <sum> %8 : tensor<1x4xf32>
    %10 = sluice.shard_softmax %5, %7, %9 : tensor<1x4x6xf32>, tensor<1x4xf32>
    %11 = sluice.shard_loss %5, %7, %9 : tensor<1x4x6xf32>, tensor<1x4xf32> -> tensor<f32>
    %12 = sluice.softmax_grad %10 : tensor<1x4x6xf32>
    %13 = sluice.shard_input_grad %12 : tensor<1x4x6xf32> -> tensor<1x4x8xf32>
    %14 = sluice.reduce %13 root 1 : tensor<1x4x8xf32>
    sluice.shard_weight_grad %12, %4 : tensor<1x4x6xf32>, tensor<1x4x8xf32>
    sluice.vocab_yield %11, %14 : tensor<f32>, tensor<1x4x8xf32>
  }
  sluice.return %3 : tensor<f32>
}


// -----

// output-shard-not-after-last-stage
sluice.model @a {seq_len = 4, micro_batch = 1, dtype = f32} {
  %0 = sluice.vocab_input @vin -> tensor<1x4x8xf32> attributes {devices = 2 : i64, padded_vocab = 12 : i64, positions = 4 : i64, root = 0 : i64, vocab = 10 : i64} {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %4 = sluice.shard_lookup : tensor<1x4x8xf32>
    %5 = sluice.reduce %4 root 0 : tensor<1x4x8xf32>
    %6 = sluice.add_positions %5 : tensor<1x4x8xf32>
    %7 = sluice.broadcast %arg0 root 0 : tensor<1x4x8xf32>
    sluice.shard_scatter_grad %7 : tensor<1x4x8xf32>
    sluice.vocab_yield %6 : tensor<1x4x8xf32>
  }
  %1 = sluice.stage @s0 device 0 chunk 0 (%0 : tensor<1x4x8xf32>) -> tensor<1x4x8xf32> {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %x = sluice.transformer_layer %arg0 {heads = 2, kv_heads = 2, ffn = 16, norm = layernorm, mlp = gelu} : tensor<1x4x8xf32>
    sluice.yield %x : tensor<1x4x8xf32>
  }
  %2 = sluice.stage @s1 device 1 chunk 0 (%1 : tensor<1x4x8xf32>) -> tensor<1x4x8xf32> {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %x = sluice.transformer_layer %arg0 {heads = 2, kv_heads = 2, ffn = 16, norm = layernorm, mlp = gelu} : tensor<1x4x8xf32>
    %normed = sluice.final_norm %x {norm = layernorm} : tensor<1x4x8xf32>
    sluice.yield %normed : tensor<1x4x8xf32>
  }
  // expected-error@+1 {{input does not chain: it is not the result of the last stage}}
  %3 = sluice.vocab_output @vout(%1 : tensor<1x4x8xf32>) -> tensor<f32> attributes {algorithm = 0 : i64, barriers = 3 : i64, devices = 2 : i64, padded_vocab = 12 : i64, root = 1 : i64, vocab = 10 : i64} {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %4 = sluice.broadcast %arg0 root 1 : tensor<1x4x8xf32>
    %5 = sluice.shard_logits %4 : tensor<1x4x8xf32> -> tensor<1x4x6xf32>
    %6 = sluice.shard_max %5 : tensor<1x4x6xf32> -> tensor<1x4xf32>
    %7 = sluice.all_reduce <max> %6 : tensor<1x4xf32>
    %8 = sluice.shard_sum_exp %5, %7 : tensor<1x4x6xf32>, tensor<1x4xf32> -> tensor<1x4xf32>
    %9 = sluice.all_reduce <sum> %8 : tensor<1x4xf32>
    %10 = sluice.shard_softmax %5, %7, %9 : tensor<1x4x6xf32>, tensor<1x4xf32>
    %11 = sluice.shard_loss %5, %7, %9 : tensor<1x4x6xf32>, tensor<1x4xf32> -> tensor<f32>
    %12 = sluice.softmax_grad %10 : tensor<1x4x6xf32>
    %13 = sluice.shard_input_grad %12 : tensor<1x4x6xf32> -> tensor<1x4x8xf32>
    %14 = sluice.reduce %13 root 1 : tensor<1x4x8xf32>
    sluice.shard_weight_grad %12, %4 : tensor<1x4x6xf32>, tensor<1x4x8xf32>
    sluice.vocab_yield %11, %14 : tensor<f32>, tensor<1x4x8xf32>
  }
  sluice.return %3 : tensor<f32>
}

// -----

// tied-shards-padded-differently
sluice.model @a {seq_len = 4, micro_batch = 1, dtype = f32} {
  // expected-error@+1 {{'sluice.vocab_input' op is tied to @vout but shards 'padded_vocab' = 16 over 2 devices, the output shard 12 over 2}}
  %0 = sluice.vocab_input @vin -> tensor<1x4x8xf32> attributes {devices = 2 : i64, padded_vocab = 16 : i64, positions = 4 : i64, root = 0 : i64, tied, vocab = 10 : i64} {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %4 = sluice.shard_lookup : tensor<1x4x8xf32>
    %5 = sluice.reduce %4 root 0 : tensor<1x4x8xf32>
    %6 = sluice.add_positions %5 : tensor<1x4x8xf32>
    %7 = sluice.broadcast %arg0 root 0 : tensor<1x4x8xf32>
    sluice.shard_scatter_grad %7 : tensor<1x4x8xf32>
    sluice.vocab_yield %6 : tensor<1x4x8xf32>
  }
  %1 = sluice.stage @s0 device 0 chunk 0 (%0 : tensor<1x4x8xf32>) -> tensor<1x4x8xf32> {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %x = sluice.transformer_layer %arg0 {heads = 2, kv_heads = 2, ffn = 16, norm = layernorm, mlp = gelu} : tensor<1x4x8xf32>
    sluice.yield %x : tensor<1x4x8xf32>
  }
  %2 = sluice.stage @s1 device 1 chunk 0 (%1 : tensor<1x4x8xf32>) -> tensor<1x4x8xf32> {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %x = sluice.transformer_layer %arg0 {heads = 2, kv_heads = 2, ffn = 16, norm = layernorm, mlp = gelu} : tensor<1x4x8xf32>
    %normed = sluice.final_norm %x {norm = layernorm} : tensor<1x4x8xf32>
    sluice.yield %normed : tensor<1x4x8xf32>
  }
  %3 = sluice.vocab_output @vout(%2 : tensor<1x4x8xf32>) -> tensor<f32> attributes {algorithm = 0 : i64, barriers = 3 : i64, devices = 2 : i64, padded_vocab = 12 : i64, root = 1 : i64, tied, vocab = 10 : i64} {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %4 = sluice.broadcast %arg0 root 1 : tensor<1x4x8xf32>
    %5 = sluice.shard_logits %4 : tensor<1x4x8xf32> -> tensor<1x4x6xf32>
    %6 = sluice.shard_max %5 : tensor<1x4x6xf32> -> tensor<1x4xf32>
    %7 = sluice.all_reduce <max> %6 : tensor<1x4xf32>
    %8 = sluice.shard_sum_exp %5, %7 : tensor<1x4x6xf32>, tensor<1x4xf32> -> tensor<1x4xf32>
    %9 = sluice.all_reduce <sum> %8 : tensor<1x4xf32>
    %10 = sluice.shard_softmax %5, %7, %9 : tensor<1x4x6xf32>, tensor<1x4xf32>
    %11 = sluice.shard_loss %5, %7, %9 : tensor<1x4x6xf32>, tensor<1x4xf32> -> tensor<f32>
    %12 = sluice.softmax_grad %10 : tensor<1x4x6xf32>
    %13 = sluice.shard_input_grad %12 : tensor<1x4x6xf32> -> tensor<1x4x8xf32>
    %14 = sluice.reduce %13 root 1 : tensor<1x4x8xf32>
    sluice.shard_weight_grad %12, %4 : tensor<1x4x6xf32>, tensor<1x4x8xf32>
    sluice.vocab_yield %11, %14 : tensor<f32>, tensor<1x4x8xf32>
  }
  sluice.return %3 : tensor<f32>
}
