sluice.model @bad {seq_len = 16, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 100} : tensor<1x16x30xf32>
  %x0 = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, ffn = 128, norm = layernorm, mlp = gelu} : tensor<1x16x30xf32>
  %loss = sluice.output_layer %x0 {vocab = 100, norm = layernorm} : tensor<1x16x30xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}
