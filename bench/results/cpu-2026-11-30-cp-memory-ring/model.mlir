sluice.model @cp_memory {seq_len = 2048, micro_batch = 1, dtype = f32} {
  %x0 = sluice.embedding {vocab = 1024} : tensor<1x2048x128xf32>
  %x1 = sluice.transformer_layer %x0 {heads = 4, kv_heads = 2, ffn = 512, norm = rmsnorm, mlp = swiglu, rope_theta = 10000.0} : tensor<1x2048x128xf32>
  %x2 = sluice.transformer_layer %x1 {heads = 4, kv_heads = 2, ffn = 512, norm = rmsnorm, mlp = swiglu, rope_theta = 10000.0} : tensor<1x2048x128xf32>
  %x3 = sluice.transformer_layer %x2 {heads = 4, kv_heads = 2, ffn = 512, norm = rmsnorm, mlp = swiglu, rope_theta = 10000.0} : tensor<1x2048x128xf32>
  %x4 = sluice.transformer_layer %x3 {heads = 4, kv_heads = 2, ffn = 512, norm = rmsnorm, mlp = swiglu, rope_theta = 10000.0} : tensor<1x2048x128xf32>
  %loss = sluice.output_layer %x4 {vocab = 1024, norm = rmsnorm} : tensor<1x2048x128xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}
