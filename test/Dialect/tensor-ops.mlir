// The tensor-parallel shard bodies round-trip through the custom and the
// generic form; the sequence-parallel form (token slices between layers,
// gathered before the column-parallel projections and scattered after the
// row-parallel ones) verifies as well as the all-reduce form.
// RUN: sluice-opt %s | sluice-opt | FileCheck %s
// RUN: sluice-opt %s -mlir-print-op-generic | sluice-opt | FileCheck %s

// CHECK-LABEL: sluice.model @tp2
// CHECK:         sluice.embedding {vocab = 64} : tensor<1x16x32xf32> shards 2 {
// CHECK-NEXT:      %[[L:.+]] = sluice.shard_lookup : tensor<1x16x32xf32>
// CHECK-NEXT:      %[[R:.+]] = sluice.tp_reduce %[[L]] : tensor<1x16x32xf32>
// CHECK-NEXT:      sluice.layer_yield %[[R]] : tensor<1x16x32xf32>
// CHECK:         sluice.transformer_layer %{{.+}} {heads = 4, kv_heads = 1, ffn = 64, norm = layernorm, mlp = gelu} : tensor<1x16x32xf32> shards 2 {
// CHECK-NEXT:    ^bb0(%[[IN:.+]]: tensor<1x16x32xf32>):
// CHECK-NEXT:      %[[N:.+]] = sluice.shard_norm %[[IN]]
// CHECK-NEXT:      %[[C:.+]] = sluice.tp_copy %[[N]]
// CHECK-NEXT:      %[[QKV:.+]] = sluice.column_parallel <qkv> %[[C]] : tensor<1x16x32xf32> -> tensor<1x16x32xf32>
// CHECK-NEXT:      %[[A:.+]] = sluice.shard_attention %[[QKV]] : tensor<1x16x32xf32> -> tensor<1x16x16xf32>
// CHECK-NEXT:      %[[O:.+]] = sluice.row_parallel <out> %[[A]] : tensor<1x16x16xf32> -> tensor<1x16x32xf32>
// CHECK-NEXT:      %[[S:.+]] = sluice.tp_reduce %[[O]]
// CHECK-NEXT:      sluice.residual_add %[[IN]], %[[S]]
// CHECK:           sluice.column_parallel <up>
// CHECK-NEXT:      sluice.shard_activation %{{.+}} : tensor<1x16x32xf32>
// CHECK-NEXT:      sluice.row_parallel <down>
// CHECK:         sluice.output_layer %{{.+}} {vocab = 64, norm = layernorm} : tensor<1x16x32xf32> -> tensor<f32> shards 2 {
// CHECK:           sluice.shard_logits %{{.+}} : tensor<1x16x32xf32> -> tensor<1x16x32xf32>
// CHECK:           sluice.all_reduce <max>
// CHECK:           sluice.all_reduce <sum>
// CHECK:           sluice.layer_yield %{{.+}} : tensor<f32>
sluice.model @tp2 {seq_len = 16, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 64} : tensor<1x16x32xf32> shards 2 {
    %0 = sluice.shard_lookup : tensor<1x16x32xf32>
    %1 = sluice.tp_reduce %0 : tensor<1x16x32xf32>
    sluice.layer_yield %1 : tensor<1x16x32xf32>
  }
  // One key/value head, replicated on both shards: each computes two query
  // heads and the shared key and value, (2 + 2 * 1) * 8 = 32 columns.
  %x = sluice.transformer_layer %emb {heads = 4, kv_heads = 1, ffn = 64, norm = layernorm, mlp = gelu} : tensor<1x16x32xf32> shards 2 {
  ^bb0(%in: tensor<1x16x32xf32>):
    %0 = sluice.shard_norm %in : tensor<1x16x32xf32>
    %1 = sluice.tp_copy %0 : tensor<1x16x32xf32>
    %2 = sluice.column_parallel <qkv> %1 : tensor<1x16x32xf32> -> tensor<1x16x32xf32>
    %3 = sluice.shard_attention %2 : tensor<1x16x32xf32> -> tensor<1x16x16xf32>
    %4 = sluice.row_parallel <out> %3 : tensor<1x16x16xf32> -> tensor<1x16x32xf32>
    %5 = sluice.tp_reduce %4 : tensor<1x16x32xf32>
    %6 = sluice.residual_add %in, %5 : tensor<1x16x32xf32>
    %7 = sluice.shard_norm %6 : tensor<1x16x32xf32>
    %8 = sluice.tp_copy %7 : tensor<1x16x32xf32>
    %9 = sluice.column_parallel <up> %8 : tensor<1x16x32xf32> -> tensor<1x16x32xf32>
    %10 = sluice.shard_activation %9 : tensor<1x16x32xf32>
    %11 = sluice.row_parallel <down> %10 : tensor<1x16x32xf32> -> tensor<1x16x32xf32>
    %12 = sluice.tp_reduce %11 : tensor<1x16x32xf32>
    %13 = sluice.residual_add %6, %12 : tensor<1x16x32xf32>
    sluice.layer_yield %13 : tensor<1x16x32xf32>
  }
  %loss = sluice.output_layer %x {vocab = 64, norm = layernorm} : tensor<1x16x32xf32> -> tensor<f32> shards 2 {
  ^bb0(%in: tensor<1x16x32xf32>):
    %0 = sluice.shard_norm %in : tensor<1x16x32xf32>
    %1 = sluice.tp_copy %0 : tensor<1x16x32xf32>
    %2 = sluice.shard_logits %1 : tensor<1x16x32xf32> -> tensor<1x16x32xf32>
    %3 = sluice.shard_max %2 : tensor<1x16x32xf32> -> tensor<1x16xf32>
    %4 = sluice.shard_sum_exp %2, %3 : tensor<1x16x32xf32>, tensor<1x16xf32> -> tensor<1x16xf32>
    %5 = sluice.all_reduce <max> %3 : tensor<1x16xf32>
    %6 = sluice.rescale_sum %4, %3, %5 : tensor<1x16xf32>
    %7 = sluice.all_reduce <sum> %6 : tensor<1x16xf32>
    %8 = sluice.shard_loss %2, %5, %7 : tensor<1x16x32xf32>, tensor<1x16xf32> -> tensor<f32>
    sluice.layer_yield %8 : tensor<f32>
  }
  sluice.return %loss : tensor<f32>
}

// Sequence parallelism: each shard holds 16 / 2 = 8 of the tokens between
// the blocks; the norm runs on the slice, the all-gather makes the whole
// sequence for the column-parallel projection and the reduce-scatter sums
// the row-parallel partials back into the slice.
// CHECK-LABEL: sluice.model @sp2
// CHECK:         ^bb0(%[[IN:.+]]: tensor<1x8x32xf32>):
// CHECK-NEXT:      %[[N:.+]] = sluice.shard_norm %[[IN]] : tensor<1x8x32xf32>
// CHECK-NEXT:      %[[G:.+]] = sluice.tp_gather %[[N]] : tensor<1x8x32xf32> -> tensor<1x16x32xf32>
// CHECK-NEXT:      sluice.column_parallel <qkv> %[[G]]
// CHECK:           %[[O:.+]] = sluice.row_parallel <out>
// CHECK-NEXT:      %[[S:.+]] = sluice.tp_scatter %[[O]] : tensor<1x16x32xf32> -> tensor<1x8x32xf32>
// CHECK-NEXT:      sluice.residual_add %[[IN]], %[[S]] : tensor<1x8x32xf32>
sluice.model @sp2 {seq_len = 16, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 64} : tensor<1x16x32xf32>
  %x = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, ffn = 64, norm = rmsnorm, mlp = swiglu} : tensor<1x16x32xf32> shards 2 {
  ^bb0(%in: tensor<1x8x32xf32>):
    %0 = sluice.shard_norm %in : tensor<1x8x32xf32>
    %1 = sluice.tp_gather %0 : tensor<1x8x32xf32> -> tensor<1x16x32xf32>
    %2 = sluice.column_parallel <qkv> %1 : tensor<1x16x32xf32> -> tensor<1x16x48xf32>
    %3 = sluice.shard_attention %2 : tensor<1x16x48xf32> -> tensor<1x16x16xf32>
    %4 = sluice.row_parallel <out> %3 : tensor<1x16x16xf32> -> tensor<1x16x32xf32>
    %5 = sluice.tp_scatter %4 : tensor<1x16x32xf32> -> tensor<1x8x32xf32>
    %6 = sluice.residual_add %in, %5 : tensor<1x8x32xf32>
    %7 = sluice.shard_norm %6 : tensor<1x8x32xf32>
    %8 = sluice.tp_gather %7 : tensor<1x8x32xf32> -> tensor<1x16x32xf32>
    %9 = sluice.column_parallel <up> %8 : tensor<1x16x32xf32> -> tensor<1x16x32xf32>
    %10 = sluice.column_parallel <gate> %8 : tensor<1x16x32xf32> -> tensor<1x16x32xf32>
    %11 = sluice.shard_activation %9, %10 : tensor<1x16x32xf32>, tensor<1x16x32xf32>
    %12 = sluice.row_parallel <down> %11 : tensor<1x16x32xf32> -> tensor<1x16x32xf32>
    %13 = sluice.tp_scatter %12 : tensor<1x16x32xf32> -> tensor<1x8x32xf32>
    %14 = sluice.residual_add %6, %13 : tensor<1x8x32xf32>
    sluice.layer_yield %14 : tensor<1x8x32xf32>
  }
  %loss = sluice.output_layer %x {vocab = 64, norm = rmsnorm} : tensor<1x16x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// Expert parallelism's dispatch and return in a sparse layer's body: one
// shard (expert parallelism alone) and two (with tensor parallelism), 4
// experts of which each token takes 2, over 2 members: 2 x 16 x 2 rows.
// CHECK-LABEL: sluice.model @experts
// CHECK:         shards 1 {
// CHECK:           %[[D:.+]] = sluice.expert_dispatch %{{.+}} over 2 : tensor<1x16x32xf32> -> tensor<1x64x32xf32>
// CHECK-NEXT:      sluice.column_parallel <up> %[[D]] : tensor<1x64x32xf32> -> tensor<1x64x24xf32>
// CHECK:           %[[Y:.+]] = sluice.expert_combine %{{.+}} over 2 : tensor<1x64x32xf32> -> tensor<1x16x32xf32>
// CHECK-NEXT:      sluice.tp_reduce %[[Y]]
// CHECK:         shards 2 {
// CHECK:           sluice.expert_dispatch %{{.+}} over 2 : tensor<1x16x32xf32> -> tensor<1x64x32xf32>
sluice.model @experts {seq_len = 16, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 64} : tensor<1x16x32xf32>
  %x = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, ffn = 24, norm = rmsnorm, mlp = swiglu, experts = 4, top_k = 2} : tensor<1x16x32xf32> shards 1 {
  ^bb0(%in: tensor<1x16x32xf32>):
    %0 = sluice.shard_norm %in : tensor<1x16x32xf32>
    %1 = sluice.tp_copy %0 : tensor<1x16x32xf32>
    %2 = sluice.column_parallel <qkv> %1 : tensor<1x16x32xf32> -> tensor<1x16x96xf32>
    %3 = sluice.shard_attention %2 : tensor<1x16x96xf32> -> tensor<1x16x32xf32>
    %4 = sluice.row_parallel <out> %3 : tensor<1x16x32xf32> -> tensor<1x16x32xf32>
    %5 = sluice.tp_reduce %4 : tensor<1x16x32xf32>
    %6 = sluice.residual_add %in, %5 : tensor<1x16x32xf32>
    %7 = sluice.shard_norm %6 : tensor<1x16x32xf32>
    %8 = sluice.tp_copy %7 : tensor<1x16x32xf32>
    %9 = sluice.expert_dispatch %8 over 2 : tensor<1x16x32xf32> -> tensor<1x64x32xf32>
    %10 = sluice.column_parallel <up> %9 : tensor<1x64x32xf32> -> tensor<1x64x24xf32>
    %11 = sluice.column_parallel <gate> %9 : tensor<1x64x32xf32> -> tensor<1x64x24xf32>
    %12 = sluice.shard_activation %10, %11 : tensor<1x64x24xf32>, tensor<1x64x24xf32>
    %13 = sluice.row_parallel <down> %12 : tensor<1x64x24xf32> -> tensor<1x64x32xf32>
    %14 = sluice.expert_combine %13 over 2 : tensor<1x64x32xf32> -> tensor<1x16x32xf32>
    %15 = sluice.tp_reduce %14 : tensor<1x16x32xf32>
    %16 = sluice.residual_add %6, %15 : tensor<1x16x32xf32>
    sluice.layer_yield %16 : tensor<1x16x32xf32>
  }
  %y = sluice.transformer_layer %x {heads = 4, kv_heads = 4, ffn = 24, norm = rmsnorm, mlp = swiglu, experts = 4, top_k = 2} : tensor<1x16x32xf32> shards 2 {
  ^bb0(%in: tensor<1x16x32xf32>):
    %0 = sluice.shard_norm %in : tensor<1x16x32xf32>
    %1 = sluice.tp_copy %0 : tensor<1x16x32xf32>
    %2 = sluice.column_parallel <qkv> %1 : tensor<1x16x32xf32> -> tensor<1x16x48xf32>
    %3 = sluice.shard_attention %2 : tensor<1x16x48xf32> -> tensor<1x16x16xf32>
    %4 = sluice.row_parallel <out> %3 : tensor<1x16x16xf32> -> tensor<1x16x32xf32>
    %5 = sluice.tp_reduce %4 : tensor<1x16x32xf32>
    %6 = sluice.residual_add %in, %5 : tensor<1x16x32xf32>
    %7 = sluice.shard_norm %6 : tensor<1x16x32xf32>
    %8 = sluice.tp_copy %7 : tensor<1x16x32xf32>
    %9 = sluice.expert_dispatch %8 over 2 : tensor<1x16x32xf32> -> tensor<1x64x32xf32>
    %10 = sluice.column_parallel <up> %9 : tensor<1x64x32xf32> -> tensor<1x64x12xf32>
    %11 = sluice.column_parallel <gate> %9 : tensor<1x64x32xf32> -> tensor<1x64x12xf32>
    %12 = sluice.shard_activation %10, %11 : tensor<1x64x12xf32>, tensor<1x64x12xf32>
    %13 = sluice.row_parallel <down> %12 : tensor<1x64x12xf32> -> tensor<1x64x32xf32>
    %14 = sluice.expert_combine %13 over 2 : tensor<1x64x32xf32> -> tensor<1x16x32xf32>
    %15 = sluice.tp_reduce %14 : tensor<1x16x32xf32>
    %16 = sluice.residual_add %6, %15 : tensor<1x16x32xf32>
    sluice.layer_yield %16 : tensor<1x16x32xf32>
  }
  %loss = sluice.output_layer %y {vocab = 64, norm = rmsnorm} : tensor<1x16x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}
