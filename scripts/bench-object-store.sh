#!/usr/bin/env bash
# The object-store tier (docs/BENCHMARKS.md, "A split in an object store"):
# a split of 1 GB in a real S3 server on this machine (launch/s3store:
# radosgw on a one-node Ceph that keeps its objects in memory), read by
# `shardtrain bench io --data s3://...`: the store's rate at 1, 2, 4 and 8
# connections (parallel ranged GETs of 8 MiB), beside a copy of the same
# files from the local disk; the cache's hit rate on a second fetch; the
# time to the first batch, cold and warm; then the loader on the copies.
# Then a 2-rank DDP job of the reference CNN from s3:// to its target, and
# `study storage` with accelerators at the H200 speed of the reference CNN
# (0.084 ms per sample) reading the split from the page cache and from the
# store.
# The server shares the machine's cores with the client: its rate is a
# floor of what a store on its own machines gives, not a ceiling.
#
# About 12 minutes, 2 GB of disk in OUT_DIR and 3 GB of memory for the store.
# OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are left as the machine sets them.
# Usage: scripts/bench-object-store.sh [OUT_DIR]   (default bench-out/)
# Runs Debian's /usr/bin/python3 for `study storage` (matplotlib).
source "$(dirname "$0")/bench-common.sh"
out=$(cd "$out" && pwd)
store="$out/s3store"
launch/s3store down "$store" >/dev/null 2>&1 || true
trap 'launch/s3store down "$store" >/dev/null 2>&1' EXIT
launch/s3store up "$store" --memory-gb 3 2>/dev/null
# shellcheck disable=SC1091
source "$store/env"

d="$out/object-store"
[ -f "$d/train/manifest.json" ] || $st prep synthetic --out "$d/train" --samples 16384 --sample-bytes 64K --shards 8
$st upload --from "$d/train" --to s3://bench/synth/train --create-bucket | tail -1
$st upload --from data/fashion-mnist/train --to s3://bench/fashion/train | tail -1
$st upload --from data/fashion-mnist/test --to s3://bench/fashion/test | tail -1

echo "== bench io on the s3:// split (1 rank)"
mpirun=(mpirun --oversubscribe --bind-to none)
[ "$(id -u)" -eq 0 ] && mpirun+=(--allow-run-as-root)
"${mpirun[@]}" -np 1 "$st" bench io --data s3://bench/synth/train --cache-dir "$out/s3cache" --no-ingest \
  --global-batch 64 --json "$out/object-store.json"

echo "== the reference CNN, 2-rank DDP, from s3:// (cold cache, then warm)"
rm -rf "$out/s3jobcache"
for pass in cold warm; do
  $run -n 2 -- "$st" train examples/fmnist_cnn.toml --set data.train=s3://bench/fashion/train \
    --set data.test=s3://bench/fashion/test --set io.stage.cache_dir="$out/s3jobcache" \
    --run-dir "$out/cnn-s3-$pass" --overwrite > "$out/cnn-s3-$pass.txt" 2>&1
  grep -E 'data: s3://.* fetched|ready in|target .* reached at|\[done\]' "$out/cnn-s3-$pass.txt"
done

echo "== study storage: H200-speed CNN accelerators from the page cache and from the store"
[ -f "$d/test/manifest.json" ] || $st prep synthetic --out "$d/test" --samples 4 --sample-bytes 64K --split test
rm -rf "$out/object-store-study"
"$st" study storage --out "$out/object-store-study" --data "$d/train" --test "$d/test" \
  --store s3://bench/synth/train --accelerator cnn-h200=0.084ms --modes page-cache,object-store --max-accelerators 8 |
  tail -n 20
