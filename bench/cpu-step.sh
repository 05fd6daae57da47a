#!/usr/bin/env bash
# CPU seconds of a training step on one core, for the CPU backend's kernels
# (issue 38): a GPT-2-shaped model (hidden 256, 4 layers, 4 heads, vocabulary
# 2000) on 2 sequences of 512 tokens, the unpartitioned run (--reference),
# OpenBLAS on one thread. Each run trains STEPS steps; RUNS runs of each
# binary alternate (A B A B ...), and the user CPU seconds of the whole
# process (GNU time) and the last step's ms/step are printed per run, then
# each binary's median and range. A second binary (an older build) gives
# the A/B; its losses must be the ones of the first to 1e-6.
#
#   bash bench/cpu-step.sh [RUNS] [STEPS] [OTHER-SLUICE-RUN]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
steps=${2:-3}
other=${3:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/config.json" <<'JSON'
{"model_type": "gpt2", "n_embd": 256, "n_layer": 4, "n_head": 4,
 "n_positions": 512, "vocab_size": 2000, "activation_function": "gelu_new",
 "torch_dtype": "float32"}
JSON
build/bin/sluice-compile "$work/config.json" --seq-len 512 --micro-batch 2 \
  --pp 1 --microbatches 1 -o "$work/plan.json" >/dev/null 2>&1
binaries=("$PWD/build/bin/sluice-run")
[ -n "$other" ] && binaries+=("$other")
echo "cpu-step: GPT-2-shaped h256 x 4 layers, 2 x 512 tokens, 1 thread, $steps steps, $runs runs each"
for ((r = 1; r <= runs; ++r)); do
  for i in "${!binaries[@]}"; do
    out=$(OPENBLAS_NUM_THREADS=1 /usr/bin/time -f "user %U" \
          "${binaries[$i]}" "$work/plan.json" --reference --steps "$steps" 2>&1)
    user=$(sed -n 's/^user //p' <<<"$out")
    ms=$(sed -n "s/^step $steps: .*| \([0-9.]*\) ms\/step.*/\1/p" <<<"$out")
    loss=$(sed -n "s/^step $steps: loss \([0-9.]*\).*/\1/p" <<<"$out")
    echo "run $r binary $i: user $user s, step $steps $ms ms, loss $loss"
    echo "$i $user $ms $loss" >> "$work/samples"
  done
done
# The median, min and max of column $2 of binary $1's samples.
stats() {
  awk -v b="$1" '$1 == b { print $'"$2"' }' "$work/samples" | sort -g |
    awk '{ v[NR] = $1 } END { printf "median %s (min %s, max %s)", v[int((NR + 1) / 2)], v[1], v[NR] }'
}
for i in "${!binaries[@]}"; do
  echo "binary $i (${binaries[$i]}): user s $(stats "$i" 2); ms/step $(stats "$i" 3); loss $(awk -v b="$i" '$1 == b { l = $4 } END { print l }' "$work/samples")"
done
