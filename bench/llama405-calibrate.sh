#!/usr/bin/env bash
# Issue 52: the 405B prediction calibrated by a measurement instead of the
# h100 preset's 45%. Reads the log of one Llama-3.1-405B-sized layer on a
# GPU (tools/gpu/run.sh calibrate: sluice-bench-gpu-layer --hidden 16384
# --ffn 53248 --heads 128 --seq 8192), takes its F+B+W rate as a fraction
# of the preset's peak (989 TFLOP/s, H100 SXM dense BF16), and predicts
# Meta's two meshes with that efficiency (bench/llama405-mfu.sh's rows).
#
#   bash bench/llama405-calibrate.sh LAYER_LOG [build/bin/sluice-compile]
#
# What the calibration does not see (docs/search.md): the layer is a GPT
# layer of the 405B's sizes run whole on one GPU, where Meta's runs a
# tensor-parallel eighth of a Llama layer (GQA, SwiGLU) per GPU; the
# collectives and the bubble are the cost model's, as before.
set -euo pipefail
cd "$(dirname "$0")/.."
log=${1:?usage: llama405-calibrate.sh LAYER_LOG [sluice-compile]}
compile=${2:-build/bin/sluice-compile}
rate=$(sed -n 's/^F+B+W *[0-9.]* ms *\([0-9.]*\) TFLOP\/s.*/\1/p' "$log" | head -n 1)
if [ -z "$rate" ]; then
  echo "llama405-calibrate.sh: error: no 'F+B+W ... TFLOP/s' line in $log" >&2
  exit 1
fi
device=$(head -n 1 "$log" | cut -d, -f1)
efficiency=$(python3 -c "print(f'{$rate / 989:.3f}')")
echo "measured: $device, one 405B-sized layer's F+B+W at $rate TFLOP/s = efficiency $efficiency of 989 TFLOP/s"
printf '%-7s %-56s %9s %7s %6s %9s %9s %s\n' GPUs plan "step s" bubble MFU "TP s" "GiB" costs
report=$(mktemp)
trap 'rm -f "$report"' EXIT
for setting in "8192 64 32 43" "16384 128 16 41"; do
  read -r gpus dp m published <<<"$setting"
  "$compile" examples/llama-3.1-405b/config.json --seq-len 8192 --micro-batch 1 \
    --pp 16 --tp 8 --dp "$dp" --zero 1 --sequence-parallel --microbatches "$m" \
    --schedule interleaved-1f1b --virtual 8 --balance compute \
    --costs "h100:efficiency=$efficiency" --report "$report" >/dev/null
  python3 - "$report" "$gpus" "$published" "$efficiency" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
d = r["per_device"]
mfu = 100 * r["mfu"]
print("%-7s %-56s %9.2f %6.1f%% %5.1f%% %9.2f %9.1f h100:efficiency=%s  (published %s%%: %+.1f points)" % (
    sys.argv[2], "interleaved-1f1b --virtual 8 --balance compute",
    r["step_time"], 100 * r["bubble_ratio"], mfu,
    max(x["tensor_parallel_time"] for x in d),
    max(x["peak_memory_bytes"] for x in d) / 2**30, sys.argv[4], sys.argv[3],
    mfu - float(sys.argv[3])))
PY
done
