#!/usr/bin/env bash
# The telemetry figures of docs/BENCHMARKS.md, one after the other on a quiet
# machine (about 8 minutes):
#  - what telemetry costs a step: `shardtrain bench telemetry`, on and off
#    alternating in one run, for the reference MLP and CNN on 1 rank and with
#    DDP on 2 ranks;
#  - the diagnosis: the reference CNN on 4 ranks with rank 2 slowed down by
#    [debug] in its compute (trained to its target), its data and its
#    communication (300 steps each), and without injection; the summary of each,
#    and the HTML report of the first rendered to docs/report-cnn4-straggler.png
#    when Chromium is installed.
# OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are left as the machine sets them.
# Usage: scripts/bench-telemetry.sh [OUT_DIR]   (default bench-out/)
source "$(dirname "$0")/bench-common.sh"

for model in mlp cnn; do
  steps=64
  [ $model = cnn ] && steps=24  # 24 x 86 ms: rounds of about 2 s, like the MLP's
  $st bench telemetry "examples/fmnist_$model.toml" --steps $steps \
    --json "$out/telemetry-$model-1.json" | tee "$out/telemetry-$model-1.txt"
  $run -n 2 -- $st bench telemetry "examples/fmnist_$model.toml" --steps $steps \
    --json "$out/telemetry-$model-2.json" | tee "$out/telemetry-$model-2.txt"
done

cnn4() {  # cnn4 NAME [--set ...]
  local name=$1
  shift
  $run -n 4 -- $st train examples/fmnist_cnn.toml "$@" --run-dir "$out/$name" --overwrite >"$out/$name.txt" 2>&1 \
    || { cat "$out/$name.txt"; exit 1; }
  echo "== $name: $*"
  grep -E '^\[summary\]|^\[done\]' "$out/$name.txt"
}
cnn4 cnn4-straggler --set debug.slow_rank=2 --set debug.slow_compute_ms=20
cnn4 cnn4-slow-data --set train.max_steps=300 --set debug.slow_rank=2 --set debug.slow_data_ms=20
cnn4 cnn4-slow-comm --set train.max_steps=300 --set debug.slow_rank=2 --set debug.slow_comm_ms=20
cnn4 cnn4-none --set train.max_steps=300

$st report "$out/cnn4-straggler"
if command -v chromium >/dev/null; then
  scripts/render-report-png.sh "$out/cnn4-straggler" docs/report-cnn4-straggler.png
else
  echo "(chromium not installed: docs/report-cnn4-straggler.png not rendered)"
fi
