// A Llama-shaped model small enough to train in tests: 8 layers with
// RMSNorm, SwiGLU feed-forward blocks and grouped-query attention (4 query
// heads sharing 2 key/value heads), rotary positions, no biases and no
// position table; hidden 32, 2 sequences of 16 tokens per microbatch, a
// 64-token vocabulary.
sluice.model @tiny_llama {seq_len = 16, micro_batch = 2, dtype = f32} {
  %emb = sluice.embedding {vocab = 64} : tensor<2x16x32xf32>
  %x0 = sluice.transformer_layer %emb {heads = 4, kv_heads = 2, ffn = 48, norm = rmsnorm, mlp = swiglu, rope_theta = 10000.0} : tensor<2x16x32xf32>
  %x1 = sluice.transformer_layer %x0 {heads = 4, kv_heads = 2, ffn = 48, norm = rmsnorm, mlp = swiglu, rope_theta = 10000.0} : tensor<2x16x32xf32>
  %x2 = sluice.transformer_layer %x1 {heads = 4, kv_heads = 2, ffn = 48, norm = rmsnorm, mlp = swiglu, rope_theta = 10000.0} : tensor<2x16x32xf32>
  %x3 = sluice.transformer_layer %x2 {heads = 4, kv_heads = 2, ffn = 48, norm = rmsnorm, mlp = swiglu, rope_theta = 10000.0} : tensor<2x16x32xf32>
  %x4 = sluice.transformer_layer %x3 {heads = 4, kv_heads = 2, ffn = 48, norm = rmsnorm, mlp = swiglu, rope_theta = 10000.0} : tensor<2x16x32xf32>
  %x5 = sluice.transformer_layer %x4 {heads = 4, kv_heads = 2, ffn = 48, norm = rmsnorm, mlp = swiglu, rope_theta = 10000.0} : tensor<2x16x32xf32>
  %x6 = sluice.transformer_layer %x5 {heads = 4, kv_heads = 2, ffn = 48, norm = rmsnorm, mlp = swiglu, rope_theta = 10000.0} : tensor<2x16x32xf32>
  %x7 = sluice.transformer_layer %x6 {heads = 4, kv_heads = 2, ffn = 48, norm = rmsnorm, mlp = swiglu, rope_theta = 10000.0} : tensor<2x16x32xf32>
  %loss = sluice.output_layer %x7 {vocab = 64, norm = rmsnorm} : tensor<2x16x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}
