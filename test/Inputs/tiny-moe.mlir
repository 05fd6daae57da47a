// A mixture-of-experts model small enough to train in tests: 8 layers
// shaped as tiny-llama.mlir's, each feed-forward block 4 SwiGLU experts of
// width 24 with 2 per token (norm_top_k on the even layers, the softmax's
// weights as they are on the odd ones) but layer 3, a dense block among
// them (as Qwen3-MoE's mlp_only_layers make), with the load-balancing loss
// (aux_loss) over its 7 sparse layers, large enough that a wrong count on
// any stage moves the routers' gradients past the tolerance.
sluice.model @tiny_moe {seq_len = 16, micro_batch = 2, dtype = f32} {
  %emb = sluice.embedding {vocab = 64} : tensor<2x16x32xf32>
  %x0 = sluice.transformer_layer %emb {heads = 4, kv_heads = 2, ffn = 24, norm = rmsnorm, mlp = swiglu, rope_theta = 10000.0, experts = 4, top_k = 2, norm_top_k, aux_loss = 0.1} : tensor<2x16x32xf32>
  %x1 = sluice.transformer_layer %x0 {heads = 4, kv_heads = 2, ffn = 24, norm = rmsnorm, mlp = swiglu, rope_theta = 10000.0, experts = 4, top_k = 2, aux_loss = 0.1} : tensor<2x16x32xf32>
  %x2 = sluice.transformer_layer %x1 {heads = 4, kv_heads = 2, ffn = 24, norm = rmsnorm, mlp = swiglu, rope_theta = 10000.0, experts = 4, top_k = 2, norm_top_k, aux_loss = 0.1} : tensor<2x16x32xf32>
  %x3 = sluice.transformer_layer %x2 {heads = 4, kv_heads = 2, ffn = 48, norm = rmsnorm, mlp = swiglu, rope_theta = 10000.0} : tensor<2x16x32xf32>
  %x4 = sluice.transformer_layer %x3 {heads = 4, kv_heads = 2, ffn = 24, norm = rmsnorm, mlp = swiglu, rope_theta = 10000.0, experts = 4, top_k = 2, norm_top_k, aux_loss = 0.1} : tensor<2x16x32xf32>
  %x5 = sluice.transformer_layer %x4 {heads = 4, kv_heads = 2, ffn = 24, norm = rmsnorm, mlp = swiglu, rope_theta = 10000.0, experts = 4, top_k = 2, aux_loss = 0.1} : tensor<2x16x32xf32>
  %x6 = sluice.transformer_layer %x5 {heads = 4, kv_heads = 2, ffn = 24, norm = rmsnorm, mlp = swiglu, rope_theta = 10000.0, experts = 4, top_k = 2, norm_top_k, aux_loss = 0.1} : tensor<2x16x32xf32>
  %x7 = sluice.transformer_layer %x6 {heads = 4, kv_heads = 2, ffn = 24, norm = rmsnorm, mlp = swiglu, rope_theta = 10000.0, experts = 4, top_k = 2, aux_loss = 0.1} : tensor<2x16x32xf32>
  %loss = sluice.output_layer %x7 {vocab = 64, norm = rmsnorm} : tensor<2x16x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}
