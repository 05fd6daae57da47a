#!/usr/bin/env bash
# Issue 55's DualPipeV table: (1) the grid of sluice-bench-dualpipev --
# p in {4, 8, 16}, m in {2p, 4p}, B/W in {1/1, 1.2/0.8}, an expert
# all-to-all of r in {0, 0.3, 0.6, 1} times a forward's compute in every F
# and B, transfers of 0 or 0.05 -- ZB-V, PyTorch's ScheduleDualPipeV order,
# Sluice's dualpipev and the same order without overlap, one simulator;
# (2) what sluice-compile predicts for DeepSeek-V3 (examples/deepseek-v3)
# under the analytic H100 model, ZB-V against dualpipev, with the experts
# inside a node (ep 8, NVLink) and across nodes (ep 32, InfiniBand).
#
#   bash bench/dualpipev-grid.sh [OUTDIR]   (default: print only)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-}
bench=build/bin/sluice-bench-dualpipev
compile=build/bin/sluice-compile
for tool in "$bench" "$compile"; do
  [ -x "$tool" ] || { echo "dualpipev-grid.sh: run 'bash setup.sh build' first" >&2; exit 1; }
done
run() { # run NAME COMMAND...: prints and, with OUTDIR, keeps the output
  echo "\$ ${*:2}"
  if [ -n "$out" ]; then
    mkdir -p "$out"
    "${@:2}" 2>&1 | tee "$out/$1"
  else
    "${@:2}" 2>&1
  fi
}
run grid.txt "$bench"
for ep in 8 32; do
  for schedule in zb-v dualpipev; do
    run "deepseek-v3-ep$ep-$schedule.txt" "$compile" examples/deepseek-v3/config.json \
      --seq-len 4096 --pp 16 --dp "$ep" --ep "$ep" --zero 1 --microbatches 64 \
      --schedule "$schedule" --costs h100 -o /dev/null
  done
done
