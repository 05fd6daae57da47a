#!/usr/bin/env bash
# Does the search's ranking hold when the plans run? On this host's CPU
# ranks (2 by default): profile the model once on the mesh (sluice-run
# --profile: measured seconds per token of each pass of each stage), let
# `sluice-compile --search` rank every plan with that profile as its
# costs, then run the best, the runner-up and the last-ranked plan with
# the flags the table prints and compare their measured step times with
# the predictions. Each plan runs RUNS times (interleaved: A B C A B C
# ...), STEPS steps each; a run's figure is the median of its steps after
# the first (warm-up), the plan's the median of its runs, with the spread.
#
#   bash bench/search-ranking.sh [MICROBATCHES ...]    (default: 4 8)
#   MODEL=... RANKS=2 RUNS=3 STEPS=6 OUT=dir bash bench/search-ranking.sh
#
# Prints, per microbatch count, the ranked table and, per plan run,
# predicted and measured seconds and the measured/predicted ratio; the
# ranking holds if the best's measured time is within 10% of the
# runner-up's (the issue's criterion) and below the last's.
set -euo pipefail
cd "$(dirname "$0")/.."
B=build/bin
MODEL=${MODEL:-bench/rank-gpt.mlir}
RANKS=${RANKS:-2}
RUNS=${RUNS:-3}
STEPS=${STEPS:-6}
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
counts=("$@")
[ ${#counts[@]} -gt 0 ] || counts=(4 8)

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

echo "host: $(nproc) cores, $RANKS ranks; $(date -u +%Y-%m-%dT%H:%MZ); commit $(git rev-parse --short HEAD)"
for m in "${counts[@]}"; do
  dir="$OUT/m$m"
  mkdir -p "$dir"
  # The profile: zero-bubble's split passes give F, B and W apiece.
  $B/sluice-compile "$MODEL" --pp "$RANKS" --microbatches "$m" --schedule zb-h1 \
    -o "$dir/profiled.json" > /dev/null
  $B/sluice-launch -np "$RANKS" $B/sluice-run "$dir/profiled.json" --steps 3 \
    --profile "$dir/prof.json" > /dev/null
  $B/sluice-compile "$MODEL" --search --gpus "$RANKS" --costs "$dir/prof.json" \
    --global-batch "$m" --gpu-memory 8 --top 100 -o "$dir/best.json" > "$dir/search.txt"
  echo
  echo "== $m microbatches: sluice-compile $MODEL --search --gpus $RANKS --costs prof.json --global-batch $m --gpu-memory 8"
  sed -n '1,/^best:/p' "$dir/search.txt"
  # Ranks 1, 2 and the last: their predicted seconds and flags.
  mapfile -t rows < <(awk '$1 ~ /^[0-9]+$/ && $3 == "s"' "$dir/search.txt")
  picks=(0 1 $((${#rows[@]} - 1)))
  names=()
  for i in "${picks[@]}"; do
    row=${rows[$i]}
    rank=$(awk '{print $1}' <<< "$row")
    predicted=$(awk '{print $2}' <<< "$row")
    flags=$(sed -E 's/^ *[0-9]+ +[0-9.]+ s +(-|[0-9.]+%) +[0-9]+ +[0-9.e+-]+ //' <<< "$row")
    # shellcheck disable=SC2086
    $B/sluice-compile "$MODEL" $flags --costs "$dir/prof.json" -o "$dir/rank$rank.json" > /dev/null
    echo "$predicted" > "$dir/rank$rank.predicted"
    echo "$flags" > "$dir/rank$rank.flags"
    names+=("rank$rank")
  done
  for run in $(seq 1 "$RUNS"); do
    for name in "${names[@]}"; do
      $B/sluice-launch -np "$RANKS" $B/sluice-run "$dir/$name.json" --steps "$STEPS" \
        > "$dir/$name.run$run.log"
      grep -o '[0-9.]* ms/step' "$dir/$name.run$run.log" | tail -n +2 | awk '{print $1 / 1000}' \
        | median >> "$dir/$name.runs"
    done
  done
  printf '%-7s %10s %10s %18s %7s  %s\n' plan predicted measured "runs (min-max)" ratio flags
  declare -A measured=()
  for name in "${names[@]}"; do
    p=$(cat "$dir/$name.predicted")
    med=$(median < "$dir/$name.runs")
    lo=$(sort -g "$dir/$name.runs" | head -1)
    hi=$(sort -g "$dir/$name.runs" | tail -1)
    measured[$name]=$med
    printf '%-7s %9.3fs %9.3fs %8.3f-%.3f s %7.3f  %s\n' "$name" "$p" "$med" "$lo" "$hi" \
      "$(awk -v a="$med" -v b="$p" 'BEGIN {print a / b}')" "$(cat "$dir/$name.flags")"
  done
  best=${measured[${names[0]}]}
  second=${measured[${names[1]}]}
  last=${measured[${names[2]}]}
  awk -v a="$best" -v b="$second" -v c="$last" 'BEGIN {
    printf "best / runner-up measured: %.3f (holds within 10%%: %s); best / last: %.3f (%s)\n",
      a / b, (a <= 1.1 * b) ? "yes" : "NO", a / c, (a < c) ? "faster" : "NOT faster" }'
  unset measured
done
echo
echo "logs: $OUT"
