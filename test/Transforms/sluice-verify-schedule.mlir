// Hand-broken programs, one per rule of sluice-verify-schedule; each error
// points at the offending instruction with a note at the one it conflicts
// with.
// RUN: sluice-opt %s -split-input-file --sluice-verify-schedule -verify-diagnostics

// A correct program: no diagnostics.
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
