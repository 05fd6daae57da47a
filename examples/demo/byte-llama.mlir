// The demo's Llama-shaped model: a byte-level model (vocabulary 256) with
// Llama's layer: RMSNorm, grouped-query attention (4 query heads sharing 2
// key/value heads), rotary positions and a SwiGLU feed-forward block; 4
// layers of hidden 64 on sequences of 64 bytes, 2 per microbatch.
// `bash setup.sh demo` trains it token-sliced with Seq1F1B over 4 ranks.
sluice.model @byte_llama {seq_len = 64, micro_batch = 2, dtype = f32} {
  %emb = sluice.embedding {vocab = 256} : tensor<2x64x64xf32>
  %x0 = sluice.transformer_layer %emb {heads = 4, kv_heads = 2, ffn = 176, norm = rmsnorm, mlp = swiglu, rope_theta = 10000.0} : tensor<2x64x64xf32>
  %x1 = sluice.transformer_layer %x0 {heads = 4, kv_heads = 2, ffn = 176, norm = rmsnorm, mlp = swiglu, rope_theta = 10000.0} : tensor<2x64x64xf32>
  %x2 = sluice.transformer_layer %x1 {heads = 4, kv_heads = 2, ffn = 176, norm = rmsnorm, mlp = swiglu, rope_theta = 10000.0} : tensor<2x64x64xf32>
  %x3 = sluice.transformer_layer %x2 {heads = 4, kv_heads = 2, ffn = 176, norm = rmsnorm, mlp = swiglu, rope_theta = 10000.0} : tensor<2x64x64xf32>
  %loss = sluice.output_layer %x3 {vocab = 256, norm = rmsnorm} : tensor<2x64x64xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}
