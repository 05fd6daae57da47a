#!/usr/bin/env bash
# The multi-rank NCCL suite (docs/gpu.md), run on a GPU machine from the
# bundle tools/gpu/bundle.sh builds with NCCL_HOME set (NCCL 2.30 or later:
# several ranks of one communicator share the one GPU):
#
#   tar -C /tmp -xJf build-gpu/bundle.tar.xz
#   bash /tmp/bundle/nccl-suite.sh /tmp/bundle
#
# Llama-3.2-1B-shaped plans (hidden 2048, 16 layers, 128256 tokens, GQA;
# 256 tokens a sequence, bf16) run over NCCL with 2, 4 and 8 ranks on the
# GPU, each against the single-GPU reference of the same microbatches
# within the bf16 band (loss 2e-3, gradients 5e-2 relative to each
# tensor's largest): 1f1b, zb-h1, zb-v, v-half, seq1f1b and vocab-2 at pp 2
# and 4; recompute; pp 2 x dp 2; ZeRO-1; tp 2 with sequence parallelism;
# pp 4 x dp 2 with vocab-2; pp 2 x tp 2 x dp 2 with ZeRO-1, SP and zb-v.
# Faults: a peer that never joins and a rank killed mid-step must each end
# every rank within the timeout. Tensor parallelism also in fp32 (against
# an fp32 reference) and bf16's band against fp32 beside a plan without
# it. The staged MPI transport runs the data- and tensor-parallel plans
# too. The checks not yet run on a GPU come first (docs/gpu.md); WORK=DIR
# keeps the references between calls on a warm machine.
#
# ONLY=REGEX keeps the checks whose names match. BACKEND=cpu PLANS=DIR runs
# the same checks on the CPU backend over --transport nccl (the emulation)
# with fp32 plans of the same names, to try the script without a GPU.
# Writes a line per check to $OUT/nccl-summary.txt and every check's
# output to $OUT/nccl-logs.txt; exits 1 if any check failed.
set -uo pipefail
bundle=$(cd "${1:?usage: nccl-suite.sh BUNDLE}" && pwd)
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
summary=$out/nccl-summary.txt
logs=$out/nccl-logs.txt
: >"$summary"
: >"$logs"
failed=0
backend=${BACKEND:-cuda}
plans=${PLANS:-$bundle/plans}
work=${WORK:-$(mktemp -d)}

if [ "$backend" = cuda ]; then
  # The bundle's NCCL first: the machine's own (PyTorch's 2.28) cannot
  # share a GPU between ranks.
  # shellcheck source=bundle-env.sh
  source "$(dirname "$0")/bundle-env.sh"
  bundle_env "$bundle" nccl
  mpi=(mpirun --oversubscribe --mca btl self,sm --mca pml ob1)
  # Several ranks on one GPU (NCCL's env docs): allowed, NVLS off, few
  # channels per rank so that they all fit; the ranks share the host, so
  # the bootstrap needs no other interface than loopback.
  export NCCL_MULTI_RANK_GPU_ENABLE=1 NCCL_NVLS_ENABLE=0 NCCL_MAX_CTAS=2 \
    NCCL_MIN_CTAS=1 NCCL_SOCKET_IFNAME=lo NCCL_DEBUG=${NCCL_DEBUG:-WARN}
  nvidia-smi --query-gpu=name,memory.total,driver_version \
    --format=csv,noheader >"$out/device.txt" 2>&1
  echo "device: $(head -n 1 "$out/device.txt"), $(date -u +%F)" | tee -a "$summary"
else
  mpi=(mpirun --oversubscribe --mca btl self,vader --mca pml ob1)
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_mpi_yield_when_idle=1
band=(--loss-tolerance 2e-3 --grad-tolerance 5e-2)
steps=${STEPS:-2}

record() { # record NAME STATUS [DETAIL]
  echo "$2 $1${3:+: $3}" | tee -a "$summary"
  [ "$2" = FAIL ] && failed=1
  return 0
}
# BUDGET: seconds after which the remaining checks are skipped (a device
# lease is short); STOP_ON_FIRST=1 ends the suite when the first NCCL run
# fails (the rest would fail alike).
budget=${BUDGET:-100000}
wanted() {
  [[ -z ${ONLY:-} || $1 =~ $ONLY ]] || return 1
  if [ "$SECONDS" -ge "$budget" ]; then
    record "$1" SKIP "past the suite's budget of $budget s"
    return 1
  fi
}
# The command of sluice-run on RANKS ranks over NCCL (or TRANSPORT), in
# `cmd`: nccl RANKS PLAN ARGS...
nccl() {
  local ranks=$1 plan=$2
  shift 2
  cmd=("${mpi[@]}" -np "$ranks" sluice-run "$plans/$plan.json"
       --backend "$backend" --transport "${TRANSPORT:-nccl}" --steps "$steps"
       --comm-timeout 60 "$@")
}
# check NAME SECONDS RANKS PLAN ARGS...: PASS when it exits 0 in time.
check() {
  local name=$1 limit=$2
  shift 2
  wanted "$name" || return 0
  nccl "$@"
  local start=$SECONDS
  timeout -k 10 "$limit" "${cmd[@]}" >"$work/log" 2>&1
  local code=$?
  { echo "=== $name (exit $code, $((SECONDS - start)) s)"; echo "${cmd[*]}";
    cat "$work/log"; } >>"$logs"
  if [ $code = 0 ]; then
    record "$name" PASS "$(grep -a -m1 '^check' "$work/log" || true) [$((SECONDS - start)) s]"
  elif [ $code = 124 ] || [ $code = 137 ]; then
    record "$name" FAIL "timed out after $limit s"
  else
    record "$name" FAIL "$(grep -a -m1 -E 'error|FAILED' "$work/log" || tail -n 1 "$work/log")"
  fi
}

# Every communicator operation, fp32 and bf16, over NCCL as a session
# opens it (test/unittests/CommConformanceTest.cpp; the CPU backend's
# emulation with BACKEND=cpu), on 2 and 4 ranks; the documents come back.
for ranks in 2 4; do
  name="communicator conformance, $ranks NCCL ranks"
  wanted "$name" || continue
  start=$SECONDS
  SLUICE_CONFORMANCE_OUT="$out/comm-conformance-nccl-$ranks.json" \
    timeout -k 10 120 "${mpi[@]}" -np "$ranks" SluiceCommConformanceTests \
    --plan="$plans/comm-p$ranks.json" --backend="$backend" \
    --transport="${TRANSPORT:-nccl}" --gtest_color=no >"$work/log" 2>&1
  code=$?
  { echo "=== $name (exit $code, $((SECONDS - start)) s)"; cat "$work/log"; } >>"$logs"
  if [ $code = 0 ]; then
    record "$name" PASS "$(grep -a -m1 'PASSED' "$work/log") [$((SECONDS - start)) s]"
  else
    record "$name" FAIL "$(grep -a -m1 -E 'error|Failure|FAILED' "$work/log" || tail -n 1 "$work/log")"
  fi
done

# The single-GPU references, one per microbatch count (and replica
# count: a data-parallel plan's reference runs every replica's), and one
# in fp32 to measure the bf16 band against. They run side by side.
reference() { # reference NAME PLAN [ARGS...]
  local name=$1 plan=$2
  shift 2
  local start=$SECONDS
  if timeout 300 sluice-run "$plans/$plan.json" --reference --backend "$backend" \
       --steps "$steps" --dump-grads "$work/$name" "$@" >"$work/$name.log" 2>&1; then
    echo "PASS reference $name: [$((SECONDS - start)) s]" >"$work/$name.result"
  else
    echo "FAIL reference $name: $(tail -n 1 "$work/$name.log")" >"$work/$name.result"
  fi
}
refs=(m4 m8 m16 m4-fp32 moe-fp32 deepseek-fp32)
[ -f "$work/moe-fp32/losses.txt" ] || reference moe-fp32 moe-ep2-dp2-p2-fp32 &
[ -f "$work/deepseek-fp32/losses.txt" ] ||
  reference deepseek-fp32 deepseek-ep2-dp2-p2-fp32 &
if [ "$backend" = cuda ]; then
  refs+=(moe-bf16)
  [ -f "$work/moe-bf16/losses.txt" ] || reference moe-bf16 moe-ep2-dp2-p2-bf16 &
fi
[ -f "$work/m4/losses.txt" ] || reference m4 1b-1f1b-p2 &
[ -f "$work/m8/losses.txt" ] || reference m8 1b-1f1b-p4 &
[ -f "$work/m16/losses.txt" ] || reference m16 1b-vocab-2-dp2-p4 &
[ -f "$work/m4-fp32/losses.txt" ] || reference m4-fp32 1b-1f1b-p2-fp32 &
wait
for r in "${refs[@]}"; do
  [ -f "$work/$r.result" ] || continue
  cat "$work/$r.result" | tee -a "$summary"
  grep -q '^PASS' "$work/$r.result" || failed=1
  { echo "=== reference $r"; cat "$work/$r.log"; } >>"$logs"
done

# The first NCCL run: if it fails, the rest would fail alike.
check "1f1b pp=2, 2 NCCL ranks" 150 2 1b-1f1b-p2 --check-against "$work/m4" "${band[@]}"
if [ "${STOP_ON_FIRST:-1}" = 1 ] && [ $failed = 1 ]; then
  echo "nccl-suite: stopped after the first NCCL run failed" | tee -a "$summary"
  exit 1
fi
# Expert parallelism (added 2026-11-29, never yet on a GPU): the mixture of
# experts' dispatch and return as NCCL all-to-alls (grouped sends and
# receives) on the compute stream, the expert group's communicator, the
# moe kernels' counts read by the host; fp32 exact against its reference,
# bf16 within the band of its bf16 reference.
check "experts pp=2 x dp=2 x ep=2 fp32, 4 NCCL ranks" 120 \
  4 moe-ep2-dp2-p2-fp32 --check-against "$work/moe-fp32"
if [ "$backend" = cuda ]; then
  check "experts pp=2 x dp=2 x ep=2 bf16, 4 NCCL ranks" 120 \
    4 moe-ep2-dp2-p2-bf16 --check-against "$work/moe-bf16" "${band[@]}"
fi
# DeepSeek-V3's block (added 2026-11-29 evening, issue 55, never yet on a
# GPU): multi-head latent attention through the fallback attention kernel
# (cuDNN declines value heads of their own size), the sigmoid router in
# groups, the bias moved every step from the load summed over the run.
check "experts deepseek pp=2 x dp=2 x ep=2 fp32, 4 NCCL ranks" 120 \
  4 deepseek-ep2-dp2-p2-fp32 --check-against "$work/deepseek-fp32"
# DualPipeV's overlapped groups (added 2026-11-29, issue 55): the same
# experts' reference (4 microbatches over 2 replicas), the plan's pairs.
check "experts dualpipev pp=2 x dp=2 x ep=2 fp32, 4 NCCL ranks" 120 \
  4 moe-dualpipev-ep2-dp2-p2-fp32 --check-against "$work/moe-fp32"
# (added 2026-11-30, issue 55) The check above runs each group's backward
# on a second compute stream (Device::openLanes); the same plan with the
# groups one pass after the other must equal the reference too. Then the
# lanes' step traced through CUPTI, a file per rank: how much of the NCCL
# all-to-alls' time ran beside the other stream's kernels
# (bench/stream_overlap.py, a Perfetto trace of rank 0), and the step's
# --timing with the lanes and without.
check "experts dualpipev, groups one pass after the other, 4 NCCL ranks" 120 \
  4 moe-dualpipev-ep2-dp2-p2-fp32 --check-against "$work/moe-fp32" \
  --overlap-groups=false
name="experts dualpipev: the all-to-alls beside the other lane's kernels"
if wanted "$name" && [ "$backend" = cuda ]; then
  for lanes in true false; do
    steps=4 nccl 4 moe-dualpipev-ep2-dp2-p2-fp32 --timing \
      --overlap-groups=$lanes --trace "$out/dualpipev-lanes-$lanes.trace.json"
    rm -f "$work"/lanes-*.csv
    CUDA_INJECTION64_PATH="$bundle/lib/libsluice-kernel-trace.so" \
      SLUICE_KERNEL_TRACE="$work/lanes-%r.csv" \
      timeout -k 10 120 "${cmd[@]}" >"$work/log" 2>&1
    code=$?
    { echo "=== $name, lanes $lanes (exit $code)"; echo "${cmd[*]}";
      cat "$work/log"; } >>"$logs"
    for rank in 0 1 2 3; do
      python3 "$bundle/stream_overlap.py" "$work/lanes-$rank.csv" \
        --pid "$rank" --perfetto "$out/dualpipev-lanes-$lanes-cupti-$rank.json"
    done >"$work/overlap" 2>&1
    cat "$work/overlap" >>"$logs"
    echo "lanes $lanes: $(grep -a 'beside' "$work/overlap" | head -n 1);" \
      "$(grep -a '^rank 0: step' "$work/log" | cut -c1-60)" >>"$work/lanes"
  done
  if grep -q 'lanes true: NCCL.*([1-9][0-9.]*%)' "$work/lanes"; then
    record "$name" PASS "$(tr '\n' ' ' <"$work/lanes")"
  else
    record "$name" FAIL "$(tr '\n' ' ' <"$work/lanes")"
  fi
  rm -f "$work/lanes"
fi
# (added 2026-11-30, issue 56) ZeRO-2: every layer's gradients
# reduce-scattered over NCCL after its W, on the compute stream, into
# the replica's part; the gradients' window of one layer.
check "ZeRO-2 pp=2 x dp=2, 4 NCCL ranks" 150 \
  4 1b-zero2-dp2-p2 --check-against "$work/m8" "${band[@]}"
# (added 2026-11-30, issue 56) ZeRO-3 (FSDP): each layer's working
# weights all-gathered over NCCL (bf16, cast from the replicas' fp32
# parts) before each pass, into two slots; and once a step under zb-v.
check "ZeRO-3 pp=2 x dp=2, 4 NCCL ranks" 150 \
  4 1b-zero3-dp2-p2 --check-against "$work/m8" "${band[@]}"
check "ZeRO-3 reshard step zb-v pp=2 x dp=2, 4 NCCL ranks" 150 \
  4 1b-zero3-step-dp2-p2 --check-against "$work/m8" "${band[@]}"
# (added 2026-11-30, issue 56) Context parallelism: each sequence over 2
# ranks, ring attention's key/value blocks sent and received over NCCL on
# the context stream inside F and B (even ranks sending first), beside
# the step's attention on the compute stream, with their fp32 gradient
# accumulators in B and the hand-written attention kernel on key blocks;
# whole sequences and Seq1F1B's two slices.
check "context cp=2 x pp=2 zb-h1, 4 NCCL ranks" 150 \
  4 1b-context-cp2-p2 --check-against "$work/m8" "${band[@]}"
check "context cp=2 x pp=2 seq1f1b, 4 NCCL ranks" 150 \
  4 1b-context-cp2-seq-p2 --check-against "$work/m8" "${band[@]}"
# (added 2026-11-30, issue 56) Context with expert parallelism: 8 ranks,
# the expert groups at one context rank, the expert gradients summed over
# the context ranks too; the experts' fp32 reference.
check "context x experts cp=2 x ep=2 x dp=2 x pp=2 fp32, 8 NCCL ranks" 150 \
  8 moe-cp2-ep2-dp2-p2-fp32 --check-against "$work/moe-fp32"
# (added 2026-11-30, issue 56) The ring's transfers traced through CUPTI,
# a file per rank: how much of the NCCL send/receive time ran beside the
# compute stream's kernels (bench/stream_overlap.py; a Perfetto trace of
# each rank). Before the context stream it was none: the transfers sat
# on the compute stream.
# traced NAME PLAN LIMIT: the plan on 4 NCCL ranks traced through CUPTI,
# a file per rank; PASS when some of the NCCL kernels' time ran beside
# another stream's compute kernels (bench/stream_overlap.py; a Perfetto
# trace of each rank into OUT).
traced() {
  local name=$1 plan=$2 limit=$3 tag=$4
  wanted "$name" && [ "$backend" = cuda ] || return 0
  steps=4 nccl 4 "$plan" --timing
  rm -f "$work"/cupti-*.csv
  CUDA_INJECTION64_PATH="$bundle/lib/libsluice-kernel-trace.so" \
    SLUICE_KERNEL_TRACE="$work/cupti-%r.csv" \
    timeout -k 10 "$limit" "${cmd[@]}" >"$work/log" 2>&1
  local code=$?
  { echo "=== $name (exit $code)"; echo "${cmd[*]}"; cat "$work/log"; } >>"$logs"
  for rank in 0 1 2 3; do
    python3 "$bundle/stream_overlap.py" "$work/cupti-$rank.csv" \
      --pid "$rank" --perfetto "$out/$tag-cupti-$rank.json"
  done >"$work/overlap" 2>&1
  cat "$work/overlap" >>"$logs"
  local line
  line="$(grep -a 'beside' "$work/overlap" | head -n 1); $(grep -a '^rank 0: step' "$work/log" | cut -c1-60)"
  if [ "$code" = 0 ] && grep -q 'NCCL.*([1-9][0-9.]*%)' "$work/overlap"; then
    record "$name" PASS "$line"
  else
    record "$name" FAIL "exit $code: $line"
  fi
}
traced "context: the ring's transfers beside attention's kernels" \
  1b-context-cp2-p2 150 context-ring
# (added 2026-11-30, issue 58) A pipeline's sends now wait for the pass
# that wrote their slot, not for everything issued before them, and the
# global order lists them nearer their passes (devices taking turns in
# the zero-time run): ZB-H1 at pp 4 traced, the activations' and
# gradients' NCCL kernels against the passes' (the fill's shape is in the
# Perfetto traces; compare a run of the bundle before 2026-11-30 if one
# is at hand). Adjacent sends and receives now go out as one NCCL group
# (ncclGroupStart/End): a receive and a send in one group should show as
# one kernel, not two in a row; CommConformance.SendAndReceiveInOneGroup
# (the conformance check above) is the ring that starts only as a group.
traced "pipeline: sends beside the passes, zb-h1 pp=4" 1b-zb-h1-p4 150 \
  pipeline-zb-h1-p4
# (added 2026-11-30, issue 58) The same plan's step with adjacent
# transfers grouped (the default) and one at a time
# (SLUICE_GROUP_TRANSFERS=0), alternating, two runs each of 6 steps
# (about 2 x 2 x 30 s): a measurement, PASS when all four ran. On CPU
# ranks under the emulation the group took 6-8% off ZB-H1 pp 2
# (bench/results/cpu-2026-11-30-comm-groups).
# ab NAME PLAN VARIABLE ON OFF: the plan on 4 NCCL ranks with VARIABLE=ON
# and =OFF, alternating, two runs each of 6 steps (about 2 x 2 x 30 s):
# the median ms a step after the first of each, PASS when all four ran.
ab() {
  local name=$1 plan=$2 variable=$3 on=$4 off=$5
  wanted "$name" && [ "$backend" = cuda ] || return 0
  steps=6 nccl 4 "$plan" --timing
  local code=0 run value ms label all=""
  for run in 1 2; do
    for value in 1 0; do
      env "$variable=$value" timeout -k 10 120 "${cmd[@]}" \
        >"$work/log" 2>&1 || code=$?
      { echo "=== $name ($variable=$value, run $run)"
        echo "${cmd[*]}"; cat "$work/log"; } >>"$logs"
      ms=$(grep -ao '[0-9.]* ms/step' "$work/log" | tail -n +2 |
        awk '{print $1}' | sort -g |
        awk '{a[NR]=$1} END {if (NR) print a[int((NR+1)/2)]; else print "none"}')
      label=$off
      [ "$value" = 1 ] && label=$on
      all="$all $label=$ms"
    done
  done
  if [ "$code" = 0 ]; then
    record "$name" PASS "ms a step:$all"
  else
    record "$name" FAIL "exit $code; ms a step:$all"
  fi
}
ab "pipeline: grouped transfers against one at a time, zb-h1 pp=4" \
  1b-zb-h1-p4 SLUICE_GROUP_TRANSFERS grouped one-at-a-time
# (added 2026-11-30, issue 58) Tensor parallelism's collectives now run on
# a stream of their own, and a BW pass's B computes the attention
# output's and the down projection's weight gradients while the group
# reduce-scatters the input gradients before them (Megatron-LM's
# overlap); SLUICE_TP_OVERLAP=0 leaves those GEMMs to W, after the sums.
# The 1F1B plan (BW passes) with tp 2 + SP at pp 2; its correctness is
# the "tp=2 + SP" checks below, which run with the overlap on.
ab "tensor: input-gradient sums beside weight GEMMs against before them, tp=2 + SP pp=2" \
  1b-tp2-sp-p2 SLUICE_TP_OVERLAP beside after
# Its CUPTI trace: the reduce-scatters on the tensor stream under the
# down and attention-output weight GEMMs in each BW (the share it prints
# counts the pipeline's transfers too; the Perfetto trace shows which).
traced "tensor: the group's sums beside the weight GEMMs, tp=2 + SP pp=2" \
  1b-tp2-sp-p2 150 tensor-tp2-sp-p2

# Faults: each must end every rank, with a message, well inside the limit.
judge() { # judge NAME LIMIT EXPECT CODE START: a run that should have failed
  local name=$1 limit=$2 expect=$3 code=$4 start=$5
  { echo "=== $name (exit $code, $((SECONDS - start)) s)"; cat "$work/log"; } >>"$logs"
  if [ "$code" = 0 ]; then
    record "$name" FAIL "the run exited 0"
  elif [ "$code" = 124 ] || [ $((SECONDS - start)) -ge "$limit" ]; then
    record "$name" FAIL "a rank hung past $limit s"
  elif ! grep -aq -E "$expect" "$work/log"; then
    record "$name" FAIL "ended ($code) without saying /$expect/"
  else
    record "$name" PASS "$(grep -a -m1 -E "$expect" "$work/log" | cut -c1-300) [$((SECONDS - start)) s]"
  fi
}
name="a peer that never joins ends every rank"
if wanted "$name"; then
  nccl 2 1b-1f1b-p2 --fail-rank 1 --fail-at-instruction 6 --fail-hang \
    --comm-timeout 20
  start=$SECONDS
  timeout -k 10 150 "${cmd[@]}" >"$work/log" 2>&1
  judge "$name" 150 "progress for|NCCL reports" $? $start
fi
name="a rank killed mid-step ends every rank"
if wanted "$name"; then
  # Training for good; once it has logged a step, one rank is killed.
  nccl 4 1b-1f1b-p4 --steps 100000 --log-every 1
  start=$SECONDS
  timeout -k 10 150 "${cmd[@]}" >"$work/log" 2>&1 &
  job=$!
  for _ in $(seq 240); do
    grep -aq "^step" "$work/log" 2>/dev/null && break
    sleep 0.5
  done
  pkill -KILL -n -f "^sluice-run "
  wait "$job"
  judge "$name" 150 "killed|signal|exited|terminated|NCCL reports|progress for" $? $start
fi

# Tensor parallelism: fp32 against the fp32 reference (tight: the same
# math, other summation orders), then bf16's band, beside a plan without
# tensor parallelism measured against the same fp32 reference.
check "tp=2 + SP pp=2 fp32, 4 NCCL ranks" 200 4 1b-tp2-sp-p2-fp32 \
  --check-against "$work/m4-fp32" --loss-tolerance 1e-5 --grad-tolerance 1e-3
check "tp=2 + SP pp=2, 4 NCCL ranks" 150 4 1b-tp2-sp-p2 --check-against "$work/m4" "${band[@]}"
for plan in 1b-tp2-sp-p2 1b-1f1b-p2; do
  ranks=4
  [ "$plan" = 1b-1f1b-p2 ] && ranks=2
  name="BAND $plan bf16 vs fp32"
  wanted "$name" || continue
  nccl "$ranks" "$plan" --measure-against "$work/m4-fp32"
  timeout -k 10 150 "${cmd[@]}" 2>&1 | grep -a '^measure' | sed "s/^/$name: /" |
    tee -a "$summary"
done
check "zb-v pp=2 x tp=2 x dp=2 ZeRO-1 SP, 8 NCCL ranks" 200 \
  8 1b-mesh-p2-tp2-dp2 --check-against "$work/m8" "${band[@]}"
check "vocab-2 pp=4 x dp=2, 8 NCCL ranks" 200 \
  8 1b-vocab-2-dp2-p4 --check-against "$work/m16" "${band[@]}"

# Four pipeline devices.
for s in 1f1b zb-h1 zb-v v-half seq1f1b vocab-2; do
  check "$s pp=4, 4 NCCL ranks" 150 4 "1b-$s-p4" --check-against "$work/m8" "${band[@]}"
done

# The staged MPI transport carries the same meshes.
TRANSPORT=mpi check "pp=2 x dp=2 ZeRO-1, staged MPI" 150 \
  4 1b-zero1-dp2-p2 --check-against "$work/m8" "${band[@]}"
TRANSPORT=mpi check "tp=2 + SP pp=2, staged MPI" 150 \
  4 1b-tp2-sp-p2 --check-against "$work/m4" "${band[@]}"

# Two pipeline devices: every schedule kind, vocabulary sharding, slicing,
# recomputation; data parallelism.
for s in zb-h1 zb-v v-half seq1f1b vocab-2; do
  check "$s pp=2, 2 NCCL ranks" 150 2 "1b-$s-p2" --check-against "$work/m4" "${band[@]}"
done
check "recompute zb-h1 pp=2, 2 NCCL ranks" 150 \
  2 1b-recompute-p2 --check-against "$work/m4" "${band[@]}"
check "pp=2 x dp=2, 4 NCCL ranks" 150 \
  4 1b-dp2-p2 --check-against "$work/m8" "${band[@]}"
check "ZeRO-1 pp=2 x dp=2, 4 NCCL ranks" 150 \
  4 1b-zero1-dp2-p2 --check-against "$work/m8" "${band[@]}"
echo "nccl-suite: $(grep -c '^PASS' "$summary") passed, $(grep -c '^FAIL' "$summary") failed" |
  tee -a "$summary"
exit $failed
