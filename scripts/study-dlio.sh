#!/usr/bin/env bash
# MLPerf Storage's workloads in DLIO (MLPerf Storage's own benchmark) beside
# `shardtrain study storage`, on the same disk, with the same number of
# samples of the same size, per workload, accelerator and cache mode: how
# many emulated accelerators each keeps at the workload's AU (docs/storage.md).
#
#   scripts/study-dlio.sh [DIR]      (default: data/study-dlio; rerun to resume)
#
# DLIO is a benchmark's tool, not a dependency of shardtrain: it goes into
# its own virtual environment (DIR/venv, Debian's /usr/bin/python3), from
# PyPI: dlio-benchmark 2.0.0 without its declared dependencies (its
# nvidia-dali-cuda110 comes from NVIDIA's index, not PyPI, and torch's
# PyPI wheels bring several GB of CUDA libraries), then what its TensorFlow
# path imports, and tensorflow-cpu. DALI's tfrecord2idx, which DLIO's
# generator calls, is scripts/dlio/tfrecord2idx. So the workloads run with
# DLIO's TensorFlow loader: resnet50 and cosmoflow as MLPerf Storage
# configures them; unet3d's config asks for the PyTorch loader and is not
# run (shardtrain's study refuses it on this host too: docs/io.md).
#
# Each run is one epoch, N = 1, 2, ... ranks until one misses the AU or N
# reaches MAX_N (default 8). Modes: page-cache (the files read once before
# each run) and cold (`echo 3 > /proc/sys/vm/drop_caches` before each DLIO
# run; shardtrain's cold mode drops its pages after each read and reads
# with O_DIRECT). Needs root for the cold mode. Leaves OPENBLAS_* as they are.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$(mkdir -p "${1:-data/study-dlio}" && cd "${1:-data/study-dlio}" && pwd)
max_n=${MAX_N:-8}
st=$PWD/build/bin/shardtrain
[ -x "$st" ] || { echo "study-dlio: build first (scripts/build.sh)" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || { echo "study-dlio: the cold mode drops the page cache: run as root" >&2; exit 2; }
log() { echo "[study-dlio $(date +%H:%M:%S)] $*"; }

# ---- DLIO in its own environment ----------------------------------------
venv=$dir/venv
if [ ! -f "$venv/.installed" ]; then
  log "installing dlio-benchmark 2.0.0 and tensorflow-cpu into $venv (PyPI, about 600 MB)"
  /usr/bin/python3 -m venv "$venv"
  "$venv/bin/pip" install -q --no-deps dlio-benchmark==2.0.0
  "$venv/bin/pip" install -q hydra-core omegaconf pandas psutil "pydftracer==1.0.2" mpi4py h5py numpy Pillow \
    PyYAML tensorflow-cpu
  touch "$venv/.installed"
fi
export PATH="$PWD/scripts/dlio:$PATH"
mpirun=(mpirun --oversubscribe --bind-to none -x PATH)
[ "$(id -u)" -ne 0 ] || mpirun+=(--allow-run-as-root)

# ---- the workloads, at the size of a data set this host holds -----------
# name files samples-per-file sample-bytes (MLPerf Storage's sample sizes
# and samples per file; fewer files than its configs, the same for both).
workloads=("resnet50 16 1251 114660" "cosmoflow 1024 1 2828486")
accelerators=(a100 h100)
modes=(page-cache cold)

dlio() {  # WORKLOAD_GPU OUT N FILES FOLDER [hydra overrides...]
  local config=$1 out=$2 n=$3 files=$4 folder=$5
  shift 5
  # In DIR: DLIO (hydra) writes a hydra_log folder where it runs.
  (cd "$dir" && "${mpirun[@]}" -np "$n" "$venv/bin/python" -m dlio_benchmark.main "workload=$config" \
    ++workload.dataset.num_files_train="$files" ++workload.dataset.num_files_eval=0 \
    ++workload.dataset.data_folder="$folder" ++workload.output.folder="$out" "$@")
}

warm() { find "$1" -type f -exec cat {} + >/dev/null; }
cold() { sync; echo 3 >/proc/sys/vm/drop_caches; }

for w in "${workloads[@]}"; do
  read -r name files per_file bytes <<<"$w"
  data=$dir/data/$name
  samples=$((files * per_file))
  # DLIO's data: its own generator (TFRecord, its sample sizes drawn around the mean).
  if [ ! -f "$data/dlio/.done" ]; then
    log "$name: DLIO writes $files files of $per_file samples"
    rm -rf "$data/dlio"
    mkdir -p "$data"
    dlio "${name}_h100" "$data/dlio-gen" 2 "$files" "$data/dlio" ++workload.workflow.generate_data=True \
      ++workload.workflow.train=False >"$data-dlio-gen.txt" 2>&1 || { tail -20 "$data-dlio-gen.txt"; exit 1; }
    touch "$data/dlio/.done"
  fi
  # shardtrain's: the same samples of the mean size, in as many HDF5 shards.
  if [ ! -f "$data/shardtrain/train/manifest.json" ]; then
    log "$name: shardtrain writes $samples samples of $bytes bytes in $files shards"
    "$st" prep synthetic --out "$data/shardtrain/train" --samples "$samples" --sample-bytes "$bytes" --shards "$files"
    "$st" prep synthetic --out "$data/shardtrain/test" --samples 1 --sample-bytes "$bytes" --split test
  fi

  for gpu in "${accelerators[@]}"; do
    for mode in "${modes[@]}"; do
      for n in $(seq 1 "$max_n"); do
        out=$dir/dlio/${name}_$gpu/$mode/n$n
        if [ ! -f "$out/summary.json" ]; then
          if [ "$mode" = cold ]; then cold; else warm "$data/dlio/train"; fi
          rm -rf "$out"
          mkdir -p "$(dirname "$out")"
          dlio "${name}_$gpu" "$out" "$n" "$files" "$data/dlio" ++workload.workflow.generate_data=False \
            ++workload.workflow.train=True ++workload.train.epochs=1 >"$out.txt" 2>&1 ||
            { tail -20 "$out.txt"; exit 1; }
        fi
        verdict=$(/usr/bin/python3 -c 'import json,sys; m=json.load(open(sys.argv[1]))["metric"]; print(m["train_au_meet_expectation"], round(m["train_au_mean_percentage"], 1), round(m["train_io_mean_MB_per_second"]))' "$out/summary.json")
        log "DLIO ${name}_$gpu $mode N=$n: $verdict"
        [[ $verdict == success* ]] || break
      done
    done
  done

  log "$name: shardtrain study storage"
  "$st" study storage --out "$dir/shardtrain-$name" --data "$data/shardtrain/train" --test "$data/shardtrain/test" \
    --accelerator "$name:a100" --accelerator "$name:h100" --modes page-cache,cold --max-accelerators "$max_n" \
    --seconds 5 | tail -n 12
done

# ---- side by side -------------------------------------------------------
/usr/bin/python3 - "$dir" "$max_n" <<'PY' | tee "$dir/table.md"
import glob, json, os, re, sys
out, max_n = sys.argv[1], int(sys.argv[2])
print("| workload | accelerator | mode | DLIO: accelerators at AU (first miss: AU %, MB/s) "
      "| shardtrain: accelerators at AU | shardtrain >= DLIO |")
print("| --- | --- | --- | --- | --- | --- |")
for study in sorted(glob.glob(f"{out}/shardtrain-*/table.md")):
    ours = {}
    for m in re.finditer(r"^\| (\S+)-(a100|h100) \| (\S+) \| (\d+) \|$", open(study).read(), re.M):
        ours[(m.group(1), m.group(2), m.group(3))] = int(m.group(4))
    for (name, gpu, mode), count in sorted(ours.items()):
        kept, miss = 0, ""
        for n in range(1, max_n + 1):
            path = f"{out}/dlio/{name}_{gpu}/{mode}/n{n}/summary.json"
            if not os.path.exists(path):
                break
            m = json.load(open(path))["metric"]
            if m["train_au_meet_expectation"] != "success":
                miss = f" ({n}: {m['train_au_mean_percentage']:.1f}%, {m['train_io_mean_MB_per_second']:.0f} MB/s)"
                break
            kept = n
        cap = ", the cap" if kept == max_n else ""
        print(f"| {name} | {gpu} | {mode} | {kept}{cap}{miss} | {count} | {'yes' if count >= kept else 'no'} |")
PY
