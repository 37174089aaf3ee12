#!/usr/bin/env bash
# What activation checkpointing costs and saves: the small Llama of
# examples/llama_kjv.toml made 4 Blocks of width 256 with a 256-byte context
# (so that activations dominate), 1 rank, strategy none, global batch 16;
# each mode (none, selective, full) 40 steps, in 3 interleaved rounds. Prints
# per mode the median step time (telemetry step_s, steps 6-40, median over
# the rounds' medians), its ratio to none, and the measured and planned peak
# tensor bytes. BIN_DIR (default build/bin) selects the build.
# OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are left as the machine sets them.
# Usage: scripts/bench-llama-checkpointing.sh [OUT_DIR]   (default bench-out/)
source "$(dirname "$0")/bench-common.sh"
[ -f data/kjv256/test/manifest.json ] || $st prep text --out data/kjv256 --block-size 256
cfg=examples/llama_kjv.toml
flags=(--set parallel.strategy=none --set model.n_layer=4 --set model.n_embd=256
       --set model.ffn_hidden=704 --set model.block_size=256 --set data.train=data/kjv256/train --set data.test=data/kjv256/test
       --set data.test_limit=16 --set train.eval_batch_size=16 --set train.global_batch_size=16
       --set train.max_steps=40 --set target.value=0)
for round in 1 2 3; do
  for mode in none selective full; do
    echo "round $round: $mode" >&2
    $st train $cfg "${flags[@]}" --set parallel.activation_checkpointing=$mode \
      --run-dir "$out/llama-ckpt-$mode-$round" --overwrite >"$out/llama-ckpt-$mode-$round.txt" 2>&1
  done
done
/usr/bin/python3 - "$out" <<'PY'
import json, statistics, sys
out = sys.argv[1]
rows = {}
for mode in ("none", "selective", "full"):
    medians, peaks = [], []
    for r in (1, 2, 3):
        d = f"{out}/llama-ckpt-{mode}-{r}"
        steps = [json.loads(l) for l in open(f"{d}/telemetry/rank-00000.jsonl")]
        medians.append(statistics.median(s["step_s"] for s in steps if s["step"] > 5))
        m = json.load(open(f"{d}/result.json"))["memory"]
        peaks.append((m["peak_bytes"], m["plan"]["peak_bytes"]))
    rows[mode] = (statistics.median(medians), peaks[0])
base = rows["none"][0]
print("Llama 4 x 256 channels, T = 256, 16 sequences per step, 1 rank (median of 3 rounds)")
print(f"{'mode':<10} {'step ms':>8} {'vs none':>8} {'peak MiB':>9} {'planned MiB':>12} {'measured/planned':>17}")
for mode, (t, (peak, plan)) in rows.items():
    print(f"{mode:<10} {t * 1e3:8.1f} {t / base:7.3f}x {peak / 2**20:9.1f} {plan / 2**20:12.1f} {peak / plan:17.4f}")
PY
