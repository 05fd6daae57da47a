// A small model with long sequences, for token slicing: 8 GPT layers of
// hidden 32 on 128-token sequences, so attention over the prefix is a
// large part of a layer and equal-FLOP slices are not equal lengths.
sluice.model @tiny_long {seq_len = 128, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 64, positions = 128} : tensor<1x128x32xf32>
  %x0 = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, ffn = 64, norm = layernorm, mlp = gelu, bias} : tensor<1x128x32xf32>
  %x1 = sluice.transformer_layer %x0 {heads = 4, kv_heads = 4, ffn = 64, norm = layernorm, mlp = gelu, bias} : tensor<1x128x32xf32>
  %x2 = sluice.transformer_layer %x1 {heads = 4, kv_heads = 4, ffn = 64, norm = layernorm, mlp = gelu, bias} : tensor<1x128x32xf32>
  %x3 = sluice.transformer_layer %x2 {heads = 4, kv_heads = 4, ffn = 64, norm = layernorm, mlp = gelu, bias} : tensor<1x128x32xf32>
  %x4 = sluice.transformer_layer %x3 {heads = 4, kv_heads = 4, ffn = 64, norm = layernorm, mlp = gelu, bias} : tensor<1x128x32xf32>
  %x5 = sluice.transformer_layer %x4 {heads = 4, kv_heads = 4, ffn = 64, norm = layernorm, mlp = gelu, bias} : tensor<1x128x32xf32>
  %x6 = sluice.transformer_layer %x5 {heads = 4, kv_heads = 4, ffn = 64, norm = layernorm, mlp = gelu, bias} : tensor<1x128x32xf32>
  %x7 = sluice.transformer_layer %x6 {heads = 4, kv_heads = 4, ffn = 64, norm = layernorm, mlp = gelu, bias} : tensor<1x128x32xf32>
  %loss = sluice.output_layer %x7 {vocab = 64, norm = layernorm} : tensor<1x128x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}
