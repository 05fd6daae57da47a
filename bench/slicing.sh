#!/usr/bin/env bash
# Token slicing against the papers, with the analytic cost model:
#
#  A. Sun et al., 2024 Tables 2-5: 1F1B against Seq1F1B with uniform
#     slices ("w/o cwp") and with the computation-wise partition, k = 4,
#     A100 costs (a tensor-parallel group of 8 as one device of 8x the
#     FLOP/s and bandwidth: `a100x8`). The paper: Seq1F1B about 1.14x 1F1B's
#     throughput at about half the memory; computation-wise 10-30% better
#     than uniform.
#  B. Li et al., 2021 Table 1, settings (1)-(10), V100 costs (`v100xOp`
#     for the #Op GPUs of a cell): GPipe against TeraPipe, each with the
#     best split of the pipeline's batch into equal microbatches, TeraPipe
#     slicing tokens with its dynamic programme. The paper (Figure 5):
#     1.21x for (1), none for (2)-(3), 1.40x (4)-(5), 1.88/1.56/2.40x
#     (6)-(8), 6.75/5.02x for (9)-(10).
#
# Writes slicing.csv and slicing.svg (a plot of both) to OUT (default
# build/bench); docs/slicing.md compares the figures with the papers'.
#
#   bash bench/slicing.sh [OUT]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build/bench}
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
compile=build/bin/sluice-compile

figures() { # report -> "step_time mfu peak_memory_gib peak_activation"
  python3 - "$1" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
peak = max(d["peak_memory_bytes"] for d in r["per_device"]) / 2**30
act = max(d["peak_activation_microbatches"] for d in r["per_device"])
print(r["step_time"], r["mfu"], round(peak, 2), act)
PY
}

echo "experiment,model,setting,seq_len,microbatches,method,step_time_s,tokens_per_s,mfu,peak_memory_gib,peak_activation,detail" > "$work/slicing.csv"

# A. Seq1F1B.
seq1f1b() { # model pp costs seqs...
  local model=$1 pp=$2 costs=$3; shift 3
  for seq in "$@"; do
    for m in $((pp * 2)) $((pp * 4)); do
      for method in 1f1b uniform seq1f1b; do
        local flags=(--schedule 1f1b)
        [ "$method" = 1f1b ] || flags=(--schedule seq1f1b --slices 4 --slicing "$method")
        if "$compile" "examples/seq1f1b/$model.mlir" --seq-len "$seq" --pp "$pp" \
             --microbatches "$m" --costs "$costs" "${flags[@]}" \
             --report "$work/r.json" > "$work/out.txt" 2>&1; then
          read -r step mfu mem act < <(figures "$work/r.json")
          local detail
          detail=$(grep -o 'slices [0-9, ]*' "$work/out.txt" | tr ',' ' ' || true)
          echo "seq1f1b,$model,pp$pp,$seq,$m,$method,$step,$(python3 -c "print($m*$seq/$step)"),$mfu,$mem,$act,$detail"
        else
          echo "seq1f1b,$model,pp$pp,$seq,$m,$method,failed,,,,,"
        fi
      done
    done
  done
}
{
  seq1f1b gpt-2.7b 8 a100 16384 24576 32768
  seq1f1b gpt-7b 4 a100x8 32768 65536 131072
  seq1f1b gpt-13b 4 a100x8 32768 49152 65536
  seq1f1b gpt-30b 8 a100x8 32768 49152 65536
} >> "$work/slicing.csv"

# B. TeraPipe: setting model batch-per-pipeline stages ops paper-speedup.
terapipe() {
  local setting=$1 model=$2 batch=$3 pp=$4 ops=$5 paper=$6
  local costs=v100
  [ "$ops" = 1 ] || costs="v100x$ops"
  for schedule in gpipe terapipe; do
    local best="" bestLine=""
    for b in $(seq 1 "$batch"); do
      [ $((batch % b)) = 0 ] || continue
      local m=$((batch / b)) flags=()
      [ "$schedule" = gpipe ] || flags=(--slices auto --slicing terapipe)
      "$compile" "examples/terapipe/$model.mlir" --micro-batch "$b" --pp "$pp" \
        --microbatches "$m" --schedule "$schedule" --costs "$costs" "${flags[@]}" \
        --report "$work/r.json" > "$work/out.txt" 2>&1 || continue
      read -r step mfu mem act < <(figures "$work/r.json")
      if [ -z "$best" ] || python3 -c "import sys; sys.exit(0 if $step < $best else 1)"; then
        best=$step
        local k
        k=$(grep -o '[0-9]* slices' "$work/out.txt" | cut -d' ' -f1 || true)
        bestLine="terapipe,$model,($setting),2048,$m,$schedule,$step,$(python3 -c "print($batch*2048/$step)"),$mfu,$mem,$act,rows $b x $m microbatches ${k:+x $k token slices} paper $paper"
      fi
    done
    if [ "$schedule" = terapipe ]; then
      # §3.4's own model: the joint batch and token DP (its knapsack may
      # split the batch unevenly, which the IR's equal microbatches cannot).
      local joint
      joint=$(build/bin/sluice-bench-slicing --joint "examples/terapipe/$model.mlir" \
                "$pp" "$costs" "$batch" | tr ',' ';')
      bestLine="$bestLine; $joint"
    fi
    echo "$bestLine"
  done
}
{
  terapipe 1 gpt3-1b 16 24 1 1.21
  terapipe 2 gpt3-1b 36 12 8 1.00
  terapipe 3 gpt3-1b 72 24 8 1.00
  terapipe 4 gpt3-13b 16 20 8 1.40
  terapipe 5 gpt3-13b 32 40 8 1.40
  terapipe 6 gpt3-44b 2 96 1 1.88
  terapipe 7 gpt3-44b 4 24 8 1.56
  terapipe 8 gpt3-44b 8 48 8 2.40
  terapipe 9 gpt3-175b 2 96 4 6.75
  terapipe 10 gpt3-175b 2 48 8 5.02
} >> "$work/slicing.csv"

cp "$work/slicing.csv" "$out/slicing.csv"
cat "$out/slicing.csv"
python3 bench/slicing-plot.py "$out/slicing.csv" "$out/slicing.svg"
