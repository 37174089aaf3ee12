#!/usr/bin/env bash
# The storage study of docs/io.md ("Storage study"): how many emulated
# accelerators this machine's storage keeps at AU >= 90%, for two
# accelerators (the reference CNN as measured here, and the CNN on the H200
# at the landed run's 10.8 ms per 128-sample step: 0.084 ms per sample),
# from the page cache, under a 4 GiB memory limit (O_DIRECT reads, as
# data.direct_io = "auto" chooses there, and buffered) and in cold-cache mode.
# Makes under DIR once: a 16 GiB synthetic data set of 64 KiB samples (4x
# the limit) and the CNN's profile run. Leaves OPENBLAS_* as they are.
# About 20 minutes here; rerun to resume.
#   scripts/study-storage.sh [DIR [study storage options]]   (default: data/storage-study)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-data/storage-study}
[ $# -eq 0 ] || shift  # the rest goes to `study storage`
st=build/bin/shardtrain
[ -x "$st" ] || { echo "study-storage: build first (scripts/build.sh)" >&2; exit 2; }
[ -f "$dir/train/manifest.json" ] ||
  "$st" prep synthetic --out "$dir/train" --samples 262144 --sample-bytes 64K --shards 16
[ -f "$dir/test/manifest.json" ] ||
  "$st" prep synthetic --out "$dir/test" --samples 16 --sample-bytes 64K --split test
[ -f data/fashion-mnist/train/manifest.json ] || "$st" prep fashion-mnist
# The CNN's compute per sample on this machine: 40 steps of the reference
# config on one rank (the profile the emulated accelerator takes over).
[ -f "$dir/profile-cnn/result.json" ] ||
  "$st" train examples/fmnist_cnn.toml --set run.dir="$dir/profile-cnn" --set train.max_steps=40 \
    --set target.value=0 --overwrite | grep -E "^\[(summary\] telemetry|done)"
exec "$st" study storage --out "$dir/study" --data "$dir/train" --test "$dir/test" \
  --accelerator cnn-cpu="$dir/profile-cnn" --accelerator cnn-h200=0.084ms \
  --modes page-cache,memory-limit,memory-limit-buffered,cold --memory-limit 4G --max-accelerators 16 --seconds 10 "$@"
