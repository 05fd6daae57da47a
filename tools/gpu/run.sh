#!/usr/bin/env bash
# The GPU suite, run on the GPU machine from the bundle tools/gpu/bundle.sh
# builds; the device tool carries build-gpu/bundle.tar.xz (docs/gpu.md):
#
#   tar -C /tmp -xJf build-gpu/bundle.tar.xz
#   bash /tmp/bundle/run.sh /tmp/bundle [quick|bench|all|variants|profile|calibrate]
#
# 1. every CUDA kernel against the CPU's (SluiceCudaTests), and every
#    backend against the reference (SluiceConformanceTests);
# 2. one GPU, fp32: training equals the CPU reference (loss 1e-5, gradients
#    1e-4), for the GPT and Llama test models; fp8 (the GPU's FP8 GEMMs)
#    against the CPU's exact emulation within fp8's band, 2 ranks against
#    the GPU's fp8 reference, and the sanitizer over an fp8 step;
# 3. 2 and 4 ranks sharing the GPU through the staged MPI communicator:
#    every variant of variants.txt (all 11 schedules, Vocab-1 and Vocab-2,
#    full recomputation; SCHEDULES=REGEX keeps some) equals the single-GPU
#    reference in fp32 (tight) and in bf16 against a bf16 reference; bf16
#    against fp32 is measured and recorded as a measurement, not a check;
# 4. an NCCL communicator of one rank; compute-sanitizer on a small step;
#    a failing rank ends every rank;
# 5. (all, bench) benchmarks: one GPT layer, a Llama-3.2-1B step, PyTorch's step
#    (the whole table with every baseline: step-table.sh, docs/benchmarks.md).
# 6. (variants) the benchmarks under each speed switch (VARIANTS, a list of
#    environment settings separated by ';'), the executor's own time in a
#    1B step (sluice-run --timing --trace), cuBLASLt's candidates per GEMM
#    shape, and the 1B model on 2 ranks with a sharded vocabulary: how
#    much of the collectives' time passes ran beside (and its trace).
# 7. (profile) the 1B step's kernels and idle gaps (a CUPTI trace), the
#    GEMM shapes' candidates, and torch.compile's step under its profiler.
#
# ONLY=REGEX keeps the checks whose names match; BUDGET=SECONDS skips (and
# records) the checks that would start past it; BANDS=0 leaves out the
# bf16-against-fp32 measurements; TORCH=0 leaves PyTorch's
# step out of the benchmarks. Writes a line per check to $OUT/summary.txt
# (or ./gpu-out), and every check and measurement of the run to
# $OUT/suite.json (written on every exit, so a run cut short still says
# what it did); exits 1 if any check failed.
#
# Owed on the next lease (added 2026-11-28, when no GPU was lent), before
# anything else, within BUDGET=300 (5 device minutes):
#   0. (added 2026-11-30, issue 58; the first checks of `quick`, about
#      30 s) the FP8 probes -- bin/fp8probe (tools/gpu/fp8probe.cpp: 16
#      cuBLASLt call patterns, three of them the call Gemm.cpp makes since
#      that day) and fp8_torch_probe.py -- then SluiceCudaTests with its
#      FP8 cases strict: Gemm.cpp now sets the real scale pointers, every
#      operand's alignment and the scalar scale mode before the heuristic,
#      keys its plans on alignment classes, accumulates fast in forward
#      products only, declines FP8 on a cuBLASLt of another major version
#      and names the loaded libraries in every run's "libraries:" line;
#      Fp8Gemm fails unless its 8 products of 64 x 48 ran on FP8 tensor
#      cores. Compiled only, never run on a GPU. (Added 2026-11-30 night,
#      issue 58) weights quantized once a step: SluiceCudaTests'
#      Fp8GemmQuantizesASteadyWeightOncePerStep (the copy reused within a
#      step, retired at its end) and item 1's "weights quantized once a
#      step = at every call" (tiny-llama fp8, SLUICE_FP8_STEADY_COPIES=0
#      against 1, 1e-6; about 10 s); the step table's A/B row
#      `sluice fp8, quantized every call|PRECISION=fp8
#      SLUICE_FP8_STEADY_COPIES=0` times the gain (estimated ~1%).
#   1. `run.sh BUNDLE quick`: SluiceConformanceTests' new cuda_bf16 half
#      (every kernel family but the FP8 GEMMs on bf16 inputs, 1e-2) and
#      the staged-MPI multi-rank checks, whose communicators now stand on
#      HostGroup (ProcessGroup.h) rather than MpiCommunicator and whose
#      send and receive share one staging path (StagedCommunicator.cpp,
#      2026-11-28); its fp8 checks (2b) run the delayed-scaling update
#      through pushFp8Amax (Backend.h), shared with the CPU since then;
#      It also runs the communicators' conformance suite over the staged
#      transport (2 and 4 ranks; about 10 s each, most of it CUDA start);
#      and (added 2026-11-29, issue 53) Conformance.MixtureOfExperts/cuda
#      and cuda_bf16: the mixture-of-experts router, its backward, the
#      grouping by expert, the permutation and the combine, and (added
#      later that day) the experts' grouped GEMMs, forward and weight
#      gradients, with an empty expert, and Qwen2-MoE's shared-expert
#      sigmoid gate, and (added 2026-11-29 afternoon) the load-balancing
#      loss's statistics, loss and router gradient (moeBalance,
#      moeBalanceLoss, moeRouteBackward's balance term), and (added
#      2026-11-29 evening, issue 55) DeepSeek's router forms: sigmoid
#      scores, the bias on the choice, group-limited top-k, the scale
#      (routeKernel's RouterRule), and Conformance.Attention's value
#      heads of their own size (v_head_dim, DeepSeek's: the fallback
#      kernel's P.V over 6 against Q.K^T over 8; cuDNN declines them)
#      (added 2026-11-30, issue 56) Conformance.AttentionOverKeyBlocks:
#      ring attention's key blocks in the fallback kernel (keyBegin,
#      keyCount, dQ summed) and the new attentionMerge kernel, against
#      attention over the whole cache
#      (runtime/cuda/Moe.cu, Attention.cuh; under a second of device time,
#      inside item 1's), never yet run on a GPU -- compiled only; the communicators'
#      suite now includes the variable-count all-to-all (AllToAllUnevenParts:
#      the staged transport here, NCCL's grouped sends in item 2);
#   2. `ONLY='conformance|1f1b|zb-h1|experts|ZeRO-2|ZeRO-3|context|tp=2' nccl-suite.sh BUNDLE`: the
#      communicators' conformance suite over NCCL (2 and 4 ranks, about
#      20 s each with NCCL's initialisation), then
#      NCCL runs over the same HostGroup bootstrap (about 45 s a check);
#      and (added 2026-11-29, issue 53) expert parallelism on 4 NCCL ranks
#      (tiny-moe, pp 2 x dp 2 x ep 2, zb-h1: the dispatch's all-to-alls as
#      grouped sends on the compute stream), fp32 exact and bf16 in band
#      (about 20 s each); and (added 2026-11-29 evening, issue 55)
#      DeepSeek-V3's block, tiny-deepseek-moe at the same mesh in fp32
#      (multi-head latent attention through the fallback attention
#      kernel, the sigmoid router, the bias moving each step; about 20 s;
#      tried on the CPU emulation: BACKEND=cpu PLANS=DIR ONLY=deepseek);
#      and (added 2026-11-30, issue 55) a dualpipev plan of the same
#      experts ("experts dualpipev"): its overlapped groups' order over
#      NCCL, each group's backward on a second compute stream
#      (Device::openLanes, built 2026-11-30, compiled only), then the same
#      plan with --overlap-groups=false, both against the reference, and
#      (cuda only) both traced through CUPTI, a file per rank: the share
#      of the NCCL all-to-alls' time beside the other stream's kernels
#      (bench/stream_overlap.py; PASS when positive with the lanes), the
#      step with and without, and Perfetto traces per rank into OUT --
#      commit them with the log (issue 55's last clause); about 80 s;
#      and (added 2026-11-30, issue 56) "ZeRO-2 pp=2 x dp=2": the 1B
#      model's layers reduce-scattered one by one over NCCL within the
#      bf16 band (about 45 s); and (added 2026-11-30, issue 56) the two
#      "ZeRO-3" checks: the 1B model's layers gathered before each pass
#      (and once a step under zb-v) over NCCL within the bf16 band (about
#      45 s each); and (added 2026-11-30, issue 56) the two "context"
#      checks: the 1B model's sequences over 2 ranks (cp 2 x pp 2, zb-h1
#      and Seq1F1B's slices), ring attention's key/value blocks and their
#      gradients passed over NCCL on the context stream inside the
#      passes, within the bf16 band (about 45 s each); and (added
#      2026-11-30 afternoon, issue 56) "context x experts": tiny-moe on 8
#      NCCL ranks (pp 2 x dp 2 x cp 2 x ep 2) against the experts' fp32
#      reference (about 30 s), and "context: the ring's transfers beside
#      attention's kernels": the cp plan traced through CUPTI, PASS when
#      some NCCL time ran beside the compute stream's kernels (about 60 s);
#      and (added 2026-11-30, issue 58) every NCCL check runs the
#      transfers' new waits (a send waits for its slot's writer, a
#      receive for its slot's last reader, not the compute stream's tail)
#      and the global order built with the devices taking turns; "pipeline:
#      sends beside the passes, zb-h1 pp=4" traces that plan through CUPTI
#      (about 60 s): commit its Perfetto traces with the log; and (added
#      2026-11-30 evening, issue 58) adjacent sends and receives go out
#      as one NCCL group (ncclGroupStart/End, Executor::issueTransfers):
#      every NCCL check runs it, the conformance suite's
#      SendAndReceiveInOneGroup is a ring that starts only as a group,
#      and "pipeline: grouped transfers against one at a time, zb-h1
#      pp=4" times the step both ways, SLUICE_GROUP_TRANSFERS=0 for one
#      at a time (about 2 minutes); and (added 2026-11-30 night, issue
#      58) the tensor-parallel collectives on a stream of their own
#      (StreamKind::Tensor) and a BW pass's B taking the attention
#      output's and the down projection's weight GEMMs while the group
#      sums the input gradients before them: every "tp=2" check runs it
#      (the fp32 one decides it is exact on NCCL), "tensor: input-gradient
#      sums beside weight GEMMs against before them" times the 1F1B tp 2 +
#      SP plan both ways (SLUICE_TP_OVERLAP=0 after; about 2 minutes) and
#      "tensor: the group's sums beside the weight GEMMs" traces it
#      through CUPTI (about 60 s): commit its Perfetto traces;
#   2b. (added 2026-11-29, issue 53 -> 58) a mixture of experts' step in
#      fp8 runs its experts' maps in bf16 (no fp8 grouped GEMM yet): the
#      first fp8 MoE run on a GPU should time the experts against the
#      dense maps before an fp8 grouped GEMM is written (docs/moe.md,
#      "Next"). Not a scripted check yet: a note for issue 58's session;
#   3. `run.sh BUNDLE calibrate` (about 30 s; added 2026-11-28): one
#      405B-sized layer's F, B and W; then, on the CPU,
#      `bash bench/llama405-calibrate.sh OUT/bench-layer-405b.txt` predicts
#      Meta's 405B meshes at the measured efficiency (issue 52's "within 3
#      points of the published MFU, with the calibration written down").
#   4. (added 2026-11-30 night, issue 58) the step table's fp8 rows
#      against PyTorch's FP8 (torchao 0.17.0's float8 training, carried
#      in the bundle's python/; bench/torch_step.py's fp8-master and
#      fp8-rowwise-master recipes, never run yet):
#      `SLUICE_ROWS='sluice bf16|;sluice fp8|PRECISION=fp8;sluice fp8,
#      quantized every call|PRECISION=fp8 SLUICE_FP8_STEADY_COPIES=0'
#      BASELINES='bf16-master/compile fp8-master/compile
#      fp8-rowwise-master/compile' bash step-table.sh BUNDLE` (about 9
#      minutes: a lease of its own after items 0-2, whose FP8 checks say
#      whether Sluice's fp8 row is FP8 at all).
set -uo pipefail
bundle=$(cd "${1:?usage: run.sh BUNDLE [quick|bench|all|variants|profile|calibrate]}" && pwd)
mode=${2:-all}
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
summary=$out/summary.txt
: >"$summary"
failed=0

# shellcheck source=bundle-env.sh
source "$(dirname "$0")/bundle-env.sh"
bundle_env "$bundle"
export OMPI_MCA_btl_vader_single_copy_mechanism=none
mpi=(mpirun --oversubscribe --mca btl self,sm --mca pml ob1)
plans=$bundle/plans
work=$(mktemp -d)

results=$out/results.tsv
: >"$results"
record() { # record NAME STATUS [DETAIL]
  echo "$2 $1${3:+: $3}" | tee -a "$summary"
  printf '%s\t%s\t%s\n' "$2" "$1" "${3:-}" >>"$results"
  if [ "$2" = FAIL ]; then failed=1; fi
}
# The machine-readable result: every check (PASS, FAIL, SKIP) and
# measurement (BAND) with its detail, the device and the date.
write_json() {
  python3 - "$results" "$out/device.txt" "$out/suite.json" <<'PY' || true
import json, sys
rows = [l.rstrip("\n").split("\t", 2) for l in open(sys.argv[1]) if l.strip()]
try:
    device = open(sys.argv[2]).readline().strip()
except OSError:
    device = ""
checks = [{"status": s, "name": n, "detail": d} for s, n, d in rows if s != "BAND"]
bands = [{"name": n, "detail": d} for s, n, d in rows if s == "BAND"]
doc = {"format": "sluice-gpu-suite", "version": 1, "device": device,
       "passed": sum(c["status"] == "PASS" for c in checks),
       "failed": sum(c["status"] == "FAIL" for c in checks),
       "checks": checks, "measurements": bands}
json.dump(doc, open(sys.argv[3], "w"), indent=1)
PY
  rm -f "$results"
}
trap write_json EXIT
# BUDGET=SECONDS: a check that would start past it is recorded as SKIP (a
# lease's device time is short; the suite says what it did not run).
past_budget() { [[ -n ${BUDGET:-} && $SECONDS -ge $BUDGET ]]; }
check() { # check NAME COMMAND...: PASS when the command exits 0 in time
  local name=$1
  shift
  # ONLY=REGEX runs the checks whose names match it (a re-run of failures).
  [[ -n ${ONLY:-} && ! $name =~ $ONLY ]] && return 0
  if past_budget; then
    record "$name" SKIP "past the budget of $BUDGET s"
    return 0
  fi
  local start=$SECONDS
  if timeout "${CHECK_TIMEOUT:-180}" "$@" >"$work/log" 2>&1; then
    record "$name" PASS "[$((SECONDS - start)) s] $(grep -a -m1 '^check' "$work/log" || true)"
  else
    local why
    why=$(grep -a -m1 -E 'error|FAILED|Failure' "$work/log" ||
          tail -n 2 "$work/log" | tr '\n' ' ')
    [ "$(wc -l <"$work/log")" -gt 0 ] || why="no output (timed out?)"
    record "$name" FAIL "$why"
    # One file for every failure: the device tool brings back few files.
    { echo "=== $name"; tail -n 80 "$work/log"; } >>"$out/failures.log"
  fi
}

if ! nvidia-smi --query-gpu=name,memory.total,driver_version \
    --format=csv,noheader >"$out/device.txt" 2>&1; then
  record "a GPU on this machine" FAIL "nvidia-smi: $(head -n 1 "$out/device.txt")"
  exit 1
fi
echo "device: $(head -n 1 "$out/device.txt"), $(date -u +%F)" | tee -a "$summary"

if [ "$mode" = quick ] || [ "$mode" = all ]; then
# 0. (added 2026-11-30, issue 58) FP8 first, in about 30 s: what the
# binaries load (sluice-run prints it too), the standalone cuBLASLt probe
# (16 call patterns, cuBLASLt's reason for each refusal; exit 0 when
# NVIDIA's canonical call works) and PyTorch's _scaled_mm on the same
# library: a library problem told from a call problem. Whole logs in OUT.
ldd "$bundle/bin/sluice-run" 2>&1 | grep -E "cublas|cudnn|nccl|cudart|not found" \
  >"$out/libraries.txt"
check "fp8: cuBLASLt probe (canonical call works)" "$bundle/bin/fp8probe"
cp "$work/log" "$out/fp8probe.log" 2>/dev/null
grep -a -E "^(cuBLASLt|fp8probe)|=> " "$out/fp8probe.log" >>"$summary" 2>/dev/null
if python3 -c "import torch" 2>/dev/null; then
  check "fp8: PyTorch _scaled_mm probe" python3 "$bundle/fp8_torch_probe.py"
  cp "$work/log" "$out/fp8-torch-probe.log" 2>/dev/null
fi
# 1. Kernels: with cuDNN's attention (bf16) and with the hand-written one.
# SluiceCudaTests' FP8 cases are strict (SLUICE_FP8_STRICT=1 unless set):
# a refused FP8 GEMM, or none run on tensor cores, fails them.
check "kernels against the CPU" SluiceCudaTests \
  --gtest_output=xml:"$out/kernels.xml"
mv "$work/log" "$out/kernels.log" 2>/dev/null
SLUICE_CUDNN_ATTENTION=0 check "kernels against the CPU, no cuDNN" \
  SluiceCudaTests --gtest_filter='*Attention*'
mv "$work/log" "$out/kernels-fallback.log" 2>/dev/null
# Every backend against the double-precision reference: the whole JSON
# document comes back (bench/results keeps it).
SLUICE_CONFORMANCE_OUT="$out/conformance.json" check \
  "backend conformance (cpu, cuda)" SluiceConformanceTests
# Every communicator operation, fp32 and bf16, over the CUDA backend's
# staged MPI transport as a session opens it (nccl-suite.sh runs NCCL's);
# each document comes back.
for p in 2 4; do
  SLUICE_CONFORMANCE_OUT="$out/comm-conformance-staged-$p.json" check \
    "communicator conformance, staged MPI, $p ranks" "${mpi[@]}" -np "$p" \
    SluiceCommConformanceTests --plan="$plans/comm-p$p.json" --backend=cuda \
    --transport=mpi
done

# 2. One GPU against the CPU reference, fp32.
for model in tiny-train tiny-llama; do
  plan=$plans/$model-1f1b-p1-fp32.json
  ref=$work/$model-cpu
  sluice-run "$plan" --reference --backend cpu --steps 3 --dump-grads "$ref" \
    >/dev/null 2>&1
  check "$model one GPU fp32 = CPU" sluice-run "$plan" --backend cuda \
    --steps 3 --check-against "$ref"
  check "$model one GPU reference fp32 = CPU" sluice-run "$plan" --reference \
    --backend cuda --steps 3 --check-against "$ref"
done

# 2b. fp8 (issue 35): the GPU's FP8 GEMMs (tensor cores on 8.9+) against
# the CPU's exact emulation -- the same quantized values where the bf16
# activations agree, so within fp8's band, not bit for bit; 2 ranks
# pipelined against the GPU's own fp8 reference at bf16's tolerances; and
# the sanitizer over an fp8 step (the quantize kernels' indexing).
plan=$plans/tiny-llama-1f1b-p1-bf16.json
sluice-run "$plan" --reference --backend cpu --precision fp8 --steps 3 \
  --dump-grads "$work/fp8-cpu" >/dev/null 2>&1
# The gradient band is 3e-1: a bf16 activation that differs in its last
# bit between the GPU's and the CPU's kernels can land on another E5M2
# value (two mantissa bits), and a norm weight's gradient is a cancelling
# sum of them (measured 2.15e-1 in layers.0.norm1.weight on an H200,
# bench/results/h200-2026-11-27-fp8; the losses within 1.6e-4).
check "tiny-llama one GPU fp8 = CPU fp8 (band)" sluice-run "$plan" \
  --backend cuda --precision fp8 --steps 3 --check-against "$work/fp8-cpu" \
  --loss-tolerance 1e-3 --grad-tolerance 3e-1
# (added 2026-11-30, issue 58) Weights quantized once a step
# (Fp8Operand::steady) are the values quantizing at every call gives, so
# the run repeats SLUICE_FP8_STEADY_COPIES=0's: tight, as only a GEMM
# algorithm chosen differently could tell them apart.
SLUICE_FP8_STEADY_COPIES=0 sluice-run "$plan" --backend cuda --precision fp8 \
  --steps 3 --dump-grads "$work/fp8-per-call" >/dev/null 2>&1
check "tiny-llama fp8: weights quantized once a step = at every call" \
  sluice-run "$plan" --backend cuda --precision fp8 --steps 3 \
  --check-against "$work/fp8-per-call" --loss-tolerance 1e-6 \
  --grad-tolerance 1e-5
sluice-run "$plans/tiny-llama-1f1b-p2-bf16.json" --reference --backend cuda \
  --precision fp8 --steps 3 --dump-grads "$work/fp8-gpu" >/dev/null 2>&1
check "tiny-llama 1f1b p=2 fp8 = fp8 reference" "${mpi[@]}" -np 2 sluice-run \
  "$plans/tiny-llama-1f1b-p2-bf16.json" --backend cuda --transport mpi \
  --precision fp8 --steps 3 --check-against "$work/fp8-gpu" \
  --loss-tolerance 2e-3 --grad-tolerance 5e-2
if command -v compute-sanitizer >/dev/null; then
  check "compute-sanitizer memcheck, fp8, one step" compute-sanitizer \
    --error-exitcode 1 --tool memcheck sluice-run "$plan" --backend cuda \
    --precision fp8 --transport mpi --steps 1
fi

# 3. Ranks sharing the GPU, staged through host memory. The reference
# depends on the model and the microbatches (2p here), so each p has its
# own, run by one process on the GPU.
for model in tiny-train tiny-llama; do
  for p in 2 4; do
    for precision in fp32 bf16; do
      ref=$work/$model-p$p-gpu-$precision
      sluice-run "$plans/$model-1f1b-p$p-$precision.json" --reference \
        --backend cuda --steps 3 --dump-grads "$ref" >/dev/null 2>&1
    done
    # fd 3: mpirun would read the list from stdin.
    while IFS='|' read -r schedule _ <&3; do
      [[ -z $schedule || $schedule == \#* ]] && continue
      [[ -n ${SCHEDULES:-} && ! $schedule =~ $SCHEDULES ]] && continue
      fp32=$plans/$model-$schedule-p$p-fp32.json
      bf16=$plans/$model-$schedule-p$p-bf16.json
      [ -f "$fp32" ] || continue
      check "$model $schedule p=$p fp32, $p ranks on one GPU" \
        "${mpi[@]}" -np "$p" sluice-run "$fp32" --backend cuda \
        --transport mpi --steps 3 --check-against "$work/$model-p$p-gpu-fp32"
      # bf16 against bf16: other summation orders only.
      check "$model $schedule p=$p bf16 = bf16 reference" \
        "${mpi[@]}" -np "$p" sluice-run "$bf16" --backend cuda \
        --transport mpi --steps 3 --check-against "$work/$model-p$p-gpu-bf16" \
        --loss-tolerance 2e-3 --grad-tolerance 5e-2
      # bf16 against fp32: the band, measured (never fails); BANDS=0
      # leaves it out.
      [[ ${BANDS:-1} == 0 ]] && continue
      past_budget && continue
      [[ -n ${ONLY:-} && ! "$model $schedule p=$p bf16" =~ $ONLY ]] && continue
      band=$("${mpi[@]}" -np "$p" sluice-run "$bf16" --backend cuda \
        --transport mpi --steps 3 --measure-against "$work/$model-p$p-gpu-fp32" \
        2>&1 | grep -a -m1 '^measure')
      echo "BAND $model $schedule p=$p bf16 vs fp32: $band" | tee -a "$summary"
      printf 'BAND\t%s\t%s\n' "$model $schedule p=$p bf16 vs fp32" "$band" \
        >>"$results"
    done 3<"$bundle/variants.txt"
  done
done

# 4. NCCL with one rank; the sanitizer; a failing rank.
check "NCCL communicator of one rank" "${mpi[@]}" -np 1 sluice-run \
  "$plans/tiny-train-1f1b-p1-fp32.json" --backend cuda --transport nccl \
  --steps 2
if command -v compute-sanitizer >/dev/null; then
  check "compute-sanitizer memcheck, one step" compute-sanitizer \
    --error-exitcode 1 --tool memcheck sluice-run \
    "$plans/tiny-llama-1f1b-p1-bf16.json" --backend cuda --transport mpi \
    --steps 1
  # NCCL's initialisation probes kernels it was not built for and reports
  # cudaErrorNoKernelImageForDevice to the sanitizer (benign, inside
  # libnccl): the NCCL path is checked for leaks and races only.
  check "compute-sanitizer memcheck, NCCL, one step" compute-sanitizer \
    --error-exitcode 1 --tool memcheck --report-api-errors no sluice-run \
    "$plans/tiny-llama-1f1b-p1-bf16.json" --backend cuda --transport nccl \
    --steps 1
else
  record "compute-sanitizer memcheck" SKIP "compute-sanitizer not found"
fi
if past_budget; then
  record "a failing rank ends every rank" SKIP "past the budget of $BUDGET s"
elif timeout 120 "${mpi[@]}" -np 2 sluice-run "$plans/tiny-train-1f1b-p2-fp32.json" \
  --backend cuda --transport mpi --steps 2 --fail-at-instruction 3 \
  --fail-rank 1 >"$work/log" 2>&1; then
  record "a failing rank ends every rank" FAIL "the run exited 0"
elif [ $? = 124 ]; then
  record "a failing rank ends every rank" FAIL "the run hung"
elif ! grep -aq "injected failure" "$work/log"; then
  # Ended, but not by the injected failure (no GPU, a crash elsewhere).
  record "a failing rank ends every rank" FAIL "$(grep -a -m1 'error' "$work/log")"
else
  record "a failing rank ends every rank" PASS "$(grep -a -m1 'injected failure' "$work/log")"
fi

fi # sections 1-4

# 5. Benchmarks.
if [ "$mode" = all ] || [ "$mode" = bench ]; then
  timeout 200 sluice-bench-gpu-layer 2>&1 | tee "$out/bench-layer.txt"
  timeout 200 sluice-bench-step "$plans/llama-3.2-1b-p1-bf16.json" 2>&1 |
    tee "$out/bench-step.txt"
  # TORCH=0 skips PyTorch's step (two minutes, most of it torch.compile).
  [ "${TORCH:-1}" = 1 ] &&
    (cd "$bundle" && timeout 300 python3 torch_step.py \
      --config llama-3.2-1b.json \
      --only "${TORCH_ONLY:-autocast/compile,bf16-master/compile}") 2>&1 |
      tee "$out/bench-torch.txt"
fi
# 5b. The 405B calibration (docs/search.md): one layer of Llama-3.1-405B's
# size (hidden 16384, FFN 53248, 128 heads, 8192 tokens) through the CUDA
# backend; bench/llama405-calibrate.sh turns its F+B+W rate into the cost
# model's efficiency and predicts Meta's meshes with it.
if [ "$mode" = all ] || [ "$mode" = bench ] || [ "$mode" = calibrate ]; then
  timeout 150 sluice-bench-gpu-layer --hidden 16384 --ffn 53248 --heads 128 \
    --seq 8192 --repeats 3 2>&1 | tee "$out/bench-layer-405b.txt"
fi
# 6. The speed switches, side by side.
if [ "$mode" = variants ]; then
  llama=$plans/llama-3.2-1b-p1-bf16.json
  IFS=';' read -ra settings <<<"${VARIANTS:-default;SLUICE_GEMM_AUTOTUNE=0;SLUICE_ATTENTION_DETERMINISTIC=0;SLUICE_CUDNN_AUTOTUNE=1}"
  for setting in "${settings[@]}"; do
    [ "$setting" = default ] && setting=""
    echo "=== variant: ${setting:-default}" | tee -a "$out/variants.txt"
    # shellcheck disable=SC2086
    env $setting timeout 120 sluice-bench-gpu-layer --repeats 10 2>&1 |
      grep -aE '^(F|B|W|F\+B\+W|GEMM) ' | tee -a "$out/variants.txt"
    # shellcheck disable=SC2086
    env $setting timeout 150 sluice-bench-step "$llama" --steps 4 \
      --warmup 2 2>&1 | grep -a '^step' | tee -a "$out/variants.txt"
  done
  echo "=== the executor in a 1B step (sluice-run --timing)" | tee -a "$out/variants.txt"
  timeout 150 sluice-run "$llama" --backend cuda --steps 4 --timing \
    --trace "$out/trace-1b.json" 2>&1 | tail -n 1 | tee -a "$out/variants.txt"
  SLUICE_GEMM_LOG=1 timeout 120 sluice-bench-step "$llama" --steps 1 \
    --warmup 0 >"$out/gemm-tune.txt" 2>&1
  # Vocabulary collectives beside passes: the 1B model on 2 ranks sharing
  # the GPU, sharded output layer (vocab-2), and its trace.
  echo "=== vocab-2, 2 ranks on the GPU (sluice-run --timing)" | tee -a "$out/variants.txt"
  timeout 200 "${mpi[@]}" -np 2 sluice-run "$plans/llama-3.2-1b-vocab-2-p2-bf16.json" \
    --backend cuda --transport mpi --steps 3 --timing \
    --trace "$out/trace-vocab-2.json" 2>&1 | grep -a '^rank' | tee -a "$out/variants.txt"
fi
# 7. Where a step's time goes: the 1B step traced through CUPTI (every
# kernel, copy and memset with its real start and end, so the GPU's idle
# gaps show; bench/kernel_gaps.py) with deterministic attention and
# without, the GEMM shapes' candidates, and (TORCH=1) torch.compile's step
# under its profiler.
if [ "$mode" = profile ]; then
  llama=$plans/llama-3.2-1b-p1-bf16.json
  for setting in "" "SLUICE_ATTENTION_DETERMINISTIC=0"; do
    echo "=== ${setting:-default}" >>"$out/profile-sluice.txt"
    # shellcheck disable=SC2086
    env $setting CUDA_INJECTION64_PATH="$bundle/lib/libsluice-kernel-trace.so" \
      SLUICE_KERNEL_TRACE="$work/trace.csv" timeout 200 \
      sluice-bench-step "$llama" --steps 2 --warmup 1 \
      >>"$out/profile-sluice.txt" 2>&1
    python3 "$bundle/kernel_gaps.py" "$work/trace.csv" \
      >>"$out/profile-sluice.txt" 2>&1
    grep -a "^step .*busy" "$out/profile-sluice.txt" | tail -n 1 |
      sed "s/^/${setting:-default}: /" | tee -a "$summary"
  done
  SLUICE_GEMM_LOG=1 timeout 120 sluice-bench-step "$llama" --steps 1 \
    --warmup 0 >"$out/gemm-tune.txt" 2>&1
  if [ "${TORCH:-1}" = 1 ]; then
    (cd "$bundle" && timeout 300 python3 torch_step.py --config llama-3.2-1b.json \
      --only "${TORCH_ONLY:-bf16-master/compile}" --steps 3 --warmup 2 --profile) \
      >"$out/profile-torch.txt" 2>&1
    grep -a "step" "$out/profile-torch.txt" | head -n 3 | tee -a "$summary"
  fi
fi
rm -rf "$work"
echo "summary: $out/summary.txt"
exit $failed
