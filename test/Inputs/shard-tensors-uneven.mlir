// A layer that does not split over tensor-parallel shards (sluice-shard-tensors).
sluice.model @uneven {seq_len = 16, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 100} : tensor<1x16x48xf32>
  %x0 = sluice.transformer_layer %emb {heads = 6, kv_heads = 3, ffn = 64, norm = rmsnorm, mlp = swiglu} : tensor<1x16x48xf32>
  %x1 = sluice.transformer_layer %x0 {heads = 6, kv_heads = 6, ffn = 96, norm = layernorm, mlp = gelu} : tensor<1x16x48xf32>
  %loss = sluice.output_layer %x1 {vocab = 100, norm = rmsnorm} : tensor<1x16x48xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}
