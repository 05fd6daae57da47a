#!/usr/bin/env bash
# Compiles test/Inputs/tiny-train.mlir (or $MODEL) with one schedule for
# p in {2, 4}, m in {p, 2p} and the chunks and slices the schedule takes,
# runs three training steps with mpirun, and checks them against the
# single-process reference: every gradient within 1e-4 relative after the
# first step, the loss within 1e-5 relative at every step.
#
# $VOCAB picks how the vocabulary layers are placed (sluice-compile --vocab;
# default baseline); $SLICING how slices cut a sequence (--slicing; default
# uniform) and $SLICES the slice counts of token-sliced schedules (default
# "2 4"); $MICROBATCHES the microbatch counts (default p and 2p); $PIPELINES
# the pipeline device counts (default "2 4"); $DP the data-parallel
# replicas of each device (default 1: mpirun -np p * DP, and the reference
# runs every replica's microbatches); $TP the tensor-parallel shards of
# each device (default 1: mpirun -np p * TP * DP); $RECOMPUTE the
# activation recomputation of every stage (--recompute; default none);
# $ZERO the ZeRO stage (--zero; default 0) and $RESHARD ZeRO-3's
# re-shard choice (--reshard; default every-pass); $EP the expert-parallel
# members the experts split over (--ep, of the DP replicas; default 1);
# $CP the context-parallel ranks each replica's sequences split over
# (--cp; default 1: mpirun -np p * TP * DP * CP);
# $SP=1 adds sequence
# parallelism over the TP shards (--sequence-parallel); $TRANSPORTS the
# sluice-run transports each plan runs over (default "mpi nccl": plain MPI,
# and MPI held to NCCL's rules, docs/communication.md).
#
#   [MODEL=...] [VOCAB=...] [SLICING=...] [SLICES=...] [MICROBATCHES=...] \
#     [PIPELINES=...] [DP=...] [TP=...] [RECOMPUTE=...] [ZERO=...] \
#     [RESHARD=...] [EP=...] [CP=...] \
#     [SP=1] \
#     check-equivalence.sh SCHEDULE WORKDIR
set -euo pipefail
schedule=$1
work=$2
model=${MODEL:-$(dirname "$0")/../Inputs/tiny-train.mlir}
vocab=${VOCAB:-baseline}
dp=${DP:-1}
tp=${TP:-1}
ep=${EP:-1}
cp=${CP:-1}
slicing=${SLICING:-uniform}
mkdir -p "$work"
case $schedule in
  interleaved-1f1b | zb-v | v-half | v-min | dualpipev) virtuals="2" ;;
  seq1f1b-i) virtuals="2" ;;
  *) virtuals="1" ;;
esac
case $schedule in
  seq1f1b | seq1f1b-i | terapipe) slices_list=${SLICES:-"2 4"} ;;
  *) slices_list="1" ;;
esac
# A small eager limit makes every message a rendezvous: a send completes
# only once its receive is posted, so the slot-lifetime contract of
# docs/plan-format.md (sends copy nothing) is what keeps these runs right
# and deadlock-free.
mpirun_flags=(--oversubscribe --mca pml ob1 --mca btl self,vader
              --mca btl_vader_eager_limit 1024 --mca btl_vader_rndv_eager_limit 256)
status=0
for p in ${PIPELINES:-2 4}; do
  for m in ${MICROBATCHES:-$p $((2 * p))}; do
    for v in $virtuals; do
      for k in $slices_list; do
        name="$schedule p=$p m=$m v=$v k=$k vocab=$vocab slicing=$slicing"
        [ "${RECOMPUTE:-none}" = none ] || name="$name recompute=$RECOMPUTE"
        [ "$tp" = 1 ] || name="$name tp=$tp"
        [ "$dp" = 1 ] || name="$name dp=$dp"
        [ "${ZERO:-0}" = 0 ] || name="$name zero=$ZERO"
        reshard=()
        [ -z "${RESHARD:-}" ] || {
          reshard=(--reshard "$RESHARD")
          name="$name reshard=$RESHARD"
        }
        [ "$ep" = 1 ] || name="$name ep=$ep"
        [ "$cp" = 1 ] || name="$name cp=$cp"
        sp=()
        [ "${SP:-0}" = 0 ] || { sp=(--sequence-parallel); name="$name sp"; }
        plan="$work/plan-p$p-m$m-v$v-k$k.json"
        ref="$work/ref-m$m-dp$dp"
        sluice-compile "$model" --pp "$p" --microbatches "$m" \
          --schedule "$schedule" --virtual "$v" --slices "$k" \
          --vocab "$vocab" --slicing "$slicing" --costs "${COSTS:-unit}" \
          --dp "$dp" --cp "$cp" --tp "$tp" --zero "${ZERO:-0}" --ep "$ep" \
          --recompute "${RECOMPUTE:-none}" "${sp[@]}" "${reshard[@]}" \
          -o "$plan" >/dev/null
        # The reference depends on the model and the microbatches only
        # (every replica's).
        [ -f "$ref/losses.txt" ] ||
          sluice-run "$plan" --reference --steps 3 --dump-grads "$ref" >/dev/null
        # Over plain MPI, and over MPI held to NCCL's rules (an order NCCL
        # could not run ends the run with a report instead of passing).
        for transport in ${TRANSPORTS:-mpi nccl}; do
          if out=$(mpirun "${mpirun_flags[@]}" -np $((p * tp * dp * cp)) sluice-run "$plan" \
                     --steps 3 --check-against "$ref" --transport "$transport" \
                     --comm-timeout 60 2>&1); then
            echo "PASS $name transport=$transport: $(echo "$out" | grep '^check')"
          else
            echo "FAIL $name transport=$transport:"
            echo "$out"
            status=1
          fi
        done
      done
    done
  done
done
exit $status
