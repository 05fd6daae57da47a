// DeepSeek-V3's block (Liu et al., 2024, sections 2.1.1 and 2.1.2) in a
// model small enough to train in tests: multi-head latent attention in
// every layer (query latent 6, key/value latent 8, 4 heads of 8 without
// positions and 4 rotated in adjacent pairs, values of 6); a dense first
// layer (first_k_dense_replace = 1), then 7 sparse layers of 8 SwiGLU
// experts of width 16 in 4 groups, each token routed to 2 of them from
// its 2 best groups by sigmoid scores plus the router's bias,
// renormalised and scaled by 2.5, beside an ungated shared expert of
// width 24. The bias moves by 0.02 a step (bias_update; the paper's
// gamma, large here so that three steps change the choices), so every
// rank must sum the same load.
sluice.model @tiny_deepseek_moe {seq_len = 16, micro_batch = 2, dtype = f32} {
  %emb = sluice.embedding {vocab = 64} : tensor<2x16x32xf32>
  %x0 = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, head_dim = 12, v_head_dim = 6, ffn = 48, norm = rmsnorm, mlp = swiglu, rope_theta = 10000.0, kv_lora_rank = 8, q_lora_rank = 6, rope_head_dim = 4, rope_interleave} : tensor<2x16x32xf32>
  %x1 = sluice.transformer_layer %x0 {heads = 4, kv_heads = 4, head_dim = 12, v_head_dim = 6, ffn = 16, norm = rmsnorm, mlp = swiglu, rope_theta = 10000.0, kv_lora_rank = 8, q_lora_rank = 6, rope_head_dim = 4, rope_interleave, experts = 8, top_k = 2, norm_top_k, shared_ffn = 24, router = sigmoid, expert_groups = 4, top_groups = 2, routed_scale = 2.5, shared_gate = false, bias_update = 0.02} : tensor<2x16x32xf32>
  %x2 = sluice.transformer_layer %x1 {heads = 4, kv_heads = 4, head_dim = 12, v_head_dim = 6, ffn = 16, norm = rmsnorm, mlp = swiglu, rope_theta = 10000.0, kv_lora_rank = 8, q_lora_rank = 6, rope_head_dim = 4, rope_interleave, experts = 8, top_k = 2, norm_top_k, shared_ffn = 24, router = sigmoid, expert_groups = 4, top_groups = 2, routed_scale = 2.5, shared_gate = false, bias_update = 0.02} : tensor<2x16x32xf32>
  %x3 = sluice.transformer_layer %x2 {heads = 4, kv_heads = 4, head_dim = 12, v_head_dim = 6, ffn = 16, norm = rmsnorm, mlp = swiglu, rope_theta = 10000.0, kv_lora_rank = 8, q_lora_rank = 6, rope_head_dim = 4, rope_interleave, experts = 8, top_k = 2, norm_top_k, shared_ffn = 24, router = sigmoid, expert_groups = 4, top_groups = 2, routed_scale = 2.5, shared_gate = false, bias_update = 0.02} : tensor<2x16x32xf32>
  %x4 = sluice.transformer_layer %x3 {heads = 4, kv_heads = 4, head_dim = 12, v_head_dim = 6, ffn = 16, norm = rmsnorm, mlp = swiglu, rope_theta = 10000.0, kv_lora_rank = 8, q_lora_rank = 6, rope_head_dim = 4, rope_interleave, experts = 8, top_k = 2, norm_top_k, shared_ffn = 24, router = sigmoid, expert_groups = 4, top_groups = 2, routed_scale = 2.5, shared_gate = false, bias_update = 0.02} : tensor<2x16x32xf32>
  %x5 = sluice.transformer_layer %x4 {heads = 4, kv_heads = 4, head_dim = 12, v_head_dim = 6, ffn = 16, norm = rmsnorm, mlp = swiglu, rope_theta = 10000.0, kv_lora_rank = 8, q_lora_rank = 6, rope_head_dim = 4, rope_interleave, experts = 8, top_k = 2, norm_top_k, shared_ffn = 24, router = sigmoid, expert_groups = 4, top_groups = 2, routed_scale = 2.5, shared_gate = false, bias_update = 0.02} : tensor<2x16x32xf32>
  %x6 = sluice.transformer_layer %x5 {heads = 4, kv_heads = 4, head_dim = 12, v_head_dim = 6, ffn = 16, norm = rmsnorm, mlp = swiglu, rope_theta = 10000.0, kv_lora_rank = 8, q_lora_rank = 6, rope_head_dim = 4, rope_interleave, experts = 8, top_k = 2, norm_top_k, shared_ffn = 24, router = sigmoid, expert_groups = 4, top_groups = 2, routed_scale = 2.5, shared_gate = false, bias_update = 0.02} : tensor<2x16x32xf32>
  %x7 = sluice.transformer_layer %x6 {heads = 4, kv_heads = 4, head_dim = 12, v_head_dim = 6, ffn = 16, norm = rmsnorm, mlp = swiglu, rope_theta = 10000.0, kv_lora_rank = 8, q_lora_rank = 6, rope_head_dim = 4, rope_interleave, experts = 8, top_k = 2, norm_top_k, shared_ffn = 24, router = sigmoid, expert_groups = 4, top_groups = 2, routed_scale = 2.5, shared_gate = false, bias_update = 0.02} : tensor<2x16x32xf32>
  %loss = sluice.output_layer %x7 {vocab = 64, norm = rmsnorm} : tensor<2x16x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}
