// One case per verifier rule of the partitioned and program levels.
// RUN: sluice-opt %s -split-input-file -verify-diagnostics -allow-unregistered-dialect

// stage-negative-device
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  // expected-error@+1 {{'sluice.stage' op 'device' must be non-negative, got -1}}
  %0 = sluice.stage @s0 device -1 chunk 0 -> tensor<f32> {
    %e = sluice.embedding {vocab = 10} : tensor<1x4x8xf32>
    %l = sluice.output_layer %e {vocab = 10, norm = layernorm} : tensor<1x4x8xf32> -> tensor<f32>
    sluice.yield %l : tensor<f32>
  }
  sluice.return %0 : tensor<f32>
}

// -----

// stage-flops-without-passes
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  // expected-error@+1 {{'sluice.stage' op 'flops' must give one value per pass, got 2 for 0 passes}}
  %0 = sluice.stage @s0 device 0 chunk 0 -> tensor<f32> attributes {flops = array<i64: 1, 2>} {
    %e = sluice.embedding {vocab = 10} : tensor<1x4x8xf32>
    %l = sluice.output_layer %e {vocab = 10, norm = layernorm} : tensor<1x4x8xf32> -> tensor<f32>
    sluice.yield %l : tensor<f32>
  }
  sluice.return %0 : tensor<f32>
}

// -----

// stage-yields-not-its-last-layer
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %0 = sluice.stage @s0 device 0 chunk 0 -> tensor<1x4x8xf32> {
    %e = sluice.embedding {vocab = 10} : tensor<1x4x8xf32>
    %x = sluice.transformer_layer %e {heads = 2, kv_heads = 2, ffn = 16, norm = layernorm, mlp = gelu} : tensor<1x4x8xf32>
    // expected-error@+1 {{'sluice.yield' op must yield the result of the stage's last layer}}
    sluice.yield %e : tensor<1x4x8xf32>
  }
  %1 = sluice.stage @s1 device 1 chunk 0 (%0 : tensor<1x4x8xf32>) -> tensor<f32> {
  ^bb0(%a: tensor<1x4x8xf32>):
    %l = sluice.output_layer %a {vocab = 10, norm = layernorm} : tensor<1x4x8xf32> -> tensor<f32>
    sluice.yield %l : tensor<f32>
  }
  sluice.return %1 : tensor<f32>
}

// -----

// stage-holds-no-layer
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %0 = sluice.stage @s0 device 0 chunk 0 -> tensor<f32> {
    %e = sluice.embedding {vocab = 10} : tensor<1x4x8xf32>
    %l = sluice.output_layer %e {vocab = 10, norm = layernorm} : tensor<1x4x8xf32> -> tensor<f32>
    sluice.yield %l : tensor<f32>
  }
  // expected-error@+1 {{'sluice.stage' op holds no layer}}
  %1 = sluice.stage @s1 device 1 chunk 0 (%0 : tensor<f32>) -> tensor<f32> {
  ^bb0(%a: tensor<f32>):
    sluice.yield %a : tensor<f32>
  }
  sluice.return %1 : tensor<f32>
}

// -----

// duplicated-stage-name
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  // expected-note@+1 {{first stage @s0 is here}}
  %0 = sluice.stage @s0 device 0 chunk 0 -> tensor<1x4x8xf32> {
    %e = sluice.embedding {vocab = 10} : tensor<1x4x8xf32>
    sluice.yield %e : tensor<1x4x8xf32>
  }
  // expected-error@+1 {{'sluice.stage' op duplicates stage name @s0}}
  %1 = sluice.stage @s0 device 1 chunk 0 (%0 : tensor<1x4x8xf32>) -> tensor<f32> {
  ^bb0(%a: tensor<1x4x8xf32>):
    %l = sluice.output_layer %a {vocab = 10, norm = layernorm} : tensor<1x4x8xf32> -> tensor<f32>
    sluice.yield %l : tensor<f32>
  }
  sluice.return %1 : tensor<f32>
}

// -----

// stage-input-does-not-chain
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  // expected-error@+1 {{'sluice.stage' op is the first stage and must take no input}}
  %0 = sluice.stage @s0 device 0 chunk 0 (%0 : tensor<1x4x8xf32>) -> tensor<1x4x8xf32> {
  ^bb0(%a: tensor<1x4x8xf32>):
    %e = sluice.embedding {vocab = 10} : tensor<1x4x8xf32>
    sluice.yield %e : tensor<1x4x8xf32>
  }
  %1 = sluice.stage @s1 device 1 chunk 0 (%0 : tensor<1x4x8xf32>) -> tensor<f32> {
  ^bb0(%a: tensor<1x4x8xf32>):
    %l = sluice.output_layer %a {vocab = 10, norm = layernorm} : tensor<1x4x8xf32> -> tensor<f32>
    sluice.yield %l : tensor<f32>
  }
  sluice.return %1 : tensor<f32>
}

// -----

// layer-beside-stages
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %0 = sluice.stage @s0 device 0 chunk 0 -> tensor<1x4x8xf32> {
    %e = sluice.embedding {vocab = 10} : tensor<1x4x8xf32>
    sluice.yield %e : tensor<1x4x8xf32>
  }
  // expected-error@+1 {{'sluice.output_layer' op cannot appear beside sluice.stage ops in a partitioned model}}
  %l = sluice.output_layer %0 {vocab = 10, norm = layernorm} : tensor<1x4x8xf32> -> tensor<f32>
  sluice.return %l : tensor<f32>
}

// -----

// program-device-out-of-range
sluice.program @p for @m {devices = 1, microbatches = 1, slices = 1, schedule = "1f1b"} {
  sluice.device 0 {
  }
  // expected-error@+1 {{'sluice.device' op index 3 is outside the program's 1 devices}}
  sluice.device 3 {
  }
}

// -----

// program-duplicated-device
// expected-note@+2 {{first device 0 is here}}
sluice.program @p for @m {devices = 2, microbatches = 1, slices = 1, schedule = "1f1b"} {
  sluice.device 0 {
  }
  // expected-error@+1 {{'sluice.device' op duplicates device 0}}
  sluice.device 0 {
  }
}

// -----

// program-missing-device
// expected-error@+1 {{'sluice.program' op has no sluice.device 1}}
sluice.program @p for @m {devices = 2, microbatches = 1, slices = 1, schedule = "1f1b"} {
  sluice.device 0 {
  }
}

// -----

// program-devices-beyond-any-file: found without a table of 2^31 - 1
// entries.
// expected-error@+1 {{'sluice.program' op has no sluice.device 1}}
sluice.program @p for @m {devices = 2147483647, microbatches = 1, slices = 1, schedule = "1f1b"} {
  sluice.device 0 {
  }
}

// -----

// program-non-positive-microbatches
// expected-error@+1 {{'sluice.program' op 'microbatches' must be positive, got 0}}
sluice.program @p for @m {devices = 1, microbatches = 0, slices = 1, schedule = "1f1b"} {
  sluice.device 0 {
  }
}

// -----

// instruction-negative-microbatch
sluice.program @p for @m {devices = 1, microbatches = 1, slices = 1, schedule = "1f1b"} {
  sluice.device 0 {
    // expected-error@+1 {{'sluice.exec' op 'mb' must be non-negative, got -1}}
    sluice.exec F @s0 {mb = -1, slice = 0}
  }
}

// -----

// send-to-itself
sluice.program @p for @m {devices = 2, microbatches = 1, slices = 1, schedule = "1f1b"} {
  sluice.device 0 {
    // expected-error@+1 {{'sluice.send' op 'to' = 0 is not another device}}
    sluice.send F @s0 {mb = 0, slice = 0} to 0
  }
  sluice.device 1 {
  }
}

// -----

// recv-from-itself
sluice.program @p for @m {devices = 2, microbatches = 1, slices = 1, schedule = "1f1b"} {
  sluice.device 0 {
  }
  sluice.device 1 {
    // expected-error@+1 {{'sluice.recv' op 'from' = 1 is not another device}}
    sluice.recv F @s0 {mb = 0, slice = 0} from 1
  }
}

// -----

// unknown-pass-kind
sluice.program @p for @m {devices = 1, microbatches = 1, slices = 1, schedule = "1f1b"} {
  sluice.device 0 {
    // expected-error@+1 {{unknown pass kind 'X' (expected F, B, W, BW, S, S2, T, IF or IB)}}
    sluice.exec X @s0 {mb = 0, slice = 0}
  }
}

// -----

// program-zero-replicas
// expected-error@+1 {{'sluice.program' op 'dp' must be positive, got 0}}
sluice.program @p for @m {devices = 1, microbatches = 1, slices = 1, schedule = "1f1b"} dp 0 {
  sluice.device 0 {
  }
}

// -----

// program-unknown-zero-stage
// expected-error@+1 {{'sluice.program' op 'zero' = 4: ZeRO stage 4 is not one Sluice runs (0, 1, 2 or 3)}}
sluice.program @p for @m {devices = 1, microbatches = 1, slices = 1, schedule = "1f1b"} dp 2 zero 4 {
  sluice.device 0 {
  }
}

// -----

// program-reshard-without-zero-3
// expected-error@+1 {{'sluice.program' op 'reshard_per_step' chooses when ZeRO-3 re-shards the gathered weights, but 'zero' is 2}}
sluice.program @p for @m {devices = 1, microbatches = 1, slices = 1, schedule = "1f1b"} dp 2 zero 2 reshard_per_step {
  sluice.device 0 {
  }
}

// -----

// program-cp-not-positive
// expected-error@+1 {{'sluice.program' op 'cp' must be positive, got 0}}
sluice.program @p for @m {devices = 1, microbatches = 1, slices = 1, schedule = "1f1b"} cp 0 {
  sluice.device 0 {
  }
}

// -----

// program-zero-without-replicas
// expected-error@+1 {{'sluice.program' op 'zero' = 1: ZeRO stage 1 shards the optimizer state over the data-parallel replicas, but dp = 1 (it needs at least 2)}}
sluice.program @p for @m {devices = 1, microbatches = 1, slices = 1, schedule = "1f1b"} zero 1 {
  sluice.device 0 {
  }
}

// -----

// program-no-expert-members
// expected-error@+1 {{'sluice.program' op 'ep' must be positive, got 0}}
sluice.program @p for @m {devices = 1, microbatches = 1, slices = 1, schedule = "1f1b"} dp 2 ep 0 {
  sluice.device 0 {
  }
}

// -----

// program-expert-groups-do-not-divide-replicas
// expected-error@+1 {{'sluice.program' op 'ep' = 2 splits the experts over that many data-parallel replicas, which must divide 'dp' = 3}}
sluice.program @p for @m {devices = 1, microbatches = 1, slices = 1, schedule = "1f1b"} dp 3 ep 2 {
  sluice.device 0 {
  }
}

// -----

// program-experts-do-not-split
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %0 = sluice.stage @s0 device 0 chunk 0 -> tensor<f32> {
    %e = sluice.embedding {vocab = 10} : tensor<1x4x8xf32>
    %x = sluice.transformer_layer %e {heads = 2, kv_heads = 2, ffn = 8, norm = rmsnorm, mlp = swiglu, experts = 4, top_k = 2} : tensor<1x4x8xf32>
    %l = sluice.output_layer %x {vocab = 10, norm = rmsnorm} : tensor<1x4x8xf32> -> tensor<f32>
    sluice.yield %l : tensor<f32>
  }
  sluice.return %0 : tensor<f32>
}
// expected-error@+1 {{'sluice.program' op layer 0: its 4 experts ('experts') do not split over 3 expert-parallel members (ep must divide every sparse layer's expert count)}}
sluice.program @p for @m {devices = 1, microbatches = 1, slices = 1, schedule = "1f1b"} dp 3 ep 3 {
  sluice.device 0 {
  }
}

// -----

// program-experts-on-a-dense-model
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %0 = sluice.stage @s0 device 0 chunk 0 -> tensor<f32> {
    %e = sluice.embedding {vocab = 10} : tensor<1x4x8xf32>
    %l = sluice.output_layer %e {vocab = 10, norm = layernorm} : tensor<1x4x8xf32> -> tensor<f32>
    sluice.yield %l : tensor<f32>
  }
  sluice.return %0 : tensor<f32>
}
// expected-error@+1 {{'sluice.program' op expert parallelism (ep = 2) splits the experts of mixture-of-experts layers, and the model has none ('experts' on no layer)}}
sluice.program @p for @m {devices = 1, microbatches = 1, slices = 1, schedule = "1f1b"} dp 2 ep 2 {
  sluice.device 0 {
  }
}

// -----

// grad-sync-without-replicas
sluice.program @p for @m {devices = 1, microbatches = 1, slices = 1, schedule = "1f1b"} {
  sluice.device 0 {
    sluice.exec F @s0 {mb = 0, slice = 0}
    // expected-error@+1 {{'sluice.grad_sync' op averages gradients over data-parallel replicas, but the program has none (dp = 1)}}
    sluice.grad_sync @s0
  }
}

// -----

// stage-takes-two-activations: a stage's input is Optional in ODS, so a
// second one is a syntax error
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %0 = sluice.stage @s0 device 0 chunk 0 -> tensor<1x4x8xf32> {
    %e = sluice.embedding {vocab = 10} : tensor<1x4x8xf32>
    sluice.yield %e : tensor<1x4x8xf32>
  }
  // expected-error@+1 {{expected ':'}}
  %1 = sluice.stage @s1 device 1 chunk 0 (%0, %0 : tensor<1x4x8xf32>, tensor<1x4x8xf32>) -> tensor<f32> {
  ^bb0(%a: tensor<1x4x8xf32>, %b: tensor<1x4x8xf32>):
    %l = sluice.output_layer %a {vocab = 10, norm = layernorm} : tensor<1x4x8xf32> -> tensor<f32>
    sluice.yield %l : tensor<f32>
  }
  sluice.return %1 : tensor<f32>
}

// -----

// stage-block-arguments-differ-from-inputs
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %0 = sluice.stage @s0 device 0 chunk 0 -> tensor<1x4x8xf32> {
    %e = sluice.embedding {vocab = 10} : tensor<1x4x8xf32>
    sluice.yield %e : tensor<1x4x8xf32>
  }
  // expected-error@+1 {{'sluice.stage' op block arguments must match the stage's inputs}}
  %1 = sluice.stage @s1 device 1 chunk 0 (%0 : tensor<1x4x8xf32>) -> tensor<f32> {
  ^bb0(%a: tensor<1x4x16xf32>):
    %l = sluice.output_layer %a {vocab = 10, norm = layernorm} : tensor<1x4x16xf32> -> tensor<f32>
    sluice.yield %l : tensor<f32>
  }
  sluice.return %1 : tensor<f32>
}

// -----

// stage-does-not-end-in-yield
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  // expected-error@+1 {{'sluice.stage' op must end in sluice.yield}}
  %0 = sluice.stage @s0 device 0 chunk 0 -> tensor<f32> {
    %e = sluice.embedding {vocab = 10} : tensor<1x4x8xf32>
    %l = sluice.output_layer %e {vocab = 10, norm = layernorm} : tensor<1x4x8xf32> -> tensor<f32>
    "test.terminator"(%l) : (tensor<f32>) -> ()
  }
  sluice.return %0 : tensor<f32>
}

// -----

// program-holds-a-non-device
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %0 = sluice.stage @s0 device 0 chunk 0 -> tensor<f32> {
    %e = sluice.embedding {vocab = 10} : tensor<1x4x8xf32>
    %l = sluice.output_layer %e {vocab = 10, norm = layernorm} : tensor<1x4x8xf32> -> tensor<f32>
    sluice.yield %l : tensor<f32>
  }
  sluice.return %0 : tensor<f32>
}
sluice.program @p for @m {devices = 1, microbatches = 1, slices = 1, schedule = "1f1b"} {
  sluice.device 0 {
  }
  // expected-error@+1 {{'test.op' op cannot appear in a sluice.program: only sluice.device regions can}}
  "test.op"() : () -> ()
}

// -----

// collective-on-the-pipeline-stream
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %0 = sluice.stage @s0 device 0 chunk 0 -> tensor<f32> {
    %e = sluice.embedding {vocab = 10} : tensor<1x4x8xf32>
    %l = sluice.output_layer %e {vocab = 10, norm = layernorm} : tensor<1x4x8xf32> -> tensor<f32>
    sluice.yield %l : tensor<f32>
  }
  sluice.return %0 : tensor<f32>
}
sluice.program @p for @m {devices = 1, microbatches = 1, slices = 1, schedule = "1f1b"} {
  sluice.device 0 {
    // expected-error@+1 {{'sluice.collective' op runs on the 'vocab' or 'compute' stream, not 'comm' (the pipeline's point-to-point stream)}}
    sluice.collective @vout 0 {mb = 0, slice = 0} on comm
  }
}

// -----

// program-for-no-model (symbol uses are checked when the module verifies,
// without any pass)
// expected-error@+1 {{'sluice.program' op refers to @nothere, which is not a sluice.model}}
sluice.program @p for @nothere {devices = 1, microbatches = 1, slices = 1, schedule = "1f1b"} {
  sluice.device 0 {
  }
}

// -----

// instruction-names-no-stage
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %0 = sluice.stage @s0 device 0 chunk 0 -> tensor<f32> {
    %e = sluice.embedding {vocab = 10} : tensor<1x4x8xf32>
    %l = sluice.output_layer %e {vocab = 10, norm = layernorm} : tensor<1x4x8xf32> -> tensor<f32>
    sluice.yield %l : tensor<f32>
  }
  sluice.return %0 : tensor<f32>
}
sluice.program @p for @m {devices = 1, microbatches = 1, slices = 1, schedule = "1f1b"} dp 2 {
  sluice.device 0 {
    sluice.exec F @s0 {mb = 0, slice = 0}
    // expected-error@+1 {{'sluice.grad_sync' op names stage @s1, which model @m does not have}}
    sluice.grad_sync @s1
  }
}

// -----

// collective-names-a-stage
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %0 = sluice.stage @s0 device 0 chunk 0 -> tensor<f32> {
    %e = sluice.embedding {vocab = 10} : tensor<1x4x8xf32>
    %l = sluice.output_layer %e {vocab = 10, norm = layernorm} : tensor<1x4x8xf32> -> tensor<f32>
    sluice.yield %l : tensor<f32>
  }
  sluice.return %0 : tensor<f32>
}
sluice.program @p for @m {devices = 1, microbatches = 1, slices = 1, schedule = "1f1b"} {
  sluice.device 0 {
    // expected-error@+1 {{'sluice.collective' op names @s0, which is not a vocabulary shard of model @m}}
    sluice.collective @s0 0 {mb = 0, slice = 0}
  }
}

// -----

// stage-yield-types-differ
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %0 = sluice.stage @s0 device 0 chunk 0 -> tensor<1x4x16xf32> {
    %e = sluice.embedding {vocab = 10} : tensor<1x4x8xf32>
    %x = sluice.transformer_layer %e {heads = 2, kv_heads = 2, ffn = 16, norm = layernorm, mlp = gelu} : tensor<1x4x8xf32>
    // expected-error@+1 {{'sluice.yield' op yields 'tensor<1x4x8xf32>', the stage's result is 'tensor<1x4x16xf32>'}}
    sluice.yield %x : tensor<1x4x8xf32>
  }
  %1 = sluice.stage @s1 device 1 chunk 0 (%0 : tensor<1x4x16xf32>) -> tensor<f32> {
  ^bb0(%a: tensor<1x4x16xf32>):
    %l = sluice.output_layer %a {vocab = 10, norm = layernorm} : tensor<1x4x16xf32> -> tensor<f32>
    sluice.yield %l : tensor<f32>
  }
  sluice.return %1 : tensor<f32>
}

// -----

// program-unknown-schedule
// expected-error@+1 {{unknown schedule 'hand-written' (expected one of gpipe, 1f1b, interleaved-1f1b, zb-h1, zb-h2, zb-v, v-half, v-min, seq1f1b, seq1f1b-i, terapipe, dualpipev)}}
sluice.program @p for @m {devices = 1, microbatches = 1, slices = 1, schedule = "hand-written"} {
}

// -----

// exec-slot-not-an-integer
sluice.program @p for @m {devices = 1, microbatches = 1, slices = 1, schedule = "1f1b"} {
  sluice.device 0 {
    // expected-error@+1 {{'sluice.exec' op attribute 'state' failed to satisfy constraint: 64-bit integer size}}
    sluice.exec F @s0 {mb = 0, slice = 0} {state = "first"}
  }
}

// -----

// device-buffers-not-sizes
sluice.program @p for @m {devices = 1, microbatches = 1, slices = 1, schedule = "1f1b"} {
  // expected-error@+1 {{'sluice.device' op attribute 'buffers' failed to satisfy constraint: i64 dense array attribute}}
  sluice.device 0 attributes {buffers = [512]} {
  }
}

// -----

// program-step-time-not-a-number
// expected-error@+1 {{'sluice.program' op attribute 'step_time' failed to satisfy constraint: 64-bit float}}
sluice.program @p for @m {devices = 1, microbatches = 1, slices = 1, schedule = "1f1b"} attributes {step_time = "fast"} {
}

// -----

// repeat-count
sluice.program @p for @m {devices = 1, microbatches = 4, slices = 1, schedule = "1f1b"} {
  sluice.device 0 {
    // expected-error@+1 {{'sluice.repeat' op 'count' must be positive, got 0}}
    sluice.repeat 0 mb_step 1 {
      sluice.exec F @s0 {mb = 0, slice = 0}
    }
  }
}

// -----

// repeat-step
sluice.program @p for @m {devices = 1, microbatches = 4, slices = 1, schedule = "1f1b"} {
  sluice.device 0 {
    // expected-error@+1 {{'sluice.repeat' op 'mb_step' must be positive, got 0}}
    sluice.repeat 2 mb_step 0 {
      sluice.exec F @s0 {mb = 0, slice = 0}
    }
  }
}

// -----

// repeat-past-the-microbatches
sluice.program @p for @m {devices = 1, microbatches = 4, slices = 1, schedule = "1f1b"} {
  sluice.device 0 {
    // expected-error@+1 {{'sluice.repeat' op runs 3 times 2 microbatches apart, past the program's 4 microbatches}}
    sluice.repeat 3 mb_step 2 {
      sluice.exec F @s0 {mb = 0, slice = 0}
    }
  }
}

// -----

// repeat-empty
sluice.program @p for @m {devices = 1, microbatches = 4, slices = 1, schedule = "1f1b"} {
  sluice.device 0 {
    // expected-error@+1 {{'sluice.repeat' op has an empty body}}
    sluice.repeat 2 mb_step 1 {
    }
  }
}

// -----

// repeat-grad-sync
sluice.program @p for @m {devices = 1, microbatches = 4, slices = 1, schedule = "1f1b"} dp 2 {
  sluice.device 0 {
    sluice.repeat 2 mb_step 1 {
      sluice.exec W @s0 {mb = 0, slice = 0}
      // expected-error@+1 {{'sluice.grad_sync' op cannot repeat: it averages a stage's gradients once, after the stage's last pass}}
      sluice.grad_sync @s0
    }
  }
}

// -----

// repeat-slot-outside-buffers
sluice.program @p for @m {devices = 1, microbatches = 4, slices = 1, schedule = "1f1b"} {
  sluice.device 0 attributes {buffers = array<i64: 256, 256>} {
    // expected-error@+1 {{'sluice.repeat' op 'slots' maps slot 2, which is not one of the device's 2 buffers}}
    sluice.repeat 2 mb_step 1 slots [0 -> 2] {
      sluice.exec F @s0 {mb = 0, slice = 0} {state = 0 : i64}
    }
  }
}

// -----

// repeat-slot-twice
sluice.program @p for @m {devices = 1, microbatches = 4, slices = 1, schedule = "1f1b"} {
  sluice.device 0 attributes {buffers = array<i64: 256, 256>} {
    // expected-error@+1 {{'sluice.repeat' op 'slots' maps slot 0 twice}}
    sluice.repeat 2 mb_step 1 slots [0 -> 1, 0 -> 0] {
      sluice.exec F @s0 {mb = 0, slice = 0} {state = 0 : i64}
    }
  }
}

// -----

// repeat-nested
sluice.program @p for @m {devices = 1, microbatches = 4, slices = 1, schedule = "1f1b"} {
  sluice.device 0 {
    sluice.repeat 2 mb_step 1 {
      // expected-error@+1 {{'sluice.repeat' op expects parent op 'sluice.device'}}
      sluice.repeat 2 mb_step 1 {
        sluice.exec F @s0 {mb = 0, slice = 0}
      }
    }
  }
}

// -----

// program-expert-members-differ-from-ep
sluice.model @m {seq_len = 16, micro_batch = 1, dtype = f32} {
  %0 = sluice.stage @s0 device 0 chunk 0 -> tensor<f32> {
    %emb = sluice.embedding {vocab = 64} : tensor<1x16x32xf32>
    %x = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, ffn = 24, norm = rmsnorm, mlp = swiglu, experts = 4, top_k = 2} : tensor<1x16x32xf32> shards 1 {
    ^bb0(%in: tensor<1x16x32xf32>):
      %1 = sluice.shard_norm %in : tensor<1x16x32xf32>
      %2 = sluice.tp_copy %1 : tensor<1x16x32xf32>
      // expected-note@+1 {{it is here}}
      %3 = sluice.expert_dispatch %2 over 4 : tensor<1x16x32xf32> -> tensor<1x64x32xf32>
      %4 = sluice.column_parallel <up> %3 : tensor<1x64x32xf32> -> tensor<1x64x24xf32>
      %5 = sluice.column_parallel <gate> %3 : tensor<1x64x32xf32> -> tensor<1x64x24xf32>
      %6 = sluice.shard_activation %4, %5 : tensor<1x64x24xf32>, tensor<1x64x24xf32>
      %7 = sluice.row_parallel <down> %6 : tensor<1x64x24xf32> -> tensor<1x64x32xf32>
      %8 = sluice.expert_combine %7 over 4 : tensor<1x64x32xf32> -> tensor<1x16x32xf32>
      %9 = sluice.tp_reduce %8 : tensor<1x16x32xf32>
      %10 = sluice.residual_add %in, %9 : tensor<1x16x32xf32>
      sluice.layer_yield %10 : tensor<1x16x32xf32>
    }
    %l = sluice.output_layer %x {vocab = 64, norm = rmsnorm} : tensor<1x16x32xf32> -> tensor<f32>
    sluice.yield %l : tensor<f32>
  }
  sluice.return %0 : tensor<f32>
}
// expected-error@+1 {{'sluice.program' op splits the experts over 2 replicas ('ep'), but a 'sluice.expert_dispatch' moves tokens over 4}}
sluice.program @p for @m {devices = 1, microbatches = 1, slices = 1, schedule = "1f1b"} dp 2 ep 2 {
  sluice.device 0 {
  }
}

// -----

// program-capacity-below-the-balanced-share
// expected-error@+1 {{'sluice.program' op 'capacity' = 5.000000e-01 must be at least 1 (the balanced share)}}
sluice.program @p for @m {devices = 1, microbatches = 1, slices = 1, schedule = "1f1b"} dp 2 ep 2 capacity 5.000000e-01 {
  sluice.device 0 {
  }
}

// -----

// program-capacity-without-expert-parallelism
// expected-error@+1 {{'sluice.program' op 'capacity' = 2.000000e+00 sizes expert parallelism's buffers, but 'ep' is 1}}
sluice.program @p for @m {devices = 1, microbatches = 1, slices = 1, schedule = "1f1b"} dp 2 capacity 2.000000e+00 {
  sluice.device 0 {
  }
}
