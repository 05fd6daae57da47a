#!/usr/bin/env bash
# Where a step's time goes on each rank, for the demo model (byte-level GPT,
# 4 layers of hidden 64, sequence 64) on 4 CPU ranks with ZB-H1: compute,
# waiting for communication, fetching data, and the executor's own
# overhead (time outside passes, transfers and data). Target (issue 4): the
# overhead below 2% of the step. Prints the last of STEPS steps.
#
#   bash bench/executor-overhead.sh [STEPS]
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-20}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none OMPI_MCA_mpi_yield_when_idle=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
build/bin/sluice-tokenize examples/corpus/founding-documents.txt -o "$work/corpus.bin" >/dev/null
build/bin/sluice-compile examples/demo/byte-gpt.mlir --pp 4 --microbatches 8 \
  --schedule zb-h1 -o "$work/plan.json" >/dev/null
echo "executor overhead: demo model, 4 ranks, zb-h1, 8 microbatches, step $steps"
mpirun --oversubscribe --mca pml ob1 --mca btl self,vader -np 4 \
  build/bin/sluice-run "$work/plan.json" --data "$work/corpus.bin" \
  --steps "$steps" --timing | grep '^rank'
