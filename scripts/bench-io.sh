#!/usr/bin/env bash
# The input-pipeline figures of docs/BENCHMARKS.md (about 5 minutes, 9 GB of
# disk in OUT_DIR):
#  - a 4.3 GB synthetic split (32768 samples of 128 KiB, 8 shards);
#  - `bench io --cold` on 1 and 2 ranks: the streaming loader against a raw
#    O_DIRECT read and a buffered read of the same files, and the ingest
#    experiment (a concurrent writer at 128 KiB, 1 MiB, 4 MiB blocks,
#    unlimited and limited);
#  - the reference CNN on 2 ranks, 400 steps, data in memory against streamed
#    (in the page cache): data_wait as a fraction of the step.
# OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are left as the machine sets them.
# Usage: scripts/bench-io.sh [OUT_DIR]   (default bench-out/)
source "$(dirname "$0")/bench-common.sh"
syn="$out/synthetic-128k/train"
[ -f "$syn/manifest.json" ] || $st prep synthetic --out "$syn" --samples 32768 --sample-bytes 128K --shards 8

for n in 1 2; do
  $run -n $n -- $st bench io --data "$syn" --cold --order shard --window 64 --transfer collective --json "$out/io-$n.json" | tee "$out/io-$n.txt"
done

for loader in memory stream; do
  $run -n 2 -- $st train examples/fmnist_cnn.toml --set data.loader=$loader --set train.max_steps=400 \
    --set target.value=0 --run-dir "$out/cnn2-$loader" --overwrite | grep -E '^\[summary\]' | tee "$out/cnn2-$loader.txt"
done
/usr/bin/python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
for loader in ("memory", "stream"):
    s = json.load(open(f"{out}/cnn2-{loader}/summary.json"))
    print(loader, "step ms", [round(r["step_time_median_s"] * 1e3, 1) for r in s["per_rank"]],
          "data_wait %", [round(100 * r["data_wait_frac"], 2) for r in s["per_rank"]])
PY
