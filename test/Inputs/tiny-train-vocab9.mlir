// A model small enough to train in tests: 8 GPT layers, hidden 32, 2
// sequences of 16 tokens per microbatch, a 9-token vocabulary: on 4 devices (16 padded rows, 4 each) the last holds padding only.
sluice.model @tiny_train {seq_len = 16, micro_batch = 2, dtype = f32} {
  %emb = sluice.embedding {vocab = 9, positions = 16} : tensor<2x16x32xf32>
  %x0 = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, ffn = 64, norm = layernorm, mlp = gelu, bias} : tensor<2x16x32xf32>
  %x1 = sluice.transformer_layer %x0 {heads = 4, kv_heads = 4, ffn = 64, norm = layernorm, mlp = gelu, bias} : tensor<2x16x32xf32>
  %x2 = sluice.transformer_layer %x1 {heads = 4, kv_heads = 4, ffn = 64, norm = layernorm, mlp = gelu, bias} : tensor<2x16x32xf32>
  %x3 = sluice.transformer_layer %x2 {heads = 4, kv_heads = 4, ffn = 64, norm = layernorm, mlp = gelu, bias} : tensor<2x16x32xf32>
  %x4 = sluice.transformer_layer %x3 {heads = 4, kv_heads = 4, ffn = 64, norm = layernorm, mlp = gelu, bias} : tensor<2x16x32xf32>
  %x5 = sluice.transformer_layer %x4 {heads = 4, kv_heads = 4, ffn = 64, norm = layernorm, mlp = gelu, bias} : tensor<2x16x32xf32>
  %x6 = sluice.transformer_layer %x5 {heads = 4, kv_heads = 4, ffn = 64, norm = layernorm, mlp = gelu, bias} : tensor<2x16x32xf32>
  %x7 = sluice.transformer_layer %x6 {heads = 4, kv_heads = 4, ffn = 64, norm = layernorm, mlp = gelu, bias} : tensor<2x16x32xf32>
  %loss = sluice.output_layer %x7 {vocab = 9, norm = layernorm} : tensor<2x16x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}
