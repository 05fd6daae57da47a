#!/usr/bin/env bash
# Issue 35's step table, run on a GPU machine from the bundle
# (tools/gpu/bundle.sh; docs/benchmarks.md):
#
#   tar -C /tmp -xJf build-gpu/bundle.tar.xz
#   BUDGET=560 bash /tmp/bundle/step-table.sh /tmp/bundle
#
# In one run, on one GPU: the Llama-3.2-1B step (8 microbatches of 4 x
# 2048 tokens, bf16, AdamW) through Sluice's training session; every
# backend against the double-precision reference (SluiceConformanceTests)
# and the CUDA kernels against the CPU's (SluiceCudaTests); the same step
# through PyTorch's baselines (bench/torch_step.py: the autocast and bf16-master
# recipes, eager and torch.compile, then max-autotune while the budget
# lasts), and bench/step_table.py's table of them all. Each part runs in
# its own process under its own limit; a part that would pass BUDGET
# seconds is skipped and said so. SLUICE_ROWS runs Sluice's step once per
# environment setting, BASELINES keeps some of PyTorch's. STEPS and WARMUP
# set the iterations;
# BACKEND=cpu PLAN=NAME.json try the script on a machine without a GPU.
# PyTorch runs in its default, non-deterministic setting, its fastest
# (TORCH_DETERMINISTIC=1: deterministic algorithms); Sluice's attention
# backward is deterministic.
#
# Writes to $OUT (or ./gpu-out) few files, as the device tool brings back
# few: summary.txt, log.txt (every part's whole output), table.md,
# samples.tar (the raw samples, one JSON document per run),
# conformance.json and device.txt.
set -uo pipefail
bundle=$(cd "${1:?usage: step-table.sh BUNDLE}" && pwd)
out=${OUT:-$PWD/gpu-out}
mkdir -p "$out"
budget=${BUDGET:-560}
steps=${STEPS:-10}
warmup=${WARMUP:-3}
summary=$out/summary.txt
log=$out/log.txt
: >"$summary"
: >"$log"
work=$(mktemp -d)
mkdir -p "$work/samples"

# shellcheck source=bundle-env.sh
source "$(dirname "$0")/bundle-env.sh"
bundle_env "$bundle"
export PYTHONUNBUFFERED=1

{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  date -u +%FT%TZ; } >"$out/device.txt" 2>&1
echo "device: $(head -n 1 "$out/device.txt"), $(date -u +%F)" | tee -a "$summary"

# part NAME LIMIT COMMAND...: runs COMMAND under LIMIT seconds (less if the
# budget has less left), its output into log.txt; PASS when it exits 0.
part() {
  local name=$1 limit=$2
  shift 2
  local left=$((budget - SECONDS))
  if [ "$left" -lt 30 ]; then
    echo "SKIP $name: past the budget of $budget s" | tee -a "$summary"
    return 0
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  local start=$SECONDS
  echo "=== $name (limit $limit s): $*" >>"$log"
  timeout -k 5 "$limit" "$@" >"$work/part.log" 2>&1
  local code=$?
  cat "$work/part.log" >>"$log"
  local seconds=$((SECONDS - start))
  if [ $code = 0 ]; then
    echo "PASS $name [$seconds s]" | tee -a "$summary"
  elif [ $code = 124 ] || [ $code = 137 ]; then
    echo "FAIL $name: timed out after $limit s" | tee -a "$summary"
  else
    echo "FAIL $name (exit $code) [$seconds s]: $(grep -a -m1 -E 'error|FAILED|Error' "$work/part.log" | cut -c1-300)" |
      tee -a "$summary"
  fi
  # The figures line of a benchmark, into the summary.
  grep -a -E '^(step median|torch .*: step median)' "$work/part.log" |
    sed 's/^/  /' | tee -a "$summary"
  tar -C "$work" -cf "$out/samples.tar" samples
}

# 1. Sluice's step through the training session users run; SLUICE_ROWS
# ("NAME|VAR=VALUE ...;..."), one row per setting of the environment: an
# A/B of a speed switch in the same lease. PRECISION=fp8 in a row's
# settings runs that row's step in fp8 (sluice-bench-step --precision).
plan=$bundle/plans/${PLAN:-llama-3.2-1b-p1-bf16.json}
IFS=';' read -r -a rows <<<"${SLUICE_ROWS:-sluice bf16|}"
for row in "${rows[@]}"; do
  name=${row%%|*}
  settings=${row#*|}
  [ "$settings" = "$row" ] && settings=
  precision=()
  case " $settings " in
  *" PRECISION="*)
    value=${settings##*PRECISION=}
    precision=(--precision "${value%% *}")
    ;;
  esac
  file=$(echo "$name" | tr -c 'a-zA-Z0-9\n' '-')
  # shellcheck disable=SC2086 # settings are words VAR=VALUE
  part "$name (training session)" 150 env $settings sluice-bench-step "$plan" \
    --backend "${BACKEND:-cuda}" "${precision[@]}" --steps "$steps" \
    --warmup "$warmup" --name "$name" --samples "$work/samples/$file.json"
done

# 2. Conformance (issue 34): every Kernels method on each backend against
# the double-precision reference, and the CUDA kernels against the CPU's.
SLUICE_CONFORMANCE_OUT="$out/conformance.json" \
  part "backend conformance (cpu, cuda)" 90 SluiceConformanceTests
part "CUDA kernels against the CPU" 120 SluiceCudaTests

# 3. PyTorch's baselines, one process each, cheapest first.
# BASELINES (words RECIPE/MODE) keeps some.
for baseline in ${BASELINES:-autocast/eager bf16-master/eager autocast/compile \
                bf16-master/compile fp8-master/compile \
                fp8-rowwise-master/compile bf16-master/max-autotune \
                autocast/max-autotune}; do
  limit=120
  case $baseline in
    */compile) limit=200 ;;
    */max-autotune) limit=400 ;;
  esac
  part "torch $baseline" "$limit" python3 "$bundle/torch_step.py" \
    --config "$bundle/llama-3.2-1b.json" --only "$baseline" \
    --steps "$steps" --warmup "$warmup" --samples-dir "$work/samples" \
    --deterministic "${TORCH_DETERMINISTIC:-0}"
done

# 4. The table.
python3 "$bundle/step_table.py" "$work"/samples/*.json >"$out/table.md" 2>&1
cat "$out/table.md" | tee -a "$summary"
rm -rf "$work"
