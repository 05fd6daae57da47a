// Hand-broken programs, one per rule of sluice-verify-schedule; each error
// points at the offending instruction with a note at the one it conflicts
// with.
// RUN: sluice-opt %s -split-input-file --sluice-verify-schedule -verify-diagnostics
// The verdict is one remark at the program, without the program printed
// after it as an op's diagnostics are.
// RUN: not sluice-opt %s -split-input-file --sluice-verify-schedule -o /dev/null 2>&1 | grep -A3 "remark: verified: 8 " | FileCheck %s --check-prefix=VERDICT --implicit-check-not="see current operation"
// VERDICT: remark: verified: 8 instructions of schedule '1f1b' on 2 devices run every pass once, in order, without deadlock

// A correct program: the verdict, as a remark.
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %0 = sluice.stage @s0 device 0 chunk 0 -> tensor<1x4x8xf32> attributes {passes = [#sluice.pass<F>, #sluice.pass<BW>]} {
    %e = sluice.embedding {vocab = 10} : tensor<1x4x8xf32>
    sluice.yield %e : tensor<1x4x8xf32>
  }
  %1 = sluice.stage @s1 device 1 chunk 0 (%0 : tensor<1x4x8xf32>) -> tensor<f32> attributes {passes = [#sluice.pass<F>, #sluice.pass<BW>]} {
  ^bb0(%a: tensor<1x4x8xf32>):
    %l = sluice.output_layer %a {vocab = 10, norm = layernorm} : tensor<1x4x8xf32> -> tensor<f32>
    sluice.yield %l : tensor<f32>
  }
  sluice.return %1 : tensor<f32>
}
// expected-remark@+1 {{verified: 8 instructions of schedule '1f1b' on 2 devices run every pass once, in order, without deadlock}}
sluice.program @plan for @m {devices = 2, microbatches = 1, slices = 1, schedule = "1f1b"} {
  sluice.device 0 {
    sluice.exec F @s0 {mb = 0, slice = 0}
    sluice.send F @s0 {mb = 0, slice = 0} to 1
    sluice.recv BW @s1 {mb = 0, slice = 0} from 1
    sluice.exec BW @s0 {mb = 0, slice = 0}
  }
  sluice.device 1 {
    sluice.recv F @s0 {mb = 0, slice = 0} from 0
    sluice.exec F @s1 {mb = 0, slice = 0}
    sluice.exec BW @s1 {mb = 0, slice = 0}
    sluice.send BW @s1 {mb = 0, slice = 0} to 0
  }
}

// -----

// missing-recv: the activation never arrives.
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %0 = sluice.stage @s0 device 0 chunk 0 -> tensor<1x4x8xf32> attributes {passes = [#sluice.pass<F>, #sluice.pass<BW>]} {
    %e = sluice.embedding {vocab = 10} : tensor<1x4x8xf32>
    sluice.yield %e : tensor<1x4x8xf32>
  }
  %1 = sluice.stage @s1 device 1 chunk 0 (%0 : tensor<1x4x8xf32>) -> tensor<f32> attributes {passes = [#sluice.pass<F>, #sluice.pass<BW>]} {
  ^bb0(%a: tensor<1x4x8xf32>):
    %l = sluice.output_layer %a {vocab = 10, norm = layernorm} : tensor<1x4x8xf32> -> tensor<f32>
    sluice.yield %l : tensor<f32>
  }
  sluice.return %1 : tensor<f32>
}
sluice.program @plan for @m {devices = 2, microbatches = 1, slices = 1, schedule = "1f1b"} {
  sluice.device 0 {
    // expected-note@+1 {{which runs here}}
    sluice.exec F @s0 {mb = 0, slice = 0}
    sluice.recv BW @s1 {mb = 0, slice = 0} from 1
    sluice.exec BW @s0 {mb = 0, slice = 0}
  }
  sluice.device 1 {
    // expected-error@+1 {{runs F of stage 1, microbatch 0, slice 0 without first receiving F of stage 0, microbatch 0, slice 0 from device 0}}
    sluice.exec F @s1 {mb = 0, slice = 0}
    sluice.exec BW @s1 {mb = 0, slice = 0}
    sluice.send BW @s1 {mb = 0, slice = 0} to 0
  }
}

// -----

// unmatched-send: sent, never received.
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %0 = sluice.stage @s0 device 0 chunk 0 -> tensor<1x4x8xf32> attributes {passes = [#sluice.pass<F>, #sluice.pass<BW>]} {
    %e = sluice.embedding {vocab = 10} : tensor<1x4x8xf32>
    sluice.yield %e : tensor<1x4x8xf32>
  }
  %1 = sluice.stage @s1 device 1 chunk 0 (%0 : tensor<1x4x8xf32>) -> tensor<f32> attributes {passes = [#sluice.pass<F>, #sluice.pass<BW>]} {
  ^bb0(%a: tensor<1x4x8xf32>):
    %l = sluice.output_layer %a {vocab = 10, norm = layernorm} : tensor<1x4x8xf32> -> tensor<f32>
    sluice.yield %l : tensor<f32>
  }
  sluice.return %1 : tensor<f32>
}
sluice.program @plan for @m {devices = 2, microbatches = 1, slices = 1, schedule = "1f1b"} {
  sluice.device 0 {
    sluice.exec F @s0 {mb = 0, slice = 0}
    // expected-error@+1 {{sends F of stage 0, microbatch 0, slice 0 to device 1, which never receives it}}
    sluice.send F @s0 {mb = 0, slice = 0} to 1
    sluice.recv BW @s1 {mb = 0, slice = 0} from 1
    sluice.exec BW @s0 {mb = 0, slice = 0}
  }
  sluice.device 1 {
    sluice.exec F @s1 {mb = 0, slice = 0}
    sluice.exec BW @s1 {mb = 0, slice = 0}
    sluice.send BW @s1 {mb = 0, slice = 0} to 0
  }
}

// -----

// unmatched-recv: received, never sent.
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %0 = sluice.stage @s0 device 0 chunk 0 -> tensor<1x4x8xf32> attributes {passes = [#sluice.pass<F>, #sluice.pass<BW>]} {
    %e = sluice.embedding {vocab = 10} : tensor<1x4x8xf32>
    sluice.yield %e : tensor<1x4x8xf32>
  }
  %1 = sluice.stage @s1 device 1 chunk 0 (%0 : tensor<1x4x8xf32>) -> tensor<f32> attributes {passes = [#sluice.pass<F>, #sluice.pass<BW>]} {
  ^bb0(%a: tensor<1x4x8xf32>):
    %l = sluice.output_layer %a {vocab = 10, norm = layernorm} : tensor<1x4x8xf32> -> tensor<f32>
    sluice.yield %l : tensor<f32>
  }
  sluice.return %1 : tensor<f32>
}
sluice.program @plan for @m {devices = 2, microbatches = 1, slices = 1, schedule = "1f1b"} {
  sluice.device 0 {
    sluice.exec F @s0 {mb = 0, slice = 0}
    sluice.send F @s0 {mb = 0, slice = 0} to 1
    // expected-error@+1 {{receives BW of stage 1, microbatch 0, slice 0 from device 1, which never sends it}}
    sluice.recv BW @s1 {mb = 0, slice = 0} from 1
    sluice.exec BW @s0 {mb = 0, slice = 0}
  }
  sluice.device 1 {
    sluice.recv F @s0 {mb = 0, slice = 0} from 0
    sluice.exec F @s1 {mb = 0, slice = 0}
    sluice.exec BW @s1 {mb = 0, slice = 0}
  }
}

// -----

// backward-before-forward on one stage.
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %0 = sluice.stage @s0 device 0 chunk 0 -> tensor<1x4x8xf32> attributes {passes = [#sluice.pass<F>, #sluice.pass<BW>]} {
    %e = sluice.embedding {vocab = 10} : tensor<1x4x8xf32>
    sluice.yield %e : tensor<1x4x8xf32>
  }
  %1 = sluice.stage @s1 device 1 chunk 0 (%0 : tensor<1x4x8xf32>) -> tensor<f32> attributes {passes = [#sluice.pass<F>, #sluice.pass<BW>]} {
  ^bb0(%a: tensor<1x4x8xf32>):
    %l = sluice.output_layer %a {vocab = 10, norm = layernorm} : tensor<1x4x8xf32> -> tensor<f32>
    sluice.yield %l : tensor<f32>
  }
  sluice.return %1 : tensor<f32>
}
sluice.program @plan for @m {devices = 2, microbatches = 1, slices = 1, schedule = "1f1b"} {
  sluice.device 0 {
    sluice.exec F @s0 {mb = 0, slice = 0}
    sluice.send F @s0 {mb = 0, slice = 0} to 1
    sluice.recv BW @s1 {mb = 0, slice = 0} from 1
    sluice.exec BW @s0 {mb = 0, slice = 0}
  }
  sluice.device 1 {
    sluice.recv F @s0 {mb = 0, slice = 0} from 0
    // expected-error@+1 {{runs BW of stage 1, microbatch 0, slice 0 before F of stage 1, microbatch 0, slice 0}}
    sluice.exec BW @s1 {mb = 0, slice = 0}
    // expected-note@+1 {{which runs here}}
    sluice.exec F @s1 {mb = 0, slice = 0}
    sluice.send BW @s1 {mb = 0, slice = 0} to 0
  }
}

// -----

// send-recv-cycle: each device waits for the other before sending.
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %0 = sluice.stage @s0 device 0 chunk 0 -> tensor<1x4x8xf32> attributes {passes = [#sluice.pass<F>, #sluice.pass<BW>]} {
    %e = sluice.embedding {vocab = 10} : tensor<1x4x8xf32>
    sluice.yield %e : tensor<1x4x8xf32>
  }
  %1 = sluice.stage @s1 device 1 chunk 0 (%0 : tensor<1x4x8xf32>) -> tensor<f32> attributes {passes = [#sluice.pass<F>, #sluice.pass<BW>]} {
  ^bb0(%a: tensor<1x4x8xf32>):
    %l = sluice.output_layer %a {vocab = 10, norm = layernorm} : tensor<1x4x8xf32> -> tensor<f32>
    sluice.yield %l : tensor<f32>
  }
  sluice.return %1 : tensor<f32>
}
sluice.program @plan for @m {devices = 2, microbatches = 1, slices = 1, schedule = "1f1b"} {
  sluice.device 0 {
    // expected-error@+1 {{deadlock: device 0 waits here for BW of stage 1, microbatch 0, slice 0 from device 1, which is itself stuck}}
    sluice.recv BW @s1 {mb = 0, slice = 0} from 1
    sluice.exec F @s0 {mb = 0, slice = 0}
    sluice.send F @s0 {mb = 0, slice = 0} to 1
    sluice.exec BW @s0 {mb = 0, slice = 0}
  }
  sluice.device 1 {
    // expected-note@+1 {{device 1 waits here, before sending it}}
    sluice.recv F @s0 {mb = 0, slice = 0} from 0
    sluice.exec F @s1 {mb = 0, slice = 0}
    sluice.exec BW @s1 {mb = 0, slice = 0}
    sluice.send BW @s1 {mb = 0, slice = 0} to 0
  }
}

// -----

// duplicated-work.
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %0 = sluice.stage @s0 device 0 chunk 0 -> tensor<1x4x8xf32> attributes {passes = [#sluice.pass<F>, #sluice.pass<BW>]} {
    %e = sluice.embedding {vocab = 10} : tensor<1x4x8xf32>
    sluice.yield %e : tensor<1x4x8xf32>
  }
  %1 = sluice.stage @s1 device 1 chunk 0 (%0 : tensor<1x4x8xf32>) -> tensor<f32> attributes {passes = [#sluice.pass<F>, #sluice.pass<BW>]} {
  ^bb0(%a: tensor<1x4x8xf32>):
    %l = sluice.output_layer %a {vocab = 10, norm = layernorm} : tensor<1x4x8xf32> -> tensor<f32>
    sluice.yield %l : tensor<f32>
  }
  sluice.return %1 : tensor<f32>
}
sluice.program @plan for @m {devices = 2, microbatches = 1, slices = 1, schedule = "1f1b"} {
  sluice.device 0 {
    // expected-note@+1 {{first run here}}
    sluice.exec F @s0 {mb = 0, slice = 0}
    // expected-error@+1 {{runs F of stage 0, microbatch 0, slice 0 twice}}
    sluice.exec F @s0 {mb = 0, slice = 0}
  }
  sluice.device 1 {
  }
}

// -----

// missing-work: a device never runs a pass it owns.
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %0 = sluice.stage @s0 device 0 chunk 0 -> tensor<1x4x8xf32> attributes {passes = [#sluice.pass<F>, #sluice.pass<BW>]} {
    %e = sluice.embedding {vocab = 10} : tensor<1x4x8xf32>
    sluice.yield %e : tensor<1x4x8xf32>
  }
  %1 = sluice.stage @s1 device 1 chunk 0 (%0 : tensor<1x4x8xf32>) -> tensor<f32> attributes {passes = [#sluice.pass<F>, #sluice.pass<BW>]} {
  ^bb0(%a: tensor<1x4x8xf32>):
    %l = sluice.output_layer %a {vocab = 10, norm = layernorm} : tensor<1x4x8xf32> -> tensor<f32>
    sluice.yield %l : tensor<f32>
  }
  sluice.return %1 : tensor<f32>
}
sluice.program @plan for @m {devices = 2, microbatches = 1, slices = 1, schedule = "1f1b"} {
  // expected-error@+1 {{never runs BW of stage 0, microbatch 0, slice 0}}
  sluice.device 0 {
    sluice.exec F @s0 {mb = 0, slice = 0}
    sluice.send F @s0 {mb = 0, slice = 0} to 1
    sluice.recv BW @s1 {mb = 0, slice = 0} from 1
  }
  sluice.device 1 {
    sluice.recv F @s0 {mb = 0, slice = 0} from 0
    sluice.exec F @s1 {mb = 0, slice = 0}
    sluice.exec BW @s1 {mb = 0, slice = 0}
    sluice.send BW @s1 {mb = 0, slice = 0} to 0
  }
}

// -----

// work-on-the-wrong-device.
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %0 = sluice.stage @s0 device 0 chunk 0 -> tensor<1x4x8xf32> attributes {passes = [#sluice.pass<F>, #sluice.pass<BW>]} {
    %e = sluice.embedding {vocab = 10} : tensor<1x4x8xf32>
    sluice.yield %e : tensor<1x4x8xf32>
  }
  %1 = sluice.stage @s1 device 1 chunk 0 (%0 : tensor<1x4x8xf32>) -> tensor<f32> attributes {passes = [#sluice.pass<F>, #sluice.pass<BW>]} {
  ^bb0(%a: tensor<1x4x8xf32>):
    %l = sluice.output_layer %a {vocab = 10, norm = layernorm} : tensor<1x4x8xf32> -> tensor<f32>
    sluice.yield %l : tensor<f32>
  }
  sluice.return %1 : tensor<f32>
}
sluice.program @plan for @m {devices = 2, microbatches = 1, slices = 1, schedule = "1f1b"} {
  sluice.device 0 {
    // expected-error@+1 {{runs F of stage 1, microbatch 0, slice 0 on device 0, but stage 1 is on device 1}}
    sluice.exec F @s1 {mb = 0, slice = 0}
  }
  sluice.device 1 {
  }
}

// -----

// work-out-of-range: a microbatch the program does not have.
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %0 = sluice.stage @s0 device 0 chunk 0 -> tensor<1x4x8xf32> attributes {passes = [#sluice.pass<F>, #sluice.pass<BW>]} {
    %e = sluice.embedding {vocab = 10} : tensor<1x4x8xf32>
    sluice.yield %e : tensor<1x4x8xf32>
  }
  %1 = sluice.stage @s1 device 1 chunk 0 (%0 : tensor<1x4x8xf32>) -> tensor<f32> attributes {passes = [#sluice.pass<F>, #sluice.pass<BW>]} {
  ^bb0(%a: tensor<1x4x8xf32>):
    %l = sluice.output_layer %a {vocab = 10, norm = layernorm} : tensor<1x4x8xf32> -> tensor<f32>
    sluice.yield %l : tensor<f32>
  }
  sluice.return %1 : tensor<f32>
}
sluice.program @plan for @m {devices = 2, microbatches = 1, slices = 1, schedule = "1f1b"} {
  sluice.device 0 {
    // expected-error@+1 {{names F of stage 0, microbatch 3, slice 0, which this pipeline does not have}}
    sluice.exec F @s0 {mb = 3, slice = 0}
  }
  sluice.device 1 {
  }
}

// -----

// send-before-its-producer.
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %0 = sluice.stage @s0 device 0 chunk 0 -> tensor<1x4x8xf32> attributes {passes = [#sluice.pass<F>, #sluice.pass<BW>]} {
    %e = sluice.embedding {vocab = 10} : tensor<1x4x8xf32>
    sluice.yield %e : tensor<1x4x8xf32>
  }
  %1 = sluice.stage @s1 device 1 chunk 0 (%0 : tensor<1x4x8xf32>) -> tensor<f32> attributes {passes = [#sluice.pass<F>, #sluice.pass<BW>]} {
  ^bb0(%a: tensor<1x4x8xf32>):
    %l = sluice.output_layer %a {vocab = 10, norm = layernorm} : tensor<1x4x8xf32> -> tensor<f32>
    sluice.yield %l : tensor<f32>
  }
  sluice.return %1 : tensor<f32>
}
sluice.program @plan for @m {devices = 2, microbatches = 1, slices = 1, schedule = "1f1b"} {
  sluice.device 0 {
    // expected-error@+1 {{sends F of stage 0, microbatch 0, slice 0 before it has run}}
    sluice.send F @s0 {mb = 0, slice = 0} to 1
    // expected-note@+1 {{it runs here}}
    sluice.exec F @s0 {mb = 0, slice = 0}
    sluice.recv BW @s1 {mb = 0, slice = 0} from 1
    sluice.exec BW @s0 {mb = 0, slice = 0}
  }
  sluice.device 1 {
    sluice.recv F @s0 {mb = 0, slice = 0} from 0
    sluice.exec F @s1 {mb = 0, slice = 0}
    sluice.exec BW @s1 {mb = 0, slice = 0}
    sluice.send BW @s1 {mb = 0, slice = 0} to 0
  }
}

// -----

// unknown-stage.
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %0 = sluice.stage @s0 device 0 chunk 0 -> tensor<1x4x8xf32> attributes {passes = [#sluice.pass<F>, #sluice.pass<BW>]} {
    %e = sluice.embedding {vocab = 10} : tensor<1x4x8xf32>
    sluice.yield %e : tensor<1x4x8xf32>
  }
  %1 = sluice.stage @s1 device 1 chunk 0 (%0 : tensor<1x4x8xf32>) -> tensor<f32> attributes {passes = [#sluice.pass<F>, #sluice.pass<BW>]} {
  ^bb0(%a: tensor<1x4x8xf32>):
    %l = sluice.output_layer %a {vocab = 10, norm = layernorm} : tensor<1x4x8xf32> -> tensor<f32>
    sluice.yield %l : tensor<f32>
  }
  sluice.return %1 : tensor<f32>
}
sluice.program @plan for @m {devices = 2, microbatches = 1, slices = 1, schedule = "1f1b"} {
  sluice.device 0 {
    // expected-error@+1 {{names stage @s7, which model @m does not have}}
    sluice.exec F @s7 {mb = 0, slice = 0}
  }
  sluice.device 1 {
  }
}

// -----

// unknown-model.
// expected-error@+1 {{'sluice.program' op refers to @nothere, which is not a sluice.model}}
sluice.program @plan for @nothere {devices = 1, microbatches = 1, slices = 1, schedule = "1f1b"} {
  sluice.device 0 {
  }
}

// -----

// A correct program with vocabulary shards: no diagnostics.
sluice.model @a {seq_len = 4, micro_batch = 1, dtype = f32} {
  %0 = sluice.vocab_input @vin -> tensor<1x4x8xf32> attributes {devices = 2 : i64, padded_vocab = 12 : i64, passes = [#sluice.pass<IF>, #sluice.pass<IB>], positions = 4 : i64, root = 0 : i64, vocab = 10 : i64} {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %4 = sluice.shard_lookup : tensor<1x4x8xf32>
    %5 = sluice.reduce %4 root 0 : tensor<1x4x8xf32>
    %6 = sluice.add_positions %5 : tensor<1x4x8xf32>
    %7 = sluice.broadcast %arg0 root 0 : tensor<1x4x8xf32>
    sluice.shard_scatter_grad %7 : tensor<1x4x8xf32>
    sluice.vocab_yield %6 : tensor<1x4x8xf32>
  }
  %1 = sluice.stage @s0 device 0 chunk 0 (%0 : tensor<1x4x8xf32>) -> tensor<1x4x8xf32> attributes {activation_bytes = 1568 : i64, flops = array<i64: 4416, 8832>, passes = [#sluice.pass<F>, #sluice.pass<BW>]} {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %x = sluice.transformer_layer %arg0 {heads = 2, kv_heads = 2, ffn = 16, norm = layernorm, mlp = gelu} : tensor<1x4x8xf32>
    sluice.yield %x : tensor<1x4x8xf32>
  }
  %2 = sluice.stage @s1 device 1 chunk 0 (%1 : tensor<1x4x8xf32>) -> tensor<1x4x8xf32> attributes {activation_bytes = 1568 : i64, flops = array<i64: 4416, 8832>, passes = [#sluice.pass<F>, #sluice.pass<BW>]} {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %x = sluice.transformer_layer %arg0 {heads = 2, kv_heads = 2, ffn = 16, norm = layernorm, mlp = gelu} : tensor<1x4x8xf32>
    %normed = sluice.final_norm %x {norm = layernorm} : tensor<1x4x8xf32>
    sluice.yield %normed : tensor<1x4x8xf32>
  }
  %3 = sluice.vocab_output @vout(%2 : tensor<1x4x8xf32>) -> tensor<f32> attributes {algorithm = 2 : i64, barriers = 1 : i64, devices = 2 : i64, padded_vocab = 12 : i64, passes = [#sluice.pass<S>, #sluice.pass<T>], root = 1 : i64, vocab = 10 : i64} {
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
// expected-remark@+1 {{verified: 48 instructions of schedule '1f1b' on 2 devices run every pass once, in order, without deadlock}}
sluice.program @plan for @a {devices = 2, microbatches = 2, slices = 1, schedule = "1f1b"} {
  sluice.device 0 {
    sluice.collective @vout 0 {mb = 0, slice = 0}
    sluice.exec IF @vin {mb = 0, slice = 0}
    sluice.collective @vin 0 {mb = 0, slice = 0}
    sluice.exec IF @vin {mb = 1, slice = 0}
    sluice.collective @vin 0 {mb = 1, slice = 0}
    sluice.exec F @s0 {mb = 0, slice = 0}
    sluice.send F @s0 {mb = 0, slice = 0} to 1
    sluice.exec F @s0 {mb = 1, slice = 0}
    sluice.send F @s0 {mb = 1, slice = 0} to 1
    sluice.exec S @vout {mb = 0, slice = 0}
    sluice.collective @vout 1 {mb = 0, slice = 0}
    sluice.collective @vout 0 {mb = 1, slice = 0}
    sluice.exec T @vout {mb = 0, slice = 0}
    sluice.exec S @vout {mb = 1, slice = 0}
    sluice.collective @vout 1 {mb = 1, slice = 0}
    sluice.recv BW @s1 {mb = 0, slice = 0} from 1
    sluice.exec BW @s0 {mb = 0, slice = 0}
    sluice.collective @vin 1 {mb = 0, slice = 0}
    sluice.exec T @vout {mb = 1, slice = 0}
    sluice.exec IB @vin {mb = 0, slice = 0}
    sluice.recv BW @s1 {mb = 1, slice = 0} from 1
    sluice.exec BW @s0 {mb = 1, slice = 0}
    sluice.collective @vin 1 {mb = 1, slice = 0}
    sluice.exec IB @vin {mb = 1, slice = 0}
  }
  sluice.device 1 {
    sluice.exec IF @vin {mb = 0, slice = 0}
    sluice.collective @vin 0 {mb = 0, slice = 0}
    sluice.exec IF @vin {mb = 1, slice = 0}
    sluice.collective @vin 0 {mb = 1, slice = 0}
    sluice.collective @vin 1 {mb = 0, slice = 0}
    sluice.collective @vin 1 {mb = 1, slice = 0}
    sluice.recv F @s0 {mb = 0, slice = 0} from 0
    sluice.exec F @s1 {mb = 0, slice = 0}
    sluice.collective @vout 0 {mb = 0, slice = 0}
    sluice.exec S @vout {mb = 0, slice = 0}
    sluice.collective @vout 1 {mb = 0, slice = 0}
    sluice.recv F @s0 {mb = 1, slice = 0} from 0
    sluice.exec F @s1 {mb = 1, slice = 0}
    sluice.collective @vout 0 {mb = 1, slice = 0}
    sluice.exec BW @s1 {mb = 0, slice = 0}
    sluice.send BW @s1 {mb = 0, slice = 0} to 0
    sluice.exec T @vout {mb = 0, slice = 0}
    sluice.exec S @vout {mb = 1, slice = 0}
    sluice.collective @vout 1 {mb = 1, slice = 0}
    sluice.exec BW @s1 {mb = 1, slice = 0}
    sluice.send BW @s1 {mb = 1, slice = 0} to 0
    sluice.exec T @vout {mb = 1, slice = 0}
    sluice.exec IB @vin {mb = 0, slice = 0}
    sluice.exec IB @vin {mb = 1, slice = 0}
  }
}

// -----

// Device 1 issues the input shard's broadcasts in another order.
sluice.model @a {seq_len = 4, micro_batch = 1, dtype = f32} {
  %0 = sluice.vocab_input @vin -> tensor<1x4x8xf32> attributes {devices = 2 : i64, padded_vocab = 12 : i64, passes = [#sluice.pass<IF>, #sluice.pass<IB>], positions = 4 : i64, root = 0 : i64, vocab = 10 : i64} {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %4 = sluice.shard_lookup : tensor<1x4x8xf32>
    %5 = sluice.reduce %4 root 0 : tensor<1x4x8xf32>
    %6 = sluice.add_positions %5 : tensor<1x4x8xf32>
    %7 = sluice.broadcast %arg0 root 0 : tensor<1x4x8xf32>
    sluice.shard_scatter_grad %7 : tensor<1x4x8xf32>
    sluice.vocab_yield %6 : tensor<1x4x8xf32>
  }
  %1 = sluice.stage @s0 device 0 chunk 0 (%0 : tensor<1x4x8xf32>) -> tensor<1x4x8xf32> attributes {activation_bytes = 1568 : i64, flops = array<i64: 4416, 8832>, passes = [#sluice.pass<F>, #sluice.pass<BW>]} {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %x = sluice.transformer_layer %arg0 {heads = 2, kv_heads = 2, ffn = 16, norm = layernorm, mlp = gelu} : tensor<1x4x8xf32>
    sluice.yield %x : tensor<1x4x8xf32>
  }
  %2 = sluice.stage @s1 device 1 chunk 0 (%1 : tensor<1x4x8xf32>) -> tensor<1x4x8xf32> attributes {activation_bytes = 1568 : i64, flops = array<i64: 4416, 8832>, passes = [#sluice.pass<F>, #sluice.pass<BW>]} {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %x = sluice.transformer_layer %arg0 {heads = 2, kv_heads = 2, ffn = 16, norm = layernorm, mlp = gelu} : tensor<1x4x8xf32>
    %normed = sluice.final_norm %x {norm = layernorm} : tensor<1x4x8xf32>
    sluice.yield %normed : tensor<1x4x8xf32>
  }
  %3 = sluice.vocab_output @vout(%2 : tensor<1x4x8xf32>) -> tensor<f32> attributes {algorithm = 2 : i64, barriers = 1 : i64, devices = 2 : i64, padded_vocab = 12 : i64, passes = [#sluice.pass<S>, #sluice.pass<T>], root = 1 : i64, vocab = 10 : i64} {
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
sluice.program @plan for @a {devices = 2, microbatches = 2, slices = 1, schedule = "1f1b"} {
  sluice.device 0 {
    sluice.collective @vout 0 {mb = 0, slice = 0}
    sluice.exec IF @vin {mb = 0, slice = 0}
    sluice.collective @vin 0 {mb = 0, slice = 0}
    sluice.exec IF @vin {mb = 1, slice = 0}
    sluice.collective @vin 0 {mb = 1, slice = 0}
    sluice.exec F @s0 {mb = 0, slice = 0}
    sluice.send F @s0 {mb = 0, slice = 0} to 1
    sluice.exec F @s0 {mb = 1, slice = 0}
    sluice.send F @s0 {mb = 1, slice = 0} to 1
    sluice.exec S @vout {mb = 0, slice = 0}
    sluice.collective @vout 1 {mb = 0, slice = 0}
    sluice.collective @vout 0 {mb = 1, slice = 0}
    sluice.exec T @vout {mb = 0, slice = 0}
    sluice.exec S @vout {mb = 1, slice = 0}
    sluice.collective @vout 1 {mb = 1, slice = 0}
    sluice.recv BW @s1 {mb = 0, slice = 0} from 1
    sluice.exec BW @s0 {mb = 0, slice = 0}
    // expected-note@+1 {{device 0's collective number 2}}
    sluice.collective @vin 1 {mb = 0, slice = 0}
    sluice.exec T @vout {mb = 1, slice = 0}
    sluice.exec IB @vin {mb = 0, slice = 0}
    sluice.recv BW @s1 {mb = 1, slice = 0} from 1
    sluice.exec BW @s0 {mb = 1, slice = 0}
    sluice.collective @vin 1 {mb = 1, slice = 0}
    sluice.exec IB @vin {mb = 1, slice = 0}
  }
  sluice.device 1 {
    sluice.exec IF @vin {mb = 0, slice = 0}
    sluice.collective @vin 0 {mb = 0, slice = 0}
    sluice.exec IF @vin {mb = 1, slice = 0}
    sluice.collective @vin 0 {mb = 1, slice = 0}
    sluice.collective @vin 1 {mb = 1, slice = 0}
    // expected-error@-1 {{issues collective 1 of the input shard, microbatch 1, slice 0 as its collective number 2 of that shard, but device 0 issues collective 1 of the input shard, microbatch 0, slice 0 there: every device must issue a shard's collectives in the same order}}
    sluice.collective @vin 1 {mb = 0, slice = 0}
    sluice.recv F @s0 {mb = 0, slice = 0} from 0
    sluice.exec F @s1 {mb = 0, slice = 0}
    sluice.collective @vout 0 {mb = 0, slice = 0}
    sluice.exec S @vout {mb = 0, slice = 0}
    sluice.collective @vout 1 {mb = 0, slice = 0}
    sluice.recv F @s0 {mb = 1, slice = 0} from 0
    sluice.exec F @s1 {mb = 1, slice = 0}
    sluice.collective @vout 0 {mb = 1, slice = 0}
    sluice.exec BW @s1 {mb = 0, slice = 0}
    sluice.send BW @s1 {mb = 0, slice = 0} to 0
    sluice.exec T @vout {mb = 0, slice = 0}
    sluice.exec S @vout {mb = 1, slice = 0}
    sluice.collective @vout 1 {mb = 1, slice = 0}
    sluice.exec BW @s1 {mb = 1, slice = 0}
    sluice.send BW @s1 {mb = 1, slice = 0} to 0
    sluice.exec T @vout {mb = 1, slice = 0}
    sluice.exec IB @vin {mb = 0, slice = 0}
    sluice.exec IB @vin {mb = 1, slice = 0}
  }
}

// -----

// Device 1 broadcasts X of microbatch 1 before computing it.
sluice.model @a {seq_len = 4, micro_batch = 1, dtype = f32} {
  %0 = sluice.vocab_input @vin -> tensor<1x4x8xf32> attributes {devices = 2 : i64, padded_vocab = 12 : i64, passes = [#sluice.pass<IF>, #sluice.pass<IB>], positions = 4 : i64, root = 0 : i64, vocab = 10 : i64} {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %4 = sluice.shard_lookup : tensor<1x4x8xf32>
    %5 = sluice.reduce %4 root 0 : tensor<1x4x8xf32>
    %6 = sluice.add_positions %5 : tensor<1x4x8xf32>
    %7 = sluice.broadcast %arg0 root 0 : tensor<1x4x8xf32>
    sluice.shard_scatter_grad %7 : tensor<1x4x8xf32>
    sluice.vocab_yield %6 : tensor<1x4x8xf32>
  }
  %1 = sluice.stage @s0 device 0 chunk 0 (%0 : tensor<1x4x8xf32>) -> tensor<1x4x8xf32> attributes {activation_bytes = 1568 : i64, flops = array<i64: 4416, 8832>, passes = [#sluice.pass<F>, #sluice.pass<BW>]} {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %x = sluice.transformer_layer %arg0 {heads = 2, kv_heads = 2, ffn = 16, norm = layernorm, mlp = gelu} : tensor<1x4x8xf32>
    sluice.yield %x : tensor<1x4x8xf32>
  }
  %2 = sluice.stage @s1 device 1 chunk 0 (%1 : tensor<1x4x8xf32>) -> tensor<1x4x8xf32> attributes {activation_bytes = 1568 : i64, flops = array<i64: 4416, 8832>, passes = [#sluice.pass<F>, #sluice.pass<BW>]} {
  ^bb0(%arg0: tensor<1x4x8xf32>):
    %x = sluice.transformer_layer %arg0 {heads = 2, kv_heads = 2, ffn = 16, norm = layernorm, mlp = gelu} : tensor<1x4x8xf32>
    %normed = sluice.final_norm %x {norm = layernorm} : tensor<1x4x8xf32>
    sluice.yield %normed : tensor<1x4x8xf32>
  }
  %3 = sluice.vocab_output @vout(%2 : tensor<1x4x8xf32>) -> tensor<f32> attributes {algorithm = 2 : i64, barriers = 1 : i64, devices = 2 : i64, padded_vocab = 12 : i64, passes = [#sluice.pass<S>, #sluice.pass<T>], root = 1 : i64, vocab = 10 : i64} {
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
sluice.program @plan for @a {devices = 2, microbatches = 2, slices = 1, schedule = "1f1b"} {
  sluice.device 0 {
    sluice.collective @vout 0 {mb = 0, slice = 0}
    sluice.exec IF @vin {mb = 0, slice = 0}
    sluice.collective @vin 0 {mb = 0, slice = 0}
    sluice.exec IF @vin {mb = 1, slice = 0}
    sluice.collective @vin 0 {mb = 1, slice = 0}
    sluice.exec F @s0 {mb = 0, slice = 0}
    sluice.send F @s0 {mb = 0, slice = 0} to 1
    sluice.exec F @s0 {mb = 1, slice = 0}
    sluice.send F @s0 {mb = 1, slice = 0} to 1
    sluice.exec S @vout {mb = 0, slice = 0}
    sluice.collective @vout 1 {mb = 0, slice = 0}
    sluice.collective @vout 0 {mb = 1, slice = 0}
    sluice.exec T @vout {mb = 0, slice = 0}
    sluice.exec S @vout {mb = 1, slice = 0}
    sluice.collective @vout 1 {mb = 1, slice = 0}
    sluice.recv BW @s1 {mb = 0, slice = 0} from 1
    sluice.exec BW @s0 {mb = 0, slice = 0}
    sluice.collective @vin 1 {mb = 0, slice = 0}
    sluice.exec T @vout {mb = 1, slice = 0}
    sluice.exec IB @vin {mb = 0, slice = 0}
    sluice.recv BW @s1 {mb = 1, slice = 0} from 1
    sluice.exec BW @s0 {mb = 1, slice = 0}
    sluice.collective @vin 1 {mb = 1, slice = 0}
    sluice.exec IB @vin {mb = 1, slice = 0}
  }
  sluice.device 1 {
    sluice.exec IF @vin {mb = 0, slice = 0}
    sluice.collective @vin 0 {mb = 0, slice = 0}
    sluice.exec IF @vin {mb = 1, slice = 0}
    sluice.collective @vin 0 {mb = 1, slice = 0}
    sluice.collective @vin 1 {mb = 0, slice = 0}
    sluice.collective @vin 1 {mb = 1, slice = 0}
    sluice.recv F @s0 {mb = 0, slice = 0} from 0
    sluice.exec F @s1 {mb = 0, slice = 0}
    sluice.collective @vout 0 {mb = 0, slice = 0}
    sluice.exec S @vout {mb = 0, slice = 0}
    sluice.collective @vout 1 {mb = 0, slice = 0}
    sluice.collective @vout 0 {mb = 1, slice = 0}
    // expected-error@-1 {{issues collective 0 of the output shard, microbatch 1, slice 0 before F of stage 1, microbatch 1, slice 0, whose result it carries}}
    sluice.recv F @s0 {mb = 1, slice = 0} from 0
    // expected-note@+1 {{which runs here}}
    sluice.exec F @s1 {mb = 1, slice = 0}
    sluice.exec BW @s1 {mb = 0, slice = 0}
    sluice.send BW @s1 {mb = 0, slice = 0} to 0
    sluice.exec T @vout {mb = 0, slice = 0}
    sluice.exec S @vout {mb = 1, slice = 0}
    sluice.collective @vout 1 {mb = 1, slice = 0}
    sluice.exec BW @s1 {mb = 1, slice = 0}
    sluice.send BW @s1 {mb = 1, slice = 0} to 0
    sluice.exec T @vout {mb = 1, slice = 0}
    sluice.exec IB @vin {mb = 0, slice = 0}
    sluice.exec IB @vin {mb = 1, slice = 0}
  }
}

// -----

// paired-with-nothing: an overlapped pass must have a partner after it.
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %0 = sluice.stage @s0 device 0 chunk 0 -> tensor<1x4x8xf32> attributes {passes = [#sluice.pass<F>, #sluice.pass<BW>]} {
    %e = sluice.embedding {vocab = 10} : tensor<1x4x8xf32>
    sluice.yield %e : tensor<1x4x8xf32>
  }
  %1 = sluice.stage @s1 device 1 chunk 0 (%0 : tensor<1x4x8xf32>) -> tensor<f32> attributes {passes = [#sluice.pass<F>, #sluice.pass<BW>]} {
  ^bb0(%a: tensor<1x4x8xf32>):
    %l = sluice.output_layer %a {vocab = 10, norm = layernorm} : tensor<1x4x8xf32> -> tensor<f32>
    sluice.yield %l : tensor<f32>
  }
  sluice.return %1 : tensor<f32>
}
sluice.program @plan for @m {devices = 2, microbatches = 1, slices = 1, schedule = "1f1b"} {
  sluice.device 0 {
    sluice.exec F @s0 {mb = 0, slice = 0}
    sluice.send F @s0 {mb = 0, slice = 0} to 1
    sluice.recv BW @s1 {mb = 0, slice = 0} from 1
    // expected-error@+1 {{pairs BW of stage 0, microbatch 0, slice 0 with nothing: an overlapped pass must be followed at once by the pass it runs beside}}
    sluice.exec BW @s0 {mb = 0, slice = 0} {paired}
  }
  sluice.device 1 {
    sluice.recv F @s0 {mb = 0, slice = 0} from 0
    sluice.exec F @s1 {mb = 0, slice = 0}
    sluice.exec BW @s1 {mb = 0, slice = 0}
    sluice.send BW @s1 {mb = 0, slice = 0} to 0
  }
}

// -----

// paired-same-microbatch: a backward cannot run beside the forward whose
// result it needs.
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %0 = sluice.stage @s0 device 0 chunk 0 -> tensor<1x4x8xf32> attributes {passes = [#sluice.pass<F>, #sluice.pass<BW>]} {
    %e = sluice.embedding {vocab = 10} : tensor<1x4x8xf32>
    sluice.yield %e : tensor<1x4x8xf32>
  }
  %1 = sluice.stage @s1 device 1 chunk 0 (%0 : tensor<1x4x8xf32>) -> tensor<f32> attributes {passes = [#sluice.pass<F>, #sluice.pass<BW>]} {
  ^bb0(%a: tensor<1x4x8xf32>):
    %l = sluice.output_layer %a {vocab = 10, norm = layernorm} : tensor<1x4x8xf32> -> tensor<f32>
    sluice.yield %l : tensor<f32>
  }
  sluice.return %1 : tensor<f32>
}
sluice.program @plan for @m {devices = 2, microbatches = 1, slices = 1, schedule = "1f1b"} {
  sluice.device 0 {
    sluice.exec F @s0 {mb = 0, slice = 0}
    sluice.send F @s0 {mb = 0, slice = 0} to 1
    sluice.recv BW @s1 {mb = 0, slice = 0} from 1
    sluice.exec BW @s0 {mb = 0, slice = 0}
  }
  sluice.device 1 {
    sluice.recv F @s0 {mb = 0, slice = 0} from 0
    // expected-error@+1 {{overlaps F of stage 1, microbatch 0, slice 0, BW of stage 1, microbatch 0, slice 0: pairs microbatch 0's F with its own backward, which needs the F's result}}
    sluice.exec F @s1 {mb = 0, slice = 0} {paired}
    sluice.exec BW @s1 {mb = 0, slice = 0}
    sluice.send BW @s1 {mb = 0, slice = 0} to 0
  }
}
