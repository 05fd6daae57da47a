// RUN: sluice-opt %s --sluice-partition-stages="pp=2" --sluice-split-passes="split=false" --sluice-schedule="schedule=1f1b microbatches=2" --sluice-plan-buffers | FileCheck %s
// RUN: sluice-opt %s --sluice-partition-stages="pp=2" --sluice-split-passes --sluice-schedule="schedule=zb-h1 microbatches=2" --sluice-plan-buffers | FileCheck %s --check-prefix=SPLIT
// RUN: sluice-opt %s --sluice-partition-stages="pp=2" --sluice-split-passes="split=false" --sluice-schedule="schedule=terapipe microbatches=1 slices=2" --sluice-plan-buffers | FileCheck %s --check-prefix=SLICED
// RUN: sluice-opt %s --sluice-partition-stages="pp=2" --sluice-split-passes="split=false" --sluice-schedule="schedule=1f1b microbatches=2" --sluice-shard-tensors="tensor-parallel=2 sequence-parallel=true" --sluice-plan-buffers | FileCheck %s --check-prefix=SP
// An instruction naming a slice, microbatch or stage the program does not
// have (a hand-edited program) is an error on it, not a read past a table.
// RUN: sluice-opt %s --sluice-partition-stages="pp=2" --sluice-split-passes="split=false" --sluice-schedule="schedule=1f1b microbatches=2" | sed '0,/mb = 1, slice = 0/s//mb = 1, slice = 1000000/' | not sluice-opt --sluice-plan-buffers 2>&1 | FileCheck %s --check-prefix=BADSLICE

// A repeat block's body gets its first run's slots and the block the map
// that carries each run's slots to the next (device 0: two rings of three
// slots, F's state, kv and output); where the map changes from one run to
// the next, the block is cut (device 1: the first two runs' received
// activation lands in slots 0 and 4, the later runs' in 5 and 0 in turn).
// RUN: sluice-opt %s --sluice-partition-stages="pp=2" --sluice-split-passes="split=false" --sluice-schedule="schedule=1f1b microbatches=12 repeats=true" --sluice-plan-buffers | FileCheck %s --check-prefix=REPEAT
// REPEAT:        sluice.device 0 attributes {buffers = array<i64: 50688, 16384, 2048, 50688, 16384, 2048, 2048, 47104>} {
// REPEAT:          sluice.repeat 11 mb_step 1 slots [0 -> 3, 1 -> 4, 2 -> 5, 3 -> 0, 4 -> 1, 5 -> 2] {
// REPEAT-NEXT:       sluice.exec F @s0 {mb = 1, slice = 0} {kv = 4 : i64, out = 5 : i64, state = 3 : i64}
// REPEAT:        sluice.device 1
// REPEAT-NEXT:     sluice.repeat 2 mb_step 1 slots [0 -> 4] {
// REPEAT-NEXT:       sluice.recv F @s0 {mb = 0, slice = 0} from 0 {buffer = 0 : i64}
// REPEAT:          sluice.repeat 10 mb_step 1 slots [0 -> 4, 4 -> 0] {
// REPEAT-NEXT:       sluice.recv F @s0 {mb = 2, slice = 0} from 0 {buffer = 5 : i64}
// BADSLICE: error: 'sluice.exec' op names slice 1000000, but the program has 1

// Stage 0 (embedding, two layers of hidden 32, 4 heads of 8, ffn 128) on
// 16 tokens keeps per layer, each region aligned to 256 bytes
// (sluice/PlanFormat/Layout.h): 512 floats of norm 1 output (2048 bytes), 16 of
// 1/std (256), 512 of Q (2048), 4 x 16 of attention log-sum-exp (256), 512
// of context (2048), 512 + 16 of norm 2 (2048 + 256) and 2 x 16 x 128 of
// MLP (16384): 25344 bytes, 50688 for two layers. Keys, values and their
// gradients: 4 x 16 x 32 floats per layer, 16384 bytes. A message is
// 16 x 32 floats, 2048 bytes. BW's weight state (45056 bytes for the
// layers, 2048 for the embedding's gradient) lives only within it.
// CHECK-LABEL: sluice.device 0 attributes {buffers = array<i64: 50688, 16384, 2048, 50688, 16384, 2048, 2048, 47104>} {
// Microbatch 0's forward state (slot 0) and keys (1) live until its BW.
// Sends copy nothing: the activation sent from slot 2 keeps it until this
// device has consumed a message device 1 sent after receiving it (the
// gradient of microbatch 0), so microbatch 1's activation takes slot 5.
// CHECK-NEXT:    sluice.exec F @s0 {mb = 0, slice = 0} {kv = 1 : i64, out = 2 : i64, state = 0 : i64}
// CHECK-NEXT:    sluice.send F @s0 {mb = 0, slice = 0} to 1 {buffer = 2 : i64}
// CHECK-NEXT:    sluice.exec F @s0 {mb = 1, slice = 0} {kv = 4 : i64, out = 5 : i64, state = 3 : i64}
// CHECK-NEXT:    sluice.send F @s0 {mb = 1, slice = 0} to 1 {buffer = 5 : i64}
// CHECK-NEXT:    sluice.recv BW @s1 {mb = 0, slice = 0} from 1 {buffer = 6 : i64}
// CHECK-NEXT:    sluice.exec BW @s0 {mb = 0, slice = 0} {in = 6 : i64, kv = 1 : i64, state = 0 : i64, wstate = 7 : i64}
// Slot 2 is free again once that gradient has been consumed.
// CHECK-NEXT:    sluice.recv BW @s1 {mb = 1, slice = 0} from 1 {buffer = 2 : i64}
// CHECK-NEXT:    sluice.exec BW @s0 {mb = 1, slice = 0} {in = 2 : i64, kv = 4 : i64, state = 3 : i64, wstate = 7 : i64}
// The last device holds one microbatch at a time: its slots are reused,
// but a gradient it sends keeps its slot to the end of the step (device 0
// sends nothing after receiving it). So microbatch 1's activation takes a
// new slot of its own size (4), not the free key-value slot 2: a larger
// slot taken by a smaller value leaves the next keys and values without
// one, and so on up the sizes (the slots of the planner that took larger
// free slots: 2048, 59456, 16384, 53504, 53504 -- 51456 bytes more).
// CHECK-LABEL: sluice.device 1 attributes {buffers = array<i64: 2048, 59456, 16384, 53504, 2048>} {
// CHECK-NEXT:    sluice.recv F @s0 {mb = 0, slice = 0} from 0 {buffer = 0 : i64}
// CHECK-NEXT:    sluice.exec F @s1 {mb = 0, slice = 0} {in = 0 : i64, kv = 2 : i64, state = 1 : i64}
// CHECK-NEXT:    sluice.exec BW @s1 {mb = 0, slice = 0} {kv = 2 : i64, out = 0 : i64, state = 1 : i64, wstate = 3 : i64}
// CHECK-NEXT:    sluice.send BW @s1 {mb = 0, slice = 0} to 0 {buffer = 0 : i64}
// CHECK-NEXT:    sluice.recv F @s0 {mb = 1, slice = 0} from 0 {buffer = 4 : i64}

// Sequence parallelism over 2 shards (sluice/PlanFormat/Layout.h): a shard keeps 8
// of the 16 tokens' norm tensors -- 256 floats of each norm's output (1024
// bytes) and 8 of its 1/std (256) -- and the whole slice's on its 2 heads
// and 64 of ffn: Q 256 floats (1024), log-sum-exp 2 x 16 (256), context
// (1024), MLP 2 x 16 x 64 (8192): 13056 bytes a layer, 26112 for two. Its
// messages are its 8 tokens, 1024 bytes. Weight state per layer: QKV's
// output gradient 16 x 48 floats (3072), the norms' output gradients on 8
// tokens (1024 each), the row-parallel outputs' whole (2048 each), the
// MLP's 16 x 64 (4096): 13312, 26624 for two, and the embedding's whole
// gradient (2048) -- 28672.
// SP-LABEL: sluice.device 0 attributes {buffers = array<i64: 26112, 8192, 1024, 26112, 8192, 1024, 1024, 28672>} {

// Split: B leaves weight state (slot 5) for W.
// SPLIT:      sluice.exec B @s0 {mb = 0, slice = 0} {in = {{[0-9]+}} : i64, kv = 1 : i64, state = 0 : i64, wstate = [[WS:[0-9]+]] : i64}
// SPLIT-NEXT: sluice.exec W @s0 {mb = 0, slice = 0} {state = 0 : i64, wstate = [[WS]] : i64}

// Token slices share their microbatch's keys and values from the first
// slice's F to the first slice's BW, which runs last.
// SLICED-LABEL: sluice.device 0
// SLICED-NEXT:    sluice.exec F @s0 {mb = 0, slice = 0} {kv = [[KV:[0-9]+]] : i64,
// SLICED:         sluice.exec F @s0 {mb = 0, slice = 1} {kv = [[KV]] : i64,
// SLICED:         sluice.exec BW @s0 {mb = 0, slice = 1} {in = {{[0-9]+}} : i64, kv = [[KV]] : i64,
// SLICED:         sluice.exec BW @s0 {mb = 0, slice = 0} {in = {{[0-9]+}} : i64, kv = [[KV]] : i64,
sluice.model @m {seq_len = 16, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 100} : tensor<1x16x32xf32>
  %x0 = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, ffn = 128, norm = layernorm, mlp = gelu} : tensor<1x16x32xf32>
  %x1 = sluice.transformer_layer %x0 {heads = 4, kv_heads = 4, ffn = 128, norm = layernorm, mlp = gelu} : tensor<1x16x32xf32>
  %x2 = sluice.transformer_layer %x1 {heads = 4, kv_heads = 4, ffn = 128, norm = layernorm, mlp = gelu} : tensor<1x16x32xf32>
  %x3 = sluice.transformer_layer %x2 {heads = 4, kv_heads = 4, ffn = 128, norm = layernorm, mlp = gelu} : tensor<1x16x32xf32>
  %loss = sluice.output_layer %x3 {vocab = 100, norm = layernorm} : tensor<1x16x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}
