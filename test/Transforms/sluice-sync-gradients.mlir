// RUN: sluice-opt %s --sluice-partition-stages="pp=2" --sluice-split-passes="split=false" --sluice-schedule="schedule=1f1b microbatches=2" --sluice-sync-gradients="data-parallel=2" | FileCheck %s --implicit-check-not=sluice.grad_sync
// RUN: sluice-opt %s --sluice-partition-stages="pp=2 virtual=2 placement=vshape" --sluice-split-passes --sluice-schedule="schedule=zb-v microbatches=2" --sluice-sync-gradients="data-parallel=4" | FileCheck %s --check-prefix=VSHAPE --implicit-check-not=sluice.grad_sync
// RUN: sluice-opt %s --sluice-partition-stages="pp=2" --sluice-split-passes="split=false" --sluice-schedule="schedule=1f1b microbatches=2" --sluice-sync-gradients="data-parallel=1" | FileCheck %s --check-prefix=ONE
// RUN: not sluice-opt %s --sluice-partition-stages="pp=2" --sluice-split-passes="split=false" --sluice-schedule="schedule=1f1b microbatches=2" --sluice-sync-gradients="data-parallel=2" --sluice-sync-gradients="data-parallel=2" 2>&1 | FileCheck %s --check-prefix=TWICE
// RUN: not sluice-opt %s --sluice-partition-stages="pp=2" --sluice-split-passes="split=false" --sluice-schedule="schedule=1f1b microbatches=2" --sluice-sync-gradients="data-parallel=0" 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: sluice-opt %s --sluice-partition-stages="pp=2" --sluice-split-passes="split=false" --sluice-schedule="schedule=1f1b microbatches=2" --sluice-sync-gradients="data-parallel=2 zero=1" | FileCheck %s --check-prefix=ZERO1
// RUN: not sluice-opt %s --sluice-partition-stages="pp=2" --sluice-split-passes="split=false" --sluice-schedule="schedule=1f1b microbatches=2" --sluice-sync-gradients="data-parallel=1 zero=1" 2>&1 | FileCheck %s --check-prefix=ZEROALONE
// RUN: not sluice-opt %s --sluice-partition-stages="pp=2" --sluice-split-passes="split=false" --sluice-schedule="schedule=1f1b microbatches=2" --sluice-sync-gradients="data-parallel=2 zero=4" 2>&1 | FileCheck %s --check-prefix=ZEROSTAGE
// RUN: sluice-opt %s --sluice-partition-stages="pp=2" --sluice-split-passes="split=false" --sluice-schedule="schedule=1f1b microbatches=2" --sluice-sync-gradients="data-parallel=2 zero=2" | FileCheck %s --check-prefix=ZERO2
// RUN: sluice-opt %inputs/tiny-moe.mlir --sluice-partition-stages="pp=2" --sluice-split-passes="split=false" --sluice-schedule="schedule=1f1b microbatches=2" --sluice-sync-gradients="data-parallel=4 expert-parallel=2 zero=2" | FileCheck %s --check-prefix=ZERO2EXPERTS
// RUN: sluice-opt %s --sluice-partition-stages="pp=2" --sluice-split-passes="split=false" --sluice-schedule="schedule=1f1b microbatches=2" --sluice-sync-gradients="data-parallel=2 zero=3" | FileCheck %s --check-prefix=ZERO3
// RUN: sluice-opt %s --sluice-partition-stages="pp=2" --sluice-split-passes="split=false" --sluice-schedule="schedule=1f1b microbatches=2" --sluice-sync-gradients="data-parallel=2 zero=3 reshard-per-step=true" | FileCheck %s --check-prefix=ZERO3STEP
// RUN: not sluice-opt %s --sluice-partition-stages="pp=2" --sluice-split-passes="split=false" --sluice-schedule="schedule=1f1b microbatches=2" --sluice-sync-gradients="data-parallel=2 zero=2 reshard-per-step=true" 2>&1 | FileCheck %s --check-prefix=RESHARD2
// RUN: not sluice-opt %inputs/tiny-deepseek-moe.mlir --sluice-partition-stages="pp=2" --sluice-split-passes="split=false" --sluice-schedule="schedule=1f1b microbatches=2" --sluice-sync-gradients="data-parallel=2 zero=3" 2>&1 | FileCheck %s --check-prefix=ZERO3BIAS
// RUN: sluice-opt %s --sluice-partition-stages="pp=2" --sluice-split-passes="split=false" --sluice-schedule="schedule=1f1b microbatches=12 repeats=true" --sluice-sync-gradients="data-parallel=2" --sluice-verify-schedule 2>&1 | FileCheck %s --check-prefix=REPEAT --implicit-check-not=sluice.grad_sync
// RUN: sluice-opt %inputs/tiny-moe.mlir --sluice-partition-stages="pp=2" --sluice-split-passes="split=false" --sluice-schedule="schedule=1f1b microbatches=2" --sluice-sync-gradients="data-parallel=4 expert-parallel=2" | FileCheck %s --check-prefix=EXPERTS
// RUN: not sluice-opt %inputs/tiny-moe.mlir --sluice-partition-stages="pp=2" --sluice-split-passes="split=false" --sluice-schedule="schedule=1f1b microbatches=2" --sluice-sync-gradients="data-parallel=4 expert-parallel=3" 2>&1 | FileCheck %s --check-prefix=EXPERTSDIVIDE
// RUN: not sluice-opt %inputs/tiny-moe.mlir --sluice-partition-stages="pp=2" --sluice-split-passes="split=false" --sluice-schedule="schedule=1f1b microbatches=2" --sluice-sync-gradients="data-parallel=3 expert-parallel=3" 2>&1 | FileCheck %s --check-prefix=EXPERTSSPLIT
// RUN: sluice-opt %inputs/tiny-moe.mlir --sluice-partition-stages="pp=2" --sluice-split-passes="split=false" --sluice-schedule="schedule=1f1b microbatches=2" --sluice-sync-gradients="data-parallel=4 expert-parallel=2 zero=1" | FileCheck %s --check-prefix=EXPERTSZERO
// RUN: not sluice-opt %s --sluice-partition-stages="pp=2" --sluice-split-passes="split=false" --sluice-schedule="schedule=1f1b microbatches=2" --sluice-sync-gradients="data-parallel=2 expert-parallel=2" 2>&1 | FileCheck %s --check-prefix=EXPERTSDENSE
// RUN: sluice-opt %inputs/tiny-llama.mlir --sluice-partition-stages="pp=2" --sluice-split-passes="split=false" --sluice-schedule="schedule=1f1b microbatches=2" --sluice-sync-gradients="context-parallel=2 zero=1" | FileCheck %s --check-prefix=CONTEXT
// RUN: not sluice-opt %s --sluice-partition-stages="pp=2" --sluice-split-passes="split=false" --sluice-schedule="schedule=1f1b microbatches=2" --sluice-sync-gradients="context-parallel=0" 2>&1 | FileCheck %s --check-prefix=CONTEXTZERO
// RUN: sluice-opt %inputs/tiny-moe.mlir --sluice-partition-stages="pp=2" --sluice-split-passes="split=false" --sluice-schedule="schedule=1f1b microbatches=2" --sluice-sync-gradients="data-parallel=2 expert-parallel=2 context-parallel=2 zero=1" | FileCheck %s --check-prefix=CONTEXTEXPERTS

// Each stage's gradients are averaged once, right after its last pass on
// its device (--implicit-check-not: no other grad_sync): the first stage's
// last BW ends device 0's program, the second stage's comes before device 1
// sends the last gradient back.
// CHECK-LABEL: sluice.program @plan for @m {devices = 2, microbatches = 2, slices = 1, schedule = "1f1b"} dp 2
// CHECK:         sluice.device 0 {
// CHECK:           sluice.exec BW @s0 {mb = 1, slice = 0}
// CHECK-NEXT:      sluice.grad_sync @s0
// CHECK-NEXT:    }
// CHECK:         sluice.device 1 {
// CHECK:           sluice.exec BW @s1 {mb = 1, slice = 0}
// CHECK-NEXT:      sluice.grad_sync @s1
// CHECK-NEXT:      sluice.send BW @s1 {mb = 1, slice = 0} to 0
// CHECK-NEXT:    }

// A V: device 0 holds the first and the last stage; the last stage's
// gradients are final (after its last W) while device 0 still runs the
// first stage's backward passes, so its all-reduce overlaps them. Each
// stage is averaged once (--implicit-check-not: no other grad_sync).
// VSHAPE-LABEL: schedule = "zb-v"} dp 4
// VSHAPE:         sluice.device 0 {
// VSHAPE:           sluice.exec W @s3 {mb = 1, slice = 0}
// VSHAPE-NEXT:      sluice.grad_sync @s3
// VSHAPE:           sluice.exec B @s0 {mb = 1, slice = 0}
// VSHAPE:           sluice.exec W @s0 {mb = 1, slice = 0}
// VSHAPE-NEXT:      sluice.grad_sync @s0
// VSHAPE-NEXT:    }
// VSHAPE:         sluice.device 1 {
// VSHAPE:           sluice.exec W @s2 {mb = 1, slice = 0}
// VSHAPE-NEXT:      sluice.grad_sync @s2
// VSHAPE-NEXT:      sluice.exec W @s1 {mb = 1, slice = 0}
// VSHAPE-NEXT:      sluice.grad_sync @s1
// VSHAPE-NEXT:    }

// A stage whose last pass is in a repeat block's last run: that run is
// written out after the block (count 12 -> 11), and the sync follows the
// pass in it. The program still runs every pass once (the verifier's
// count is the flat program's: 2 x 12 x 4 instructions and 2 syncs).
// REPEAT:         remark: verified: 98 instructions of schedule '1f1b' on 2 devices
// REPEAT:         sluice.device 0 {
// REPEAT:           sluice.repeat 11 mb_step 1 {
// REPEAT:           sluice.exec BW @s0 {mb = 11, slice = 0}
// REPEAT-NEXT:      sluice.grad_sync @s0
// REPEAT-NEXT:    }
// REPEAT:         sluice.device 1 {
// REPEAT-NEXT:      sluice.repeat 11 mb_step 1 {
// REPEAT:             sluice.send BW @s1 {mb = 0, slice = 0} to 0
// REPEAT-NEXT:      }
// REPEAT-NEXT:      sluice.recv F @s0 {mb = 11, slice = 0} from 0
// REPEAT-NEXT:      sluice.exec F @s1 {mb = 11, slice = 0}
// REPEAT-NEXT:      sluice.exec BW @s1 {mb = 11, slice = 0}
// REPEAT-NEXT:      sluice.grad_sync @s1
// REPEAT-NEXT:      sluice.send BW @s1 {mb = 11, slice = 0} to 0
// REPEAT-NEXT:    }

// One replica: nothing to average, the program is unchanged.
// ONE-LABEL: schedule = "1f1b"} {
// ONE-NOT: grad_sync

// TWICE: error: 'sluice.program' op already has 2 data-parallel replicas
// ZERO: error: 'sluice.program' op cannot have 0 data-parallel replicas: the count must be positive

// ZeRO-1: the same grad_syncs; the program records that they
// reduce-scatter and that the optimizer state is sharded.
// ZERO1-LABEL: sluice.program @plan for @m {devices = 2, microbatches = 2, slices = 1, schedule = "1f1b"} dp 2 zero 1
// ZERO1: sluice.grad_sync @s1
// ZEROALONE: error: 'sluice.program' op cannot use ZeRO stage 1: ZeRO stage 1 shards the optimizer state over the data-parallel replicas, but dp = 1 (it needs at least 2)
// ZEROSTAGE: error: 'sluice.program' op cannot use ZeRO stage 4: ZeRO stage 4 is not one Sluice runs (0, 1, 2 or 3)

// ZeRO-2: the same grad_syncs (each now marks where the stage's last
// per-layer reduce-scatter is done), with expert parallelism too.
// ZERO2-LABEL: sluice.program @plan for @m {devices = 2, microbatches = 2, slices = 1, schedule = "1f1b"} dp 2 zero 2
// ZERO2: sluice.grad_sync @s1
// ZERO2EXPERTS: schedule = "1f1b"} dp 4 zero 2 ep 2 {

// ZeRO-3: the same grad_syncs again (the runtime gathers each layer's
// weights before the passes that use them), and the re-shard choice
// recorded only where it is ZeRO-3's; a sigmoid router's bias, which
// DeepSeek's balance moves outside Adam, is refused by name.
// ZERO3-LABEL: sluice.program @plan for @m {devices = 2, microbatches = 2, slices = 1, schedule = "1f1b"} dp 2 zero 3 {
// ZERO3: sluice.grad_sync @s1
// ZERO3STEP: schedule = "1f1b"} dp 2 zero 3 reshard_per_step {
// RESHARD2: error: 'sluice.program' op cannot re-shard per step under ZeRO stage 2: the choice is ZeRO-3's (the gathered weights)
// ZERO3BIAS: error: 'sluice.program' op cannot use ZeRO stage 3: layer 1: its sigmoid router's bias is read in fp32 and moved outside Adam (auxiliary-loss-free balance), which ZeRO-3 does not shard yet; use ZeRO stage 2

// Expert parallelism: the program records it (the grad_syncs stay where
// they are; the runtime sums the expert maps over their own replicas), and
// refuses expert groups that do not divide the replicas, experts that do
// not divide over the members and a model with no experts; ZeRO-1 combines
// with it.
// EXPERTS-LABEL: sluice.program @plan for @tiny_moe {devices = 2, microbatches = 2, slices = 1, schedule = "1f1b"} dp 4 ep 2 {
// EXPERTS:         sluice.grad_sync @s0
// EXPERTSDIVIDE: error: 'sluice.program' op cannot split the experts over 3 expert-parallel replicas: ep must be positive and divide the 4 data-parallel replicas (the expert groups are ep of them)
// EXPERTSSPLIT: error: 'sluice.program' op layer 0: its 4 experts ('experts') do not split over 3 expert-parallel members (ep must divide every sparse layer's expert count)
// EXPERTSZERO: schedule = "1f1b"} dp 4 zero 1 ep 2 {
// EXPERTSDENSE: error: 'sluice.program' op expert parallelism (ep = 2) splits the experts of mixture-of-experts layers, and the model has none ('experts' on no layer)

sluice.model @m {seq_len = 16, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 100} : tensor<1x16x32xf32>
  %x0 = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, ffn = 128, norm = layernorm, mlp = gelu} : tensor<1x16x32xf32>
  %x1 = sluice.transformer_layer %x0 {heads = 4, kv_heads = 4, ffn = 128, norm = layernorm, mlp = gelu} : tensor<1x16x32xf32>
  %x2 = sluice.transformer_layer %x1 {heads = 4, kv_heads = 4, ffn = 128, norm = layernorm, mlp = gelu} : tensor<1x16x32xf32>
  %x3 = sluice.transformer_layer %x2 {heads = 4, kv_heads = 4, ffn = 128, norm = layernorm, mlp = gelu} : tensor<1x16x32xf32>
  %loss = sluice.output_layer %x3 {vocab = 100, norm = layernorm} : tensor<1x16x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// Context parallelism: one replica of two context-parallel ranks sums its
// gradients over both (each saw half of every sequence), so each stage
// gets its grad_sync as with two replicas; ZeRO shards over the two.
// CONTEXT-LABEL: sluice.program @plan for @tiny_llama {devices = 2, microbatches = 2, slices = 1, schedule = "1f1b"} cp 2 zero 1 {
// CONTEXT:         sluice.device 0 {
// CONTEXT:           sluice.grad_sync @s0
// CONTEXT:         sluice.device 1 {
// CONTEXT:           sluice.grad_sync @s1

// CONTEXTZERO: error: 'sluice.program' op cannot split the sequences over 0 context-parallel ranks: the count must be positive

// With expert parallelism: the expert groups are ep replicas at one
// context rank, and the expert maps' grad_syncs are the stage's as the
// rest's (the runtime sums them over the dp / ep x cp ranks holding them).
// CONTEXTEXPERTS-LABEL: sluice.program @plan for @tiny_moe {devices = 2, microbatches = 2, slices = 1, schedule = "1f1b"} dp 2 cp 2 zero 1 ep 2 {
// CONTEXTEXPERTS:         sluice.grad_sync @s0
// CONTEXTEXPERTS:         sluice.grad_sync @s1
