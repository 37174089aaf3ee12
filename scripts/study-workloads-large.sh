#!/usr/bin/env bash
# MLPerf Storage's resnet50 and cosmoflow workloads on data sets larger than
# the job's memory (docs/BENCHMARKS.md, "MLPerf Storage's workloads on data
# sets larger than the job's memory"): 6 GB of each workload's samples in
# its file layout, every job in a 4 GiB memory cgroup (launch/memlimit), and
# `study storage` searching the accelerators kept busy with O_DIRECT and
# with buffered reads. About 15 minutes and 12 GB of disk in OUT_DIR; needs
# root for the cgroup. Runs Debian's /usr/bin/python3 (`shardtrain study`).
# OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are left as the machine sets them.
# Usage: scripts/study-workloads-large.sh [OUT_DIR]   (default bench-out/)
source "$(dirname "$0")/bench-common.sh"
w="$out/workloads-large"
mkdir -p "$w"
[ -f "$w/r50/train/manifest.json" ] ||
  $st prep synthetic --out "$w/r50/train" --samples 52542 --sample-bytes 114660 --shards 42 | tail -1
[ -f "$w/r50/test/manifest.json" ] || $st prep synthetic --out "$w/r50/test" --samples 4 --sample-bytes 114660 --split test | tail -1
[ -f "$w/cosmo/train/manifest.json" ] ||
  $st prep synthetic --out "$w/cosmo/train" --samples 2120 --sample-bytes 2828486 --shards 2120 | tail -1
[ -f "$w/cosmo/test/manifest.json" ] || $st prep synthetic --out "$w/cosmo/test" --samples 1 --sample-bytes 2828486 --split test | tail -1
limits=(--modes memory-limit,memory-limit-buffered --memory-limit 4G --max-accelerators 8 --seconds 5)
$st study storage --out "$w/study-r50" --data "$w/r50/train" --test "$w/r50/test" --accelerator resnet50:a100 \
  --accelerator resnet50:h100 "${limits[@]}"
$st study storage --out "$w/study-cosmo" --data "$w/cosmo/train" --test "$w/cosmo/test" --accelerator cosmoflow:a100 \
  --accelerator cosmoflow:h100 "${limits[@]}"
