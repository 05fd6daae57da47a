#!/usr/bin/env bash
# Issue 58's CPU measurement: what the one global communication order
# (runtime/plan/CommOrder.h, which NCCL needs) costs a pipeline on CPU
# ranks, against each device's own plan order (what MPI alone needs), and
# both against the simulator's prediction from this machine's measured
# pass times.
#
#   [PP=4] [M=8] [SCHEDULE=zb-h1] [RUNS=5] [STEPS=6] [OLD=path/sluice-run] \
#     [TRANSPORT=nccl] bash bench/comm-order.sh [OUTDIR]
#
# Model: bench/rank-gpt.mlir (8 GPT layers, hidden 256, 128 tokens),
# pp PP x M microbatches of SCHEDULE, one rank per device through
# sluice-launch. The profile run (--profile) gives the passes' seconds per
# token; `sluice-compile --costs PROFILE` predicts the step. Each order
# runs RUNS times, alternating, STEPS steps a run; a run's figure is the
# median of its steps after the first, an order's the median of its runs
# with the spread. OLD names another build's sluice-run (the global order
# before a change) to run beside, under --comm-order global.
#
# TRANSPORT=nccl runs the NCCL emulation (every operation waits for the
# one before it) instead of plain MPI, and compares the global order with
# adjacent transfers as one group (the default) against the same order
# issued one transfer at a time (SLUICE_GROUP_TRANSFERS=0).
#
# The simulator gives every device a core of its own: with PP above the
# host's cores the ranks share them and the measured steps are longer
# than predicted for every order alike (the comparison between orders
# still holds).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-$(mktemp -d)}
mkdir -p "$out"
bin=build/bin
pp=${PP:-4}
m=${M:-8}
schedule=${SCHEDULE:-zb-h1}
runs=${RUNS:-5}
steps=${STEPS:-6}
model=bench/rank-gpt.mlir
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

echo "host: $(nproc) cores, $pp ranks; $(date -u +%Y-%m-%dT%H:%MZ); commit $(git rev-parse --short HEAD)"
"$bin/sluice-compile" "$model" --pp "$pp" --microbatches "$m" \
  --schedule "$schedule" -o "$out/plan.json" > /dev/null
"$bin/sluice-launch" -np "$pp" "$bin/sluice-run" "$out/plan.json" --steps 4 \
  --profile "$out/profile.json" > "$out/profile.log"
"$bin/sluice-compile" "$model" --pp "$pp" --microbatches "$m" \
  --schedule "$schedule" --costs "$out/profile.json" -o "$out/predicted.json" \
  > "$out/predicted.txt"
predicted=$(grep -o 'step time [0-9.e+-]* s' "$out/predicted.txt" | awk '{print $3}')
echo "predicted: $predicted s a step (sluice-compile $model --pp $pp" \
  "--microbatches $m --schedule $schedule --costs profile.json)"

transport=${TRANSPORT:-mpi}
names=(plan global)
[ "$transport" = nccl ] && names=(global global-ungrouped)
[ -z "${OLD:-}" ] || names+=(old-global)
for run in $(seq 1 "$runs"); do
  for name in "${names[@]}"; do
    exe=$bin/sluice-run order=$name grouped=1
    [ "$name" = old-global ] && { exe=$OLD; order=global; }
    [ "$name" = global-ungrouped ] && { order=global; grouped=0; }
    SLUICE_GROUP_TRANSFERS=$grouped "$bin/sluice-launch" -np "$pp" "$exe" \
      "$out/plan.json" --steps "$steps" --comm-order "$order" \
      --transport "$transport" > "$out/$name.run$run.log"
    grep -o '[0-9.]* ms/step' "$out/$name.run$run.log" | tail -n +2 |
      awk '{print $1 / 1000}' | median >> "$out/$name.runs"
  done
done
printf '%-11s %10s %18s %9s\n' order measured "runs (min-max)" "/ predicted"
for name in "${names[@]}"; do
  med=$(median < "$out/$name.runs")
  lo=$(sort -g "$out/$name.runs" | head -1)
  hi=$(sort -g "$out/$name.runs" | tail -1)
  printf '%-11s %9.4fs %8.4f-%.4f s %9.3f\n' "$name" "$med" "$lo" "$hi" \
    "$(awk -v a="$med" -v b="$predicted" 'BEGIN {print a / b}')"
done
echo "logs: $out"
