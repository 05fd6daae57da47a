// RUN: sluice-opt %s --sluice-partition-stages="pp=2" --sluice-split-passes="split=false" --sluice-schedule="schedule=1f1b microbatches=3" | FileCheck %s --check-prefix=ONEF1B
// RUN: sluice-opt %s --sluice-partition-stages="pp=2" --sluice-split-passes --sluice-schedule="schedule=zb-h1 microbatches=3" | grep -E "sluice.(exec|device)" | FileCheck %s --check-prefix=ZBH1
// RUN: sluice-opt %s --sluice-partition-stages="pp=2" --sluice-split-passes="split=false" --sluice-schedule="schedule=terapipe microbatches=1 slices=2" | FileCheck %s --check-prefix=TERA
// RUN: not sluice-opt %s --sluice-partition-stages="pp=2" --sluice-split-passes="split=false" --sluice-schedule="schedule=pipedream microbatches=2" 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: sluice-opt %s --sluice-partition-stages="pp=2 virtual=2 placement=interleaved" --sluice-split-passes="split=false" --sluice-schedule="schedule=interleaved-1f1b microbatches=3" --sluice-verify-schedule | FileCheck %s --check-prefix=ANYM
// RUN: not sluice-opt %s --sluice-partition-stages="pp=2" --sluice-split-passes="split=false" --sluice-schedule="schedule=1f1b microbatches=0" 2>&1 | FileCheck %s --check-prefix=ZEROM
// RUN: sluice-opt %s --sluice-partition-stages="pp=2" --sluice-partition-vocab --sluice-reorder-softmax-barriers="algorithm=1" --sluice-split-passes="split=false" --sluice-schedule="schedule=1f1b microbatches=2" --sluice-verify-schedule | FileCheck %s --check-prefix=VOCAB

// repeats=true: each device's steady state once, as a sluice.repeat of its
// runs; the verifier runs the blocks out (3 x 4 instructions of 1F1B's
// steady state on device 0, and the same program as without them).
// RUN: sluice-opt %s --sluice-partition-stages="pp=2" --sluice-split-passes="split=false" --sluice-schedule="schedule=1f1b microbatches=12 repeats=true" --sluice-verify-schedule 2>&1 | FileCheck %s --check-prefix=REPEATS
// RUN: sluice-opt %s --sluice-partition-stages="pp=2" --sluice-split-passes="split=false" --sluice-schedule="schedule=1f1b microbatches=12" --sluice-verify-schedule 2>&1 | FileCheck %s --check-prefix=FLAT
// RUN: sluice-opt %s --sluice-partition-stages="pp=2 virtual=2 placement=vshape" --sluice-split-passes --sluice-schedule="schedule=dualpipev microbatches=4" --sluice-verify-schedule 2>&1 | FileCheck %s --check-prefix=DUALV
// REPEATS:       remark: verified: 96 instructions of schedule '1f1b' on 2 devices
// REPEATS:       sluice.device 0 {
// REPEATS-NEXT:    sluice.exec F @s0 {mb = 0, slice = 0}
// REPEATS-NEXT:    sluice.send F @s0 {mb = 0, slice = 0} to 1
// REPEATS-NEXT:    sluice.repeat 11 mb_step 1 {
// REPEATS-NEXT:      sluice.exec F @s0 {mb = 1, slice = 0}
// REPEATS-NEXT:      sluice.send F @s0 {mb = 1, slice = 0} to 1
// REPEATS-NEXT:      sluice.recv BW @s1 {mb = 0, slice = 0} from 1
// REPEATS-NEXT:      sluice.exec BW @s0 {mb = 0, slice = 0}
// REPEATS-NEXT:    }
// REPEATS-NEXT:    sluice.recv BW @s1 {mb = 11, slice = 0} from 1
// REPEATS-NEXT:    sluice.exec BW @s0 {mb = 11, slice = 0}
// REPEATS-NEXT:  }
// FLAT:          remark: verified: 96 instructions of schedule '1f1b' on 2 devices
// FLAT-NOT:      sluice.repeat

// DualPipeV (DeepSeek-AI, 2024, section 3.2.1): device 0 holds s0 and s3.
// After its warm-up, F of one stage runs beside the full backward (B then
// its W) of the other, marked `paired`; the group's receives come before
// it and its sends after it.
// DUALV:       remark: verified: 80 instructions of schedule 'dualpipev' on 2 devices
// DUALV:       sluice.device 0 {
// DUALV:         sluice.recv F @s2 {mb = 1, slice = 0} from 1
// DUALV-NEXT:    sluice.exec F @s3 {mb = 1, slice = 0}
// DUALV-NEXT:    sluice.exec F @s0 {mb = 3, slice = 0} {paired}
// DUALV-NEXT:    sluice.exec B @s3 {mb = 1, slice = 0} {paired}
// DUALV-NEXT:    sluice.exec W @s3 {mb = 1, slice = 0}
// DUALV-NEXT:    sluice.send F @s0 {mb = 3, slice = 0} to 1
// DUALV-NEXT:    sluice.send B @s3 {mb = 1, slice = 0} to 1
// DUALV-NEXT:    sluice.recv F @s2 {mb = 2, slice = 0} from 1
// DUALV-NEXT:    sluice.recv B @s1 {mb = 0, slice = 0} from 1
// DUALV-NEXT:    sluice.exec F @s3 {mb = 2, slice = 0} {paired}
// DUALV-NEXT:    sluice.exec B @s0 {mb = 0, slice = 0} {paired}
// DUALV-NEXT:    sluice.exec W @s0 {mb = 0, slice = 0}

// 1F1B: device 0 warms up with p - d = 2 forwards, then alternates; the
// receive sits right before its consumer, the send right after its
// producer.
// ONEF1B-LABEL: sluice.program @plan for @m {devices = 2, microbatches = 3, slices = 1, schedule = "1f1b"} {
// ONEF1B-NEXT:    sluice.device 0 {
// ONEF1B-NEXT:      sluice.exec F @s0 {mb = 0, slice = 0}
// ONEF1B-NEXT:      sluice.send F @s0 {mb = 0, slice = 0} to 1
// ONEF1B-NEXT:      sluice.exec F @s0 {mb = 1, slice = 0}
// ONEF1B-NEXT:      sluice.send F @s0 {mb = 1, slice = 0} to 1
// ONEF1B-NEXT:      sluice.recv BW @s1 {mb = 0, slice = 0} from 1
// ONEF1B-NEXT:      sluice.exec BW @s0 {mb = 0, slice = 0}
// ONEF1B-NEXT:      sluice.exec F @s0 {mb = 2, slice = 0}
// ONEF1B-NEXT:      sluice.send F @s0 {mb = 2, slice = 0} to 1
// ONEF1B-NEXT:      sluice.recv BW @s1 {mb = 1, slice = 0} from 1
// ONEF1B-NEXT:      sluice.exec BW @s0 {mb = 1, slice = 0}
// ONEF1B-NEXT:      sluice.recv BW @s1 {mb = 2, slice = 0} from 1
// ONEF1B-NEXT:      sluice.exec BW @s0 {mb = 2, slice = 0}
// ONEF1B-NEXT:    }
// ONEF1B-NEXT:    sluice.device 1 {
// ONEF1B-NEXT:      sluice.recv F @s0 {mb = 0, slice = 0} from 0
// ONEF1B-NEXT:      sluice.exec F @s1 {mb = 0, slice = 0}
// ONEF1B-NEXT:      sluice.exec BW @s1 {mb = 0, slice = 0}
// ONEF1B-NEXT:      sluice.send BW @s1 {mb = 0, slice = 0} to 0
// ONEF1B-NEXT:      sluice.recv F @s0 {mb = 1, slice = 0} from 0
// ONEF1B-NEXT:      sluice.exec F @s1 {mb = 1, slice = 0}
// ONEF1B-NEXT:      sluice.exec BW @s1 {mb = 1, slice = 0}
// ONEF1B-NEXT:      sluice.send BW @s1 {mb = 1, slice = 0} to 0
// ONEF1B-NEXT:      sluice.recv F @s0 {mb = 2, slice = 0} from 0
// ONEF1B-NEXT:      sluice.exec F @s1 {mb = 2, slice = 0}
// ONEF1B-NEXT:      sluice.exec BW @s1 {mb = 2, slice = 0}
// ONEF1B-NEXT:      sluice.send BW @s1 {mb = 2, slice = 0} to 0
// ONEF1B-NEXT:    }

// ZB-H1 (compute only): the same F/B order as 1F1B; device d runs each W
// d microbatches after its B (the last device lags most), so the critical
// chain of B passes runs back to back.
// ZBH1:      sluice.device 0 {
// ZBH1-NEXT:   sluice.exec F @s0 {mb = 0, slice = 0}
// ZBH1-NEXT:   sluice.exec F @s0 {mb = 1, slice = 0}
// ZBH1-NEXT:   sluice.exec B @s0 {mb = 0, slice = 0}
// ZBH1-NEXT:   sluice.exec W @s0 {mb = 0, slice = 0}
// ZBH1-NEXT:   sluice.exec F @s0 {mb = 2, slice = 0}
// ZBH1-NEXT:   sluice.exec B @s0 {mb = 1, slice = 0}
// ZBH1-NEXT:   sluice.exec W @s0 {mb = 1, slice = 0}
// ZBH1-NEXT:   sluice.exec B @s0 {mb = 2, slice = 0}
// ZBH1-NEXT:   sluice.exec W @s0 {mb = 2, slice = 0}
// ZBH1-NEXT: sluice.device 1 {
// ZBH1-NEXT:   sluice.exec F @s1 {mb = 0, slice = 0}
// ZBH1-NEXT:   sluice.exec B @s1 {mb = 0, slice = 0}
// ZBH1-NEXT:   sluice.exec F @s1 {mb = 1, slice = 0}
// ZBH1-NEXT:   sluice.exec B @s1 {mb = 1, slice = 0}
// ZBH1-NEXT:   sluice.exec W @s1 {mb = 0, slice = 0}
// ZBH1-NEXT:   sluice.exec F @s1 {mb = 2, slice = 0}
// ZBH1-NEXT:   sluice.exec B @s1 {mb = 2, slice = 0}
// ZBH1-NEXT:   sluice.exec W @s1 {mb = 1, slice = 0}
// ZBH1-NEXT:   sluice.exec W @s1 {mb = 2, slice = 0}

// TeraPipe: forward slices in order, backward slices in reverse.
// TERA-LABEL:   sluice.device 0 {
// TERA-NEXT:      sluice.exec F @s0 {mb = 0, slice = 0}
// TERA-NEXT:      sluice.send F @s0 {mb = 0, slice = 0} to 1
// TERA-NEXT:      sluice.exec F @s0 {mb = 0, slice = 1}
// TERA-NEXT:      sluice.send F @s0 {mb = 0, slice = 1} to 1
// TERA-NEXT:      sluice.recv BW @s1 {mb = 0, slice = 1} from 1
// TERA-NEXT:      sluice.exec BW @s0 {mb = 0, slice = 1}
// TERA-NEXT:      sluice.recv BW @s1 {mb = 0, slice = 0} from 1
// TERA-NEXT:      sluice.exec BW @s0 {mb = 0, slice = 0}

// UNKNOWN: for the --schedule option: Cannot find option named 'pipedream'!
// Interleaving takes a microbatch count that is not a multiple of pp: one
// round of all 3 microbatches through chunk 0, then chunk 1 (it verifies).
// ANYM-LABEL:  sluice.device 0 {
// ANYM-NEXT:     sluice.exec F @s0 {mb = 0, slice = 0}
// ANYM-NEXT:     sluice.send F @s0 {mb = 0, slice = 0} to 1
// ANYM-NEXT:     sluice.exec F @s0 {mb = 1, slice = 0}
// ANYM-NEXT:     sluice.send F @s0 {mb = 1, slice = 0} to 1
// ANYM-NEXT:     sluice.exec F @s0 {mb = 2, slice = 0}
// ANYM-NEXT:     sluice.send F @s0 {mb = 2, slice = 0} to 1
// ANYM-NEXT:     sluice.recv F @s1 {mb = 0, slice = 0} from 1
// ANYM-NEXT:     sluice.exec F @s2 {mb = 0, slice = 0}
// ZEROM: error: 'sluice.model' op cannot be scheduled with 'microbatches' = 0: it must be positive
// Vocab-1 (Algorithm 1) on 2 devices: device 1 holds the last stage; after
// its F it broadcasts X (collective 0), every device runs S, joins the
// barrier (collective 1) and runs T, whose reduce (collective 2) the last
// stage's backward waits for (§5.1).
// VOCAB:      sluice.device 1 {
// VOCAB:        sluice.exec F @s1 {mb = 0, slice = 0}
// VOCAB-NEXT:   sluice.collective @vout 0 {mb = 0, slice = 0}
// VOCAB-NEXT:   sluice.exec S @vout {mb = 0, slice = 0}
// VOCAB-NEXT:   sluice.collective @vout 1 {mb = 0, slice = 0}
// VOCAB:        sluice.exec T @vout {mb = 0, slice = 0}
// VOCAB-NEXT:   sluice.collective @vout 2 {mb = 0, slice = 0}
// VOCAB:        sluice.exec BW @s1 {mb = 0, slice = 0}
// VOCAB:        sluice.exec IB @vin {mb = 1, slice = 0}
// VOCAB-NEXT: }

sluice.model @m {seq_len = 16, micro_batch = 1, dtype = f32} {
  %emb = sluice.embedding {vocab = 100} : tensor<1x16x32xf32>
  %x0 = sluice.transformer_layer %emb {heads = 4, kv_heads = 4, ffn = 128, norm = layernorm, mlp = gelu} : tensor<1x16x32xf32>
  %x1 = sluice.transformer_layer %x0 {heads = 4, kv_heads = 4, ffn = 128, norm = layernorm, mlp = gelu} : tensor<1x16x32xf32>
  %x2 = sluice.transformer_layer %x1 {heads = 4, kv_heads = 4, ffn = 128, norm = layernorm, mlp = gelu} : tensor<1x16x32xf32>
  %x3 = sluice.transformer_layer %x2 {heads = 4, kv_heads = 4, ffn = 128, norm = layernorm, mlp = gelu} : tensor<1x16x32xf32>
  %loss = sluice.output_layer %x3 {vocab = 100, norm = layernorm} : tensor<1x16x32xf32> -> tensor<f32>
  sluice.return %loss : tensor<f32>
}
