#!/usr/bin/env bash
# Runs each libFuzzer target for SECONDS (default 600) from its seed corpus
# (test/fuzz/corpus/<target>) plus what earlier runs found, in BUILD
# (default build-fuzz, configured by `bash setup.sh fuzz`). A crash, an ASan
# or UBSan report, a timeout or an out-of-memory stops the run with the
# input saved as BUILD/fuzz/<target>/crash-* (or timeout-*, oom-*), and the
# script fails. Replay one with: BUILD/bin/sluice-fuzz-<target> FILE
#
#   test/fuzz/run.sh [SECONDS] [TARGET...]     targets: config pipeline plan
#                                               dataset checkpoint safetensors tokenizer
#
# With FUZZ_RUNS=N each target runs N inputs from seed 1 instead: the same
# inputs every time, what CI runs (.ci/run), so that its verdict does not
# depend on the machine's speed. Targets run FUZZ_JOBS (the cores) at once.
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds=${1:-600}
shift || true
targets=("$@")
[ ${#targets[@]} -eq 0 ] &&
  targets=(config pipeline plan dataset checkpoint safetensors tokenizer)
build=${BUILD:-build-fuzz}
# Targets run side by side, one a core (FUZZ_JOBS overrides): each is its
# own process with its own corpus and log, and the verdicts are printed in
# the targets' order once all have ended.
parallel=${FUZZ_JOBS:-$(nproc)}

run_target() {
  local target=$1 work=$build/fuzz/$1 bound
  mkdir -p "$work/corpus"
  if [ -n "${FUZZ_RUNS:-}" ]; then
    bound=(-runs="$FUZZ_RUNS" -seed=1)
  else
    bound=(-max_total_time="$seconds")
  fi
  rm -f "$work/status"
  if "$build/bin/sluice-fuzz-$target" "${bound[@]}" \
      -timeout=60 -rss_limit_mb=4096 -print_final_stats=1 \
      -artifact_prefix="$work/" "$work/corpus" "test/fuzz/corpus/$target" \
      > "$work/log" 2>&1; then
    echo 0 > "$work/status"
  else
    echo 1 > "$work/status"
  fi
}

if [ -n "${FUZZ_RUNS:-}" ]; then
  echo "== ${targets[*]}: $FUZZ_RUNS inputs each from seed 1, $parallel at a time"
else
  echo "== ${targets[*]}: ${seconds} s each, $parallel at a time"
fi
for target in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$parallel" ]; do
    wait -n || true
  done
  run_target "$target" &
done
wait

status=0
for target in "${targets[@]}"; do
  work=$build/fuzz/$target
  echo "== sluice-fuzz-$target"
  if [ "$(cat "$work/status" 2>/dev/null)" != 0 ]; then
    status=1
    echo "   FINDING: $(ls "$work"/crash-* "$work"/timeout-* "$work"/oom-* 2>/dev/null | head -n 1)"
    grep -m 1 -A 12 "ERROR\|runtime error\|deadly signal" "$work/log" || tail -n 20 "$work/log"
  fi
  grep -E "^stat::number_of_executed_units|^stat::new_units_added|cov:|^Done " "$work/log" |
    tail -n 4 | sed 's/^/   /'
done
exit $status
