// The partitioned models sluice-schedule refuses, each named at the
// offending op. The inputs are written here, not made by earlier passes.
// RUN: sluice-opt %s -split-input-file -verify-diagnostics --sluice-schedule="schedule=zb-h1 microbatches=2"

// Two models: the schedule would not know which to run.
// expected-error@+1 {{expected exactly one sluice.model, found 2}}
module {
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %0 = sluice.vocab_input @vin -> tensor<1x4x8xf32> attributes {devices = 2 : i64, padded_vocab = 12 : i64, passes = [#sluice.pass<IF>, #sluice.pass<IB>], root = 0 : i64, vocab = 10 : i64} {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %4 = sluice.shard_lookup : tensor<1x4x8xf32>
    %5 = sluice.reduce %4 root 0 : tensor<1x4x8xf32>
    %6 = sluice.broadcast %arg0 root 0 : tensor<1x4x8xf32>
    sluice.shard_scatter_grad %6 : tensor<1x4x8xf32>
    sluice.vocab_yield %5 : tensor<1x4x8xf32>
  }
  %1 = sluice.stage @s0 device 0 chunk 0 (%0 : tensor<1x4x8xf32>) -> tensor<1x4x8xf32> attributes {activation_bytes = 1568 : i64, flops = array<i64: 4416, 4736, 4096>, passes = [#sluice.pass<F>, #sluice.pass<B>, #sluice.pass<W>]} {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %x = sluice.transformer_layer %arg0 {heads = 2, kv_heads = 2, ffn = 16, norm = layernorm, mlp = gelu} : tensor<1x4x8xf32>
    sluice.yield %x : tensor<1x4x8xf32>
  }
  %2 = sluice.stage @s1 device 1 chunk 0 (%1 : tensor<1x4x8xf32>) -> tensor<1x4x8xf32> attributes {activation_bytes = 1568 : i64, flops = array<i64: 4416, 4736, 4096>, passes = [#sluice.pass<F>, #sluice.pass<B>, #sluice.pass<W>]} {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %x = sluice.transformer_layer %arg0 {heads = 2, kv_heads = 2, ffn = 16, norm = layernorm, mlp = gelu} : tensor<1x4x8xf32>
    %normed = sluice.final_norm %x {norm = layernorm} : tensor<1x4x8xf32>
    sluice.yield %normed : tensor<1x4x8xf32>
  }
  %3 = sluice.vocab_output @vout(%2 : tensor<1x4x8xf32>) -> tensor<f32> attributes {algorithm = 2 : i64, barriers = 1 : i64, devices = 2 : i64, padded_vocab = 12 : i64, passes = [#sluice.pass<S>, #sluice.pass<T>], root = 1 : i64, vocab = 10 : i64} {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %4 = sluice.broadcast %arg0 root 1 : tensor<1x4x8xf32>
    %5 = sluice.shard_logits %4 : tensor<1x4x8xf32> -> tensor<1x4x6xf32>
    %6 = sluice.shard_max %5 : tensor<1x4x6xf32> -> tensor<1x4xf32>
    %7 = sluice.shard_sum_exp %5, %6 : tensor<1x4x6xf32>, tensor<1x4xf32> -> tensor<1x4xf32>
    %8 = sluice.shard_softmax %5, %6, %7 : tensor<1x4x6xf32>, tensor<1x4xf32>
    %9 = sluice.shard_input_grad %8 : tensor<1x4x6xf32> -> tensor<1x4x8xf32>
    %10 = sluice.label_rows : tensor<1x4x8xf32>
    %11 = sluice.all_reduce <max> %6 : tensor<1x4xf32>
    %12 = sluice.rescale_sum %7, %6, %11 : tensor<1x4xf32>
    %13 = sluice.all_reduce <sum> %12 : tensor<1x4xf32>
    %14 = sluice.combine_grad %9, %10, %12, %13 : tensor<1x4x8xf32>, tensor<1x4xf32>
    %15 = sluice.reduce %14 root 1 : tensor<1x4x8xf32>
    %16 = sluice.rescale_probs %8, %12, %13 : tensor<1x4x6xf32>, tensor<1x4xf32>
    %17 = sluice.shard_loss %5, %11, %13 : tensor<1x4x6xf32>, tensor<1x4xf32> -> tensor<f32>
    %18 = sluice.softmax_grad %16 : tensor<1x4x6xf32>
    sluice.shard_weight_grad %18, %4 : tensor<1x4x6xf32>, tensor<1x4x8xf32>
    sluice.vocab_yield %17, %15 : tensor<f32>, tensor<1x4x8xf32>
  }
  sluice.return %3 : tensor<f32>
}
sluice.model @m2 {seq_len = 4, micro_batch = 1, dtype = f32} {
  %0 = sluice.vocab_input @vin -> tensor<1x4x8xf32> attributes {devices = 2 : i64, padded_vocab = 12 : i64, passes = [#sluice.pass<IF>, #sluice.pass<IB>], root = 0 : i64, vocab = 10 : i64} {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %4 = sluice.shard_lookup : tensor<1x4x8xf32>
    %5 = sluice.reduce %4 root 0 : tensor<1x4x8xf32>
    %6 = sluice.broadcast %arg0 root 0 : tensor<1x4x8xf32>
    sluice.shard_scatter_grad %6 : tensor<1x4x8xf32>
    sluice.vocab_yield %5 : tensor<1x4x8xf32>
  }
  %1 = sluice.stage @s0 device 0 chunk 0 (%0 : tensor<1x4x8xf32>) -> tensor<1x4x8xf32> attributes {activation_bytes = 1568 : i64, flops = array<i64: 4416, 4736, 4096>, passes = [#sluice.pass<F>, #sluice.pass<B>, #sluice.pass<W>]} {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %x = sluice.transformer_layer %arg0 {heads = 2, kv_heads = 2, ffn = 16, norm = layernorm, mlp = gelu} : tensor<1x4x8xf32>
    sluice.yield %x : tensor<1x4x8xf32>
  }
  %2 = sluice.stage @s1 device 1 chunk 0 (%1 : tensor<1x4x8xf32>) -> tensor<1x4x8xf32> attributes {activation_bytes = 1568 : i64, flops = array<i64: 4416, 4736, 4096>, passes = [#sluice.pass<F>, #sluice.pass<B>, #sluice.pass<W>]} {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %x = sluice.transformer_layer %arg0 {heads = 2, kv_heads = 2, ffn = 16, norm = layernorm, mlp = gelu} : tensor<1x4x8xf32>
    %normed = sluice.final_norm %x {norm = layernorm} : tensor<1x4x8xf32>
    sluice.yield %normed : tensor<1x4x8xf32>
  }
  %3 = sluice.vocab_output @vout(%2 : tensor<1x4x8xf32>) -> tensor<f32> attributes {algorithm = 2 : i64, barriers = 1 : i64, devices = 2 : i64, padded_vocab = 12 : i64, passes = [#sluice.pass<S>, #sluice.pass<T>], root = 1 : i64, vocab = 10 : i64} {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %4 = sluice.broadcast %arg0 root 1 : tensor<1x4x8xf32>
    %5 = sluice.shard_logits %4 : tensor<1x4x8xf32> -> tensor<1x4x6xf32>
    %6 = sluice.shard_max %5 : tensor<1x4x6xf32> -> tensor<1x4xf32>
    %7 = sluice.shard_sum_exp %5, %6 : tensor<1x4x6xf32>, tensor<1x4xf32> -> tensor<1x4xf32>
    %8 = sluice.shard_softmax %5, %6, %7 : tensor<1x4x6xf32>, tensor<1x4xf32>
    %9 = sluice.shard_input_grad %8 : tensor<1x4x6xf32> -> tensor<1x4x8xf32>
    %10 = sluice.label_rows : tensor<1x4x8xf32>
    %11 = sluice.all_reduce <max> %6 : tensor<1x4xf32>
    %12 = sluice.rescale_sum %7, %6, %11 : tensor<1x4xf32>
    %13 = sluice.all_reduce <sum> %12 : tensor<1x4xf32>
    %14 = sluice.combine_grad %9, %10, %12, %13 : tensor<1x4x8xf32>, tensor<1x4xf32>
    %15 = sluice.reduce %14 root 1 : tensor<1x4x8xf32>
    %16 = sluice.rescale_probs %8, %12, %13 : tensor<1x4x6xf32>, tensor<1x4xf32>
    %17 = sluice.shard_loss %5, %11, %13 : tensor<1x4x6xf32>, tensor<1x4xf32> -> tensor<f32>
    %18 = sluice.softmax_grad %16 : tensor<1x4x6xf32>
    sluice.shard_weight_grad %18, %4 : tensor<1x4x6xf32>, tensor<1x4x8xf32>
    sluice.vocab_yield %17, %15 : tensor<f32>, tensor<1x4x8xf32>
  }
  sluice.return %3 : tensor<f32>
}
}

// -----

// One stage runs B and W, the other BW.
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %0 = sluice.vocab_input @vin -> tensor<1x4x8xf32> attributes {devices = 2 : i64, padded_vocab = 12 : i64, passes = [#sluice.pass<IF>, #sluice.pass<IB>], root = 0 : i64, vocab = 10 : i64} {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %4 = sluice.shard_lookup : tensor<1x4x8xf32>
    %5 = sluice.reduce %4 root 0 : tensor<1x4x8xf32>
    %6 = sluice.broadcast %arg0 root 0 : tensor<1x4x8xf32>
    sluice.shard_scatter_grad %6 : tensor<1x4x8xf32>
    sluice.vocab_yield %5 : tensor<1x4x8xf32>
  }
  %1 = sluice.stage @s0 device 0 chunk 0 (%0 : tensor<1x4x8xf32>) -> tensor<1x4x8xf32> attributes {activation_bytes = 1568 : i64, flops = array<i64: 4416, 4736, 4096>, passes = [#sluice.pass<F>, #sluice.pass<B>, #sluice.pass<W>]} {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %x = sluice.transformer_layer %arg0 {heads = 2, kv_heads = 2, ffn = 16, norm = layernorm, mlp = gelu} : tensor<1x4x8xf32>
    sluice.yield %x : tensor<1x4x8xf32>
  }
  // expected-error@+1 {{'sluice.stage' op splits its backward differently from stage @s0: every stage must run F, B, W or every stage F, BW}}
  %2 = sluice.stage @s1 device 1 chunk 0 (%1 : tensor<1x4x8xf32>) -> tensor<1x4x8xf32> attributes {passes = [#sluice.pass<F>, #sluice.pass<BW>]} {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %x = sluice.transformer_layer %arg0 {heads = 2, kv_heads = 2, ffn = 16, norm = layernorm, mlp = gelu} : tensor<1x4x8xf32>
    %normed = sluice.final_norm %x {norm = layernorm} : tensor<1x4x8xf32>
    sluice.yield %normed : tensor<1x4x8xf32>
  }
  %3 = sluice.vocab_output @vout(%2 : tensor<1x4x8xf32>) -> tensor<f32> attributes {algorithm = 2 : i64, barriers = 1 : i64, devices = 2 : i64, padded_vocab = 12 : i64, passes = [#sluice.pass<S>, #sluice.pass<T>], root = 1 : i64, vocab = 10 : i64} {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %4 = sluice.broadcast %arg0 root 1 : tensor<1x4x8xf32>
    %5 = sluice.shard_logits %4 : tensor<1x4x8xf32> -> tensor<1x4x6xf32>
    %6 = sluice.shard_max %5 : tensor<1x4x6xf32> -> tensor<1x4xf32>
    %7 = sluice.shard_sum_exp %5, %6 : tensor<1x4x6xf32>, tensor<1x4xf32> -> tensor<1x4xf32>
    %8 = sluice.shard_softmax %5, %6, %7 : tensor<1x4x6xf32>, tensor<1x4xf32>
    %9 = sluice.shard_input_grad %8 : tensor<1x4x6xf32> -> tensor<1x4x8xf32>
    %10 = sluice.label_rows : tensor<1x4x8xf32>
    %11 = sluice.all_reduce <max> %6 : tensor<1x4xf32>
    %12 = sluice.rescale_sum %7, %6, %11 : tensor<1x4xf32>
    %13 = sluice.all_reduce <sum> %12 : tensor<1x4xf32>
    %14 = sluice.combine_grad %9, %10, %12, %13 : tensor<1x4x8xf32>, tensor<1x4xf32>
    %15 = sluice.reduce %14 root 1 : tensor<1x4x8xf32>
    %16 = sluice.rescale_probs %8, %12, %13 : tensor<1x4x6xf32>, tensor<1x4xf32>
    %17 = sluice.shard_loss %5, %11, %13 : tensor<1x4x6xf32>, tensor<1x4xf32> -> tensor<f32>
    %18 = sluice.softmax_grad %16 : tensor<1x4x6xf32>
    sluice.shard_weight_grad %18, %4 : tensor<1x4x6xf32>, tensor<1x4x8xf32>
    sluice.vocab_yield %17, %15 : tensor<f32>, tensor<1x4x8xf32>
  }
  sluice.return %3 : tensor<f32>
}

// -----

// Algorithm 2's output shard runs S and T, not the naive form's S, S2, T.
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %0 = sluice.vocab_input @vin -> tensor<1x4x8xf32> attributes {devices = 2 : i64, padded_vocab = 12 : i64, passes = [#sluice.pass<IF>, #sluice.pass<IB>], root = 0 : i64, vocab = 10 : i64} {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %4 = sluice.shard_lookup : tensor<1x4x8xf32>
    %5 = sluice.reduce %4 root 0 : tensor<1x4x8xf32>
    %6 = sluice.broadcast %arg0 root 0 : tensor<1x4x8xf32>
    sluice.shard_scatter_grad %6 : tensor<1x4x8xf32>
    sluice.vocab_yield %5 : tensor<1x4x8xf32>
  }
  %1 = sluice.stage @s0 device 0 chunk 0 (%0 : tensor<1x4x8xf32>) -> tensor<1x4x8xf32> attributes {activation_bytes = 1568 : i64, flops = array<i64: 4416, 4736, 4096>, passes = [#sluice.pass<F>, #sluice.pass<B>, #sluice.pass<W>]} {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %x = sluice.transformer_layer %arg0 {heads = 2, kv_heads = 2, ffn = 16, norm = layernorm, mlp = gelu} : tensor<1x4x8xf32>
    sluice.yield %x : tensor<1x4x8xf32>
  }
  %2 = sluice.stage @s1 device 1 chunk 0 (%1 : tensor<1x4x8xf32>) -> tensor<1x4x8xf32> attributes {activation_bytes = 1568 : i64, flops = array<i64: 4416, 4736, 4096>, passes = [#sluice.pass<F>, #sluice.pass<B>, #sluice.pass<W>]} {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %x = sluice.transformer_layer %arg0 {heads = 2, kv_heads = 2, ffn = 16, norm = layernorm, mlp = gelu} : tensor<1x4x8xf32>
    %normed = sluice.final_norm %x {norm = layernorm} : tensor<1x4x8xf32>
    sluice.yield %normed : tensor<1x4x8xf32>
  }
  // expected-error@+1 {{'sluice.vocab_output' op 'passes' do not match its form: expected S, T}}
  %3 = sluice.vocab_output @vout(%2 : tensor<1x4x8xf32>) -> tensor<f32> attributes {algorithm = 2 : i64, barriers = 1 : i64, devices = 2 : i64, padded_vocab = 12 : i64, passes = [#sluice.pass<S>, #sluice.pass<S2>, #sluice.pass<T>], root = 1 : i64, vocab = 10 : i64} {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %4 = sluice.broadcast %arg0 root 1 : tensor<1x4x8xf32>
    %5 = sluice.shard_logits %4 : tensor<1x4x8xf32> -> tensor<1x4x6xf32>
    %6 = sluice.shard_max %5 : tensor<1x4x6xf32> -> tensor<1x4xf32>
    %7 = sluice.shard_sum_exp %5, %6 : tensor<1x4x6xf32>, tensor<1x4xf32> -> tensor<1x4xf32>
    %8 = sluice.shard_softmax %5, %6, %7 : tensor<1x4x6xf32>, tensor<1x4xf32>
    %9 = sluice.shard_input_grad %8 : tensor<1x4x6xf32> -> tensor<1x4x8xf32>
    %10 = sluice.label_rows : tensor<1x4x8xf32>
    %11 = sluice.all_reduce <max> %6 : tensor<1x4xf32>
    %12 = sluice.rescale_sum %7, %6, %11 : tensor<1x4xf32>
    %13 = sluice.all_reduce <sum> %12 : tensor<1x4xf32>
    %14 = sluice.combine_grad %9, %10, %12, %13 : tensor<1x4x8xf32>, tensor<1x4xf32>
    %15 = sluice.reduce %14 root 1 : tensor<1x4x8xf32>
    %16 = sluice.rescale_probs %8, %12, %13 : tensor<1x4x6xf32>, tensor<1x4xf32>
    %17 = sluice.shard_loss %5, %11, %13 : tensor<1x4x6xf32>, tensor<1x4xf32> -> tensor<f32>
    %18 = sluice.softmax_grad %16 : tensor<1x4x6xf32>
    sluice.shard_weight_grad %18, %4 : tensor<1x4x6xf32>, tensor<1x4x8xf32>
    sluice.vocab_yield %17, %15 : tensor<f32>, tensor<1x4x8xf32>
  }
  sluice.return %3 : tensor<f32>
}

// -----

// The output shard is rooted where the last stage is not.
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %0 = sluice.vocab_input @vin -> tensor<1x4x8xf32> attributes {devices = 2 : i64, padded_vocab = 12 : i64, passes = [#sluice.pass<IF>, #sluice.pass<IB>], root = 0 : i64, vocab = 10 : i64} {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %4 = sluice.shard_lookup : tensor<1x4x8xf32>
    %5 = sluice.reduce %4 root 0 : tensor<1x4x8xf32>
    %6 = sluice.broadcast %arg0 root 0 : tensor<1x4x8xf32>
    sluice.shard_scatter_grad %6 : tensor<1x4x8xf32>
    sluice.vocab_yield %5 : tensor<1x4x8xf32>
  }
  %1 = sluice.stage @s0 device 0 chunk 0 (%0 : tensor<1x4x8xf32>) -> tensor<1x4x8xf32> attributes {activation_bytes = 1568 : i64, flops = array<i64: 4416, 4736, 4096>, passes = [#sluice.pass<F>, #sluice.pass<B>, #sluice.pass<W>]} {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %x = sluice.transformer_layer %arg0 {heads = 2, kv_heads = 2, ffn = 16, norm = layernorm, mlp = gelu} : tensor<1x4x8xf32>
    sluice.yield %x : tensor<1x4x8xf32>
  }
  %2 = sluice.stage @s1 device 1 chunk 0 (%1 : tensor<1x4x8xf32>) -> tensor<1x4x8xf32> attributes {activation_bytes = 1568 : i64, flops = array<i64: 4416, 4736, 4096>, passes = [#sluice.pass<F>, #sluice.pass<B>, #sluice.pass<W>]} {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %x = sluice.transformer_layer %arg0 {heads = 2, kv_heads = 2, ffn = 16, norm = layernorm, mlp = gelu} : tensor<1x4x8xf32>
    %normed = sluice.final_norm %x {norm = layernorm} : tensor<1x4x8xf32>
    sluice.yield %normed : tensor<1x4x8xf32>
  }
  // expected-error@+1 {{'sluice.vocab_output' op is sharded over 2 devices rooted at device 0, but the stages span 2 devices and the last one is on device 1}}
  %3 = sluice.vocab_output @vout(%2 : tensor<1x4x8xf32>) -> tensor<f32> attributes {algorithm = 2 : i64, barriers = 1 : i64, devices = 2 : i64, padded_vocab = 12 : i64, passes = [#sluice.pass<S>, #sluice.pass<T>], root = 0 : i64, vocab = 10 : i64} {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %4 = sluice.broadcast %arg0 root 0 : tensor<1x4x8xf32>
    %5 = sluice.shard_logits %4 : tensor<1x4x8xf32> -> tensor<1x4x6xf32>
    %6 = sluice.shard_max %5 : tensor<1x4x6xf32> -> tensor<1x4xf32>
    %7 = sluice.shard_sum_exp %5, %6 : tensor<1x4x6xf32>, tensor<1x4xf32> -> tensor<1x4xf32>
    %8 = sluice.shard_softmax %5, %6, %7 : tensor<1x4x6xf32>, tensor<1x4xf32>
    %9 = sluice.shard_input_grad %8 : tensor<1x4x6xf32> -> tensor<1x4x8xf32>
    %10 = sluice.label_rows : tensor<1x4x8xf32>
    %11 = sluice.all_reduce <max> %6 : tensor<1x4xf32>
    %12 = sluice.rescale_sum %7, %6, %11 : tensor<1x4xf32>
    %13 = sluice.all_reduce <sum> %12 : tensor<1x4xf32>
    %14 = sluice.combine_grad %9, %10, %12, %13 : tensor<1x4x8xf32>, tensor<1x4xf32>
    %15 = sluice.reduce %14 root 0 : tensor<1x4x8xf32>
    %16 = sluice.rescale_probs %8, %12, %13 : tensor<1x4x6xf32>, tensor<1x4xf32>
    %17 = sluice.shard_loss %5, %11, %13 : tensor<1x4x6xf32>, tensor<1x4xf32> -> tensor<f32>
    %18 = sluice.softmax_grad %16 : tensor<1x4x6xf32>
    sluice.shard_weight_grad %18, %4 : tensor<1x4x6xf32>, tensor<1x4x8xf32>
    sluice.vocab_yield %17, %15 : tensor<f32>, tensor<1x4x8xf32>
  }
  sluice.return %3 : tensor<f32>
}

// -----

// A stage without passes.
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %0 = sluice.vocab_input @vin -> tensor<1x4x8xf32> attributes {devices = 2 : i64, padded_vocab = 12 : i64, passes = [#sluice.pass<IF>, #sluice.pass<IB>], root = 0 : i64, vocab = 10 : i64} {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %4 = sluice.shard_lookup : tensor<1x4x8xf32>
    %5 = sluice.reduce %4 root 0 : tensor<1x4x8xf32>
    %6 = sluice.broadcast %arg0 root 0 : tensor<1x4x8xf32>
    sluice.shard_scatter_grad %6 : tensor<1x4x8xf32>
    sluice.vocab_yield %5 : tensor<1x4x8xf32>
  }
  // expected-error@+1 {{'sluice.stage' op has no passes: run sluice-split-passes first}}
  %1 = sluice.stage @s0 device 0 chunk 0 (%0 : tensor<1x4x8xf32>) -> tensor<1x4x8xf32> attributes {activation_bytes = 1568 : i64} {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %x = sluice.transformer_layer %arg0 {heads = 2, kv_heads = 2, ffn = 16, norm = layernorm, mlp = gelu} : tensor<1x4x8xf32>
    sluice.yield %x : tensor<1x4x8xf32>
  }
  %2 = sluice.stage @s1 device 1 chunk 0 (%1 : tensor<1x4x8xf32>) -> tensor<1x4x8xf32> attributes {activation_bytes = 1568 : i64, flops = array<i64: 4416, 4736, 4096>, passes = [#sluice.pass<F>, #sluice.pass<B>, #sluice.pass<W>]} {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %x = sluice.transformer_layer %arg0 {heads = 2, kv_heads = 2, ffn = 16, norm = layernorm, mlp = gelu} : tensor<1x4x8xf32>
    %normed = sluice.final_norm %x {norm = layernorm} : tensor<1x4x8xf32>
    sluice.yield %normed : tensor<1x4x8xf32>
  }
  %3 = sluice.vocab_output @vout(%2 : tensor<1x4x8xf32>) -> tensor<f32> attributes {algorithm = 2 : i64, barriers = 1 : i64, devices = 2 : i64, padded_vocab = 12 : i64, passes = [#sluice.pass<S>, #sluice.pass<T>], root = 1 : i64, vocab = 10 : i64} {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %4 = sluice.broadcast %arg0 root 1 : tensor<1x4x8xf32>
    %5 = sluice.shard_logits %4 : tensor<1x4x8xf32> -> tensor<1x4x6xf32>
    %6 = sluice.shard_max %5 : tensor<1x4x6xf32> -> tensor<1x4xf32>
    %7 = sluice.shard_sum_exp %5, %6 : tensor<1x4x6xf32>, tensor<1x4xf32> -> tensor<1x4xf32>
    %8 = sluice.shard_softmax %5, %6, %7 : tensor<1x4x6xf32>, tensor<1x4xf32>
    %9 = sluice.shard_input_grad %8 : tensor<1x4x6xf32> -> tensor<1x4x8xf32>
    %10 = sluice.label_rows : tensor<1x4x8xf32>
    %11 = sluice.all_reduce <max> %6 : tensor<1x4xf32>
    %12 = sluice.rescale_sum %7, %6, %11 : tensor<1x4xf32>
    %13 = sluice.all_reduce <sum> %12 : tensor<1x4xf32>
    %14 = sluice.combine_grad %9, %10, %12, %13 : tensor<1x4x8xf32>, tensor<1x4xf32>
    %15 = sluice.reduce %14 root 1 : tensor<1x4x8xf32>
    %16 = sluice.rescale_probs %8, %12, %13 : tensor<1x4x6xf32>, tensor<1x4xf32>
    %17 = sluice.shard_loss %5, %11, %13 : tensor<1x4x6xf32>, tensor<1x4xf32> -> tensor<f32>
    %18 = sluice.softmax_grad %16 : tensor<1x4x6xf32>
    sluice.shard_weight_grad %18, %4 : tensor<1x4x6xf32>, tensor<1x4x8xf32>
    sluice.vocab_yield %17, %15 : tensor<f32>, tensor<1x4x8xf32>
  }
  sluice.return %3 : tensor<f32>
}

// -----

// An input shard without passes.
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  // expected-error@+1 {{'sluice.vocab_input' op has no passes: run sluice-split-passes first}}
  %0 = sluice.vocab_input @vin -> tensor<1x4x8xf32> attributes {devices = 2 : i64, padded_vocab = 12 : i64, root = 0 : i64, vocab = 10 : i64} {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %4 = sluice.shard_lookup : tensor<1x4x8xf32>
    %5 = sluice.reduce %4 root 0 : tensor<1x4x8xf32>
    %6 = sluice.broadcast %arg0 root 0 : tensor<1x4x8xf32>
    sluice.shard_scatter_grad %6 : tensor<1x4x8xf32>
    sluice.vocab_yield %5 : tensor<1x4x8xf32>
  }
  %1 = sluice.stage @s0 device 0 chunk 0 (%0 : tensor<1x4x8xf32>) -> tensor<1x4x8xf32> attributes {activation_bytes = 1568 : i64, flops = array<i64: 4416, 4736, 4096>, passes = [#sluice.pass<F>, #sluice.pass<B>, #sluice.pass<W>]} {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %x = sluice.transformer_layer %arg0 {heads = 2, kv_heads = 2, ffn = 16, norm = layernorm, mlp = gelu} : tensor<1x4x8xf32>
    sluice.yield %x : tensor<1x4x8xf32>
  }
  %2 = sluice.stage @s1 device 1 chunk 0 (%1 : tensor<1x4x8xf32>) -> tensor<1x4x8xf32> attributes {activation_bytes = 1568 : i64, flops = array<i64: 4416, 4736, 4096>, passes = [#sluice.pass<F>, #sluice.pass<B>, #sluice.pass<W>]} {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %x = sluice.transformer_layer %arg0 {heads = 2, kv_heads = 2, ffn = 16, norm = layernorm, mlp = gelu} : tensor<1x4x8xf32>
    %normed = sluice.final_norm %x {norm = layernorm} : tensor<1x4x8xf32>
    sluice.yield %normed : tensor<1x4x8xf32>
  }
  %3 = sluice.vocab_output @vout(%2 : tensor<1x4x8xf32>) -> tensor<f32> attributes {algorithm = 2 : i64, barriers = 1 : i64, devices = 2 : i64, padded_vocab = 12 : i64, passes = [#sluice.pass<S>, #sluice.pass<T>], root = 1 : i64, vocab = 10 : i64} {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %4 = sluice.broadcast %arg0 root 1 : tensor<1x4x8xf32>
    %5 = sluice.shard_logits %4 : tensor<1x4x8xf32> -> tensor<1x4x6xf32>
    %6 = sluice.shard_max %5 : tensor<1x4x6xf32> -> tensor<1x4xf32>
    %7 = sluice.shard_sum_exp %5, %6 : tensor<1x4x6xf32>, tensor<1x4xf32> -> tensor<1x4xf32>
    %8 = sluice.shard_softmax %5, %6, %7 : tensor<1x4x6xf32>, tensor<1x4xf32>
    %9 = sluice.shard_input_grad %8 : tensor<1x4x6xf32> -> tensor<1x4x8xf32>
    %10 = sluice.label_rows : tensor<1x4x8xf32>
    %11 = sluice.all_reduce <max> %6 : tensor<1x4xf32>
    %12 = sluice.rescale_sum %7, %6, %11 : tensor<1x4xf32>
    %13 = sluice.all_reduce <sum> %12 : tensor<1x4xf32>
    %14 = sluice.combine_grad %9, %10, %12, %13 : tensor<1x4x8xf32>, tensor<1x4xf32>
    %15 = sluice.reduce %14 root 1 : tensor<1x4x8xf32>
    %16 = sluice.rescale_probs %8, %12, %13 : tensor<1x4x6xf32>, tensor<1x4xf32>
    %17 = sluice.shard_loss %5, %11, %13 : tensor<1x4x6xf32>, tensor<1x4xf32> -> tensor<f32>
    %18 = sluice.softmax_grad %16 : tensor<1x4x6xf32>
    sluice.shard_weight_grad %18, %4 : tensor<1x4x6xf32>, tensor<1x4x8xf32>
    sluice.vocab_yield %17, %15 : tensor<f32>, tensor<1x4x8xf32>
  }
  sluice.return %3 : tensor<f32>
}

// -----

// ZB-H1 runs B and W apart; these stages run BW.
// expected-error@+1 {{'sluice.model' op cannot be scheduled: schedule 'zb-h1' runs the backward split into B and W, but the stages' passes are unsplit (BW)}}
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %0 = sluice.vocab_input @vin -> tensor<1x4x8xf32> attributes {devices = 2 : i64, padded_vocab = 12 : i64, passes = [#sluice.pass<IF>, #sluice.pass<IB>], root = 0 : i64, vocab = 10 : i64} {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %4 = sluice.shard_lookup : tensor<1x4x8xf32>
    %5 = sluice.reduce %4 root 0 : tensor<1x4x8xf32>
    %6 = sluice.broadcast %arg0 root 0 : tensor<1x4x8xf32>
    sluice.shard_scatter_grad %6 : tensor<1x4x8xf32>
    sluice.vocab_yield %5 : tensor<1x4x8xf32>
  }
  %1 = sluice.stage @s0 device 0 chunk 0 (%0 : tensor<1x4x8xf32>) -> tensor<1x4x8xf32> attributes {passes = [#sluice.pass<F>, #sluice.pass<BW>]} {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %x = sluice.transformer_layer %arg0 {heads = 2, kv_heads = 2, ffn = 16, norm = layernorm, mlp = gelu} : tensor<1x4x8xf32>
    sluice.yield %x : tensor<1x4x8xf32>
  }
  %2 = sluice.stage @s1 device 1 chunk 0 (%1 : tensor<1x4x8xf32>) -> tensor<1x4x8xf32> attributes {passes = [#sluice.pass<F>, #sluice.pass<BW>]} {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %x = sluice.transformer_layer %arg0 {heads = 2, kv_heads = 2, ffn = 16, norm = layernorm, mlp = gelu} : tensor<1x4x8xf32>
    %normed = sluice.final_norm %x {norm = layernorm} : tensor<1x4x8xf32>
    sluice.yield %normed : tensor<1x4x8xf32>
  }
  %3 = sluice.vocab_output @vout(%2 : tensor<1x4x8xf32>) -> tensor<f32> attributes {algorithm = 2 : i64, barriers = 1 : i64, devices = 2 : i64, padded_vocab = 12 : i64, passes = [#sluice.pass<S>, #sluice.pass<T>], root = 1 : i64, vocab = 10 : i64} {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %4 = sluice.broadcast %arg0 root 1 : tensor<1x4x8xf32>
    %5 = sluice.shard_logits %4 : tensor<1x4x8xf32> -> tensor<1x4x6xf32>
    %6 = sluice.shard_max %5 : tensor<1x4x6xf32> -> tensor<1x4xf32>
    %7 = sluice.shard_sum_exp %5, %6 : tensor<1x4x6xf32>, tensor<1x4xf32> -> tensor<1x4xf32>
    %8 = sluice.shard_softmax %5, %6, %7 : tensor<1x4x6xf32>, tensor<1x4xf32>
    %9 = sluice.shard_input_grad %8 : tensor<1x4x6xf32> -> tensor<1x4x8xf32>
    %10 = sluice.label_rows : tensor<1x4x8xf32>
    %11 = sluice.all_reduce <max> %6 : tensor<1x4xf32>
    %12 = sluice.rescale_sum %7, %6, %11 : tensor<1x4xf32>
    %13 = sluice.all_reduce <sum> %12 : tensor<1x4xf32>
    %14 = sluice.combine_grad %9, %10, %12, %13 : tensor<1x4x8xf32>, tensor<1x4xf32>
    %15 = sluice.reduce %14 root 1 : tensor<1x4x8xf32>
    %16 = sluice.rescale_probs %8, %12, %13 : tensor<1x4x6xf32>, tensor<1x4xf32>
    %17 = sluice.shard_loss %5, %11, %13 : tensor<1x4x6xf32>, tensor<1x4xf32> -> tensor<f32>
    %18 = sluice.softmax_grad %16 : tensor<1x4x6xf32>
    sluice.shard_weight_grad %18, %4 : tensor<1x4x6xf32>, tensor<1x4x8xf32>
    sluice.vocab_yield %17, %15 : tensor<f32>, tensor<1x4x8xf32>
  }
  sluice.return %3 : tensor<f32>
}
