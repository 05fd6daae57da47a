sluice.model @tiny {seq_len = 16, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 100, positions = 64} : tensor<1x16x32xf32>
  %x0 = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, ffn = 128, norm = layernorm, mlp = gelu, bias} : tensor<1x16x32xf32>
  %x1 = sluice.transformer_layer %x0 {heads = 4, kv_heads = 4, ffn = 128, norm = layernorm, mlp = gelu, bias} : tensor<1x16x32xf32>
  %loss = sluice.output_layer %x1 {vocab = 100, norm = layernorm} : tensor<1x16x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}
