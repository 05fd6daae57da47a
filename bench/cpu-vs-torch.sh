#!/usr/bin/env bash
# Sluice's CPU backend against PyTorch eager on the same model, weights,
# tokens and threads (issue 38). Three cells -- GPT-2-shaped (hidden 768, 6
# layers, vocabulary 50257), Llama-shaped (hidden 512, 8 layers, GQA
# 8/2, vocabulary 32000) and Mixtral-shaped (the Llama cell with each
# feed-forward block 8 experts of half its width, 2 per token; issue 53)
# -- fp32, AdamW, 2 sequences of 512 tokens a step.
# transformers makes each model once (random weights, saved as safetensors)
# and one step's tokens; sluice-run loads that directory (--load-hf) and
# trains on those tokens with the plan sluice-compile makes from its
# config.json; bench/torch_cpu_step.py trains the same directory in
# PyTorch (transformers' model, SDPA attention, fused AdamW, the same
# hyperparameters). Both print each step's wall milliseconds.
#
# RUNS rounds; in each, every cell at every thread count runs Sluice, then
# PyTorch (interleaved, so a drift of the machine's speed hits both), STEPS
# steps each. A side's figure is the median over all rounds of its steps
# after the first WARMUP (PyTorch's allocator takes two or three steps to
# settle), with the minimum and maximum; the table's ratio is Sluice's
# median over PyTorch's. With more than one thread PyTorch runs under each
# OpenMP wait policy of TORCH_WAIT (PASSIVE sleeps between parallel
# regions, ACTIVE spins) and the faster median is its figure; a mixture of
# experts runs under each of transformers' expert implementations in
# TORCH_EXPERTS as well (grouped_mm: torch's grouped matmul; eager: a loop
# over the experts hit; batched_mm gathers every copy's expert matrices,
# 2048 x 704 x 512 floats a map here, and is left out). The first step's losses must
# agree (relative 1e-4: the same model on the same weights) and are
# printed with the second's (after one AdamW update).
#
#   bash bench/cpu-vs-torch.sh
#   RUNS=3 STEPS=7 WARMUP=2 CELLS="gpt2 llama" THREADS="1 2" \
#     TORCH_WAIT="PASSIVE ACTIVE" OUT=dir bash bench/cpu-vs-torch.sh
#
# PyTorch comes from PyPI (pinned below) into build/torch-cpu-venv, made
# on first use (about 5 GB: PyPI's wheel carries CUDA's libraries, which it
# loads even on a CPU); where it cannot be installed the benchmark prints
# why and exits 0. Nothing else may run on the machine meanwhile.
set -euo pipefail
cd "$(dirname "$0")/.."
B=build/bin
RUNS=${RUNS:-3}
STEPS=${STEPS:-7}
WARMUP=${WARMUP:-2}
TORCH_WAIT=${TORCH_WAIT:-PASSIVE ACTIVE}
TORCH_EXPERTS=${TORCH_EXPERTS:-grouped_mm eager}
CELLS=${CELLS:-gpt2 llama mixtral}
THREADS=${THREADS:-1 2}
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
venv=build/torch-cpu-venv
pins=(torch==2.15.0 transformers==5.24.0 safetensors==0.8.0 numpy==2.4.6)

if ! "$venv/bin/python" -c "import torch, transformers" 2>/dev/null; then
  echo "cpu-vs-torch: installing ${pins[*]} into $venv (first use)"
  if ! { python3 -m venv "$venv" && "$venv/bin/pip" install -q "${pins[@]}"; } \
      > "$OUT/install.log" 2>&1; then
    echo "cpu-vs-torch: skipped: PyTorch could not be installed from PyPI" \
         "(see $OUT/install.log; python3-venv and network access are needed)"
    exit 0
  fi
fi
py="$venv/bin/python"

echo "host: $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p'); $(date -u +%Y-%m-%dT%H:%MZ); commit $(git rev-parse --short HEAD)"
echo "rounds $RUNS, steps $STEPS a run (the first $WARMUP not counted); cells: $CELLS; threads: $THREADS; PyTorch's wait policies: $TORCH_WAIT"
for cell in $CELLS; do
  mkdir -p "$OUT/$cell"
  [ -f "$OUT/$cell/tokens.bin" ] || "$py" bench/torch_cpu_step.py make "$cell" "$OUT/$cell" 2>/dev/null
  $B/sluice-compile "$OUT/$cell/hf/config.json" --seq-len 512 --micro-batch 2 \
    --pp 1 --microbatches 1 -o "$OUT/$cell/plan.json" > /dev/null 2>&1
done

# Steps after the warm-up of one run's printout: "step I: loss L | ... | MS ms/step".
step_ms() { sed -n 's/^step \([0-9]*\): .* \([0-9.]*\) ms\/step.*/\1 \2/p' "$1" | awk -v w="$WARMUP" '$1 > w { print $2 }'; }
step_loss() { sed -n "s/^step $2: loss \([0-9.]*\).*/\1/p" "$1"; }

# PyTorch's configurations for cell $1 at $2 threads: POLICY or
# POLICY/EXPERTS. One thread: the wait policy does not matter.
policies() {
  local waits=$TORCH_WAIT p e
  [ "$2" = 1 ] && waits=${TORCH_WAIT%% *}
  for p in $waits; do
    if [ "$1" = mixtral ]; then
      for e in $TORCH_EXPERTS; do echo "$p/$e"; done
    else
      echo "$p"
    fi
  done
}

for ((r = 1; r <= RUNS; ++r)); do
  for cell in $CELLS; do
    for t in $THREADS; do
      log="$OUT/$cell/sluice-t$t-r$r.txt"
      $B/sluice-run "$OUT/$cell/plan.json" --load-hf "$OUT/$cell/hf" \
        --data "$OUT/$cell/tokens.bin" --data-dtype uint32 --steps "$STEPS" \
        --threads "$t" --lr 1e-4 --weight-decay 0.1 > "$log" 2>&1
      line="round $r $cell $t threads: sluice $(step_ms "$log" | tr '\n' ' ')"
      for policy in $(policies "$cell" "$t"); do
        log="$OUT/$cell/torch-${policy//\//-}-t$t-r$r.txt"
        experts=
        [[ $policy == */* ]] && experts="--experts ${policy#*/}"
        # shellcheck disable=SC2086
        OMP_NUM_THREADS=$t MKL_NUM_THREADS=$t OMP_WAIT_POLICY=${policy%%/*} \
          "$py" bench/torch_cpu_step.py run "$OUT/$cell" --steps "$STEPS" \
          --threads "$t" $experts > "$log" 2>&1
        line+="| torch $policy $(step_ms "$log" | tr '\n' ' ')"
      done
      echo "$line"
    done
  done
done

# median min max of the numbers on stdin
stats() { sort -g | awk '{ a[NR] = $1 } END { m = (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2; printf "%.0f %.0f %.0f\n", m, a[1], a[NR] }'; }

echo
echo "| cell | threads | Sluice ms/step (median; min-max) | PyTorch ms/step (its faster wait policy) | Sluice / PyTorch | losses step 1 (Sluice, PyTorch) | step 2 |"
echo "|---|---|---|---|---|---|---|"
status=0
for cell in $CELLS; do
  for t in $THREADS; do
    read -r sm smin smax < <(cat "$OUT/$cell"/sluice-t$t-r*.txt | step_ms /dev/stdin | stats)
    tm=; best=
    for policy in $(policies "$cell" "$t"); do
      read -r m lo hi < <(cat "$OUT/$cell"/torch-${policy//\//-}-t$t-r*.txt | step_ms /dev/stdin | stats)
      if [ -z "$tm" ] || awk -v a="$m" -v b="$tm" 'BEGIN { exit !(a < b) }'; then
        tm=$m tmin=$lo tmax=$hi best=$policy
      fi
    done
    s1=$(step_loss "$OUT/$cell/sluice-t$t-r1.txt" 1)
    t1=$(step_loss "$OUT/$cell/torch-${best//\//-}-t$t-r1.txt" 1)
    s2=$(step_loss "$OUT/$cell/sluice-t$t-r1.txt" 2)
    t2=$(step_loss "$OUT/$cell/torch-${best//\//-}-t$t-r1.txt" 2)
    ratio=$(awk -v a="$sm" -v b="$tm" 'BEGIN { printf "%.2f", a / b }')
    echo "| $cell | $t | $sm ($smin-$smax) | $tm ($tmin-$tmax, $best) | $ratio | $s1, $t1 | $s2, $t2 |"
    if ! awk -v a="$s1" -v b="$t1" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1e-4 * b) }'; then
      echo "error: $cell: the first step's losses differ ($s1, $t1): not the same model" >&2
      status=1
    fi
  done
done
echo "logs: $OUT"
exit $status
