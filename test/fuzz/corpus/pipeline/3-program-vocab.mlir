module {
  sluice.model @tiny {seq_len = 16, micro_batch = 1, dtype = f32} {
    %0 = sluice.vocab_input @vin -> tensor<1x16x32xf32> attributes {devices = 2 : i64, padded_vocab = 100 : i64, passes = [#sluice.pass<IF>, #sluice.pass<IB>], positions = 64 : i64, root = 0 : i64, vocab = 100 : i64} {
    ^bb0(%arg0: tensor<1x16x32xf32>):
      %4 = sluice.shard_lookup : tensor<1x16x32xf32>
      %5 = sluice.reduce %4 root 0 : tensor<1x16x32xf32>
      %6 = sluice.add_positions %5 : tensor<1x16x32xf32>
      %7 = sluice.broadcast %arg0 root 0 : tensor<1x16x32xf32>
      sluice.shard_scatter_grad %7 : tensor<1x16x32xf32>
      sluice.vocab_yield %6 : tensor<1x16x32xf32>
    }
    %1 = sluice.stage @s0 device 0 chunk 0 (%0 : tensor<1x16x32xf32>) -> tensor<1x16x32xf32> attributes {activation_bytes = 33024 : i64, flops = array<i64: 410624, 428032, 393216>, passes = [#sluice.pass<F>, #sluice.pass<B>, #sluice.pass<W>]} {
    ^bb0(%arg0: tensor<1x16x32xf32>):
      %x = sluice.transformer_layer %arg0 {heads = 4, kv_heads = 4, ffn = 128, norm = layernorm, mlp = gelu, bias} : tensor<1x16x32xf32>
      sluice.yield %x : tensor<1x16x32xf32>
    }
    %2 = sluice.stage @s1 device 1 chunk 0 (%1 : tensor<1x16x32xf32>) -> tensor<1x16x32xf32> attributes {activation_bytes = 33024 : i64, flops = array<i64: 410624, 428032, 393216>, passes = [#sluice.pass<F>, #sluice.pass<B>, #sluice.pass<W>]} {
    ^bb0(%arg0: tensor<1x16x32xf32>):
      %x = sluice.transformer_layer %arg0 {heads = 4, kv_heads = 4, ffn = 128, norm = layernorm, mlp = gelu, bias} : tensor<1x16x32xf32>
      %normed = sluice.final_norm %x {norm = layernorm} : tensor<1x16x32xf32>
      sluice.yield %normed : tensor<1x16x32xf32>
    }
    %3 = sluice.vocab_output @vout(%2 : tensor<1x16x32xf32>) -> tensor<f32> attributes {algorithm = 2 : i64, barriers = 1 : i64, devices = 2 : i64, padded_vocab = 100 : i64, passes = [#sluice.pass<S>, #sluice.pass<T>], root = 1 : i64, vocab = 100 : i64} {
    ^bb0(%arg0: tensor<1x16x32xf32>):
      %4 = sluice.broadcast %arg0 root 1 : tensor<1x16x32xf32>
      %5 = sluice.shard_logits %4 : tensor<1x16x32xf32> -> tensor<1x16x50xf32>
      %6 = sluice.shard_max %5 : tensor<1x16x50xf32> -> tensor<1x16xf32>
      %7 = sluice.shard_sum_exp %5, %6 : tensor<1x16x50xf32>, tensor<1x16xf32> -> tensor<1x16xf32>
      %8 = sluice.shard_softmax %5, %6, %7 : tensor<1x16x50xf32>, tensor<1x16xf32>
      %9 = sluice.shard_input_grad %8 : tensor<1x16x50xf32> -> tensor<1x16x32xf32>
      %10 = sluice.label_rows : tensor<1x16x32xf32>
      %11 = sluice.all_reduce <max> %6 : tensor<1x16xf32>
      %12 = sluice.rescale_sum %7, %6, %11 : tensor<1x16xf32>
      %13 = sluice.all_reduce <sum> %12 : tensor<1x16xf32>
      %14 = sluice.combine_grad %9, %10, %12, %13 : tensor<1x16x32xf32>, tensor<1x16xf32>
      %15 = sluice.reduce %14 root 1 : tensor<1x16x32xf32>
      %16 = sluice.rescale_probs %8, %12, %13 : tensor<1x16x50xf32>, tensor<1x16xf32>
      %17 = sluice.shard_loss %5, %11, %13 : tensor<1x16x50xf32>, tensor<1x16xf32> -> tensor<f32>
      %18 = sluice.softmax_grad %16 : tensor<1x16x50xf32>
      sluice.shard_weight_grad %18, %4 : tensor<1x16x50xf32>, tensor<1x16x32xf32>
      sluice.vocab_yield %17, %15 : tensor<f32>, tensor<1x16x32xf32>
    }
    sluice.return %3 : tensor<f32>
  }
  sluice.program @plan for @tiny {devices = 2, microbatches = 2, slices = 1, schedule = "zb-h1"} attributes {bubble_ratio = 2.500000e-01 : f64, peak_activation = array<f64: 2.000000e+00, 2.000000e+00>, peak_activation_until_w = array<f64: 2.000000e+00, 2.000000e+00>, step_time = 8.000000e+00 : f64} {
    sluice.device 0 {
      sluice.collective @vout 0 {mb = 0, slice = 0}
      sluice.exec IF @vin {mb = 0, slice = 0}
      sluice.collective @vin 0 {mb = 0, slice = 0}
      sluice.exec IF @vin {mb = 1, slice = 0}
      sluice.collective @vin 0 {mb = 1, slice = 0}
      sluice.exec F @s0 {mb = 0, slice = 0}
      sluice.send F @s0 {mb = 0, slice = 0} to 1
      sluice.exec F @s0 {mb = 1, slice = 0}
      sluice.send F @s0 {mb = 1, slice = 0} to 1
      sluice.exec S @vout {mb = 0, slice = 0}
      sluice.collective @vout 1 {mb = 0, slice = 0}
      sluice.collective @vout 0 {mb = 1, slice = 0}
      sluice.exec T @vout {mb = 0, slice = 0}
      sluice.exec S @vout {mb = 1, slice = 0}
      sluice.collective @vout 1 {mb = 1, slice = 0}
      sluice.recv B @s1 {mb = 0, slice = 0} from 1
      sluice.exec B @s0 {mb = 0, slice = 0}
      sluice.collective @vin 1 {mb = 0, slice = 0}
      sluice.exec W @s0 {mb = 0, slice = 0}
      sluice.exec IB @vin {mb = 0, slice = 0}
      sluice.exec T @vout {mb = 1, slice = 0}
      sluice.recv B @s1 {mb = 1, slice = 0} from 1
      sluice.exec B @s0 {mb = 1, slice = 0}
      sluice.collective @vin 1 {mb = 1, slice = 0}
      sluice.exec W @s0 {mb = 1, slice = 0}
      sluice.exec IB @vin {mb = 1, slice = 0}
    }
    sluice.device 1 {
      sluice.exec IF @vin {mb = 0, slice = 0}
      sluice.collective @vin 0 {mb = 0, slice = 0}
      sluice.exec IF @vin {mb = 1, slice = 0}
      sluice.collective @vin 0 {mb = 1, slice = 0}
      sluice.collective @vin 1 {mb = 0, slice = 0}
      sluice.collective @vin 1 {mb = 1, slice = 0}
      sluice.recv F @s0 {mb = 0, slice = 0} from 0
      sluice.exec F @s1 {mb = 0, slice = 0}
      sluice.collective @vout 0 {mb = 0, slice = 0}
      sluice.exec S @vout {mb = 0, slice = 0}
      sluice.collective @vout 1 {mb = 0, slice = 0}
      sluice.recv F @s0 {mb = 1, slice = 0} from 0
      sluice.exec F @s1 {mb = 1, slice = 0}
      sluice.collective @vout 0 {mb = 1, slice = 0}
      sluice.exec B @s1 {mb = 0, slice = 0}
      sluice.send B @s1 {mb = 0, slice = 0} to 0
      sluice.exec T @vout {mb = 0, slice = 0}
      sluice.exec S @vout {mb = 1, slice = 0}
      sluice.collective @vout 1 {mb = 1, slice = 0}
      sluice.exec B @s1 {mb = 1, slice = 0}
      sluice.send B @s1 {mb = 1, slice = 0} to 0
      sluice.exec IB @vin {mb = 0, slice = 0}
      sluice.exec T @vout {mb = 1, slice = 0}
      sluice.exec W @s1 {mb = 0, slice = 0}
      sluice.exec W @s1 {mb = 1, slice = 0}
      sluice.exec IB @vin {mb = 1, slice = 0}
    }
  }
}

