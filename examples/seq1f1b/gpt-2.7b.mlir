// 2.7B GPT of Sun et al., 2024, Table 1: 32 layers, 32 heads, hidden 2560;
// sequence 16k / 24k / 32k (this file: 16k), PP 8, TP 1, 32 / 64 microbatches.
//
// Tied input and output embeddings (Megatron-LM's default for GPT).
// The paper does not give the vocabulary or the position encoding: the
// GPT-2 vocabulary (50257) is assumed, and no learned position table (a
// table of 128k positions would add hundreds of millions of parameters
// the paper's sizes do not include). Other sequences: --seq-len.

sluice.model @seq1f1b_gpt_2_7b {seq_len = 16384, micro_batch = 1, dtype = bf16} {
  %emb = sluice.embedding {vocab = 50257} : tensor<1x16384x2560xbf16>
  %x = sluice.transformer_layer %emb {heads = 32, kv_heads = 32, ffn = 10240, norm = layernorm, mlp = gelu, bias} : tensor<1x16384x2560xbf16>
  %x_0 = sluice.transformer_layer %x {heads = 32, kv_heads = 32, ffn = 10240, norm = layernorm, mlp = gelu, bias} : tensor<1x16384x2560xbf16>
  %x_1 = sluice.transformer_layer %x_0 {heads = 32, kv_heads = 32, ffn = 10240, norm = layernorm, mlp = gelu, bias} : tensor<1x16384x2560xbf16>
  %x_2 = sluice.transformer_layer %x_1 {heads = 32, kv_heads = 32, ffn = 10240, norm = layernorm, mlp = gelu, bias} : tensor<1x16384x2560xbf16>
  %x_3 = sluice.transformer_layer %x_2 {heads = 32, kv_heads = 32, ffn = 10240, norm = layernorm, mlp = gelu, bias} : tensor<1x16384x2560xbf16>
  %x_4 = sluice.transformer_layer %x_3 {heads = 32, kv_heads = 32, ffn = 10240, norm = layernorm, mlp = gelu, bias} : tensor<1x16384x2560xbf16>
  %x_5 = sluice.transformer_layer %x_4 {heads = 32, kv_heads = 32, ffn = 10240, norm = layernorm, mlp = gelu, bias} : tensor<1x16384x2560xbf16>
  %x_6 = sluice.transformer_layer %x_5 {heads = 32, kv_heads = 32, ffn = 10240, norm = layernorm, mlp = gelu, bias} : tensor<1x16384x2560xbf16>
  %x_7 = sluice.transformer_layer %x_6 {heads = 32, kv_heads = 32, ffn = 10240, norm = layernorm, mlp = gelu, bias} : tensor<1x16384x2560xbf16>
  %x_8 = sluice.transformer_layer %x_7 {heads = 32, kv_heads = 32, ffn = 10240, norm = layernorm, mlp = gelu, bias} : tensor<1x16384x2560xbf16>
  %x_9 = sluice.transformer_layer %x_8 {heads = 32, kv_heads = 32, ffn = 10240, norm = layernorm, mlp = gelu, bias} : tensor<1x16384x2560xbf16>
  %x_10 = sluice.transformer_layer %x_9 {heads = 32, kv_heads = 32, ffn = 10240, norm = layernorm, mlp = gelu, bias} : tensor<1x16384x2560xbf16>
  %x_11 = sluice.transformer_layer %x_10 {heads = 32, kv_heads = 32, ffn = 10240, norm = layernorm, mlp = gelu, bias} : tensor<1x16384x2560xbf16>
  %x_12 = sluice.transformer_layer %x_11 {heads = 32, kv_heads = 32, ffn = 10240, norm = layernorm, mlp = gelu, bias} : tensor<1x16384x2560xbf16>
  %x_13 = sluice.transformer_layer %x_12 {heads = 32, kv_heads = 32, ffn = 10240, norm = layernorm, mlp = gelu, bias} : tensor<1x16384x2560xbf16>
  %x_14 = sluice.transformer_layer %x_13 {heads = 32, kv_heads = 32, ffn = 10240, norm = layernorm, mlp = gelu, bias} : tensor<1x16384x2560xbf16>
  %x_15 = sluice.transformer_layer %x_14 {heads = 32, kv_heads = 32, ffn = 10240, norm = layernorm, mlp = gelu, bias} : tensor<1x16384x2560xbf16>
  %x_16 = sluice.transformer_layer %x_15 {heads = 32, kv_heads = 32, ffn = 10240, norm = layernorm, mlp = gelu, bias} : tensor<1x16384x2560xbf16>
  %x_17 = sluice.transformer_layer %x_16 {heads = 32, kv_heads = 32, ffn = 10240, norm = layernorm, mlp = gelu, bias} : tensor<1x16384x2560xbf16>
  %x_18 = sluice.transformer_layer %x_17 {heads = 32, kv_heads = 32, ffn = 10240, norm = layernorm, mlp = gelu, bias} : tensor<1x16384x2560xbf16>
  %x_19 = sluice.transformer_layer %x_18 {heads = 32, kv_heads = 32, ffn = 10240, norm = layernorm, mlp = gelu, bias} : tensor<1x16384x2560xbf16>
  %x_20 = sluice.transformer_layer %x_19 {heads = 32, kv_heads = 32, ffn = 10240, norm = layernorm, mlp = gelu, bias} : tensor<1x16384x2560xbf16>
  %x_21 = sluice.transformer_layer %x_20 {heads = 32, kv_heads = 32, ffn = 10240, norm = layernorm, mlp = gelu, bias} : tensor<1x16384x2560xbf16>
  %x_22 = sluice.transformer_layer %x_21 {heads = 32, kv_heads = 32, ffn = 10240, norm = layernorm, mlp = gelu, bias} : tensor<1x16384x2560xbf16>
  %x_23 = sluice.transformer_layer %x_22 {heads = 32, kv_heads = 32, ffn = 10240, norm = layernorm, mlp = gelu, bias} : tensor<1x16384x2560xbf16>
  %x_24 = sluice.transformer_layer %x_23 {heads = 32, kv_heads = 32, ffn = 10240, norm = layernorm, mlp = gelu, bias} : tensor<1x16384x2560xbf16>
  %x_25 = sluice.transformer_layer %x_24 {heads = 32, kv_heads = 32, ffn = 10240, norm = layernorm, mlp = gelu, bias} : tensor<1x16384x2560xbf16>
  %x_26 = sluice.transformer_layer %x_25 {heads = 32, kv_heads = 32, ffn = 10240, norm = layernorm, mlp = gelu, bias} : tensor<1x16384x2560xbf16>
  %x_27 = sluice.transformer_layer %x_26 {heads = 32, kv_heads = 32, ffn = 10240, norm = layernorm, mlp = gelu, bias} : tensor<1x16384x2560xbf16>
  %x_28 = sluice.transformer_layer %x_27 {heads = 32, kv_heads = 32, ffn = 10240, norm = layernorm, mlp = gelu, bias} : tensor<1x16384x2560xbf16>
  %x_29 = sluice.transformer_layer %x_28 {heads = 32, kv_heads = 32, ffn = 10240, norm = layernorm, mlp = gelu, bias} : tensor<1x16384x2560xbf16>
  %x_30 = sluice.transformer_layer %x_29 {heads = 32, kv_heads = 32, ffn = 10240, norm = layernorm, mlp = gelu, bias} : tensor<1x16384x2560xbf16>
  %loss = sluice.output_layer %x_30 {vocab = 50257, norm = layernorm, tied} : tensor<1x16384x2560xbf16> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}
