#!/usr/bin/env bash
# The five methods of Yeung et al., 2024 (§6.2-6.4) under the
# analytic A100 cost model: MFU, step time, and the spread of peak memory
# over the pipeline devices, for the paper's settings -- Table 1 on 1F1B
# (4B/8, 10B/16, 21B/32 devices) and Table 2 on V-Half (7B/16, 16B/24,
# 30B/32), sequence 2048, 128 microbatches, vocabularies 32k to 256k.
#
# The paper measures (Figures 11-14): Redis losing 8-33% to Vocab-1/2 at
# large vocabularies, Vocab-1/2 beating Interlaced by 6.7-8.2% MFU on the
# 21B model, the interlaced pipeline holding 1.5x 1F1B's activations, and
# Vocab-1 on V-Half beating the baseline by 7.2-143% with balanced memory.
# docs/vocabulary.md compares these figures with the paper's.
#
#   bash bench/vocabulary.sh [CSV]     (CSV default: stdout only)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
compile=build/bin/sluice-compile

run() { # model pp schedule vocab method
  local model=$1 pp=$2 schedule=$3 vocab=$4 method=$5
  local file="$work/$(basename "$model" .mlir)-$vocab.mlir"
  [ -f "$file" ] || sed "s/vocab = 128000/vocab = $vocab/g" "$model" > "$file"
  local report="$work/report.json"
  if "$compile" "$file" --pp "$pp" --microbatches 128 --schedule "$schedule" \
       --vocab "$method" --costs a100 --report "$report" >/dev/null 2>&1; then
    python3 - "$report" "$(basename "$model" .mlir)" "$pp" "$schedule" \
      "$vocab" "$method" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
peaks = [d["peak_memory_bytes"] / 2**30 for d in r["per_device"]]
acts = [d["peak_activation_microbatches"] for d in r["per_device"]]
print(",".join(sys.argv[2:7]) + ",%.4f,%.4f,%.2f,%.2f,%.2f" % (
    r["mfu"], r["step_time"], max(peaks), min(peaks), max(acts)))
PY
  else
    echo "$(basename "$model" .mlir),$pp,$schedule,$vocab,$method,failed,,,,"
  fi
}

{
  echo "model,devices,schedule,vocab,method,mfu,step_time_s,peak_memory_max_gib,peak_memory_min_gib,peak_activation_microbatches"
  for setting in "table1-4b 8" "table1-10b 16" "table1-21b 32"; do
    set -- $setting
    for vocab in 32000 64000 128000 256000; do
      for method in baseline redis vocab-1 vocab-2 interlaced; do
        run "examples/vocab-parallelism/$1.mlir" "$2" 1f1b "$vocab" "$method"
      done
    done
  done
  for setting in "table2-7b 16" "table2-16b 24" "table2-30b 32"; do
    set -- $setting
    for vocab in 32000 64000 128000 256000; do
      for method in baseline vocab-1 vocab-2; do
        run "examples/vocab-parallelism/$1.mlir" "$2" v-half "$vocab" "$method"
      done
    done
  done
} > "$work/all.csv"
cat "$work/all.csv"
[ -z "$out" ] || cp "$work/all.csv" "$out"

# The paper's comparisons, from the table above.
python3 - "$work/all.csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
def get(model, vocab, method):
    for r in rows:
        if r["model"] == model and r["vocab"] == vocab and r["method"] == method:
            return r
print()
print("MFU relative to the baseline (Vocab-2 / Redis / Interlaced), 1F1B:")
for model in ["table1-4b", "table1-10b", "table1-21b"]:
    for vocab in ["32000", "64000", "128000", "256000"]:
        base = float(get(model, vocab, "baseline")["mfu"])
        line = [f"{model:11} {int(vocab)//1000:4}k"]
        for m in ["vocab-1", "vocab-2", "redis", "interlaced"]:
            line.append(f"{m} {float(get(model, vocab, m)['mfu'])/base:5.2f}x")
        print("  " + "  ".join(line))
print("Vocab-2 over Interlaced, 21B (paper: +6.7% to +8.2% MFU):")
for vocab in ["32000", "64000", "128000", "256000"]:
    v = float(get("table1-21b", vocab, "vocab-2")["mfu"])
    i = float(get("table1-21b", vocab, "interlaced")["mfu"])
    print(f"  {int(vocab)//1000:4}k: {100*(v/i-1):+.1f}%")
print("V-Half, Vocab-1 over the baseline (paper: +7.2% to +143%), and the")
print("peak-memory spread over devices (GiB, max - min):")
for model in ["table2-7b", "table2-16b", "table2-30b"]:
    for vocab in ["32000", "64000", "128000", "256000"]:
        b, v = get(model, vocab, "baseline"), get(model, vocab, "vocab-1")
        gain = 100 * (float(v["mfu"]) / float(b["mfu"]) - 1)
        sb = float(b["peak_memory_max_gib"]) - float(b["peak_memory_min_gib"])
        sv = float(v["peak_memory_max_gib"]) - float(v["peak_memory_min_gib"])
        print(f"  {model:11} {int(vocab)//1000:4}k: {gain:+6.1f}%  spread baseline {sb:5.1f}, vocab-1 {sv:5.1f}")
PY
