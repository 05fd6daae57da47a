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
# Per seed: the largest and the median relative difference of the
# per-step training loss, and the last step's training and validation
# losses, for fp8 - bf16 and bf16 - fp32.
#
#   bash bench/fp8-band.sh [STEPS] [SEEDS]
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-300}
seeds=${2:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
build/bin/sluice-tokenize examples/corpus -o "$work/bytes.tokens" >/dev/null
for p in fp32 bf16 fp8; do
  build/bin/sluice-compile examples/demo/byte-llama.mlir --pp 1 \
    --microbatches 4 --precision $p -o "$work/$p.json" >/dev/null
done
echo "fp8-band: byte Llama (examples/demo/byte-llama.mlir), $steps steps, seeds 1-$seeds, $(date -u +%F)"
for ((seed = 1; seed <= seeds; ++seed)); do
  for p in fp32 bf16 fp8; do
    build/bin/sluice-run "$work/$p.json" --reference --threads 1 \
      --data "$work/bytes.tokens" --steps "$steps" --seed "$seed" \
      --lr 0.01 --warmup-steps 20 --lr-decay cosine --min-lr 0.001 \
      --weight-decay 0.1 --clip-grad 1 --eval-every 50 --val-fraction 0.1 \
      --log-every 1 >"$work/$p-$seed.log"
  done
  python3 - "$work" "$seed" <<'PY'
import statistics, sys
work, seed = sys.argv[1], sys.argv[2]
def read(p):
    train, val = [], []
    for line in open(f"{work}/{p}-{seed}.log"):
        w = line.split()
        if len(w) > 3 and w[0] == "step" and w[2] == "loss":
            train.append(float(w[3]))
        if len(w) > 4 and w[0] == "step" and w[2:4] == ["validation", "loss"]:
            val.append(float(w[4]))
    return train, val
runs = {p: read(p) for p in ("fp32", "bf16", "fp8")}
for a, b in (("fp8", "bf16"), ("bf16", "fp32")):
    (ta, va), (tb, vb) = runs[a], runs[b]
    d = [abs(x - y) / y for x, y in zip(ta, tb)]
    print(f"seed {seed} {a:>4} vs {b:<4}: loss relative difference max {max(d):.2e}, "
          f"median {statistics.median(d):.2e}; last loss {ta[-1]:.4f} vs {tb[-1]:.4f}, "
          f"validation {va[-1]:.4f} vs {vb[-1]:.4f}")
PY
done
