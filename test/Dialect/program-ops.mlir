// The partitioned and program levels round-trip through their custom and
// generic forms.
// RUN: sluice-opt %s | sluice-opt | FileCheck %s
// RUN: sluice-opt %s -mlir-print-op-generic | sluice-opt | FileCheck %s
// RUN: sluice-opt %s -mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC

// CHECK-LABEL: sluice.model @m
// CHECK:         %[[S0:.+]] = sluice.stage @s0 device 0 chunk 0 -> tensor<1x4x8xf32> attributes {activation_bytes = 512 : i64, flops = array<i64: 10, 20, 10>, passes = [#sluice.pass<F>, #sluice.pass<B>, #sluice.pass<W>]} {
// CHECK:           sluice.yield %{{.+}} : tensor<1x4x8xf32>
// CHECK:         %[[S1:.+]] = sluice.stage @s1 device 1 chunk 0 (%[[S0]] : tensor<1x4x8xf32>) -> tensor<f32> {
// CHECK-NEXT:    ^bb0(%[[A:.+]]: tensor<1x4x8xf32>):
// CHECK-NEXT:      %[[L:.+]] = sluice.output_layer %[[A]]
// CHECK-NEXT:      sluice.yield %[[L]] : tensor<f32>
// CHECK:         sluice.return %[[S1]] : tensor<f32>
// CHECK-LABEL: sluice.program @plan for @m {devices = 2, microbatches = 1, slices = 1, schedule = "1f1b"} {
// CHECK-NEXT:    sluice.device 0 {
// CHECK-NEXT:      sluice.exec F @s0 {mb = 0, slice = 0}
// CHECK-NEXT:      sluice.send F @s0 {mb = 0, slice = 0} to 1
// CHECK-NEXT:      sluice.recv B @s1 {mb = 0, slice = 0} from 1 on vocab
// CHECK-NEXT:      sluice.exec B @s0 {mb = 0, slice = 0}
// CHECK-NEXT:      sluice.exec W @s0 {mb = 0, slice = 0}
// CHECK-NEXT:    }
// CHECK-NEXT:    sluice.device 1 {
// CHECK-NEXT:      sluice.recv F @s0 {mb = 0, slice = 0} from 0
// CHECK-NEXT:      sluice.exec S @s1 {mb = 0, slice = 0}
// CHECK-NEXT:      sluice.exec T @s1 {mb = 0, slice = 0}
// CHECK-NEXT:      sluice.exec IF @s1 {mb = 0, slice = 0}
// CHECK-NEXT:      sluice.exec IB @s1 {mb = 0, slice = 0}
// CHECK-NEXT:      sluice.send B @s1 {mb = 0, slice = 0} to 0 on vocab
// CHECK-NEXT:    }
// CHECK-NEXT:  }
// GENERIC: "sluice.stage"() <{activation_bytes = 512 : i64, chunk = 0 : i64, device = 0 : i64, flops = array<i64: 10, 20, 10>, passes = [#sluice.pass<F>, #sluice.pass<B>, #sluice.pass<W>], sym_name = "s0"}>
// GENERIC: "sluice.yield"
// GENERIC: "sluice.program"() <{cp = 1 : i64, devices = 2 : i64, dp = 1 : i64, ep = 1 : i64, microbatches = 1 : i64, model = @m, schedule = #sluice.schedule<"1f1b">, slices = 1 : i64, sym_name = "plan", tp = 1 : i64, zero = 0 : i64}>
// GENERIC: "sluice.device"() <{index = 0 : i64}>
// GENERIC: "sluice.exec"() <{kind = #sluice.pass<F>, mb = 0 : i64, slice = 0 : i64, stage = @s0}>
// GENERIC: "sluice.send"() <{kind = #sluice.pass<F>, mb = 0 : i64, slice = 0 : i64, stage = @s0, stream = #sluice<stream comm>, to = 1 : i64}>
// GENERIC: "sluice.recv"() <{from = 1 : i64, kind = #sluice.pass<B>, mb = 0 : i64, slice = 0 : i64, stage = @s1, stream = #sluice<stream vocab>}>
sluice.model @m {seq_len = 4, micro_batch = 1, dtype = f32} {
  %0 = sluice.stage @s0 device 0 chunk 0 -> tensor<1x4x8xf32> attributes {activation_bytes = 512 : i64, flops = array<i64: 10, 20, 10>, passes = [#sluice.pass<F>, #sluice.pass<B>, #sluice.pass<W>]} {
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
sluice.program @plan for @m {devices = 2, microbatches = 1, slices = 1, schedule = "1f1b"} {
  sluice.device 0 {
    sluice.exec F @s0 {mb = 0, slice = 0}
    sluice.send F @s0 {mb = 0, slice = 0} to 1
    sluice.recv B @s1 {mb = 0, slice = 0} from 1 on vocab
    sluice.exec B @s0 {mb = 0, slice = 0}
    sluice.exec W @s0 {mb = 0, slice = 0}
  }
  sluice.device 1 {
    sluice.recv F @s0 {mb = 0, slice = 0} from 0
    sluice.exec S @s1 {mb = 0, slice = 0}
    sluice.exec T @s1 {mb = 0, slice = 0}
    sluice.exec IF @s1 {mb = 0, slice = 0}
    sluice.exec IB @s1 {mb = 0, slice = 0}
    sluice.send B @s1 {mb = 0, slice = 0} to 0 on vocab
  }
}

// A data-parallel program with its optimizer state sharded (ZeRO-1): the
// mesh prints after the attributes, and each stage's gradients are
// averaged over the replicas once final.
// CHECK-LABEL: sluice.program @replicated for @m {devices = 2, microbatches = 1, slices = 1, schedule = "1f1b"} dp 2 zero 1 {
// CHECK:           sluice.exec W @s0 {mb = 0, slice = 0}
// CHECK-NEXT:      sluice.grad_sync @s0
// GENERIC: "sluice.program"() <{cp = 1 : i64, devices = 2 : i64, dp = 2 : i64, ep = 1 : i64, microbatches = 1 : i64, model = @m, schedule = #sluice.schedule<"1f1b">, slices = 1 : i64, sym_name = "replicated"
// GENERIC: "sluice.grad_sync"() <{stage = @s0}>
sluice.program @replicated for @m {devices = 2, microbatches = 1, slices = 1, schedule = "1f1b"} dp 2 zero 1 {
  sluice.device 0 {
    sluice.exec F @s0 {mb = 0, slice = 0}
    sluice.send F @s0 {mb = 0, slice = 0} to 1
    sluice.recv B @s1 {mb = 0, slice = 0} from 1
    sluice.exec B @s0 {mb = 0, slice = 0}
    sluice.exec W @s0 {mb = 0, slice = 0}
    sluice.grad_sync @s0
  }
  sluice.device 1 {
    sluice.recv F @s0 {mb = 0, slice = 0} from 0
    sluice.exec F @s1 {mb = 0, slice = 0}
    sluice.exec B @s1 {mb = 0, slice = 0}
    sluice.exec W @s1 {mb = 0, slice = 0}
    sluice.grad_sync @s1
    sluice.send B @s1 {mb = 0, slice = 0} to 0
  }
}

// The program contract the runtime reads: the simulation's results on the
// program, the buffer sizes on each device, the slots on the instructions.
// CHECK-LABEL: sluice.program @planned for @m {devices = 2, microbatches = 1, slices = 1, schedule = "zb-h1"} attributes {bubble_ratio = 2.500000e-01 : f64, mfu = 4.000000e-01 : f64, peak_activation = array<f64: 1.000000e+00, 1.000000e+00>, peak_activation_until_w = array<f64: 1.000000e+00, 1.000000e+00>, step_time = 1.200000e+01 : f64} {
// CHECK-NEXT:    sluice.device 0 attributes {buffers = array<i64: 512, 256>} {
// CHECK-NEXT:      sluice.exec F @s0 {mb = 0, slice = 0} {out = 1 : i64, state = 0 : i64}
// CHECK-NEXT:      sluice.send F @s0 {mb = 0, slice = 0} to 1 {buffer = 1 : i64}
// CHECK-NEXT:      sluice.recv B @s1 {mb = 0, slice = 0} from 1 {buffer = 1 : i64}
// CHECK-NEXT:      sluice.exec B @s0 {mb = 0, slice = 0} {in = 1 : i64, state = 0 : i64, wstate = 2 : i64}
// CHECK-NEXT:      sluice.exec W @s0 {mb = 0, slice = 0} {state = 0 : i64, wstate = 2 : i64}
// GENERIC: "sluice.program"() <{bubble_ratio = 2.500000e-01 : f64, cp = 1 : i64, devices = 2 : i64, dp = 1 : i64, ep = 1 : i64, mfu = 4.000000e-01 : f64, microbatches = 1 : i64, model = @m, peak_activation = array<f64: 1.000000e+00, 1.000000e+00>, peak_activation_until_w = array<f64: 1.000000e+00, 1.000000e+00>, schedule = #sluice.schedule<"zb-h1">, slices = 1 : i64, step_time = 1.200000e+01 : f64, sym_name = "planned"
// GENERIC: "sluice.device"() <{buffers = array<i64: 512, 256>, index = 0 : i64}>
// GENERIC: "sluice.exec"() <{in = 1 : i64, kind = #sluice.pass<B>, mb = 0 : i64, slice = 0 : i64, stage = @s0, state = 0 : i64, wstate = 2 : i64}>
sluice.program @planned for @m {devices = 2, microbatches = 1, slices = 1, schedule = "zb-h1"} attributes {bubble_ratio = 0.25 : f64, mfu = 0.4 : f64, peak_activation = array<f64: 1.0, 1.0>, peak_activation_until_w = array<f64: 1.0, 1.0>, step_time = 12.0 : f64} {
  sluice.device 0 attributes {buffers = array<i64: 512, 256>} {
    sluice.exec F @s0 {mb = 0, slice = 0} {out = 1 : i64, state = 0 : i64}
    sluice.send F @s0 {mb = 0, slice = 0} to 1 {buffer = 1 : i64}
    sluice.recv B @s1 {mb = 0, slice = 0} from 1 {buffer = 1 : i64}
    sluice.exec B @s0 {mb = 0, slice = 0} {in = 1 : i64, state = 0 : i64, wstate = 2 : i64}
    sluice.exec W @s0 {mb = 0, slice = 0} {state = 0 : i64, wstate = 2 : i64}
  }
  sluice.device 1 {
    sluice.recv F @s0 {mb = 0, slice = 0} from 0
    sluice.exec F @s1 {mb = 0, slice = 0}
    sluice.exec B @s1 {mb = 0, slice = 0}
    sluice.exec W @s1 {mb = 0, slice = 0}
    sluice.send B @s1 {mb = 0, slice = 0} to 0
  }
}

// A device's periodic stretch stated once: the body, its runs, the
// microbatch step and (after buffer planning) the slot map.
// CHECK-LABEL: sluice.program @periodic for @m {devices = 2, microbatches = 4, slices = 1, schedule = "1f1b"} {
// CHECK-NEXT:    sluice.device 0 attributes {buffers = array<i64: 256, 256>} {
// CHECK-NEXT:      sluice.repeat 4 mb_step 1 slots [0 -> 1, 1 -> 0] {
// CHECK-NEXT:        sluice.exec F @s0 {mb = 0, slice = 0} {out = 0 : i64}
// CHECK-NEXT:        sluice.send F @s0 {mb = 0, slice = 0} to 1 {buffer = 0 : i64}
// CHECK-NEXT:      }
// CHECK:         sluice.device 1 {
// CHECK-NEXT:      sluice.repeat 2 mb_step 2 {
// GENERIC: "sluice.repeat"() <{count = 4 : i64, mb_step = 1 : i64, slots = array<i64: 0, 1, 1, 0>}>
// GENERIC: "sluice.repeat"() <{count = 2 : i64, mb_step = 2 : i64}>
sluice.program @periodic for @m {devices = 2, microbatches = 4, slices = 1, schedule = "1f1b"} {
  sluice.device 0 attributes {buffers = array<i64: 256, 256>} {
    sluice.repeat 4 mb_step 1 slots [0 -> 1, 1 -> 0] {
      sluice.exec F @s0 {mb = 0, slice = 0} {out = 0 : i64}
      sluice.send F @s0 {mb = 0, slice = 0} to 1 {buffer = 0 : i64}
    }
  }
  sluice.device 1 {
    sluice.repeat 2 mb_step 2 {
      sluice.recv F @s0 {mb = 0, slice = 0} from 0
      sluice.exec F @s1 {mb = 0, slice = 0}
      sluice.recv F @s0 {mb = 1, slice = 0} from 0
      sluice.exec F @s1 {mb = 1, slice = 0}
    }
  }
}
