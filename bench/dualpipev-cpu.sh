#!/usr/bin/env bash
# Issue 55's measured overlap: DualPipeV's pairs on CPU ranks, with the
# expert all-to-all made slow (sluice-run --slow-all-to-all MS: every
# all-to-all holds one link for MS milliseconds, as the cost model's
# communication stream does). The same plan is run with its groups
# interleaved (--overlap-groups=true, the default) and one pass after the
# other (false); the gain is set against what the simulator predicts for
# the two (sluice-compile --overlap-groups true / false) from this
# machine's own pass times (a --profile run without the delay) and the
# delay (--costs F=..,B=..,W=..,a2a=MS/1000).
#
#   [PP=1] bash bench/dualpipev-cpu.sh [OUTDIR] [RUNS] [MS]
#
# Model: test/Inputs/tiny-moe.mlir (7 sparse layers of 4 experts, 2 per
# token), pp PP (default 1: DualPipeV's V on one device) x dp 2 with the
# experts over the 2 replicas, 16 microbatches, 8 steps a run; each
# run's figure is the median of its steps 3-8; RUNS runs of each (default
# 7), alternating. Passes when the measured gain (median over runs) is at
# least half the predicted one. The simulator gives every rank a core of
# its own: on a 2-core machine PP=1 (2 ranks) is what it predicts; PP=2
# (4 ranks) shares the cores, and the overlapped run is then bound by
# them.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-$(mktemp -d)}
runs=${2:-7}
ms=${3:-0.25}
mkdir -p "$out"
bin=build/bin
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
pp=${PP:-1}
mpi=(mpirun --oversubscribe -np $((pp * 2)))
model=test/Inputs/tiny-moe.mlir
mesh=(--pp "$pp" --dp 2 --ep 2 --microbatches 16 --schedule dualpipev)
"$bin/sluice-compile" "$model" "${mesh[@]}" -o "$out/plan.json" > /dev/null

# This machine's pass times: a profile (which runs the groups one pass
# after the other, so each span is its own pass) without the delay.
"${mpi[@]}" "$bin/sluice-run" "$out/plan.json" --steps 4 \
  --profile "$out/profile.json" > "$out/profile.log" 2>&1
# Per device per microbatch, over a device's two stages, averaged over
# the devices (explicit costs are uniform).
costs=$(python3 - "$out/profile.json" "$model" "$ms" <<'PY'
import json, re, sys
prof = json.load(open(sys.argv[1]))
text = open(sys.argv[2]).read()
tokens = int(re.search(r'seq_len = (\d+)', text).group(1)) * \
         int(re.search(r'micro_batch = (\d+)', text).group(1))
stages = prof["stages"]
names = sorted(stages, key=lambda s: int(s[1:]))
p = len(names) // 2
per = {}
for kind in "FBW":
    device = [sum(stages[names[s]][kind]["seconds_per_token"] * tokens
                  for s in (d, 2 * p - 1 - d)) for d in range(p)]
    per[kind] = sum(device) / p
print("F=%.6g,B=%.6g,W=%.6g,a2a=%.6g" % (per["F"], per["B"], per["W"],
                                       float(sys.argv[3]) / 1000))
PY
)
echo "costs: $costs" | tee "$out/prediction.txt"
predict() {
  "$bin/sluice-compile" "$model" "${mesh[@]}" --costs "$costs" \
    --overlap-groups="$1" -o /dev/null |
    sed -n 's/.*step time \([0-9.e+-]*\) .*/\1/p' | head -n 1
}
t_on=$(predict true)
t_off=$(predict false)
echo "predicted step: overlapped $t_on s, one after the other $t_off s" |
  tee -a "$out/prediction.txt"

step_ms() { # the median ms/step of steps 3..8 in a run's log
  grep -E '^step [3-8]:' "$1" | sed -n 's/.* \([0-9.]*\) ms\/step.*/\1/p' |
    sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'
}
: > "$out/runs.tsv"
for r in $(seq 1 "$runs"); do
  for ov in true false; do
    log="$out/run-$r-overlap-$ov.log"
    "${mpi[@]}" "$bin/sluice-run" "$out/plan.json" --steps 8 \
      --slow-all-to-all "$ms" --overlap-groups="$ov" > "$log" 2>&1
    printf '%s\t%s\t%s\n' "$r" "$ov" "$(step_ms "$log")" >> "$out/runs.tsv"
  done
done
python3 - "$out/runs.tsv" "$t_on" "$t_off" <<'PY' | tee "$out/summary.txt"
import statistics, sys
rows = [l.split("\t") for l in open(sys.argv[1]).read().split("\n") if l]
on = [float(r[2]) for r in rows if r[1] == "true"]
off = [float(r[2]) for r in rows if r[1] == "false"]
t_on, t_off = float(sys.argv[2]) * 1e3, float(sys.argv[3]) * 1e3
m_on, m_off = statistics.median(on), statistics.median(off)
pred, meas = t_off - t_on, m_off - m_on
print("measured ms/step over %d runs each: overlapped median %.2f (%.2f-%.2f), "
      "one after the other median %.2f (%.2f-%.2f)"
      % (len(on), m_on, min(on), max(on), m_off, min(off), max(off)))
print("pair by pair, overlapped / one after the other: median %.3f"
      % statistics.median(a / b for a, b in zip(on, off)))
print("predicted: %.2f vs %.2f ms, a gain of %.2f ms; measured gain %.2f ms "
      "(%.0f%% of the prediction)" % (t_on, t_off, pred, meas,
                                     100 * meas / pred if pred else 0))
print("PASS" if pred > 0 and meas >= 0.5 * pred else "FAIL",
      "(the measured gain must be at least half the predicted one)")
PY
