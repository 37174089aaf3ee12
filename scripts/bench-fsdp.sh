#!/usr/bin/env bash
# FSDP against DDP on the reference CNN and the small GPT (docs/BENCHMARKS.md,
# "FSDP"): 2 and 4 ranks, 300 (CNN) and 100 (GPT) steps each, DDP,
# FULL_SHARD and SHARD_GRAD_OP, and at 4 ranks HYBRID (2 emulated nodes of 2
# ranks: comm.ranks_per_node = 2) and FULL_SHARD in bf16 mixed precision:
# step time, samples/s, bytes communicated per step per rank (the
# communicator's payload, and what a ring sends against the strategy's
# theory), the per-rank parameter + gradient + optimizer bytes, and the
# measured peak tensor bytes per rank against `shardtrain plan`'s
# prediction. About 5 minutes.
# OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are left as the machine sets them.
# Usage: scripts/bench-fsdp.sh [OUT_DIR]   (default bench-out/)
source "$(dirname "$0")/bench-common.sh"
[ -f data/kjv/test/manifest.json ] || $st prep text --out data/kjv --block-size 64
runs=()
for model in cnn gpt; do
  cfg=examples/fmnist_cnn.toml
  steps=300
  [ $model = gpt ] && cfg=examples/gpt_kjv.toml && steps=100
  for n in 2 4; do
    variants=(ddp full grad_op)
    [ $n = 4 ] && variants+=(hybrid full-bf16)
    for s in "${variants[@]}"; do
      fsdp=($(strategy_flags $cfg fsdp))
      case $s in
        ddp) strategy=($(strategy_flags $cfg ddp)) ;;
        hybrid) strategy=("${fsdp[@]}" --set parallel.fsdp.sharding=hybrid --set comm.ranks_per_node=2) ;;
        full-bf16) strategy=("${fsdp[@]}" --set parallel.fsdp.param_dtype=bf16 --set parallel.fsdp.reduce_dtype=bf16) ;;
        *) strategy=("${fsdp[@]}" --set parallel.fsdp.sharding=$s) ;;
      esac
      $run -n $n -- $st train $cfg "${strategy[@]}" --set train.max_steps=$steps \
        --set target.value=0 --run-dir "$out/fsdp-$model-$n-$s" --overwrite >"$out/fsdp-$model-$n-$s.txt" 2>&1
      runs+=("$model $n $s")
    done
  done
done
/usr/bin/python3 - "$out" "${runs[@]}" <<'PY'
import json, re, sys
out = sys.argv[1]
names = {"ddp": "DDP", "full": "FULL_SHARD", "grad_op": "SHARD_GRAD_OP", "hybrid": "HYBRID 2x2",
         "full-bf16": "FULL_SHARD bf16"}
print("| model | ranks | strategy | step ms (median) | samples/s | payload MB/step/rank | wire MB/step/rank: measured / theory (ratio) | param + grad + optimizer MiB/rank | peak MiB/rank: measured / planned | test loss |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for spec in sys.argv[2:]:
    model, n, st = spec.split()
    d = f"{out}/fsdp-{model}-{n}-{st}"
    r = json.load(open(f"{d}/result.json"))
    s = json.load(open(f"{d}/summary.json"))
    log = open(f"{d}.txt").read()
    m = re.search(r"optimizer shards ([0-9.]+) MiB \(DDP: ([0-9.]+) MiB\)", log)
    mem = m.group(1) if m else f"{r['memory']['plan']['persistent_bytes'] / 2**20:.2f}"
    v = re.search(r"volume per step and rank: ([0-9.]+) MB .* = ([0-9.]+) MB \(measured/theory ([0-9.]+)\)", log)
    wire = f"{v.group(1)} / {v.group(2)} ({v.group(3)})" if v else "?"
    step = sorted(p["step_time_median_s"] for p in s["per_rank"])[len(s["per_rank"]) // 2] * 1e3
    peak = r["memory"]["peak_bytes"] / 2**20
    planned = r["memory"]["plan"]["peak_bytes"] / 2**20
    print(f"| {model.upper()} | {n} | {names[st]} | {step:.1f} | {r['samples_per_s']:.0f} | "
          f"{r['timing']['comm_bytes'] / 1e6:.3f} | {wire} | {mem} | {peak:.1f} / {planned:.1f} | "
          f"{r['final']['test_loss']:.4f} |")
PY
