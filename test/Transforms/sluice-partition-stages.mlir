// RUN: sluice-opt %s --sluice-partition-stages="pp=2" | FileCheck %s --check-prefix=LOOP
// RUN: sluice-opt %s --sluice-partition-stages="pp=2 virtual=2 placement=interleaved" | FileCheck %s --check-prefix=INTER
// RUN: sluice-opt %s --sluice-partition-stages="pp=2 virtual=2 placement=vshape" | FileCheck %s --check-prefix=VSHAPE
// RUN: sluice-opt %s --sluice-partition-stages="pp=2 balance=compute" | FileCheck %s --check-prefix=REDIS
// RUN: not sluice-opt %s --sluice-partition-stages="pp=8" 2>&1 | FileCheck %s --check-prefix=TOOMANY
// RUN: not sluice-opt %s --sluice-partition-stages="pp=0" 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: not sluice-opt %s --sluice-partition-stages="pp=2 virtual=2" 2>&1 | FileCheck %s --check-prefix=LOOPCHUNKS
// RUN: not sluice-opt %s --sluice-partition-stages="pp=2 placement=vshape" 2>&1 | FileCheck %s --check-prefix=VCHUNKS
// RUN: not sluice-opt %s --sluice-partition-stages="pp=2 placement=ring" 2>&1 | FileCheck %s --check-prefix=PLACEMENT
// RUN: not sluice-opt %s --sluice-partition-stages="pp=2 balance=memory" 2>&1 | FileCheck %s --check-prefix=BALANCE

// Six equal layers; the output layer (vocab 800) costs about two of them.

// Uniform: three layers each, embedding first, output layer last.
// LOOP:      %[[S0:.+]] = sluice.stage @s0 device 0 chunk 0 -> tensor<1x16x32xf32> {
// LOOP-NEXT:   sluice.embedding
// LOOP-COUNT-3: sluice.transformer_layer
// LOOP-NEXT:   sluice.yield
// LOOP:      %[[S1:.+]] = sluice.stage @s1 device 1 chunk 0 (%[[S0]] : tensor<1x16x32xf32>) -> tensor<f32> {
// LOOP-NEXT: ^bb0(%[[ARG:.+]]: tensor<1x16x32xf32>):
// LOOP-NEXT:   sluice.transformer_layer %[[ARG]]
// LOOP-COUNT-2: sluice.transformer_layer
// LOOP-NEXT:   %[[LOSS:.+]] = sluice.output_layer
// LOOP-NEXT:   sluice.yield %[[LOSS]] : tensor<f32>
// LOOP:      sluice.return %[[S1]] : tensor<f32>

// Megatron's interleaving: stage i on device i mod 2.
// INTER: sluice.stage @s0 device 0 chunk 0
// INTER: sluice.stage @s1 device 1 chunk 0
// INTER: sluice.stage @s2 device 0 chunk 1
// INTER: sluice.stage @s3 device 1 chunk 1

// V-shape: device i holds stages i and 2p - 1 - i.
// VSHAPE: sluice.stage @s0 device 0 chunk 0
// VSHAPE: sluice.stage @s1 device 1 chunk 0
// VSHAPE: sluice.stage @s2 device 1 chunk 1
// VSHAPE: sluice.stage @s3 device 0 chunk 1

// Redis: the heavy output layer pushes a layer to the first stage.
// REDIS:      sluice.stage @s0 device 0 chunk 0
// REDIS-NEXT:   sluice.embedding
// REDIS-COUNT-4: sluice.transformer_layer
// REDIS-NEXT:   sluice.yield
// REDIS:      sluice.stage @s1 device 1 chunk 0
// REDIS-NEXT: ^bb0
// REDIS-COUNT-2: sluice.transformer_layer
// REDIS-NEXT:   sluice.output_layer

// TOOMANY: error: 'sluice.model' op cannot be partitioned with 'pp' = 8 and 'virtual' = 1: 8 stages need at least 8 transformer layers, the model has 6
// ZERO: error: 'sluice.model' op cannot be partitioned with 'pp' = 0: it must be positive
// LOOPCHUNKS: error: 'sluice.model' op placement 'loop' holds one chunk per device: 'virtual' must be 1, got 2 (use interleaved or vshape)
// VCHUNKS: error: 'sluice.model' op placement 'vshape' holds two chunks per device: 'virtual' must be 2, got 1
// PLACEMENT: for the --placement option: Cannot find option named 'ring'!
// BALANCE: for the --balance option: Cannot find option named 'memory'!
sluice.model @m {seq_len = 16, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 800} : tensor<1x16x32xf32>
  %x0 = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, ffn = 128, norm = layernorm, mlp = gelu} : tensor<1x16x32xf32>
  %x1 = sluice.transformer_layer %x0 {heads = 4, kv_heads = 4, ffn = 128, norm = layernorm, mlp = gelu} : tensor<1x16x32xf32>
  %x2 = sluice.transformer_layer %x1 {heads = 4, kv_heads = 4, ffn = 128, norm = layernorm, mlp = gelu} : tensor<1x16x32xf32>
  %x3 = sluice.transformer_layer %x2 {heads = 4, kv_heads = 4, ffn = 128, norm = layernorm, mlp = gelu} : tensor<1x16x32xf32>
  %x4 = sluice.transformer_layer %x3 {heads = 4, kv_heads = 4, ffn = 128, norm = layernorm, mlp = gelu} : tensor<1x16x32xf32>
  %x5 = sluice.transformer_layer %x4 {heads = 4, kv_heads = 4, ffn = 128, norm = layernorm, mlp = gelu} : tensor<1x16x32xf32>
  %loss = sluice.output_layer %x5 {vocab = 800, norm = layernorm} : tensor<1x16x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}
