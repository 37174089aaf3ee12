#!/usr/bin/env bash
# The ingest study of docs/io.md ("Ingest while training"): the slowdown of a
# running job while `shardtrain stage` copies a second data set (4 GiB) next
# to its data, at 128 KiB, 1 MiB and 4 MiB blocks, unlimited and limited to
# 200 MB/s (and 50 MB/s for the real job). The jobs run under a 4 GiB memory
# limit on the 16 GiB data set of scripts/study-storage.sh (made first if
# missing):
#   - a real training job: an MLP (65536-32-10) on the 64 KiB samples, DDP
#     on 2 ranks, global batch 64 (the disk feeds it about 150 MB/s); then
#     again at 1 MiB blocks with the writer at nice 0 and nice 19, and with
#     the writer copying with O_DIRECT;
#   - one emulated accelerator of the reference CNN's measured speed, and
#     six of them (1 MiB blocks).
# Leaves OPENBLAS_* as they are. About 15 minutes here; rerun to resume.
#   scripts/study-ingest.sh [DIR]   (default: data/storage-study)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-data/storage-study}
st=build/bin/shardtrain
[ -x "$st" ] || { echo "study-ingest: build first (scripts/build.sh)" >&2; exit 2; }
[ -f "$dir/train/manifest.json" ] && [ -f "$dir/profile-cnn/result.json" ] ||
  scripts/study-storage.sh "$dir" --modes page-cache --max-accelerators 1
[ -f "$dir/ingest-source/manifest.json" ] ||
  "$st" prep synthetic --out "$dir/ingest-source" --samples 65536 --sample-bytes 64K --shards 4 --seed 2
common=(--data "$dir/train" --source "$dir/ingest-source" --ingest-dir "$dir/ingest-scratch" --memory-limit 4G
        --set "data.test=$(realpath "$dir/test")" --set data.verify_files=false --set train.epochs=1)
cat > "$dir/ingest-mlp.toml" <<'TOML'
[train]
global_batch_size = 64
max_steps = 300
[model]
kind = "mlp"
hidden = [32]
[optim]
kind = "sgd"
lr = 0.01
[parallel]
strategy = "ddp"
TOML
"$st" study ingest --out "$dir/ingest-mlp" --config "$dir/ingest-mlp.toml" -n 2 --rates 0,200,50 "${common[@]}"
# The writer at its default and at the lowest CPU priority, beside a fresh
# measurement of the job alone: is the slowdown the writer's CPU time?
for nice in 0 19; do
  "$st" study ingest --out "$dir/ingest-nice" --config "$dir/ingest-mlp.toml" -n 2 --blocks 1M --rates 0,50 \
    --writer-nice "$nice" "${common[@]}"
done
# The writer with O_DIRECT: no page-cache copies, evictions or writeback.
"$st" study ingest --out "$dir/ingest-direct" --config "$dir/ingest-mlp.toml" -n 2 --blocks 1M,4M --rates 0,200 \
  --writer-direct "${common[@]}"
cat > "$dir/ingest-emulated.toml" <<TOML
[train]
global_batch_size = 32
max_steps = 600
[model]
kind = "mlp"
hidden = [8]
[runtime]
device = "emulated"
[runtime.emulate]
profile = "$(realpath "$dir/profile-cnn")"
[parallel]
strategy = "none"
TOML
"$st" study ingest --out "$dir/ingest-emulated" --config "$dir/ingest-emulated.toml" -n 1 "${common[@]}"
# 6 accelerators: near the 7 the storage study found under this limit.
"$st" study ingest --out "$dir/ingest-emulated-6" --config "$dir/ingest-emulated.toml" -n 6 --blocks 1M \
  --rates 0,200 --set train.global_batch_size=192 --set parallel.strategy=ddp "${common[@]}"
