#!/bin/bash
# Compares expanded plans (--expand-plan) of OLD and build/bin, and the sizes of the compact ones.
set -u
OLD=${1:?usage: expanded-grid.sh OLD_SLUICE_COMPILE (run from the repository root, after building build/bin)}
same=0; diff=0; bigger=0
run() {
  $OLD "$@" --expand-plan -o /tmp/ce-a.json >/dev/null 2>&1 || return
  build/bin/sluice-compile "$@" --expand-plan -o /tmp/ce-b.json >/dev/null 2>&1
  if cmp -s /tmp/ce-a.json /tmp/ce-b.json; then same=$((same+1)); else diff=$((diff+1)); echo "DIFF $*"; fi
  $OLD "$@" -o /tmp/ce-c.json >/dev/null 2>&1; build/bin/sluice-compile "$@" -o /tmp/ce-d.json >/dev/null 2>&1
  a=$(stat -c %s /tmp/ce-c.json); b=$(stat -c %s /tmp/ce-d.json)
  [ $b -gt $a ] && { bigger=$((bigger+1)); echo "BIGGER $a -> $b $*"; }
  echo "$a $b $*" >> ${SIZES:-/tmp/ce-sizes.txt}
}
rm -f ${SIZES:-/tmp/ce-sizes.txt}
for s in 1f1b zb-h1 zb-h2 zb-v v-half v-min interleaved-1f1b gpipe seq1f1b; do for p in 4 8 16 32; do for mm in 1 4 8; do
  extra=""; [ $s = seq1f1b ] && extra="--slices 2"
  run bench/deep128.mlir --pp $p --microbatches $((p*mm)) --schedule $s $extra
done; done; done
for model in test/Inputs/tiny-train.mlir test/Inputs/tiny-llama.mlir bench/rank-gpt.mlir; do
 for cfg in "--pp 2 --schedule 1f1b --microbatches 8" "--pp 2 --schedule zb-h2 --microbatches 8" "--pp 2 --schedule v-half --microbatches 8" "--pp 2 --schedule interleaved-1f1b --microbatches 8" "--pp 2 --schedule seq1f1b --microbatches 4 --slices 2" "--pp 2 --schedule 1f1b --microbatches 4 --tp 2 --sequence-parallel" "--pp 2 --schedule 1f1b --microbatches 8 --vocab vocab-1" "--pp 2 --schedule terapipe --microbatches 2 --slices 2" "--pp 2 --schedule 1f1b --microbatches 16 --dp 2" "--pp 4 --schedule zb-v --microbatches 16 --dp 2 --zero 1" "--pp 2 --schedule 1f1b --microbatches 16 --recompute full" "--pp 4 --schedule 1f1b --microbatches 32 --vocab vocab-2"; do
  run $model $cfg
 done
done
run bench/deep128.mlir --pp 64 --microbatches 512 --schedule v-half
run bench/deep128.mlir --pp 32 --microbatches 256 --schedule interleaved-1f1b
run bench/deep128.mlir --pp 64 --microbatches 512 --schedule zb-h1
echo "same=$same diff=$diff bigger=$bigger"
