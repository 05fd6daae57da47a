// RUN: sluice-opt %s --sluice-partition-stages="pp=2" --sluice-split-passes | FileCheck %s --check-prefix=SPLIT
// RUN: sluice-opt %s --sluice-partition-stages="pp=2" --sluice-split-passes="split=false" | FileCheck %s --check-prefix=UNSPLIT
// RUN: sluice-opt %s --sluice-partition-stages="pp=2" --sluice-partition-vocab --sluice-split-passes | FileCheck %s --check-prefix=NAIVE
// RUN: sluice-opt %s --sluice-partition-stages="pp=2" --sluice-partition-vocab --sluice-reorder-softmax-barriers="algorithm=1" --sluice-split-passes | FileCheck %s --check-prefix=ALG1
// RUN: sluice-opt %s --sluice-partition-stages="pp=2" --sluice-partition-vocab --sluice-reorder-softmax-barriers="algorithm=2" --sluice-split-passes | FileCheck %s --check-prefix=ALG2
// RUN: sluice-opt %s --sluice-partition-stages="pp=2" --sluice-split-passes="recompute=full" | FileCheck %s --check-prefix=FULL
// RUN: sluice-opt %s --sluice-partition-stages="pp=2" --sluice-split-passes="recompute=selective" | FileCheck %s --check-prefix=SELECTIVE
// RUN: not sluice-opt %s --sluice-partition-stages="pp=2" --sluice-split-passes="recompute=most" 2>&1 | FileCheck %s --check-prefix=BADMODE

// Two layers of hidden 32, ffn 128, 16 tokens: 12288 matmul weights per
// layer (2 x 12288 x 16 FLOPs each) and causal attention 4 x 32 x 136.
// Stage 0: F = 2 x (393216 + 17408) = 821248; B = matmuls + 2 x attention
// = 856064; W = matmuls = 786432. Stage 1 adds the output layer's
// 2 x 32 x 100 x 16 = 102400 to each.
// SPLIT:   sluice.stage @s0 device 0 chunk 0 -> tensor<1x16x32xf32> attributes {activation_bytes = {{[0-9]+}} : i64, flops = array<i64: 821248, 856064, 786432>, passes = [#sluice.pass<F>, #sluice.pass<B>, #sluice.pass<W>]}
// SPLIT:   sluice.stage @s1 device 1 chunk 0 ({{.*}}) -> tensor<f32> attributes {activation_bytes = {{[0-9]+}} : i64, flops = array<i64: 923648, 958464, 888832>, passes = [#sluice.pass<F>, #sluice.pass<B>, #sluice.pass<W>]}
// UNSPLIT: sluice.stage @s0 {{.*}} flops = array<i64: 821248, 1642496>, passes = [#sluice.pass<F>, #sluice.pass<BW>]
// UNSPLIT: sluice.stage @s1 {{.*}} flops = array<i64: 923648, 1847296>, passes = [#sluice.pass<F>, #sluice.pass<BW>]
// Full recomputation: B runs F again first (stage 0: 856064 + 821248;
// stage 1: 958464 + 923648); F keeps only the stage's input, 16 x 32
// floats, and nothing on the stage that embeds.
// FULL:   sluice.stage @s0 {{.*}}activation_bytes = 0 : i64, flops = array<i64: 821248, 1677312, 786432>, {{.*}}recompute = #sluice<recompute full>}
// FULL:   sluice.stage @s1 {{.*}}activation_bytes = 2048 : i64, flops = array<i64: 923648, 1882112, 888832>, {{.*}}recompute = #sluice<recompute full>}
// Selective: B recomputes each layer's attention core (2 x 17408).
// SELECTIVE: sluice.stage @s0 {{.*}}flops = array<i64: 821248, 890880, 786432>, {{.*}}recompute = #sluice<recompute selective>}
// BADMODE: for the --recompute option: Cannot find option named 'most'!
// Vocabulary shards are cut before heavy work that reads a collective
// issued since the pass began (§5.1): the naive form's sum of exponentials
// waits for the maximum (S2), its softmax for the sum (T); Algorithm 1's
// weight gradient after the reduce reads nothing new and stays in T;
// Algorithm 2 has S and T only. The input shard runs IF and IB.
// NAIVE: sluice.vocab_input @vin {{.*}}passes = [#sluice.pass<IF>, #sluice.pass<IB>]
// NAIVE: sluice.vocab_output @vout{{.*}}passes = [#sluice.pass<S>, #sluice.pass<S2>, #sluice.pass<T>]
// ALG1: sluice.vocab_output @vout{{.*}}algorithm = 1 : i64, barriers = 2 : i64, {{.*}}passes = [#sluice.pass<S>, #sluice.pass<T>]
// ALG2: sluice.vocab_output @vout{{.*}}algorithm = 2 : i64, barriers = 1 : i64, {{.*}}passes = [#sluice.pass<S>, #sluice.pass<T>]
sluice.model @m {seq_len = 16, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 100} : tensor<1x16x32xf32>
  %x0 = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, ffn = 128, norm = layernorm, mlp = gelu} : tensor<1x16x32xf32>
  %x1 = sluice.transformer_layer %x0 {heads = 4, kv_heads = 4, ffn = 128, norm = layernorm, mlp = gelu} : tensor<1x16x32xf32>
  %x2 = sluice.transformer_layer %x1 {heads = 4, kv_heads = 4, ffn = 128, norm = layernorm, mlp = gelu} : tensor<1x16x32xf32>
  %x3 = sluice.transformer_layer %x2 {heads = 4, kv_heads = 4, ffn = 128, norm = layernorm, mlp = gelu} : tensor<1x16x32xf32>
  %loss = sluice.output_layer %x3 {vocab = 100, norm = layernorm} : tensor<1x16x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}
