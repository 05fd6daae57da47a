// RUN: sluice-opt %s --sluice-partition-stages="pp=2" --sluice-partition-vocab | FileCheck %s --check-prefix=NAIVE --implicit-check-not=sluice.all_reduce
// RUN: sluice-opt %s --sluice-partition-stages="pp=2" --sluice-partition-vocab --sluice-reorder-softmax-barriers="algorithm=1" | FileCheck %s --check-prefix=ALG1 --implicit-check-not=sluice.all_reduce
// RUN: sluice-opt %s --sluice-partition-stages="pp=2" --sluice-partition-vocab --sluice-reorder-softmax-barriers="algorithm=2" | FileCheck %s --check-prefix=ALG2 --implicit-check-not=sluice.all_reduce
// RUN: sluice-opt %s --sluice-partition-stages="pp=2" --sluice-partition-vocab --sluice-reorder-softmax-barriers="algorithm=1" --sluice-reorder-softmax-barriers="algorithm=2" | FileCheck %s --check-prefix=ALG2 --implicit-check-not=sluice.all_reduce
// RUN: sluice-opt %s --sluice-partition-stages="pp=2" --sluice-partition-vocab --sluice-reorder-softmax-barriers="algorithm=2" | sluice-opt | FileCheck %s --check-prefix=ALG2 --implicit-check-not=sluice.all_reduce
// RUN: not sluice-opt %s --sluice-partition-stages="pp=2" --sluice-partition-vocab --sluice-reorder-softmax-barriers="algorithm=3" 2>&1 | FileCheck %s --check-prefix=BADALG

// The `barriers` attribute is checked by the verifier against a count of
// the body's collectives not separated by heavy compute, so the numbers
// below are the rewritten bodies' real barrier counts.

// Naive (Figure 4): max | sum | reduce of the input gradient, each
// separated from the next by heavy work: 3 barriers.
// NAIVE: sluice.vocab_output @vout{{.*}}algorithm = 0 : i64, barriers = 3 : i64
// NAIVE:      %[[X:.+]] = sluice.broadcast
// NAIVE-NEXT: %[[Y:.+]] = sluice.shard_logits %[[X]]
// NAIVE-NEXT: %[[M:.+]] = sluice.shard_max %[[Y]]
// NAIVE-NEXT: %[[GM:.+]] = sluice.all_reduce <max> %[[M]]
// NAIVE-NEXT: %[[S:.+]] = sluice.shard_sum_exp %[[Y]], %[[GM]]
// NAIVE-NEXT: %[[GS:.+]] = sluice.all_reduce <sum> %[[S]]
// NAIVE-NEXT: sluice.shard_softmax %[[Y]], %[[GM]], %[[GS]]

// Algorithm 1 (equation 5): the local softmax' uses the local max and sum;
// the max and the sum of the rescaled local sums form one barrier, the
// reduce of the input gradient the second.
// ALG1: sluice.vocab_output @vout{{.*}}algorithm = 1 : i64, barriers = 2 : i64
// ALG1:      %[[X:.+]] = sluice.broadcast
// ALG1-NEXT: %[[Y:.+]] = sluice.shard_logits %[[X]]
// ALG1-NEXT: %[[M:.+]] = sluice.shard_max %[[Y]]
// ALG1-NEXT: %[[S1:.+]] = sluice.shard_sum_exp %[[Y]], %[[M]]
// ALG1-NEXT: %[[P1:.+]] = sluice.shard_softmax %[[Y]], %[[M]], %[[S1]]
// ALG1-NEXT: %[[GM:.+]] = sluice.all_reduce <max> %[[M]]
// ALG1-NEXT: %[[S2:.+]] = sluice.rescale_sum %[[S1]], %[[M]], %[[GM]]
// ALG1-NEXT: %[[GS:.+]] = sluice.all_reduce <sum> %[[S2]]
// ALG1-NEXT: %[[P:.+]] = sluice.rescale_probs %[[P1]], %[[S2]], %[[GS]]
// ALG1-NEXT: %[[L:.+]] = sluice.shard_loss %[[Y]], %[[GM]], %[[GS]]
// ALG1-NEXT: %[[G:.+]] = sluice.softmax_grad %[[P]]
// ALG1-NEXT: %[[DX:.+]] = sluice.shard_input_grad %[[G]]
// ALG1-NEXT: %[[R:.+]] = sluice.reduce %[[DX]] root 1
// ALG1-NEXT: sluice.shard_weight_grad %[[G]], %[[X]]
// ALG1-NEXT: sluice.vocab_yield %[[L]], %[[R]]

// Algorithm 2 (equation 6): A = softmax' W and B = G W before the barrier;
// inside it only dX = A s'/s - B; the reduce joins the barrier: 1 barrier.
// The old (p - G) W matmul is gone: exactly one shard_input_grad remains,
// on the local softmax'.
// ALG2: sluice.vocab_output @vout{{.*}}algorithm = 2 : i64, barriers = 1 : i64
// ALG2:      %[[X:.+]] = sluice.broadcast
// ALG2-NEXT: %[[Y:.+]] = sluice.shard_logits %[[X]]
// ALG2-NEXT: %[[M:.+]] = sluice.shard_max %[[Y]]
// ALG2-NEXT: %[[S1:.+]] = sluice.shard_sum_exp %[[Y]], %[[M]]
// ALG2-NEXT: %[[P1:.+]] = sluice.shard_softmax %[[Y]], %[[M]], %[[S1]]
// ALG2-NEXT: %[[A:.+]] = sluice.shard_input_grad %[[P1]]
// ALG2-NEXT: %[[B:.+]] = sluice.label_rows
// ALG2-NEXT: %[[GM:.+]] = sluice.all_reduce <max> %[[M]]
// ALG2-NEXT: %[[S2:.+]] = sluice.rescale_sum %[[S1]], %[[M]], %[[GM]]
// ALG2-NEXT: %[[GS:.+]] = sluice.all_reduce <sum> %[[S2]]
// ALG2-NEXT: %[[DX:.+]] = sluice.combine_grad %[[A]], %[[B]], %[[S2]], %[[GS]]
// ALG2-NEXT: %[[R:.+]] = sluice.reduce %[[DX]] root 1
// ALG2-NEXT: %[[P:.+]] = sluice.rescale_probs %[[P1]], %[[S2]], %[[GS]]
// ALG2-NEXT: %[[L:.+]] = sluice.shard_loss %[[Y]], %[[GM]], %[[GS]]
// ALG2-NEXT: %[[G:.+]] = sluice.softmax_grad %[[P]]
// ALG2-NEXT: sluice.shard_weight_grad %[[G]], %[[X]]
// ALG2-NEXT: sluice.vocab_yield %[[L]], %[[R]]
// ALG2-NOT:  sluice.shard_input_grad

// BADALG: error: 'sluice.vocab_output' op cannot reorder to 'algorithm' = 3 (expected 1 or 2)

sluice.model @m {seq_len = 16, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 101, positions = 16} : tensor<1x16x32xf32>
  %x0 = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, ffn = 128, norm = layernorm, mlp = gelu} : tensor<1x16x32xf32>
  %x1 = sluice.transformer_layer %x0 {heads = 4, kv_heads = 4, ffn = 128, norm = layernorm, mlp = gelu} : tensor<1x16x32xf32>
  %x2 = sluice.transformer_layer %x1 {heads = 4, kv_heads = 4, ffn = 128, norm = layernorm, mlp = gelu} : tensor<1x16x32xf32>
  %x3 = sluice.transformer_layer %x2 {heads = 4, kv_heads = 4, ffn = 128, norm = layernorm, mlp = gelu} : tensor<1x16x32xf32>
  %loss = sluice.output_layer %x3 {vocab = 101, norm = layernorm} : tensor<1x16x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}
