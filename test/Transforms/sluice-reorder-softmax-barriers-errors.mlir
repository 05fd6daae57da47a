// RUN: sluice-opt %s --sluice-reorder-softmax-barriers="algorithm=2" -split-input-file -verify-diagnostics

// Algorithm 2 folds the reduce of the input gradient into the barrier, so
// it needs the Algorithm 1 body to reduce that gradient. Verified IR need
// not: here the reduce reads the broadcast X, and the input gradient has
// no user. A diagnostic, not a crash (it segfaulted before; issue 13).

module {
  sluice.model @m {seq_len = 16, micro_batch = 1, dtype = f32} {
    %0 = sluice.vocab_input @vin -> tensor<1x16x32xf32> attributes {devices = 2 : i64, padded_vocab = 104 : i64, positions = 16 : i64, root = 0 : i64, vocab = 101 : i64} {
    ^bb0(%arg0: tensor<1x16x32xf32>):
      %4 = sluice.shard_lookup : tensor<1x16x32xf32>
      %5 = sluice.reduce %4 root 0 : tensor<1x16x32xf32>
      %6 = sluice.add_positions %5 : tensor<1x16x32xf32>
      %7 = sluice.broadcast %arg0 root 0 : tensor<1x16x32xf32>
      sluice.shard_scatter_grad %7 : tensor<1x16x32xf32>
      sluice.vocab_yield %6 : tensor<1x16x32xf32>
    }
    %1 = sluice.stage @s0 device 0 chunk 0 (%0 : tensor<1x16x32xf32>) -> tensor<1x16x32xf32> {
    ^bb0(%arg0: tensor<1x16x32xf32>):
      %x = sluice.transformer_layer %arg0 {heads = 4, kv_heads = 4, ffn = 128, norm = layernorm, mlp = gelu} : tensor<1x16x32xf32>
      %x_0 = sluice.transformer_layer %x {heads = 4, kv_heads = 4, ffn = 128, norm = layernorm, mlp = gelu} : tensor<1x16x32xf32>
      sluice.yield %x_0 : tensor<1x16x32xf32>
    }
    %2 = sluice.stage @s1 device 1 chunk 0 (%1 : tensor<1x16x32xf32>) -> tensor<1x16x32xf32> {
    ^bb0(%arg0: tensor<1x16x32xf32>):
      %x = sluice.transformer_layer %arg0 {heads = 4, kv_heads = 4, ffn = 128, norm = layernorm, mlp = gelu} : tensor<1x16x32xf32>
      %x_0 = sluice.transformer_layer %x {heads = 4, kv_heads = 4, ffn = 128, norm = layernorm, mlp = gelu} : tensor<1x16x32xf32>
      %normed = sluice.final_norm %x_0 {norm = layernorm} : tensor<1x16x32xf32>
      sluice.yield %normed : tensor<1x16x32xf32>
    }
    // expected-error @+1 {{'sluice.vocab_output' op does not reduce the input gradient}}
    %3 = sluice.vocab_output @vout(%2 : tensor<1x16x32xf32>) -> tensor<f32> attributes {algorithm = 1 : i64, barriers = 2 : i64, devices = 2 : i64, padded_vocab = 104 : i64, root = 1 : i64, vocab = 101 : i64} {
    ^bb0(%arg0: tensor<1x16x32xf32>):
      %4 = sluice.broadcast %arg0 root 1 : tensor<1x16x32xf32>
      %5 = sluice.shard_logits %4 : tensor<1x16x32xf32> -> tensor<1x16x52xf32>
      %6 = sluice.shard_max %5 : tensor<1x16x52xf32> -> tensor<1x16xf32>
      %7 = sluice.shard_sum_exp %5, %6 : tensor<1x16x52xf32>, tensor<1x16xf32> -> tensor<1x16xf32>
      %8 = sluice.shard_softmax %5, %6, %7 : tensor<1x16x52xf32>, tensor<1x16xf32>
      %9 = sluice.all_reduce <max> %6 : tensor<1x16xf32>
      %10 = sluice.rescale_sum %7, %6, %9 : tensor<1x16xf32>
      %11 = sluice.all_reduce <sum> %10 : tensor<1x16xf32>
      %12 = sluice.rescale_probs %8, %10, %11 : tensor<1x16x52xf32>, tensor<1x16xf32>
      %13 = sluice.shard_loss %5, %9, %11 : tensor<1x16x52xf32>, tensor<1x16xf32> -> tensor<f32>
      %14 = sluice.softmax_grad %12 : tensor<1x16x52xf32>
      %15 = sluice.shard_input_grad %14 : tensor<1x16x52xf32> -> tensor<1x16x32xf32>
      %16 = sluice.reduce %4 root 1 : tensor<1x16x32xf32>
      sluice.shard_weight_grad %14, %4 : tensor<1x16x52xf32>, tensor<1x16x32xf32>
      sluice.vocab_yield %13, %16 : tensor<f32>, tensor<1x16x32xf32>
    }
    sluice.return %3 : tensor<f32>
  }
}

