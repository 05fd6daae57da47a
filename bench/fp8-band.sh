#!/usr/bin/env bash
# The fp8 precision's loss against bf16 (and bf16's against fp32, the
# yardstick), over a few hundred steps of a small model (issue 35): the
# demo's byte-level Llama (examples/demo/byte-llama.mlir: 4 layers, hidden
# 64, GQA, SwiGLU, RoPE) on the bytes of examples/corpus, the demo's
# optimizer (AdamW lr 0.01, warmup 20, cosine to 0.001, weight decay 0.1,
# clip 1), validation every 50 steps on 10% held out, the unpartitioned
# run (--reference; the pipelined fp8 run repeats it, test/runtime/fp8.test).
# On the CPU the FP8 rounding is emulated exactly (runtime/cpu/Fp8.cpp),
# so these are the numbers an FP8 GPU run gives, up to the order of sums.
# Single steps' losses wander apart chaotically between any two
# precisions (last bits grow over hundreds of updates), so the band is
# taken where a user looks: the training loss averaged over each window of
# 50 steps and the validation loss every 50 steps, per precision, with the
# spread over seeds (the run-to-run noise) beside the differences.
#
#   bash bench/fp8-band.sh [STEPS] [SEEDS]
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-300}
seeds=${2:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
build/bin/sluice-tokenize examples/corpus/*.txt -o "$work/bytes.tokens" >/dev/null
for p in fp32 bf16 fp8; do
  build/bin/sluice-compile examples/demo/byte-llama.mlir --pp 1 \
    --microbatches 4 --precision $p -o "$work/$p.json" >/dev/null
done
echo "fp8-band: byte Llama (examples/demo/byte-llama.mlir), $steps steps, seeds 1-$seeds, $(date -u +%F)"
for ((seed = 1; seed <= seeds; ++seed)); do
  for p in fp32 bf16 fp8; do
    build/bin/sluice-run "$work/$p.json" --reference --threads 1 \
      --data "$work/bytes.tokens" --steps "$steps" --seed "$seed" \
      --lr 3e-3 --warmup-steps 20 --lr-decay cosine --min-lr 3e-4 \
      --weight-decay 0.1 --clip-grad 1 --eval-every 50 --val-fraction 0.1 \
      --log-every 1 >"$work/$p-$seed.log"
  done
done
python3 - "$work" "$seeds" <<'PY'
import statistics, sys
work, seeds = sys.argv[1], int(sys.argv[2])
precisions = ("fp32", "bf16", "fp8")
def read(p, seed):
    train, val = [], []
    for line in open(f"{work}/{p}-{seed}.log"):
        w = line.split()
        if len(w) > 3 and w[0] == "step" and w[2] == "loss":
            train.append(float(w[3]))
        if len(w) > 4 and w[0] == "step" and w[2:4] == ["validation", "loss"]:
            val.append(float(w[4]))
    return train, val
runs = {(p, s): read(p, s) for p in precisions for s in range(1, seeds + 1)}
rows = []  # (label, {precision: [value per seed]})
steps = len(runs[("fp32", 1)][0])
for start in range(0, steps, 50):
    label = f"train loss, steps {start + 1}-{min(start + 50, steps)}"
    rows.append((label, {p: [statistics.mean(runs[(p, s)][0][start:start + 50])
                             for s in range(1, seeds + 1)] for p in precisions}))
for i in range(len(runs[("fp32", 1)][1])):
    rows.append((f"validation loss, step {50 * (i + 1)}",
                 {p: [runs[(p, s)][1][i] for s in range(1, seeds + 1)]
                  for p in precisions}))
print(f"| {'':34} | fp32 (mean, seed range) | bf16 | fp8 | fp8 - bf16 | bf16 - fp32 |")
print(f"|{'-' * 36}|---|---|---|---|---|")
for label, v in rows:
    m = {p: statistics.mean(v[p]) for p in precisions}
    r = {p: max(v[p]) - min(v[p]) for p in precisions}
    cells = " | ".join(f"{m[p]:.4f} ({r[p]:.4f})" for p in precisions)
    print(f"| {label:34} | {cells} | {(m['fp8'] - m['bf16']) / m['bf16']:+.2%} | "
          f"{(m['bf16'] - m['fp32']) / m['fp32']:+.2%} |")
PY
