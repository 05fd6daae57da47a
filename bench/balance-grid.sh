#!/usr/bin/env bash
# What a user gets by default against uniform stages: for the V shapes and
# ZB-V -- where moving layers off the vocabulary head's stage changes the
# order most -- on the vocabulary-parallelism paper's 4B (32 layers) and
# 10B (48 layers) models, p in {4, 6, 8}, m in {p, 2p, 3p}, three cost
# profiles, the step sluice-compile predicts with its default flags
# (--balance auto, which simulates auto's cut against uniform stages where
# they differ and keeps the faster: chooseBalance) and with --balance
# uniform. The default must never be slower; the table says where it is
# faster and by how much.
#
#   bash bench/balance-grid.sh [TSV]     (TSV default: stdout only)
#
# Profiles: unit (F = B = W = 1, comm 0.1); "bw" (the issue's: F 1.0, B 1.5,
# W 0.7, comm 0.3, BW 2.2); h100 (the analytic model, seconds).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-/dev/null}
compile=build/bin/sluice-compile
[ -x "$compile" ] || { echo "balance-grid.sh: run 'bash setup.sh build' first" >&2; exit 1; }
step() { # step FLAGS...: the predicted step, or "-" where it does not compile
  "$compile" "$@" 2>/dev/null | sed -n 's/.*step time \([0-9.e+-]*\) .*/\1/p' |
    head -n 1 | grep . || echo -
}
printf 'model\tp\tm\tschedule\tcosts\tdefault\tuniform\tdefault/uniform\n' | tee "$out"
slower=0 faster=0 same=0 cases=0
for model in table1-4b table1-10b; do
  for p in 4 6 8; do
    for mult in 1 2 3; do
      m=$((mult * p))
      for schedule in v-half v-min zb-v; do
        for profile in unit bw h100; do
          case $profile in
            unit) costs=F=1,B=1,W=1,comm=0.1 ;;
            bw) costs=F=1.0,B=1.5,W=0.7,comm=0.3,BW=2.2 ;;
            h100) costs=h100 ;;
          esac
          flags=(examples/vocab-parallelism/$model.mlir --pp "$p"
                 --microbatches "$m" --schedule "$schedule" --costs "$costs")
          a=$(step "${flags[@]}")
          u=$(step "${flags[@]}" --balance uniform)
          [ "$a" = - ] || [ "$u" = - ] && continue
          cases=$((cases + 1))
          ratio=$(python3 -c "print('%.4f' % ($a / $u))")
          case $(python3 -c "a, u = $a, $u; print('slower' if a > u * (1 + 1e-9) else 'faster' if a < u * (1 - 1e-9) else 'same')") in
            slower) slower=$((slower + 1)) ;;
            faster) faster=$((faster + 1)) ;;
            same) same=$((same + 1)) ;;
          esac
          printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$model" "$p" "$m" \
            "$schedule" "$profile" "$a" "$u" "$ratio" | tee -a "$out"
        done
      done
    done
  done
done
echo "default against uniform stages over $cases cases: $faster faster, $same the same, $slower slower"
[ "$slower" = 0 ]
