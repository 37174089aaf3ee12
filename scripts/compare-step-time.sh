#!/usr/bin/env bash
# Step time of two builds side by side, alternating in one run (the VMs are
# noisy: only ratios measured together compare): `shardtrain bench step` on
# the MLP (one process, the step alone) and a 2-rank DDP run of the MLP (150
# steps: the time in steps over the steps, from result.json), ROUNDS times
# each, A then B.
#   scripts/compare-step-time.sh BIN_A BIN_B [ROUNDS]   # each holds shardtrain and shardrun
# Prints one line per measurement and the medians with B/A.
set -euo pipefail
cd "$(dirname "$0")/.."
a=${1:?usage: compare-step-time.sh BIN_A BIN_B [ROUNDS]}
b=${2:?usage: compare-step-time.sh BIN_A BIN_B [ROUNDS]}
rounds=${3:-5}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
[ -f data/fashion-mnist/test/part-00000.h5 ] || "$a/shardtrain" prep fashion-mnist >/dev/null
bench() {  # bin -> ms per step
  "$1/shardtrain" bench step examples/fmnist_mlp.toml --steps 20 --rounds 3 |
    awk '/training step/ {print $3}'
}
ddp() {  # bin -> ms per step
  "$1/shardrun" -n 2 -- "$1/shardtrain" train examples/fmnist_mlp.toml --set train.max_steps=150 \
    --set target.value=0 --set train.progress_every_s=1000 --run-dir "$work/run" --overwrite >/dev/null 2>&1
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(f\"{r['step_time_s']/r['steps']*1e3:.3f}\")" \
    "$work/run/result.json"
}
declare -A t
for r in $(seq "$rounds"); do
  for which in a b; do
    bin=${!which}
    s=$(bench "$bin"); d=$(ddp "$bin")
    t[$which.bench]+="$s "; t[$which.ddp]+="$d "
    echo "round $r $which: bench step $s ms, ddp 2 ranks $d ms"
  done
done
median() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }
for m in bench ddp; do
  ma=$(echo "${t[a.$m]}" | median); mb=$(echo "${t[b.$m]}" | median)
  echo "median $m: A $ma ms, B $mb ms, B/A $(awk -v a="$ma" -v b="$mb" 'BEGIN {printf "%.3f", b/a}')"
done
