// The search-ranking check's model (bench/search-ranking.sh): a GPT shape
// sized for 2 CPU cores -- 8 layers of hidden 256 over 128-token sequences,
// vocabulary 8192 -- whose passes take milliseconds, so schedules differ.
sluice.model @rank_gpt {seq_len = 128, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 8192, positions = 128} : tensor<1x128x256xf32>
  %x0 = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, ffn = 1024, norm = layernorm, mlp = gelu, bias} : tensor<1x128x256xf32>
  %x1 = sluice.transformer_layer %x0 {heads = 4, kv_heads = 4, ffn = 1024, norm = layernorm, mlp = gelu, bias} : tensor<1x128x256xf32>
  %x2 = sluice.transformer_layer %x1 {heads = 4, kv_heads = 4, ffn = 1024, norm = layernorm, mlp = gelu, bias} : tensor<1x128x256xf32>
  %x3 = sluice.transformer_layer %x2 {heads = 4, kv_heads = 4, ffn = 1024, norm = layernorm, mlp = gelu, bias} : tensor<1x128x256xf32>
  %x4 = sluice.transformer_layer %x3 {heads = 4, kv_heads = 4, ffn = 1024, norm = layernorm, mlp = gelu, bias} : tensor<1x128x256xf32>
  %x5 = sluice.transformer_layer %x4 {heads = 4, kv_heads = 4, ffn = 1024, norm = layernorm, mlp = gelu, bias} : tensor<1x128x256xf32>
  %x6 = sluice.transformer_layer %x5 {heads = 4, kv_heads = 4, ffn = 1024, norm = layernorm, mlp = gelu, bias} : tensor<1x128x256xf32>
  %x7 = sluice.transformer_layer %x6 {heads = 4, kv_heads = 4, ffn = 1024, norm = layernorm, mlp = gelu, bias} : tensor<1x128x256xf32>
  %loss = sluice.output_layer %x7 {vocab = 8192, norm = layernorm} : tensor<1x128x256xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}
