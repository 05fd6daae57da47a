// The demo's model: a byte-level GPT (vocabulary 256: one token per byte of
// text, see tools/sluice-tokenize), 4 layers of hidden 64, trained on
// sequences of 64 bytes, 2 per microbatch. Small enough to train on CPUs in
// seconds; `bash setup.sh demo` pipelines it over 4 ranks.
sluice.model @byte_gpt {seq_len = 64, micro_batch = 2, dtype = f32} {
  %emb = sluice.embedding {vocab = 256, positions = 64} : tensor<2x64x64xf32>
  %x0 = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, ffn = 256, norm = layernorm, mlp = gelu, bias} : tensor<2x64x64xf32>
  %x1 = sluice.transformer_layer %x0 {heads = 4, kv_heads = 4, ffn = 256, norm = layernorm, mlp = gelu, bias} : tensor<2x64x64xf32>
  %x2 = sluice.transformer_layer %x1 {heads = 4, kv_heads = 4, ffn = 256, norm = layernorm, mlp = gelu, bias} : tensor<2x64x64xf32>
  %x3 = sluice.transformer_layer %x2 {heads = 4, kv_heads = 4, ffn = 256, norm = layernorm, mlp = gelu, bias} : tensor<2x64x64xf32>
  %loss = sluice.output_layer %x3 {vocab = 256, norm = layernorm} : tensor<2x64x64xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}
