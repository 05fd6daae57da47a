module {
  sluice.model @tiny {seq_len = 16, micro_batch = 1, dtype = f32} {
    %0 = sluice.stage @s0 device 0 chunk 0 -> tensor<1x16x32xf32> attributes {activation_bytes = 33024 : i64, flops = array<i64: 410624, 821248>, passes = [#sluice.pass<F>, #sluice.pass<BW>]} {
      %emb = sluice.embedding {vocab = 100, positions = 64} : tensor<1x16x32xf32>
      %x = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, ffn = 128, norm = layernorm, mlp = gelu, bias} : tensor<1x16x32xf32>
      sluice.yield %x : tensor<1x16x32xf32>
    }
    %1 = sluice.stage @s1 device 1 chunk 0 (%0 : tensor<1x16x32xf32>) -> tensor<f32> attributes {activation_bytes = 41472 : i64, flops = array<i64: 513024, 1026048>, passes = [#sluice.pass<F>, #sluice.pass<BW>]} {
    ^bb0(%arg0: tensor<1x16x32xf32>):
      %x = sluice.transformer_layer %arg0 {heads = 4, kv_heads = 4, ffn = 128, norm = layernorm, mlp = gelu, bias} : tensor<1x16x32xf32>
      %loss = sluice.output_layer %x {vocab = 100, norm = layernorm} : tensor<1x16x32xf32> -> tensor<f32>
      sluice.yield %loss : tensor<f32>
    }
    sluice.return %1 : tensor<f32>
  }
  sluice.program @plan for @tiny {devices = 2, microbatches = 12, slices = 1, schedule = "1f1b"} dp 2 {
    sluice.device 0 {
      sluice.exec F @s0 {mb = 0, slice = 0}
      sluice.send F @s0 {mb = 0, slice = 0} to 1
      sluice.repeat 11 mb_step 1 {
        sluice.exec F @s0 {mb = 1, slice = 0}
        sluice.send F @s0 {mb = 1, slice = 0} to 1
        sluice.recv BW @s1 {mb = 0, slice = 0} from 1
        sluice.exec BW @s0 {mb = 0, slice = 0}
      }
      sluice.recv BW @s1 {mb = 11, slice = 0} from 1
      sluice.exec BW @s0 {mb = 11, slice = 0}
      sluice.grad_sync @s0
    }
    sluice.device 1 {
      sluice.repeat 11 mb_step 1 {
        sluice.recv F @s0 {mb = 0, slice = 0} from 0
        sluice.exec F @s1 {mb = 0, slice = 0}
        sluice.exec BW @s1 {mb = 0, slice = 0}
        sluice.send BW @s1 {mb = 0, slice = 0} to 0
      }
      sluice.recv F @s0 {mb = 11, slice = 0} from 0
      sluice.exec F @s1 {mb = 11, slice = 0}
      sluice.exec BW @s1 {mb = 11, slice = 0}
      sluice.grad_sync @s1
      sluice.send BW @s1 {mb = 11, slice = 0} to 0
    }
  }
}

