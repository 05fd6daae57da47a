// RUN: sluice-opt %s --sluice-partition-stages="pp=2" --sluice-split-passes="split=false" --sluice-schedule="schedule=1f1b microbatches=3" --sluice-simulate | FileCheck %s --check-prefix=UNIT
// RUN: sluice-opt %s --sluice-partition-stages="pp=2" --sluice-split-passes="split=false" --sluice-schedule="schedule=1f1b microbatches=3" --sluice-simulate="costs=F=1,B=2,W=2,comm=0.5" | FileCheck %s --check-prefix=EXPLICIT
// RUN: sluice-opt %s --sluice-partition-stages="pp=2" --sluice-split-passes="split=false" --sluice-schedule="schedule=1f1b microbatches=3" --sluice-simulate="costs=h100" | FileCheck %s --check-prefix=H100
// RUN: rm -f %t.json %t.trace.json %t.svg
// The pass writes no files; sluice-compile writes them from its simulation.
// RUN: sluice-compile %s --pp 2 --schedule 1f1b --microbatches 3 --report %t.json --trace %t.trace.json --svg %t.svg -o /dev/null
// RUN: FileCheck %s --check-prefix=REPORT < %t.json
// RUN: FileCheck %s --check-prefix=TRACE < %t.trace.json
// RUN: FileCheck %s --check-prefix=SVG < %t.svg
// RUN: sluice-compile %s --pp 2 --schedule 1f1b --microbatches 3 --dp 4 --tp 2 --costs h100 --report %t.mesh.json --trace %t.mesh.trace.json -o /dev/null
// RUN: FileCheck %s --check-prefix=MESH < %t.mesh.json
// RUN: FileCheck %s --check-prefix=MESHTRACE < %t.mesh.trace.json
// RUN: not sluice-opt %s --sluice-partition-stages="pp=2" --sluice-split-passes="split=false" --sluice-schedule="schedule=1f1b microbatches=3" --sluice-simulate="costs=tpu" 2>&1 | FileCheck %s --check-prefix=BADCOSTS
// RUN: not sluice-opt %s --sluice-partition-stages="pp=2" --sluice-split-passes="split=false" --sluice-schedule="schedule=1f1b microbatches=3" --sluice-simulate="costs=F=1,B=-2" 2>&1 | FileCheck %s --check-prefix=NEGATIVE
// RUN: not sluice-opt %s --sluice-partition-stages="pp=2" --sluice-split-passes="split=false" --sluice-schedule="schedule=1f1b microbatches=3" --sluice-simulate="report=%t.never.json" 2>&1 | FileCheck %s --check-prefix=NOFILES

// Unit costs: (p - 1) / (m + p - 1) = 1/4 of 2 devices x 12 units idle.
// Unsplit (BW), the peak until W is the peak until B.
// UNIT: sluice.program @plan for @m {{.*}} attributes {bubble_ratio = 2.500000e-01 : f64, peak_activation = array<f64: 2.000000e+00, 1.000000e+00>, peak_activation_until_w = array<f64: 2.000000e+00, 1.000000e+00>, step_time = 1.200000e+01 : f64}

// F = 1, BW = B + W = 4, 0.5 per transfer. Device 1 gets F2 at 12.5
// (device 0 runs it after BW0, which waits for device 1's BW0), runs F2 and
// BW2 until 17.5; the gradient arrives at 18; device 0's BW2 ends at 22.
// EXPLICIT: step_time = 2.200000e+01 : f64

// Analytic costs, seconds: this tiny model's FLOPs take nanoseconds; the
// fixed 15 us of every layer's pass (kernel launches), the weight reads at
// memory bandwidth and the 8 us link latencies make up about 0.35 ms.
// H100: step_time = 3.{{[0-9]+}}E-4 : f64

// REPORT: "bubble_ratio": 0.25,
// REPORT: "devices": 2,
// REPORT: "microbatches": 3,
// REPORT: "per_device": [
// REPORT:     "busy": 9,
// REPORT:     "device": 0,
// REPORT:     "idle": 3,
// REPORT:     "parameter_bytes": {{[0-9]+}},
// REPORT:     "peak_activation_bytes": {{[0-9]+}},
// REPORT:     "peak_activation_microbatches": 2,
// REPORT:     "peak_memory_bytes": {{[0-9]+}}
// REPORT:     "device": 1,
// REPORT:     "peak_activation_microbatches": 1,
// REPORT: "schedule": "1f1b",
// REPORT: "step_time": 12,
// REPORT: "verified": true,

// On pp 2 x tp 2 x dp 4 = 16 ranks in nodes of 8 (rank d*8 + r*2 + t),
// a tensor-parallel pair and a device's 4 replicas share a node; the
// pipeline's neighbours (ranks 8 apart) do not. Device 0's gradient
// all-reduce follows the step's last pass: all of it is exposed; then
// its Adam step (tens of microseconds for these few parameters).
// MESH:      "links": [
// MESH-NEXT:   {
// MESH-NEXT:     "group_size": 2,
// MESH-NEXT:     "link": "network",
// MESH-NEXT:     "traffic": "pipeline"
// MESH:          "group_size": 2,
// MESH-NEXT:     "link": "node",
// MESH-NEXT:     "traffic": "tensor-parallel"
// MESH:          "group_size": 4,
// MESH-NEXT:     "link": "node",
// MESH-NEXT:     "traffic": "data-parallel"
// MESH:      "mesh": {
// MESH-NEXT:   "dp": 4,
// MESH-NEXT:   "ep": 1,
// MESH-NEXT:   "pp": 2,
// MESH-NEXT:   "ranks": 16,
// MESH-NEXT:   "ranks_per_node": 8,
// MESH-NEXT:   "sequence_parallel": false,
// MESH-NEXT:   "tp": 2
// MESH:      "per_device": [
// MESH:          "device": 0,
// MESH-NEXT:     "gradient_sync_exposed": 3.01{{[0-9]*}}e-05,
// MESH-NEXT:     "gradient_sync_time": 3.01{{[0-9]*}}e-05,
// MESH:          "optimizer_bytes": {{[1-9][0-9]*}},
// MESH-NEXT:     "optimizer_time": {{[1-9][0-9.]*}}e-{{0[5-9]}},
// MESH:          "tensor_parallel_time": {{[0-9.e-]+}}

// MESHTRACE-DAG: "name":"data-parallel"
// MESHTRACE-DAG: "name":"gradient all-reduce s0"
// MESHTRACE-DAG: "name":"gradient all-reduce s1"

// TRACE: "traceEvents":
// TRACE-DAG: "name":"process_name"
// TRACE-DAG: "name":"F s0 mb0"
// TRACE-DAG: "name":"send F s0 mb0 -> 1"
// TRACE-DAG: "name":"activation memory","ph":"C"

// SVG: <svg xmlns="http://www.w3.org/2000/svg"
// SVG: 1f1b: 2 devices, 3 microbatches, bubble 25.0%
// SVG: device 0
// SVG: </svg>

// BADCOSTS: error: 'sluice.program' op cannot be simulated: unknown cost model 'tpu' (expected unit, a100, h100, h200, v100, or costs such as F=1,B=1,W=1,S=0.2,T=0.2,comm=0.1)
// NEGATIVE: error: 'sluice.program' op cannot be simulated: cost 'B' must be non-negative, got -2
sluice.model @m {seq_len = 16, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 100} : tensor<1x16x32xf32>
  %x0 = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, ffn = 128, norm = layernorm, mlp = gelu} : tensor<1x16x32xf32>
  %x1 = sluice.transformer_layer %x0 {heads = 4, kv_heads = 4, ffn = 128, norm = layernorm, mlp = gelu} : tensor<1x16x32xf32>
  %x2 = sluice.transformer_layer %x1 {heads = 4, kv_heads = 4, ffn = 128, norm = layernorm, mlp = gelu} : tensor<1x16x32xf32>
  %x3 = sluice.transformer_layer %x2 {heads = 4, kv_heads = 4, ffn = 128, norm = layernorm, mlp = gelu} : tensor<1x16x32xf32>
  %loss = sluice.output_layer %x3 {vocab = 100, norm = layernorm} : tensor<1x16x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}

// NOFILES: no such option report
