#!/usr/bin/env bash
# FSDP against DDP on the reference CNN and the small GPT (docs/BENCHMARKS.md,
# "FSDP (issue 6, in progress)"): 2 and 4 ranks, 300 (CNN) and 100 (GPT)
# steps each, DDP, FULL_SHARD and
# SHARD_GRAD_OP: step time, samples/s, bytes communicated per step per rank
# (the communicator's payload, and what a ring sends against the strategy's
# theory) and the per-rank parameter + gradient + optimizer bytes
# (fsdp_memory, printed at [init]). About 5 minutes.
# OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are left as the machine sets them.
# Usage: scripts/bench-fsdp.sh [OUT_DIR]   (default bench-out/)
source "$(dirname "$0")/bench-common.sh"
[ -f data/kjv/test/manifest.json ] || $st prep text --out data/kjv --block-size 64
for model in cnn gpt; do
  cfg=examples/fmnist_cnn.toml
  steps=300
  [ $model = gpt ] && cfg=examples/gpt_kjv.toml && steps=100
  for n in 2 4; do
    for s in ddp full grad_op; do
      strategy=(--set parallel.strategy=ddp)
      [ $s = ddp ] || strategy=(--set parallel.strategy=fsdp --set parallel.fsdp.sharding=$s)
      $run -n $n -- $st train $cfg "${strategy[@]}" --set train.max_steps=$steps \
        --set target.value=0 --run-dir "$out/fsdp-$model-$n-$s" --overwrite >"$out/fsdp-$model-$n-$s.txt" 2>&1
    done
  done
done
/usr/bin/python3 - "$out" <<'PY'
import json, re, sys
out = sys.argv[1]
print("| model | ranks | strategy | step ms (median) | samples/s | payload MB/step/rank | wire MB/step/rank: measured / theory | per-rank param+grad+opt MiB |")
print("| --- | --- | --- | --- | --- | --- | --- | --- |")
for model in ("cnn", "gpt"):
  for n in (2, 4):
    for st in ("ddp", "full", "grad_op"):
        r = json.load(open(f"{out}/fsdp-{model}-{n}-{st}/result.json"))
        s = json.load(open(f"{out}/fsdp-{model}-{n}-{st}/summary.json"))
        log = open(f"{out}/fsdp-{model}-{n}-{st}.txt").read()
        m = re.search(r"optimizer shards ([0-9.]+) MiB \(DDP: ([0-9.]+) MiB\)", log)
        mem = f"{m.group(1)} (DDP {m.group(2)})" if m else "(full copy)"
        v = re.search(r"volume per step and rank: ([0-9.]+) MB .* = ([0-9.]+) MB \(measured/theory ([0-9.]+)\)", log)
        wire = f"{v.group(1)} / {v.group(2)} ({v.group(3)})" if v else "?"
        step = sorted(p["step_time_median_s"] for p in s["per_rank"])[len(s["per_rank"]) // 2] * 1e3
        print(f"| {model} | {n} | {st} | {step:.1f} | {r['samples_per_s']:.0f} | {r['timing']['comm_bytes'] / 1e6:.3f} | {wire} | {mem} |")
PY
