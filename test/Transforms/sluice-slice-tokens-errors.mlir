// The models sluice-slice-tokens refuses for TeraPipe's dynamic programme,
// named at the offending op. The input is written here, not made by
// earlier passes.
// RUN: sluice-opt %s -split-input-file -verify-diagnostics --sluice-slice-tokens="slices=auto method=terapipe costs=a100"

// Not partitioned into stages: the programme optimises over them.
// expected-error@+1 {{'sluice.model' op cannot slice tokens with method terapipe: its dynamic programme optimises over the pipeline's stages; run sluice-partition-stages first}}
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %e = sluice.embedding {vocab = 10} : tensor<1x4x8xf32>
  %x = sluice.transformer_layer %e {heads = 2, kv_heads = 2, ffn = 16, norm = layernorm, mlp = gelu} : tensor<1x4x8xf32>
  %l = sluice.output_layer %x {vocab = 10, norm = layernorm} : tensor<1x4x8xf32> -> tensor<f32>
  sluice.return %l : tensor<f32>
}
