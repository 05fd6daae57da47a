// ≈16B model of Yeung et al., 2024, Table 2
// (V-Half experiments on 24 pipeline devices): 48 layers, 40 heads,
// hidden 5120.
//
// GPT-like (Megatron-LM): LayerNorm, GELU MLP of 4 x hidden, biases,
// learned positions, untied input and output embeddings (§6.1).
// The paper sweeps the vocabulary over 32k / 64k / 128k / 256k and the
// sequence over 2048 / 4096 (micro-batch 1, 128 microbatches); this file
// holds 128k and 2048. Use --seq-len 4096 for the other sequence (the
// position table holds 4096).

sluice.model @vp_table2_16b {seq_len = 2048, micro_batch = 1, dtype = bf16} {
  %emb = sluice.embedding {vocab = 128000, positions = 4096} : tensor<1x2048x5120xbf16>
  %x = sluice.transformer_layer %emb {heads = 40, kv_heads = 40, ffn = 20480, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x5120xbf16>
  %x_0 = sluice.transformer_layer %x {heads = 40, kv_heads = 40, ffn = 20480, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x5120xbf16>
  %x_1 = sluice.transformer_layer %x_0 {heads = 40, kv_heads = 40, ffn = 20480, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x5120xbf16>
  %x_2 = sluice.transformer_layer %x_1 {heads = 40, kv_heads = 40, ffn = 20480, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x5120xbf16>
  %x_3 = sluice.transformer_layer %x_2 {heads = 40, kv_heads = 40, ffn = 20480, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x5120xbf16>
  %x_4 = sluice.transformer_layer %x_3 {heads = 40, kv_heads = 40, ffn = 20480, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x5120xbf16>
  %x_5 = sluice.transformer_layer %x_4 {heads = 40, kv_heads = 40, ffn = 20480, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x5120xbf16>
  %x_6 = sluice.transformer_layer %x_5 {heads = 40, kv_heads = 40, ffn = 20480, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x5120xbf16>
  %x_7 = sluice.transformer_layer %x_6 {heads = 40, kv_heads = 40, ffn = 20480, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x5120xbf16>
  %x_8 = sluice.transformer_layer %x_7 {heads = 40, kv_heads = 40, ffn = 20480, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x5120xbf16>
  %x_9 = sluice.transformer_layer %x_8 {heads = 40, kv_heads = 40, ffn = 20480, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x5120xbf16>
  %x_10 = sluice.transformer_layer %x_9 {heads = 40, kv_heads = 40, ffn = 20480, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x5120xbf16>
  %x_11 = sluice.transformer_layer %x_10 {heads = 40, kv_heads = 40, ffn = 20480, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x5120xbf16>
  %x_12 = sluice.transformer_layer %x_11 {heads = 40, kv_heads = 40, ffn = 20480, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x5120xbf16>
  %x_13 = sluice.transformer_layer %x_12 {heads = 40, kv_heads = 40, ffn = 20480, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x5120xbf16>
  %x_14 = sluice.transformer_layer %x_13 {heads = 40, kv_heads = 40, ffn = 20480, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x5120xbf16>
  %x_15 = sluice.transformer_layer %x_14 {heads = 40, kv_heads = 40, ffn = 20480, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x5120xbf16>
  %x_16 = sluice.transformer_layer %x_15 {heads = 40, kv_heads = 40, ffn = 20480, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x5120xbf16>
  %x_17 = sluice.transformer_layer %x_16 {heads = 40, kv_heads = 40, ffn = 20480, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x5120xbf16>
  %x_18 = sluice.transformer_layer %x_17 {heads = 40, kv_heads = 40, ffn = 20480, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x5120xbf16>
  %x_19 = sluice.transformer_layer %x_18 {heads = 40, kv_heads = 40, ffn = 20480, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x5120xbf16>
  %x_20 = sluice.transformer_layer %x_19 {heads = 40, kv_heads = 40, ffn = 20480, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x5120xbf16>
  %x_21 = sluice.transformer_layer %x_20 {heads = 40, kv_heads = 40, ffn = 20480, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x5120xbf16>
  %x_22 = sluice.transformer_layer %x_21 {heads = 40, kv_heads = 40, ffn = 20480, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x5120xbf16>
  %x_23 = sluice.transformer_layer %x_22 {heads = 40, kv_heads = 40, ffn = 20480, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x5120xbf16>
  %x_24 = sluice.transformer_layer %x_23 {heads = 40, kv_heads = 40, ffn = 20480, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x5120xbf16>
  %x_25 = sluice.transformer_layer %x_24 {heads = 40, kv_heads = 40, ffn = 20480, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x5120xbf16>
  %x_26 = sluice.transformer_layer %x_25 {heads = 40, kv_heads = 40, ffn = 20480, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x5120xbf16>
  %x_27 = sluice.transformer_layer %x_26 {heads = 40, kv_heads = 40, ffn = 20480, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x5120xbf16>
  %x_28 = sluice.transformer_layer %x_27 {heads = 40, kv_heads = 40, ffn = 20480, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x5120xbf16>
  %x_29 = sluice.transformer_layer %x_28 {heads = 40, kv_heads = 40, ffn = 20480, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x5120xbf16>
  %x_30 = sluice.transformer_layer %x_29 {heads = 40, kv_heads = 40, ffn = 20480, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x5120xbf16>
  %x_31 = sluice.transformer_layer %x_30 {heads = 40, kv_heads = 40, ffn = 20480, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x5120xbf16>
  %x_32 = sluice.transformer_layer %x_31 {heads = 40, kv_heads = 40, ffn = 20480, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x5120xbf16>
  %x_33 = sluice.transformer_layer %x_32 {heads = 40, kv_heads = 40, ffn = 20480, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x5120xbf16>
  %x_34 = sluice.transformer_layer %x_33 {heads = 40, kv_heads = 40, ffn = 20480, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x5120xbf16>
  %x_35 = sluice.transformer_layer %x_34 {heads = 40, kv_heads = 40, ffn = 20480, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x5120xbf16>
  %x_36 = sluice.transformer_layer %x_35 {heads = 40, kv_heads = 40, ffn = 20480, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x5120xbf16>
  %x_37 = sluice.transformer_layer %x_36 {heads = 40, kv_heads = 40, ffn = 20480, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x5120xbf16>
  %x_38 = sluice.transformer_layer %x_37 {heads = 40, kv_heads = 40, ffn = 20480, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x5120xbf16>
  %x_39 = sluice.transformer_layer %x_38 {heads = 40, kv_heads = 40, ffn = 20480, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x5120xbf16>
  %x_40 = sluice.transformer_layer %x_39 {heads = 40, kv_heads = 40, ffn = 20480, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x5120xbf16>
  %x_41 = sluice.transformer_layer %x_40 {heads = 40, kv_heads = 40, ffn = 20480, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x5120xbf16>
  %x_42 = sluice.transformer_layer %x_41 {heads = 40, kv_heads = 40, ffn = 20480, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x5120xbf16>
  %x_43 = sluice.transformer_layer %x_42 {heads = 40, kv_heads = 40, ffn = 20480, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x5120xbf16>
  %x_44 = sluice.transformer_layer %x_43 {heads = 40, kv_heads = 40, ffn = 20480, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x5120xbf16>
  %x_45 = sluice.transformer_layer %x_44 {heads = 40, kv_heads = 40, ffn = 20480, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x5120xbf16>
  %x_46 = sluice.transformer_layer %x_45 {heads = 40, kv_heads = 40, ffn = 20480, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x5120xbf16>
  %loss = sluice.output_layer %x_46 {vocab = 128000, norm = layernorm} : tensor<1x2048x5120xbf16> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}
