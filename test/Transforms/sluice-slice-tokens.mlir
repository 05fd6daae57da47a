// RUN: sluice-opt %s --sluice-slice-tokens="slices=4 method=uniform" | FileCheck %s --check-prefix=UNIFORM
// RUN: sluice-opt %s --sluice-slice-tokens="slices=3 method=uniform" | FileCheck %s --check-prefix=UNEVEN
// RUN: sluice-opt %s --sluice-slice-tokens="slices=4 method=seq1f1b" | FileCheck %s --check-prefix=SEQ1F1B
// RUN: sluice-opt %s --sluice-partition-stages="pp=4" --sluice-slice-tokens="slices=auto method=terapipe costs=v100" | FileCheck %s --check-prefix=TERAPIPE
// RUN: sluice-opt %s --sluice-partition-stages="pp=4" --sluice-slice-tokens="slices=3 method=terapipe costs=v100 granularity=64" | FileCheck %s --check-prefix=COUNT
// RUN: sluice-opt %s --sluice-slice-tokens="slices=4 method=seq1f1b" | sluice-opt | FileCheck %s --check-prefix=SEQ1F1B
// RUN: not sluice-opt %s --sluice-slice-tokens="slices=5000 method=uniform" 2>&1 | FileCheck %s --check-prefix=TOOMANY
// RUN: not sluice-opt %s --sluice-slice-tokens="slices=0" 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: not sluice-opt %s --sluice-slice-tokens="slices=auto method=seq1f1b" 2>&1 | FileCheck %s --check-prefix=AUTO
// RUN: not sluice-opt %s --sluice-slice-tokens="slices=2 method=random" 2>&1 | FileCheck %s --check-prefix=METHOD
// RUN: not sluice-opt %s --sluice-partition-stages="pp=4" --sluice-slice-tokens="slices=auto method=terapipe costs=unit" 2>&1 | FileCheck %s --check-prefix=UNIT
// RUN: not sluice-opt %s --sluice-partition-stages="pp=4" --sluice-slice-tokens="slices=auto method=terapipe costs=v100 granularity=100" 2>&1 | FileCheck %s --check-prefix=GRANULARITY

// A 4-layer GPT of hidden 1024 on sequences of 4096 tokens.

// UNIFORM: sluice.model @m {{.*}} attributes {slicing = #sluice.slicing<uniform>, token_slices = array<i64: 1024, 1024, 1024, 1024>}
// Lengths differ by a token at most when the count does not divide.
// UNEVEN: token_slices = array<i64: 1366, 1365, 1365>

// Sun et al., 2024 §3.4: equal FLOPs; attention grows with the prefix,
// so the segments shrink.
// SEQ1F1B: sluice.model @m {{.*}} attributes {slicing = #sluice.slicing<seq1f1b>, token_slices = array<i64: 1240, 1060, 941, 855>}

// Li et al., 2021 §3.3 on 4 stages with V100 costs: the DP's latency
// and equation 9's fit error are recorded with the slices.
// TERAPIPE: sluice.model @m {{.*}} attributes {slicing = #sluice.slicing<terapipe>, slicing_fit_error = {{.*}} : f64, slicing_latency = {{.*}} : f64, token_slices = array<i64: {{[0-9, ]+}}>}
// COUNT: token_slices = array<i64: {{[0-9]+}}, {{[0-9]+}}, {{[0-9]+}}>

// TOOMANY: error: 'sluice.model' op cannot slice tokens: 'slices' = 5000 is larger than the sequence ('seq_len' = 4096)
// ZERO: error: sluice-slice-tokens: 'slices' must be at least 1, got 0
// AUTO: error: 'sluice.model' op cannot slice tokens: 'slices' = auto needs method terapipe (its dynamic programme picks the count); method seq1f1b needs a number
// METHOD: for the --method option: Cannot find option named 'random'!
// UNIT: error: 'sluice.model' op cannot slice tokens with method terapipe and costs 'unit': its latencies must depend on the slice's length and context (use a100, h100, h200, v100, or a sluice-run --profile file with --profile-slices)
// GRANULARITY: error: 'sluice.model' op cannot slice tokens: 'granularity' = 100 does not divide 'seq_len' = 4096

sluice.model @m {seq_len = 4096, micro_batch = 1, dtype = bf16} {
  %emb = sluice.embedding {vocab = 32000} : tensor<1x4096x1024xbf16>
  %x0 = sluice.transformer_layer %emb {heads = 16, kv_heads = 16, ffn = 4096, norm = layernorm, mlp = gelu} : tensor<1x4096x1024xbf16>
  %x1 = sluice.transformer_layer %x0 {heads = 16, kv_heads = 16, ffn = 4096, norm = layernorm, mlp = gelu} : tensor<1x4096x1024xbf16>
  %x2 = sluice.transformer_layer %x1 {heads = 16, kv_heads = 16, ffn = 4096, norm = layernorm, mlp = gelu} : tensor<1x4096x1024xbf16>
  %x3 = sluice.transformer_layer %x2 {heads = 16, kv_heads = 16, ffn = 4096, norm = layernorm, mlp = gelu} : tensor<1x4096x1024xbf16>
  %loss = sluice.output_layer %x3 {vocab = 32000, norm = layernorm} : tensor<1x4096x1024xbf16> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}
