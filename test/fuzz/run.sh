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
# depend on the machine's speed.
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds=${1:-600}
shift || true
targets=("$@")
[ ${#targets[@]} -eq 0 ] &&
  targets=(config pipeline plan dataset checkpoint safetensors tokenizer)
build=${BUILD:-build-fuzz}
status=0
for target in "${targets[@]}"; do
  work=$build/fuzz/$target
  mkdir -p "$work/corpus"
  if [ -n "${FUZZ_RUNS:-}" ]; then
    bound=(-runs="$FUZZ_RUNS" -seed=1)
    echo "== sluice-fuzz-$target: $FUZZ_RUNS inputs from seed 1"
  else
    bound=(-max_total_time="$seconds")
    echo "== sluice-fuzz-$target: ${seconds} s"
  fi
  if ! "$build/bin/sluice-fuzz-$target" "${bound[@]}" \
      -timeout=60 -rss_limit_mb=4096 -print_final_stats=1 \
      -artifact_prefix="$work/" "$work/corpus" "test/fuzz/corpus/$target" \
      > "$work/log" 2>&1; then
    status=1
    echo "   FINDING: $(ls "$work"/crash-* "$work"/timeout-* "$work"/oom-* 2>/dev/null | head -n 1)"
    grep -m 1 -A 12 "ERROR\|runtime error\|deadly signal" "$work/log" || tail -n 20 "$work/log"
  fi
  grep -E "^stat::number_of_executed_units|^stat::new_units_added|cov:" "$work/log" |
    tail -n 3 | sed 's/^/   /'
done
exit $status
