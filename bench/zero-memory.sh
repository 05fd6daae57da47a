#!/usr/bin/env bash
# Issue 56's memory check on CPU ranks: the measured peak resident memory
# of each rank under ZeRO-1, ZeRO-2 and ZeRO-3 (re-sharding every pass,
# and per step: "3s"), against the saving the planner predicts (sluice-run
# --memory's training state, the same count as the compiler's;
# TrainingState.h).
#
#   bash bench/zero-memory.sh [OUTDIR] [RUNS]
#
# Model: a Llama-shaped model written here (8 layers, hidden 512, 8 heads
# with 4 key/value heads, SwiGLU 1376, an 8192-token vocabulary, 64
# tokens a sequence, fp32: about 25M parameters), pp 2 x dp 2 (4 ranks),
# zb-h1, 4 microbatches, 2 steps a run. Each rank's peak RSS is GNU
# time's maximum resident set size; RUNS runs of each stage (default 3),
# alternating; per rank the median. Prints, per rank and stage, the
# predicted and measured saving against ZeRO-1, and the measured share of
# the predicted one.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-$(mktemp -d)}
runs=${2:-3}
mkdir -p "$out"
bin=build/bin
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

model=$out/model.mlir
layer='{heads = 8, kv_heads = 4, ffn = 1376, norm = rmsnorm, mlp = swiglu, rope_theta = 10000.0} : tensor<1x64x512xf32>'
{
  echo 'sluice.model @zero_memory {seq_len = 64, micro_batch = 1, dtype = f32} {'
  echo '  %x0 = sluice.embedding {vocab = 8192} : tensor<1x64x512xf32>'
  for i in $(seq 0 7); do
    echo "  %x$((i + 1)) = sluice.transformer_layer %x$i $layer"
  done
  echo '  %loss = sluice.output_layer %x8 {vocab = 8192, norm = rmsnorm} : tensor<1x64x512xf32> -> tensor<f32>'
  echo '  sluice.return %loss : tensor<f32>'
  echo '}'
} >"$model"

stages=(1 2 3 3s)
for z in "${stages[@]}"; do
  flags=(--zero "${z%s}")
  [ "$z" = 3s ] && flags+=(--reshard step)
  "$bin/sluice-compile" "$model" --pp 2 --dp 2 "${flags[@]}" --microbatches 4 \
    --schedule zb-h1 -o "$out/zero$z.json" >/dev/null
  "$bin/sluice-run" "$out/zero$z.json" --memory >"$out/zero$z.memory"
done

for run in $(seq 1 "$runs"); do
  for z in "${stages[@]}"; do
    mpirun --oversubscribe -np 4 sh -c \
      "/usr/bin/time -f \"rank \$OMPI_COMM_WORLD_RANK rss %M\" $bin/sluice-run $out/zero$z.json --steps 2 >/dev/null" \
      2>"$out/zero$z-run$run.rss"
  done
done

python3 - "$out" "$runs" "${stages[@]}" <<'PY'
import re, statistics, sys
out, runs, stages = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
state = {}
for z in stages:
    for line in open(f"{out}/zero{z}.memory"):
        m = re.match(r"device (\d+): .* training state (\d+) bytes", line)
        if m:
            state[(z, int(m.group(1)))] = int(m.group(2))
rss = {}
for z in stages:
    for run in range(1, runs + 1):
        for line in open(f"{out}/zero{z}-run{run}.rss"):
            m = re.match(r"rank (\d+) rss (\d+)", line)
            if m:
                rss.setdefault((z, int(m.group(1))), []).append(int(m.group(2)) * 1024)
shares = {}
print("stage  rank  device  ZeRO-1 RSS MB  its RSS MB  predicted saving MB  "
      "measured MB  share")
for z in stages[1:]:
    for rank in range(4):
        device = rank // 2  # rank d*dp + r (tp 1)
        one = statistics.median(rss[("1", rank)])
        two = statistics.median(rss[(z, rank)])
        predicted = state[("1", device)] - state[(z, device)]
        measured = one - two
        shares.setdefault(z, []).append(measured / predicted)
        print(f"{z:>5}  {rank:4d}  {device:6d}  {one / 1e6:13.1f}  "
              f"{two / 1e6:10.1f}  {predicted / 1e6:19.1f}  "
              f"{measured / 1e6:11.1f}  {measured / predicted:5.2f}")
        spread = [f"{v / 1e6:.1f}" for v in rss[("1", rank)]] + ["|"] + \
                 [f"{v / 1e6:.1f}" for v in rss[(z, rank)]]
        print("             runs (MB): " + " ".join(spread))
for z in stages[1:]:
    print(f"ZeRO-{z}: median share of the predicted saving against ZeRO-1: "
          f"{statistics.median(shares[z]):.2f}")
PY
