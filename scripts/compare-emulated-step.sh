#!/usr/bin/env bash
# Step time of several shardtrain binaries on one emulated-cluster point,
# alternating run by run (only ratios measured together compare): NODES
# emulated nodes of 2 ranks, unshaped links, emulated compute from a study's
# profile, 10 steps. Prints rank 0's mean, median and worst step over steps
# 2-9 of each run. Needs root (launch/emunodes); python3 reads the telemetry.
#   scripts/compare-emulated-step.sh MODEL STRATEGY NODES ROUNDS PROFILE BIN...
#     MODEL cnn or gpt; STRATEGY ddp or an FSDP sharding (full, grad_op, hybrid);
#     PROFILE a study's calibration/profile-MODEL.json; BIN shardtrain binaries
set -euo pipefail
cd "$(dirname "$0")/.."
usage="usage: compare-emulated-step.sh MODEL STRATEGY NODES ROUNDS PROFILE BIN..."
model=${1:?$usage} strategy=${2:?$usage} nodes=${3:?$usage} rounds=${4:?$usage} profile=${5:?$usage}
shift 5
[ $# -gt 0 ] || { echo "$usage" >&2; exit 2; }
case $model in
  cnn) config=examples/fmnist_cnn.toml data=data/fashion-mnist ;;
  gpt) config=examples/gpt_kjv.toml data=data/kjv ;;
  *) echo "compare-emulated-step.sh: model cnn or gpt, not $model" >&2; exit 2 ;;
esac
case $strategy in
  ddp) sets=(--set parallel.strategy=ddp) ;;
  *) sets=(--set parallel.strategy=fsdp --set "parallel.fsdp.sharding=$strategy" --set '~parallel.ddp') ;;
esac
work=$(mktemp -d)
trap 'build/bin/emunodes down --prefix cmpstep >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
build/bin/emunodes up "$nodes" --prefix cmpstep --owner-pid $$ >/dev/null
for r in $(seq "$rounds"); do
  for bin in "$@"; do
    build/bin/emunodes run --prefix cmpstep -n $((nodes * 2)) --per-node 2 -- "$bin" train "$config" \
      --set "data.train=$data/train" --set "data.test=$data/test" --set data.test_limit=512 \
      --set target.value=0 --set train.max_steps=10 --set comm.timeout_s=300 "${sets[@]}" \
      --set runtime.emulate.compute=profile --set "runtime.emulate.profile=$profile" \
      --run-dir "$work/run" --overwrite >"$work/log" 2>&1 || { tail -5 "$work/log"; exit 1; }
    python3 - "$work/run/telemetry/rank-00000.jsonl" "$r" "$bin" <<'PY'
import json, statistics, sys
steps = [json.loads(line) for line in open(sys.argv[1])][2:]
ms = [s["step_s"] * 1e3 for s in steps]
print(f"round {sys.argv[2]} {sys.argv[3]}: mean {statistics.mean(ms):.1f} ms, "
      f"median {statistics.median(ms):.1f}, worst {max(ms):.1f}")
PY
  done
done
