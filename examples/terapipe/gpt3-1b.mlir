// GPT3-1B of Li et al., 2021, Table 1 settings (1)-(3): N = 24 layers,
// H = 2048, sequence L = 2048, as in Brown et al. (2020): LayerNorm,
// GELU MLP of 4H, biases, learned positions, GPT-2 vocabulary (50257),
// input and output embeddings tied.
// Heads are not in the table: 16 heads of 128 (GPT-3's head size 128).
// Batch sizes, data and pipeline shapes of each setting are training options,
// not part of the model.

sluice.model @terapipe_gpt3_1b {seq_len = 2048, micro_batch = 1, dtype = bf16} {
  %emb = sluice.embedding {vocab = 50257, positions = 2048} : tensor<1x2048x2048xbf16>
  %x = sluice.transformer_layer %emb {heads = 16, kv_heads = 16, ffn = 8192, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x2048xbf16>
  %x_0 = sluice.transformer_layer %x {heads = 16, kv_heads = 16, ffn = 8192, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x2048xbf16>
  %x_1 = sluice.transformer_layer %x_0 {heads = 16, kv_heads = 16, ffn = 8192, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x2048xbf16>
  %x_2 = sluice.transformer_layer %x_1 {heads = 16, kv_heads = 16, ffn = 8192, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x2048xbf16>
  %x_3 = sluice.transformer_layer %x_2 {heads = 16, kv_heads = 16, ffn = 8192, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x2048xbf16>
  %x_4 = sluice.transformer_layer %x_3 {heads = 16, kv_heads = 16, ffn = 8192, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x2048xbf16>
  %x_5 = sluice.transformer_layer %x_4 {heads = 16, kv_heads = 16, ffn = 8192, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x2048xbf16>
  %x_6 = sluice.transformer_layer %x_5 {heads = 16, kv_heads = 16, ffn = 8192, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x2048xbf16>
  %x_7 = sluice.transformer_layer %x_6 {heads = 16, kv_heads = 16, ffn = 8192, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x2048xbf16>
  %x_8 = sluice.transformer_layer %x_7 {heads = 16, kv_heads = 16, ffn = 8192, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x2048xbf16>
  %x_9 = sluice.transformer_layer %x_8 {heads = 16, kv_heads = 16, ffn = 8192, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x2048xbf16>
  %x_10 = sluice.transformer_layer %x_9 {heads = 16, kv_heads = 16, ffn = 8192, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x2048xbf16>
  %x_11 = sluice.transformer_layer %x_10 {heads = 16, kv_heads = 16, ffn = 8192, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x2048xbf16>
  %x_12 = sluice.transformer_layer %x_11 {heads = 16, kv_heads = 16, ffn = 8192, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x2048xbf16>
  %x_13 = sluice.transformer_layer %x_12 {heads = 16, kv_heads = 16, ffn = 8192, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x2048xbf16>
  %x_14 = sluice.transformer_layer %x_13 {heads = 16, kv_heads = 16, ffn = 8192, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x2048xbf16>
  %x_15 = sluice.transformer_layer %x_14 {heads = 16, kv_heads = 16, ffn = 8192, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x2048xbf16>
  %x_16 = sluice.transformer_layer %x_15 {heads = 16, kv_heads = 16, ffn = 8192, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x2048xbf16>
  %x_17 = sluice.transformer_layer %x_16 {heads = 16, kv_heads = 16, ffn = 8192, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x2048xbf16>
  %x_18 = sluice.transformer_layer %x_17 {heads = 16, kv_heads = 16, ffn = 8192, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x2048xbf16>
  %x_19 = sluice.transformer_layer %x_18 {heads = 16, kv_heads = 16, ffn = 8192, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x2048xbf16>
  %x_20 = sluice.transformer_layer %x_19 {heads = 16, kv_heads = 16, ffn = 8192, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x2048xbf16>
  %x_21 = sluice.transformer_layer %x_20 {heads = 16, kv_heads = 16, ffn = 8192, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x2048xbf16>
  %x_22 = sluice.transformer_layer %x_21 {heads = 16, kv_heads = 16, ffn = 8192, norm = layernorm, mlp = gelu, bias} : tensor<1x2048x2048xbf16>
  %loss = sluice.output_layer %x_22 {vocab = 50257, norm = layernorm, tied} : tensor<1x2048x2048xbf16> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}
