// RUN: sluice-opt %s -split-input-file --sluice-set-microbatch-shape="seq-len=64 micro-batch=4" | FileCheck %s
// RUN: sluice-opt %s -split-input-file --sluice-set-microbatch-shape="seq-len=32" | FileCheck %s --check-prefix=SEQ
// RUN: sluice-opt %s -split-input-file --sluice-set-microbatch-shape | FileCheck %s --check-prefix=KEEP
// RUN: not sluice-opt %s -split-input-file --sluice-set-microbatch-shape="seq-len=-3" 2>&1 | FileCheck %s --check-prefix=NEG
// RUN: not sluice-opt %s -split-input-file --sluice-set-microbatch-shape="seq-len=4096" 2>&1 | FileCheck %s --check-prefix=POS
// RUN: sluice-opt %s -split-input-file --sluice-set-microbatch-shape="dtype=bf16" | FileCheck %s --check-prefix=BF16
// RUN: not sluice-opt %s -split-input-file --sluice-set-microbatch-shape="dtype=f16" 2>&1 | FileCheck %s --check-prefix=F16

// Every activation is retyped; the loss stays a scalar.
// CHECK-LABEL: sluice.model @m {seq_len = 64, micro_batch = 4, dtype = f32}
// CHECK-NEXT:    sluice.embedding {vocab = 10, positions = 2048} : tensor<4x64x16xf32>
// CHECK-NEXT:    sluice.transformer_layer {{.*}} : tensor<4x64x16xf32>
// CHECK-NEXT:    sluice.transformer_layer {{.*}} : tensor<4x64x16xf32>
// CHECK-NEXT:    sluice.output_layer {{.*}} : tensor<4x64x16xf32> -> tensor<f32>
// SEQ-LABEL:   sluice.model @m {seq_len = 32, micro_batch = 1, dtype = f32}
// SEQ:           sluice.embedding {vocab = 10, positions = 2048} : tensor<1x32x16xf32>
// KEEP-LABEL:  sluice.model @m {seq_len = 8, micro_batch = 1, dtype = f32}
// KEEP:          sluice.embedding {vocab = 10, positions = 2048} : tensor<1x8x16xf32>
// NEG:         error: 'sluice.model' op cannot set 'seq_len' to -3
// A learned position table bounds the sequence; the verifier says so.
// POS:         error: 'sluice.model' op 'seq_len' = 4096 exceeds the embedding's 'positions' = 2048
// The element type (the plan's precision) retypes every activation too.
// BF16-LABEL:  sluice.model @m {seq_len = 8, micro_batch = 1, dtype = bf16}
// BF16-NEXT:     sluice.embedding {vocab = 10, positions = 2048} : tensor<1x8x16xbf16>
// BF16-NEXT:     sluice.transformer_layer {{.*}} : tensor<1x8x16xbf16>
// BF16-NEXT:     sluice.transformer_layer {{.*}} : tensor<1x8x16xbf16>
// BF16-NEXT:     sluice.output_layer {{.*}} : tensor<1x8x16xbf16> -> tensor<f32>
// F16:         error: 'sluice.model' op cannot set 'dtype' to 'f16' (expected bf16 or f32)
sluice.model @m {seq_len = 8, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 10, positions = 2048} : tensor<1x8x16xf32>
  %x0 = sluice.transformer_layer %emb {heads = 2, kv_heads = 2, ffn = 32, norm = layernorm, mlp = gelu} : tensor<1x8x16xf32>
  %x1 = sluice.transformer_layer %x0 {heads = 2, kv_heads = 2, ffn = 32, norm = layernorm, mlp = gelu} : tensor<1x8x16xf32>
  %loss = sluice.output_layer %x1 {vocab = 10, norm = layernorm} : tensor<1x8x16xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}
