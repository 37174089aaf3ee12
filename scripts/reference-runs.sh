#!/usr/bin/env bash
# The reference runs a refactoring must not change: test loss and accuracy
# of fmnist_mlp, fmnist_cnn and gpt_kjv (200 steps each, no early stop) on
# 1 rank, DDP on 2 ranks and FSDP FULL_SHARD on 4 ranks, printed with every
# bit (%.17g) so that two builds compare exactly.
#   scripts/reference-runs.sh BIN_DIR OUT_DIR   # BIN_DIR holds shardtrain and shardrun
# Prints one Markdown row per run; the run directories stay under OUT_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/strategy-flags.sh
bin=${1:?usage: reference-runs.sh BIN_DIR OUT_DIR}
out=${2:?usage: reference-runs.sh BIN_DIR OUT_DIR}
mkdir -p "$out"
[ -f data/fashion-mnist/test/part-00000.h5 ] || "$bin/shardtrain" prep fashion-mnist >/dev/null
[ -f data/kjv/test/part-00000.h5 ] || "$bin/shardtrain" prep text --out data/kjv >/dev/null
echo "| config | ranks | strategy | test_loss | test_accuracy |"
echo "| --- | --- | --- | --- | --- |"
for cfg in fmnist_mlp fmnist_cnn gpt_kjv; do
  for case in "1 none" "2 ddp" "4 fsdp"; do
    set -- $case
    dir="$out/$cfg-$1-$2"
    rm -rf "$dir"
    "$bin/shardrun" -n "$1" -- "$bin/shardtrain" train "examples/$cfg.toml" --set train.max_steps=200 \
      --set target.value=0 $(strategy_flags "examples/$cfg.toml" "$2") --set train.progress_every_s=1000 --run-dir "$dir" >"$dir.log" 2>&1 ||
      { echo "reference-runs: $cfg on $1 rank(s) with $2 failed; see $dir.log" >&2; exit 1; }
    python3 - "$dir/result.json" "$cfg" "$1" "$2" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["final"]
print(f"| {sys.argv[2]} | {sys.argv[3]} | {sys.argv[4]} | {r['test_loss']:.17g} | {r['test_accuracy']:.17g} |")
PY
  done
done
