// Every model-level op round-trips through its custom form and through the
// generic form, and both print back to the same custom form. A transformer
// layer's generic form holds its spec as the plan's JSON object of it.
// RUN: sluice-opt %s | sluice-opt | FileCheck %s
// RUN: sluice-opt %s -mlir-print-op-generic | sluice-opt | FileCheck %s
// RUN: sluice-opt %s -mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC

// CHECK-LABEL: sluice.model @gpt {seq_len = 16, micro_batch = 2, dtype = f32} {
// CHECK-NEXT:    %[[E:.+]] = sluice.embedding {vocab = 256, positions = 32} : tensor<2x16x32xf32>
// CHECK-NEXT:    %[[X:.+]] = sluice.transformer_layer %[[E]] {heads = 4, kv_heads = 4, ffn = 128, norm = layernorm, mlp = gelu, bias} : tensor<2x16x32xf32>
// CHECK-NEXT:    %[[L:.+]] = sluice.output_layer %[[X]] {vocab = 256, norm = layernorm} : tensor<2x16x32xf32> -> tensor<f32>
// CHECK-NEXT:    sluice.return %[[L]] : tensor<f32>
// CHECK-NEXT:  }
// GENERIC-LABEL: "sluice.model"() <{dtype = f32, micro_batch = 2 : i64, seq_len = 16 : i64, sym_name = "gpt"}>
// GENERIC:         "sluice.embedding"() <{positions = 32 : i64, vocab = 256 : i64}> ({
// GENERIC:         "sluice.transformer_layer"(%{{.+}}) <{spec = "{\22kind\22:\22transformer\22,\22heads\22:4,\22kv_heads\22:4,\22ffn\22:128,\22norm\22:\22layernorm\22,\22mlp\22:\22gelu\22,\22bias\22:true}"}>
// GENERIC:         "sluice.output_layer"(%{{.+}}) <{norm = #sluice<norm layernorm>, vocab = 256 : i64}>
// GENERIC:         "sluice.return"(%{{.+}}) : (tensor<f32>) -> ()
sluice.model @gpt {seq_len = 16, micro_batch = 2, dtype = f32} {
  %emb = sluice.embedding {vocab = 256, positions = 32} : tensor<2x16x32xf32>
  %x = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, ffn = 128, norm = layernorm, mlp = gelu, bias} : tensor<2x16x32xf32>
  %loss = sluice.output_layer %x {vocab = 256, norm = layernorm} : tensor<2x16x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// Grouped-query attention, an explicit head_dim, gated MLPs, rotary
// positions (a round base prints as written, others in full), Llama 3.1's
// scaled rotary frequencies, Qwen2's query/key/value biases, Gemma-2's
// sandwich norms and sliding window, OLMo-2's post-norm-only block with
// its projection norms, Gemma-3's linear scaling, a tied head. Entries
// parse in any order and print in the field table's; a default stated
// (pre_norms = true) is not printed.
// CHECK-LABEL: sluice.model @llama_like {seq_len = 8, micro_batch = 1, dtype = bf16} {
// CHECK:         sluice.transformer_layer %{{.+}} {heads = 4, kv_heads = 2, ffn = 96, norm = rmsnorm, mlp = swiglu} : tensor<1x8x32xbf16>
// CHECK:         sluice.transformer_layer %{{.+}} {heads = 4, kv_heads = 1, head_dim = 16, ffn = 96, norm = rmsnorm, mlp = geglu} : tensor<1x8x32xbf16>
// CHECK:         sluice.transformer_layer %{{.+}} {heads = 4, kv_heads = 2, ffn = 96, norm = rmsnorm, mlp = swiglu, rope_theta = 500000.0} : tensor<1x8x32xbf16>
// CHECK:         sluice.transformer_layer %{{.+}} {heads = 4, kv_heads = 4, ffn = 96, norm = layernorm, mlp = gelu, bias, rope_theta = 1.255000e+02} : tensor<1x8x32xbf16>
// CHECK:         sluice.transformer_layer %{{.+}} {heads = 4, kv_heads = 2, ffn = 96, norm = rmsnorm, mlp = geglu, rope_theta = 10000.0, post_norms} : tensor<1x8x32xbf16>
// CHECK:         sluice.transformer_layer %{{.+}} {heads = 4, kv_heads = 2, ffn = 96, norm = rmsnorm, mlp = swiglu, rope_theta = 500000.0, rope_scaling = llama3<factor = 3.200000e+01, low_freq_factor = 1.000000e+00, high_freq_factor = 4.000000e+00, original_max_positions = 8192>} : tensor<1x8x32xbf16>
// CHECK:         sluice.transformer_layer %{{.+}} {heads = 4, kv_heads = 2, ffn = 96, norm = rmsnorm, mlp = swiglu, qkv_bias, rope_theta = 1000000.0} : tensor<1x8x32xbf16>
// CHECK:         sluice.transformer_layer %{{.+}} {heads = 4, kv_heads = 2, ffn = 96, norm = rmsnorm, mlp = geglu, rope_theta = 10000.0, post_norms, window = 4} : tensor<1x8x32xbf16>
// CHECK:         sluice.transformer_layer %{{.+}} {heads = 4, kv_heads = 2, head_dim = 16, ffn = 96, norm = rmsnorm, mlp = swiglu, qk_norm = heads, rope_theta = 1000000.0} : tensor<1x8x32xbf16>
// CHECK:         sluice.transformer_layer %{{.+}} {heads = 4, kv_heads = 4, ffn = 96, norm = rmsnorm, mlp = swiglu, qk_norm = projection, rope_theta = 500000.0, pre_norms = false, post_norms} : tensor<1x8x32xbf16>
// CHECK:         sluice.transformer_layer %{{.+}} {heads = 4, kv_heads = 1, head_dim = 16, ffn = 96, norm = rmsnorm, mlp = geglu, qk_norm = heads, rope_theta = 1000000.0, rope_scaling = linear<factor = 8.000000e+00>, post_norms} : tensor<1x8x32xbf16>
// CHECK:         sluice.transformer_layer %{{.+}} {heads = 4, kv_heads = 4, head_dim = 12, v_head_dim = 8, ffn = 96, norm = rmsnorm, mlp = swiglu, rope_theta = 10000.0, rope_scaling = yarn<factor = 4.000000e+01, original_max_positions = 4096, beta_fast = 3.200000e+01, beta_slow = 1.000000e+00, attention_factor = 1.000000e+00>, kv_lora_rank = 8, q_lora_rank = 6, rope_head_dim = 4, rope_interleave} : tensor<1x8x32xbf16>
// CHECK:         sluice.output_layer %{{.+}} {vocab = 100, norm = rmsnorm, tied} : tensor<1x8x32xbf16> -> tensor<f32>
// GENERIC:       "sluice.transformer_layer"(%{{.+}}) <{spec = "{\22kind\22:\22transformer\22,\22heads\22:4,\22kv_heads\22:2,\22ffn\22:96,\22norm\22:\22rmsnorm\22,\22mlp\22:\22swiglu\22,\22bias\22:false,\22rope_theta\22:500000.0}"}>
sluice.model @llama_like {seq_len = 8, micro_batch = 1, dtype = bf16} {
  %emb = sluice.embedding {vocab = 100} : tensor<1x8x32xbf16>
  %x0 = sluice.transformer_layer %emb {heads = 4, kv_heads = 2, ffn = 96, norm = rmsnorm, mlp = swiglu} : tensor<1x8x32xbf16>
  %x1 = sluice.transformer_layer %x0 {heads = 4, kv_heads = 1, head_dim = 16, ffn = 96, norm = rmsnorm, mlp = geglu} : tensor<1x8x32xbf16>
  %x2 = sluice.transformer_layer %x1 {heads = 4, kv_heads = 2, ffn = 96, norm = rmsnorm, mlp = swiglu, rope_theta = 5.0e5} : tensor<1x8x32xbf16>
  %x3 = sluice.transformer_layer %x2 {heads = 4, kv_heads = 4, ffn = 96, norm = layernorm, mlp = gelu, bias, rope_theta = 125.5} : tensor<1x8x32xbf16>
  %x4 = sluice.transformer_layer %x3 {heads = 4, kv_heads = 2, ffn = 96, norm = rmsnorm, mlp = geglu, rope_theta = 10000.0, post_norms} : tensor<1x8x32xbf16>
  %x5 = sluice.transformer_layer %x4 {heads = 4, kv_heads = 2, ffn = 96, norm = rmsnorm, mlp = swiglu, rope_theta = 500000.0, rope_scaling = llama3<factor = 32.0, low_freq_factor = 1.0, high_freq_factor = 4.0, original_max_positions = 8192>} : tensor<1x8x32xbf16>
  %x6 = sluice.transformer_layer %x5 {heads = 4, kv_heads = 2, ffn = 96, norm = rmsnorm, mlp = swiglu, qkv_bias, rope_theta = 1000000.0} : tensor<1x8x32xbf16>
  %x7 = sluice.transformer_layer %x6 {heads = 4, kv_heads = 2, ffn = 96, norm = rmsnorm, mlp = geglu, rope_theta = 10000.0, post_norms, window = 4} : tensor<1x8x32xbf16>
  %x8 = sluice.transformer_layer %x7 {heads = 4, kv_heads = 2, head_dim = 16, ffn = 96, norm = rmsnorm, mlp = swiglu, qk_norm = heads, rope_theta = 1000000.0} : tensor<1x8x32xbf16>
  %x9 = sluice.transformer_layer %x8 {heads = 4, kv_heads = 4, ffn = 96, norm = rmsnorm, mlp = swiglu, post_norms, pre_norms = false, rope_theta = 500000.0, qk_norm = projection} : tensor<1x8x32xbf16>
  %x10 = sluice.transformer_layer %x9 {heads = 4, kv_heads = 1, head_dim = 16, ffn = 96, norm = rmsnorm, mlp = geglu, qk_norm = heads, rope_theta = 1000000.0, rope_scaling = linear<factor = 8.0>, post_norms, pre_norms = true} : tensor<1x8x32xbf16>
  %x11 = sluice.transformer_layer %x10 {heads = 4, kv_heads = 4, head_dim = 12, v_head_dim = 8, ffn = 96, norm = rmsnorm, mlp = swiglu, rope_theta = 10000.0, rope_scaling = yarn<factor = 40.0, original_max_positions = 4096, beta_fast = 32.0, beta_slow = 1.0, attention_factor = 1.0>, kv_lora_rank = 8, q_lora_rank = 6, rope_head_dim = 4, rope_interleave} : tensor<1x8x32xbf16>
  %loss = sluice.output_layer %x11 {vocab = 100, norm = rmsnorm, tied} : tensor<1x8x32xbf16> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// A model without transformer layers is still a model.
// CHECK-LABEL: sluice.model @bare
// CHECK:         sluice.output_layer
sluice.model @bare {seq_len = 4, micro_batch = 1, dtype = f16} {
  %emb = sluice.embedding {vocab = 7} : tensor<1x4x8xf16>
  %loss = sluice.output_layer %emb {vocab = 7, norm = layernorm} : tensor<1x4x8xf16> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}
