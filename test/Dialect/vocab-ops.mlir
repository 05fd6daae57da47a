// The vocabulary shards and their fine-grained ops round-trip through their
// custom and generic forms.
// RUN: sluice-opt %s | sluice-opt | FileCheck %s
// RUN: sluice-opt %s -mlir-print-op-generic | sluice-opt | FileCheck %s
// RUN: sluice-opt %s -mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC

// CHECK-LABEL: sluice.model @a
// CHECK:      %[[IN:.+]] = sluice.vocab_input @vin -> tensor<1x4x8xf32> attributes {devices = 2 : i64, padded_vocab = 12 : i64, positions = 4 : i64, root = 0 : i64, vocab = 10 : i64} {
// CHECK-NEXT: ^bb0(%[[GR:.+]]: tensor<1x4x8xf32>):
// CHECK-NEXT:   %[[P:.+]] = sluice.shard_lookup : tensor<1x4x8xf32>
// CHECK-NEXT:   %[[R:.+]] = sluice.reduce %[[P]] root 0 : tensor<1x4x8xf32>
// CHECK-NEXT:   %[[X:.+]] = sluice.add_positions %[[R]] : tensor<1x4x8xf32>
// CHECK-NEXT:   %[[G:.+]] = sluice.broadcast %[[GR]] root 0 : tensor<1x4x8xf32>
// CHECK-NEXT:   sluice.shard_scatter_grad %[[G]] : tensor<1x4x8xf32>
// CHECK-NEXT:   sluice.vocab_yield %[[X]] : tensor<1x4x8xf32>
// CHECK:      sluice.final_norm %{{.+}} {norm = layernorm} : tensor<1x4x8xf32>
// CHECK:      sluice.vocab_output @vout(%{{.+}} : tensor<1x4x8xf32>) -> tensor<f32> attributes {algorithm = 2 : i64, barriers = 1 : i64, devices = 2 : i64, padded_vocab = 12 : i64, root = 1 : i64, vocab = 10 : i64} {
// CHECK-NEXT: ^bb0(%[[A0:.+]]: tensor<1x4x8xf32>):
// CHECK-NEXT:   %[[B:.+]] = sluice.broadcast %[[A0]] root 1 : tensor<1x4x8xf32>
// CHECK-NEXT:   %[[Y:.+]] = sluice.shard_logits %[[B]] : tensor<1x4x8xf32> -> tensor<1x4x6xf32>
// CHECK-NEXT:   %[[M:.+]] = sluice.shard_max %[[Y]] : tensor<1x4x6xf32> -> tensor<1x4xf32>
// CHECK-NEXT:   %[[S:.+]] = sluice.shard_sum_exp %[[Y]], %[[M]] : tensor<1x4x6xf32>, tensor<1x4xf32> -> tensor<1x4xf32>
// CHECK-NEXT:   %[[SM:.+]] = sluice.shard_softmax %[[Y]], %[[M]], %[[S]] : tensor<1x4x6xf32>, tensor<1x4xf32>
// CHECK-NEXT:   %[[IG:.+]] = sluice.shard_input_grad %[[SM]] : tensor<1x4x6xf32> -> tensor<1x4x8xf32>
// CHECK-NEXT:   %[[LR:.+]] = sluice.label_rows : tensor<1x4x8xf32>
// CHECK-NEXT:   %[[GM:.+]] = sluice.all_reduce <max> %[[M]] : tensor<1x4xf32>
// CHECK-NEXT:   %[[RS:.+]] = sluice.rescale_sum %[[S]], %[[M]], %[[GM]] : tensor<1x4xf32>
// CHECK-NEXT:   %[[GS:.+]] = sluice.all_reduce <sum> %[[RS]] : tensor<1x4xf32>
// CHECK-NEXT:   %[[CG:.+]] = sluice.combine_grad %[[IG]], %[[LR]], %[[RS]], %[[GS]] : tensor<1x4x8xf32>, tensor<1x4xf32>
// CHECK-NEXT:   %[[RD:.+]] = sluice.reduce %[[CG]] root 1 : tensor<1x4x8xf32>
// CHECK-NEXT:   %[[RP:.+]] = sluice.rescale_probs %[[SM]], %[[RS]], %[[GS]] : tensor<1x4x6xf32>, tensor<1x4xf32>
// CHECK-NEXT:   %[[L:.+]] = sluice.shard_loss %[[Y]], %[[GM]], %[[GS]] : tensor<1x4x6xf32>, tensor<1x4xf32> -> tensor<f32>
// CHECK-NEXT:   %[[SG:.+]] = sluice.softmax_grad %[[RP]] : tensor<1x4x6xf32>
// CHECK-NEXT:   sluice.shard_weight_grad %[[SG]], %[[B]] : tensor<1x4x6xf32>, tensor<1x4x8xf32>
// CHECK-NEXT:   sluice.vocab_yield %[[L]], %[[RD]] : tensor<f32>, tensor<1x4x8xf32>

// CHECK-LABEL: sluice.model @tied
// CHECK: sluice.vocab_input @vin -> tensor<1x4x8xf32> attributes {devices = 2 : i64, padded_vocab = 12 : i64, positions = 4 : i64, root = 0 : i64, synchronous, tied, vocab = 10 : i64}
// CHECK: sluice.vocab_output @vout(%{{.+}} : tensor<1x4x8xf32>) -> tensor<f32> attributes {algorithm = 0 : i64, barriers = 3 : i64, devices = 2 : i64, padded_vocab = 12 : i64, root = 1 : i64, synchronous, tied, vocab = 10 : i64}

// GENERIC: "sluice.vocab_input"() <{devices = 2 : i64, padded_vocab = 12 : i64, positions = 4 : i64, root = 0 : i64, sym_name = "vin", vocab = 10 : i64}>
// GENERIC: "sluice.vocab_output"(%{{.+}}) <{algorithm = 2 : i64, barriers = 1 : i64, devices = 2 : i64, padded_vocab = 12 : i64, root = 1 : i64, sym_name = "vout", vocab = 10 : i64}>
// GENERIC: "sluice.all_reduce"(%{{.+}}) <{reduction = #sluice.reduction<max>}>

sluice.model @a {seq_len = 4, micro_batch = 1, dtype = f32} {
  %0 = sluice.vocab_input @vin -> tensor<1x4x8xf32> attributes {devices = 2 : i64, padded_vocab = 12 : i64, positions = 4 : i64, root = 0 : i64, vocab = 10 : i64} {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %4 = sluice.shard_lookup : tensor<1x4x8xf32>
    %5 = sluice.reduce %4 root 0 : tensor<1x4x8xf32>
    %6 = sluice.add_positions %5 : tensor<1x4x8xf32>
    %7 = sluice.broadcast %arg0 root 0 : tensor<1x4x8xf32>
    sluice.shard_scatter_grad %7 : tensor<1x4x8xf32>
    sluice.vocab_yield %6 : tensor<1x4x8xf32>
  }
  %1 = sluice.stage @s0 device 0 chunk 0 (%0 : tensor<1x4x8xf32>) -> tensor<1x4x8xf32> {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %x = sluice.transformer_layer %arg0 {heads = 2, kv_heads = 2, ffn = 16, norm = layernorm, mlp = gelu} : tensor<1x4x8xf32>
    sluice.yield %x : tensor<1x4x8xf32>
  }
  %2 = sluice.stage @s1 device 1 chunk 0 (%1 : tensor<1x4x8xf32>) -> tensor<1x4x8xf32> {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %x = sluice.transformer_layer %arg0 {heads = 2, kv_heads = 2, ffn = 16, norm = layernorm, mlp = gelu} : tensor<1x4x8xf32>
    %normed = sluice.final_norm %x {norm = layernorm} : tensor<1x4x8xf32>
    sluice.yield %normed : tensor<1x4x8xf32>
  }
  %3 = sluice.vocab_output @vout(%2 : tensor<1x4x8xf32>) -> tensor<f32> attributes {algorithm = 2 : i64, barriers = 1 : i64, devices = 2 : i64, padded_vocab = 12 : i64, root = 1 : i64, vocab = 10 : i64} {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %4 = sluice.broadcast %arg0 root 1 : tensor<1x4x8xf32>
    %5 = sluice.shard_logits %4 : tensor<1x4x8xf32> -> tensor<1x4x6xf32>
    %6 = sluice.shard_max %5 : tensor<1x4x6xf32> -> tensor<1x4xf32>
    %7 = sluice.shard_sum_exp %5, %6 : tensor<1x4x6xf32>, tensor<1x4xf32> -> tensor<1x4xf32>
    %8 = sluice.shard_softmax %5, %6, %7 : tensor<1x4x6xf32>, tensor<1x4xf32>
    %9 = sluice.shard_input_grad %8 : tensor<1x4x6xf32> -> tensor<1x4x8xf32>
    %10 = sluice.label_rows : tensor<1x4x8xf32>
    %11 = sluice.all_reduce <max> %6 : tensor<1x4xf32>
    %12 = sluice.rescale_sum %7, %6, %11 : tensor<1x4xf32>
    %13 = sluice.all_reduce <sum> %12 : tensor<1x4xf32>
    %14 = sluice.combine_grad %9, %10, %12, %13 : tensor<1x4x8xf32>, tensor<1x4xf32>
    %15 = sluice.reduce %14 root 1 : tensor<1x4x8xf32>
    %16 = sluice.rescale_probs %8, %12, %13 : tensor<1x4x6xf32>, tensor<1x4xf32>
    %17 = sluice.shard_loss %5, %11, %13 : tensor<1x4x6xf32>, tensor<1x4xf32> -> tensor<f32>
    %18 = sluice.softmax_grad %16 : tensor<1x4x6xf32>
    sluice.shard_weight_grad %18, %4 : tensor<1x4x6xf32>, tensor<1x4x8xf32>
    sluice.vocab_yield %17, %15 : tensor<f32>, tensor<1x4x8xf32>
  }
  sluice.return %3 : tensor<f32>
}
sluice.model @tied {seq_len = 4, micro_batch = 1, dtype = f32} {
  %0 = sluice.vocab_input @vin -> tensor<1x4x8xf32> attributes {devices = 2 : i64, padded_vocab = 12 : i64, positions = 4 : i64, root = 0 : i64, synchronous, tied, vocab = 10 : i64} {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %4 = sluice.shard_lookup : tensor<1x4x8xf32>
    %5 = sluice.reduce %4 root 0 : tensor<1x4x8xf32>
    %6 = sluice.add_positions %5 : tensor<1x4x8xf32>
    %7 = sluice.broadcast %arg0 root 0 : tensor<1x4x8xf32>
    sluice.shard_scatter_grad %7 : tensor<1x4x8xf32>
    sluice.vocab_yield %6 : tensor<1x4x8xf32>
  }
  %1 = sluice.stage @s0 device 0 chunk 0 (%0 : tensor<1x4x8xf32>) -> tensor<1x4x8xf32> {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %x = sluice.transformer_layer %arg0 {heads = 2, kv_heads = 2, ffn = 16, norm = layernorm, mlp = gelu} : tensor<1x4x8xf32>
    sluice.yield %x : tensor<1x4x8xf32>
  }
  %2 = sluice.stage @s1 device 1 chunk 0 (%1 : tensor<1x4x8xf32>) -> tensor<1x4x8xf32> {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %x = sluice.transformer_layer %arg0 {heads = 2, kv_heads = 2, ffn = 16, norm = layernorm, mlp = gelu} : tensor<1x4x8xf32>
    %normed = sluice.final_norm %x {norm = layernorm} : tensor<1x4x8xf32>
    sluice.yield %normed : tensor<1x4x8xf32>
  }
  %3 = sluice.vocab_output @vout(%2 : tensor<1x4x8xf32>) -> tensor<f32> attributes {algorithm = 0 : i64, barriers = 3 : i64, devices = 2 : i64, padded_vocab = 12 : i64, root = 1 : i64, synchronous, tied, vocab = 10 : i64} {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %4 = sluice.broadcast %arg0 root 1 : tensor<1x4x8xf32>
    %5 = sluice.shard_logits %4 : tensor<1x4x8xf32> -> tensor<1x4x6xf32>
    %6 = sluice.shard_max %5 : tensor<1x4x6xf32> -> tensor<1x4xf32>
    %7 = sluice.all_reduce <max> %6 : tensor<1x4xf32>
    %8 = sluice.shard_sum_exp %5, %7 : tensor<1x4x6xf32>, tensor<1x4xf32> -> tensor<1x4xf32>
    %9 = sluice.all_reduce <sum> %8 : tensor<1x4xf32>
    %10 = sluice.shard_softmax %5, %7, %9 : tensor<1x4x6xf32>, tensor<1x4xf32>
    %11 = sluice.shard_loss %5, %7, %9 : tensor<1x4x6xf32>, tensor<1x4xf32> -> tensor<f32>
    %12 = sluice.softmax_grad %10 : tensor<1x4x6xf32>
    %13 = sluice.shard_input_grad %12 : tensor<1x4x6xf32> -> tensor<1x4x8xf32>
    %14 = sluice.reduce %13 root 1 : tensor<1x4x8xf32>
    sluice.shard_weight_grad %12, %4 : tensor<1x4x6xf32>, tensor<1x4x8xf32>
    sluice.vocab_yield %11, %14 : tensor<f32>, tensor<1x4x8xf32>
  }
  sluice.return %3 : tensor<f32>
}
