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
# nvidia-dali-cuda110 comes from NVIDIA's index, not PyPI, and is only for
# DALI's loader), then what its TensorFlow path imports, tensorflow-cpu,
# and torch (PyPI's wheel with its CUDA libraries: about 7 GB in all) for
# unet3d, whose config asks for DLIO's PyTorch loader. DALI's tfrecord2idx,
# which DLIO's generator calls, is scripts/dlio/tfrecord2idx. resnet50 and
# cosmoflow run with DLIO's TensorFlow loader, as MLPerf Storage
# configures them. shardtrain's study hands unet3d's accelerators the
# stored bytes (--input bytes: as floats one accelerator's batches would
# need 29 GB of this host's memory, docs/io.md); the other two get floats,
# as training does.
#
#   WORKLOADS="unet3d" scripts/study-dlio.sh    runs only those named
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
workloads=(${WORKLOADS:-resnet50 cosmoflow unet3d})
if [[ " ${workloads[*]} " == *" unet3d "* ]] && [ ! -f "$venv/.torch" ]; then
  log "installing torch into $venv for DLIO's PyTorch loader (PyPI, about 6 GB with its CUDA libraries)"
  "$venv/bin/pip" install -q torch
  touch "$venv/.torch"
fi
export PATH="$PWD/scripts/dlio:$PATH"
mpirun=(mpirun --oversubscribe --bind-to none -x PATH)
[ "$(id -u)" -ne 0 ] || mpirun+=(--allow-run-as-root)

# ---- the workloads, at the size of a data set this host holds -----------
# name files samples-per-file sample-bytes (MLPerf Storage's sample sizes
# and samples per file; fewer files than its configs, the same for both).
# unet3d: 28 files of 147 MB (4.1 GB) from the page cache, so that the
# data set, DLIO's PyTorch loader (4 read workers per rank, each a batch
# of 7 samples ahead) and shardtrain's 7 batch slots per rank (7.2 GB as
# stored) fit this host's memory beside each other at N = 1 and 2. Cold,
# 112 files (16.4 GB, on disk only): with 28, one rank's epoch is 4 steps,
# all of which DLIO's 4 workers read during the wait for the first batch,
# which its AU leaves out (docs/storage.md).
declare -A layout=([resnet50]="16 1251 114660" [cosmoflow]="1024 1 2828486" [unet3d]="28 1 146600628")
declare -A cold_files=([unet3d]=112)
declare -A input=([resnet50]=floats [cosmoflow]=floats [unet3d]=bytes)
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

# make_data NAME FILES PER_FILE BYTES SUFFIX: both tools' data sets in
# $data/dlio$SUFFIX and $data/shardtrain$SUFFIX.
make_data() {
  local name=$1 files=$2 per_file=$3 bytes=$4 sfx=$5
  # DLIO's: its own generator (its formats, its sample sizes drawn around the mean).
  if [ ! -f "$data/dlio$sfx/.done" ]; then
    log "$name: DLIO writes $files files of $per_file samples"
    rm -rf "$data/dlio$sfx"
    mkdir -p "$data"
    dlio "${name}_h100" "$data/dlio-gen$sfx" 2 "$files" "$data/dlio$sfx" ++workload.workflow.generate_data=True \
      ++workload.workflow.train=False >"$data-dlio-gen$sfx.txt" 2>&1 || { tail -20 "$data-dlio-gen$sfx.txt"; exit 1; }
    touch "$data/dlio$sfx/.done"
  fi
  # shardtrain's: the same samples of the mean size, in as many HDF5 shards.
  if [ ! -f "$data/shardtrain$sfx/train/manifest.json" ]; then
    log "$name: shardtrain writes $((files * per_file)) samples of $bytes bytes in $files shards"
    "$st" prep synthetic --out "$data/shardtrain$sfx/train" --samples "$((files * per_file))" --sample-bytes "$bytes" \
      --shards "$files"
    "$st" prep synthetic --out "$data/shardtrain$sfx/test" --samples 1 --sample-bytes "$bytes" --split test
  fi
}

for name in "${workloads[@]}"; do
  [ -n "${layout[$name]:-}" ] || { echo "study-dlio: unknown workload $name (resnet50, cosmoflow, unet3d)" >&2; exit 2; }
  read -r files per_file bytes <<<"${layout[$name]}"
  data=$dir/data/$name
  for mode in "${modes[@]}"; do
    n_files=$files
    [ "$mode" != cold ] || n_files=${cold_files[$name]:-$files}
    sfx=""
    [ "$n_files" = "$files" ] || sfx="-$n_files"
    make_data "$name" "$n_files" "$per_file" "$bytes" "$sfx"
    for gpu in "${accelerators[@]}"; do
      for n in $(seq 1 "$max_n"); do
        out=$dir/dlio/${name}_$gpu/$mode$sfx/n$n
        if [ ! -f "$out/summary.json" ]; then
          if [ "$mode" = cold ]; then cold; else warm "$data/dlio$sfx/train"; fi
          rm -rf "$out"
          mkdir -p "$(dirname "$out")"
          # unet3d's 28 files are 4 steps of one rank: from the page cache it
          # runs its config's 5 epochs, so that DLIO's AU covers 20 steps;
          # cold, one (a second epoch would come from the page cache).
          epochs=1
          [ "$name" != unet3d ] || [ "$mode" != page-cache ] || epochs=5
          dlio "${name}_$gpu" "$out" "$n" "$n_files" "$data/dlio$sfx" ++workload.workflow.generate_data=False \
            ++workload.workflow.train=True ++workload.workflow.checkpoint=False \
            ++workload.train.epochs=$epochs >"$out.txt" 2>&1 ||
            { tail -20 "$out.txt"; exit 1; }
        fi
        verdict=$(/usr/bin/python3 -c 'import json,sys; m=json.load(open(sys.argv[1]))["metric"]; print(m["train_au_meet_expectation"], round(m["train_au_mean_percentage"], 1), round(m["train_io_mean_MB_per_second"]))' "$out/summary.json")
        log "DLIO ${name}_$gpu $mode ($n_files files) N=$n: $verdict"
        [[ $verdict == success* ]] || break
      done
    done
    log "$name: shardtrain study storage, $mode ($n_files files)"
    "$st" study storage --out "$dir/shardtrain-$name-$mode$sfx" --data "$data/shardtrain$sfx/train" \
      --test "$data/shardtrain$sfx/test" --accelerator "$name:a100" --accelerator "$name:h100" \
      --input "${input[$name]}" --modes "$mode" --max-accelerators "$max_n" --seconds 5 | tail -n 8
  done
done

# ---- side by side -------------------------------------------------------
/usr/bin/python3 - "$dir" "$max_n" <<'PY' | tee "$dir/table.md"
import glob, json, os, re, sys
out, max_n = sys.argv[1], int(sys.argv[2])
print("| workload | accelerator | mode | DLIO: accelerators at AU (first miss: AU %, DLIO's MiB/s) "
      "| shardtrain: accelerators at AU | shardtrain >= DLIO |")
print("| --- | --- | --- | --- | --- | --- |")
for study in sorted(glob.glob(f"{out}/shardtrain-*/table.md")):
    ours = {}
    for m in re.finditer(r"^\| (\S+?)-(a100|h100)(?:-bytes)? \| (\S+) \| (\d+) \|$", open(study).read(), re.M):
        ours[(m.group(1), m.group(2), m.group(3))] = int(m.group(4))
    for (name, gpu, mode), count in sorted(ours.items()):
        # The data set's suffix (-FILES where the mode has its own size) from the study's directory.
        sfx = os.path.basename(os.path.dirname(study))[len(f"shardtrain-{name}-{mode}"):]
        kept, miss = 0, ""
        for n in range(1, max_n + 1):
            path = f"{out}/dlio/{name}_{gpu}/{mode}{sfx}/n{n}/summary.json"
            if not os.path.exists(path):
                break
            m = json.load(open(path))["metric"]
            if m["train_au_meet_expectation"] != "success":
                miss = f" ({n}: {m['train_au_mean_percentage']:.1f}%, {m['train_io_mean_MB_per_second']:.0f})"
                break
            kept = n
        cap = ", the cap" if kept == max_n else ""
        files = f" ({sfx[1:]} files)" if sfx else ""
        print(f"| {name} | {gpu} | {mode}{files} | {kept}{cap}{miss} | {count} | {'yes' if count >= kept else 'no'} |")
PY
