#!/usr/bin/env bash
# The read pool's figures (docs/BENCHMARKS.md, "Read pool"): `bench io` on a
# cold global shuffle of 64 KiB and 128 KiB samples, 1 and 2 ranks, with
# buffered and O_DIRECT readers (the HDF5 engine timed in the same run),
# then shard order. Each run alternates the random O_DIRECT reference and
# the loader 3 times and reports the median ratio. Makes its synthetic data
# sets (2.15 GB each) under DIR once. Leaves OPENBLAS_* as they are. About
# 8 minutes here.
#   scripts/bench-read-pool.sh [DIR]   (default: data/read-pool)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-data/read-pool}
st=build/bin/shardtrain
[ -x "$st" ] || { echo "bench-read-pool: build first (scripts/build.sh)" >&2; exit 2; }
[ -f "$dir/s64k/manifest.json" ] || "$st" prep synthetic --out "$dir/s64k" --samples 32768 --sample-bytes 64K --shards 8
[ -f "$dir/s128k/manifest.json" ] || "$st" prep synthetic --out "$dir/s128k" --samples 16384 --sample-bytes 128K --shards 8
run() { echo "=== shardrun $*"; launch/shardrun "$@" 2>&1 | grep -v "^shardrun"; }
bench=("$st" bench io --cold --no-ingest --batches 256 --global-batch 64 --rounds 3)
for d in s64k s128k; do
  for n in 1 2; do
    run -n "$n" -- "${bench[@]}" --data "$dir/$d" --order global --direct-io off --compare-hdf5
    run -n "$n" -- "${bench[@]}" --data "$dir/$d" --order global --direct-io on
  done
done
for n in 1 2; do
  run -n "$n" -- "${bench[@]}" --data "$dir/s64k" --order shard --window 64 --direct-io off --compare-hdf5
  run -n "$n" -- "${bench[@]}" --data "$dir/s64k" --order shard --window 64 --direct-io on
done
