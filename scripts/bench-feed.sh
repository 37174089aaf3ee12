#!/usr/bin/env bash
# One rank's input pipeline at full speed (docs/BENCHMARKS.md, "One rank's
# feed"): the streaming loader behind an emulated accelerator that takes
# 0.1 us per sample, so that the step is the pipeline (reads, checksums,
# conversion to floats, the hand-over), at 64 KiB and 4 MiB samples, from
# the page cache and cold (data.cold_cache: O_DIRECT reads of a global
# shuffle), each point the median of 3 runs. Beside it, on the same files:
# fio's random O_DIRECT reads of one sample at 16 in flight (what a global
# shuffle can get from the disk) before each cold repetition, and the CPU's
# conversion and memcpy rates
# (kernels_fused_bench). With BEFORE=path/to/another/shardtrain every point
# also runs that binary, alternating with this one, and prints the ratio.
#
# About 2 minutes (with BEFORE; less without), 4.3 GB of disk in OUT_DIR.
# Needs fio (apt-get install fio). Runs Debian's /usr/bin/python3.
# OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are left as the machine sets them.
# Usage: [BEFORE=BIN] scripts/bench-feed.sh [OUT_DIR]   (default bench-out/)
source "$(dirname "$0")/bench-common.sh"
command -v fio >/dev/null || { echo "$0: needs fio (apt-get install fio)" >&2; exit 2; }
bins=("$st")
[ -z "${BEFORE:-}" ] || bins=("$BEFORE" "$st")

declare -A batch=([64K]=32 [4M]=4) samples=([64K]=32768 [4M]=512)
for size in 64K 4M; do
  d="$out/feed-$size"
  [ -f "$d/train/manifest.json" ] ||
    $st prep synthetic --out "$d/train" --samples "${samples[$size]}" --sample-bytes $size --shards 8
  [ -f "$d/test/manifest.json" ] || $st prep synthetic --out "$d/test" --samples 4 --sample-bytes $size --split test
done

point() {  # BIN SIZE MODE RUN_DIR: one run; prints MB/s
  local bin=$1 size=$2 mode=$3 dir=$4 d="$out/feed-$2"
  local cold=false steps=$((20 * 1024 * 1024 * 1024 / ${batch[$size]} / $(numfmt --from=iec "$size") / 16))
  if [ "$mode" = cold ]; then cold=true; else cat "$d"/train/*.h5 >/dev/null; fi
  cat >"$dir.toml" <<EOF
[train]
epochs = 1000
max_steps = $((steps + 5))
global_batch_size = ${batch[$size]}
[data]
train = "$d/train"
test = "$d/test"
loader = "stream"
cold_cache = $cold
verify_files = false
[model]
kind = "mlp"
hidden = [8]
[runtime]
device = "emulated"
[runtime.emulate]
sample_ms = 0.0001
[telemetry]
trace = false
EOF
  "$bin" train "$dir.toml" --run-dir "$dir" --overwrite >"$dir.log" 2>&1 || { tail "$dir.log" >&2; exit 1; }
  /usr/bin/python3 - "$dir" <<'PY'
import glob, json, sys
recs = [json.loads(l) for l in open(glob.glob(f"{sys.argv[1]}/telemetry/rank-*.jsonl")[0]) if l.strip()]
recs = [r for r in recs if r["step"] >= 5]  # the queue filling left out
wall = recs[-1]["t_start_s"] + recs[-1]["step_s"] - recs[0]["t_start_s"]
print(f"{sum(r['io_bytes'] for r in recs) / wall / 1e6:.0f}")
PY
}

fio_mb() {  # SIZE: fio's random O_DIRECT reads of one sample, 16 in flight, for 4 s; prints MB/s
  fio --name=feed --filename="$(ls "$out/feed-$1"/train/*.h5 | tr '\n' ':' | sed 's/:$//')" --rw=randread \
    --direct=1 --bs=$1 --iodepth=16 --ioengine=libaio --runtime=4 --time_based --output-format=json |
    /usr/bin/python3 -c "import json, sys; print(round(json.load(sys.stdin)['jobs'][0]['read']['bw_bytes'] / 1e6))"
}

# Each repetition measures fio right before the cold runs it is compared
# with: this disk's rate moves by tens of percent from minute to minute.
rows="$out/feed-rows.txt"
: >"$rows"
for size in 64K 4M; do
  for mode in page-cache cold; do
    for rep in 1 2 3; do
      [ $mode = page-cache ] || echo "$size fio $rep $(fio_mb $size)" | tee -a "$rows"
      for i in "${!bins[@]}"; do
        mb=$(point "${bins[$i]}" $size $mode "$out/feed-run")
        echo "$size $mode $i $mb $rep" | tee -a "$rows"
      done
    done
  done
done
bench=${BIN_DIR:-build/bin}/kernels_fused_bench
[ -x "$bench" ] && "$bench" --benchmark_filter='U8ToF32Normalized|MemcpyOfTheFloats' --benchmark_format=json \
  >"$out/convert.json" 2>/dev/null

/usr/bin/python3 - "$out" "${#bins[@]}" <<'PY'
import json, os, statistics, sys
out, nbins = sys.argv[1], int(sys.argv[2])
runs, fio = {}, {}
for line in open(f"{out}/feed-rows.txt"):
    f = line.split()
    if f[1] == "fio":
        fio[(f[0], int(f[2]))] = float(f[3])
    else:
        runs.setdefault((f[0], f[1], int(f[2])), []).append((float(f[3]), int(f[4])))
print("one rank's feed, MB/s of samples (median of 3 runs); cold: fio's random O_DIRECT reads of one")
print("sample at 16 in flight, run before each repetition, and the median of the reps' ratios")
head = "| samples | storage | " + ("before | after | after/before |" if nbins == 2 else "shardtrain |") + \
    " fio | shardtrain/fio |"
print(head)
print("|" + " --- |" * (head.count("|") - 1))
for size in ("64K", "4M"):
    for mode in ("page-cache", "cold"):
        med = [statistics.median(mb for mb, _ in runs[(size, mode, i)]) for i in range(nbins)]
        cells = [f"{m:.0f}" for m in med] + ([f"{med[1] / med[0]:.2f}"] if nbins == 2 else [])
        if mode == "cold":
            reps = runs[(size, mode, nbins - 1)]
            cells += [f"{statistics.median(fio[(size, r)] for _, r in reps):.0f}",
                      f"{statistics.median(mb / fio[(size, r)] for mb, r in reps):.2f}"]
        else:
            cells += ["-", "-"]
        print(f"| {size} | {mode} | " + " | ".join(cells) + " |")
if os.path.exists(f"{out}/convert.json"):
    for b in json.load(open(f"{out}/convert.json"))["benchmarks"]:
        print(f"{b['name']}: {b['bytes_per_second'] / 1e9:.1f} GB/s of bytes read and written")
PY
