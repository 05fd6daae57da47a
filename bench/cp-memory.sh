#!/usr/bin/env bash
# Context parallelism on CPU ranks (issue 56): each rank's measured peak
# resident memory and step time at cp 1 and cp 2, against what the
# runtime's memory check predicts for its buffers (sluice-run --memory:
# the activations, key/value caches and workspace the plan's slots and
# the exchange area need; the same layout the compiler sizes).
#
#   bash bench/cp-memory.sh [OUTDIR] [RUNS]
#
# Model: a Llama-shaped model written here (4 layers, hidden 128, 4 heads
# with 2 key/value heads, SwiGLU 512, a 1024-token vocabulary, 2048
# tokens a sequence, fp32), pp 2, 1F1B, 4 microbatches, 2 steps a run:
# cp 1 on 2 ranks, cp 2 on 4 (oversubscribing this machine's 2 cores:
# the step times say what the exchanges cost here, not a speed-up). Each
# rank's peak RSS is GNU time's maximum resident set size; RUNS runs of
# each (default 3), alternating; per rank the median.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-$(mktemp -d)}
runs=${2:-3}
mkdir -p "$out"
bin=build/bin
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# One BLAS thread a rank: both meshes run the same kernels alike.
export OPENBLAS_NUM_THREADS=1

model=$out/model.mlir
layer='{heads = 4, kv_heads = 2, ffn = 512, norm = rmsnorm, mlp = swiglu, rope_theta = 10000.0} : tensor<1x2048x128xf32>'
{
  echo 'sluice.model @cp_memory {seq_len = 2048, micro_batch = 1, dtype = f32} {'
  echo '  %x0 = sluice.embedding {vocab = 1024} : tensor<1x2048x128xf32>'
  for i in $(seq 0 3); do
    echo "  %x$((i + 1)) = sluice.transformer_layer %x$i $layer"
  done
  echo '  %loss = sluice.output_layer %x4 {vocab = 1024, norm = rmsnorm} : tensor<1x2048x128xf32> -> tensor<f32>'
  echo '  sluice.return %loss : tensor<f32>'
  echo '}'
} >"$model"

sizes=(1 2)
for cp in "${sizes[@]}"; do
  "$bin/sluice-compile" "$model" --pp 2 --cp "$cp" --microbatches 4 \
    --schedule 1f1b -o "$out/cp$cp.json" >/dev/null
  "$bin/sluice-run" "$out/cp$cp.json" --memory >"$out/cp$cp.memory"
done

for run in $(seq 1 "$runs"); do
  for cp in "${sizes[@]}"; do
    mpirun --oversubscribe -np $((2 * cp)) sh -c \
      "/usr/bin/time -f \"rank \$OMPI_COMM_WORLD_RANK rss %M\" $bin/sluice-run $out/cp$cp.json --steps 2" \
      >"$out/cp$cp-run$run.log" 2>"$out/cp$cp-run$run.rss"
  done
done

python3 - "$out" "$runs" <<'PY'
import re, statistics, sys
out, runs = sys.argv[1], int(sys.argv[2])
buffers = {}
for cp in (1, 2):
    for line in open(f"{out}/cp{cp}.memory"):
        m = re.match(r"device (\d+): .* buffers and workspace (\d+)", line)
        if m:
            buffers[(cp, int(m.group(1)))] = int(m.group(2))
rss, steps = {}, {1: [], 2: []}
for cp in (1, 2):
    for run in range(1, runs + 1):
        for line in open(f"{out}/cp{cp}-run{run}.rss"):
            m = re.match(r"rank (\d+) rss (\d+)", line)
            if m:
                rss.setdefault((cp, int(m.group(1))), []).append(int(m.group(2)) * 1024)
        for line in open(f"{out}/cp{cp}-run{run}.log"):
            m = re.match(r"step 2: .*\| ([0-9.]+) ms/step", line)
            if m:
                steps[cp].append(float(m.group(1)) / 1000)
mb = lambda b: b / 2**20
print("rank  device  cp 1 RSS MB  cp 2 RSS MB  predicted saving MB  measured MB  share")
shares = []
for rank in range(4):
    device = rank // 2  # cp 2: rank d*cp + c
    one = statistics.median(rss[(1, device)])
    two = statistics.median(rss[(2, rank)])
    predicted = buffers[(1, device)] - buffers[(2, device)]
    measured = one - two
    shares.append(measured / predicted)
    print(f"{rank:4d}  {device:6d}  {mb(one):11.1f}  {mb(two):11.1f}  "
          f"{mb(predicted):19.1f}  {mb(measured):11.1f}  {measured / predicted:5.2f}")
print(f"shares of the predicted saving: median {statistics.median(shares):.2f}, "
      f"range {min(shares):.2f}-{max(shares):.2f}")
for cp in (1, 2):
    if steps[cp]:
        print(f"cp {cp}: step 2 of each run {steps[cp]} s (median "
              f"{statistics.median(steps[cp]):.3f})")
PY
