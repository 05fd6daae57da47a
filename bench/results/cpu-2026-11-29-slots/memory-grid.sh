#!/bin/bash
# Usage: memory-grid.sh SLUICE_COMPILE  (run from the repository root)
# Prints, per model and flags, the largest device's buffer bytes (the sum
# of its plan's `buffers`) and the plan's JSON length. memory-grid.txt
# holds its output for bccd1e8 ("before"), for an experiment build that
# planned slots of a value's own size only ("own size"), and for the
# commit that added it ("after").
bin=${1:?usage: memory-grid.sh SLUICE_COMPILE}
plan=$(mktemp)
for model in test/Inputs/tiny-train.mlir test/Inputs/tiny-llama.mlir test/Inputs/tiny-gpt.mlir test/Inputs/tiny-train-vocab61.mlir bench/rank-gpt.mlir; do
  for cfg in "--pp 2 --schedule 1f1b --microbatches 8" "--pp 2 --schedule zb-h1 --microbatches 8" \
             "--pp 2 --schedule zb-h2 --microbatches 8" "--pp 2 --schedule v-half --microbatches 8" \
             "--pp 2 --schedule zb-v --microbatches 6" "--pp 4 --schedule 1f1b --microbatches 8" \
             "--pp 2 --schedule interleaved-1f1b --microbatches 4" "--pp 2 --schedule seq1f1b --microbatches 4 --slices 2" \
             "--pp 2 --schedule 1f1b --microbatches 4 --recompute full" \
             "--pp 2 --schedule 1f1b --microbatches 4 --tp 2 --sequence-parallel" \
             "--pp 2 --schedule 1f1b --microbatches 4 --vocab vocab-1" "--pp 2 --schedule gpipe --microbatches 4" \
             "--pp 2 --schedule terapipe --microbatches 2 --slices 2"; do
    # shellcheck disable=SC2086
    if "$bin" $model $cfg -o "$plan" >/dev/null 2>&1; then
      figures=$(python3 -c "import json,sys; pl=json.load(open(sys.argv[1])); print(max(sum(p['buffers']) for p in pl['programs']), len(json.dumps(pl)))" "$plan")
    else
      figures=ERR
    fi
    echo "$(basename $model) $cfg | $figures"
  done
done
rm -f "$plan"
