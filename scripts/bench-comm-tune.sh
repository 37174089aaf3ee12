#!/usr/bin/env bash
# Collective algorithms chosen by measurement (docs/comm.md, "Algorithms
# chosen by measurement"): for each topology, `bench comm --tune-algorithms` times
# every algorithm of all-reduce, reduce-scatter and all-gather at each size
# and writes the fastest into a tuning file; then `bench comm` (latency
# mode) runs shardtrain's collectives following that file side by side with
# the MPI library's, and the summary prints, per topology and op, the
# lowest shardtrain / MPI ratio over the sizes (>= 1: never slower than the
# MPI library's) and the thresholds' (comm.tuning = "off") against it.
# Topologies: one host (2 and 4 ranks), 2 and 4 emulated nodes of 1 rank,
# unshaped and shaped to RATE. Sizes 4 KiB to MAX_BYTES.
#   scripts/bench-comm-tune.sh [OUT] [MAX_BYTES] [RATE]   (bench-out/comm-tune, 256M, 1gbit)
# A shaped 256 MiB all-reduce takes seconds per run at 1 Gbit/s: the shaped
# topologies stop at min(MAX_BYTES, 64M). The tuning files stay in OUT (not
# in your cache). Needs root for the emulated nodes; runs Debian's python3
# for the summary. OPENBLAS_* are left as the machine sets them.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-bench-out/comm-tune}
max=${2:-256M}
rate=${3:-1gbit}
mkdir -p "$out"
st=build/bin/shardtrain
emu=launch/emunodes
prefix=ctune

bench() {  # NAME LAUNCH... -- runs tune, then the comparison, on that launch
  local name=$1; shift
  local top=$max
  [[ $name == *"$rate"* ]] && top=$(/usr/bin/python3 -c "import sys; u={'K':1<<10,'M':1<<20,'G':1<<30}; \
f=lambda s: int(s[:-1])*u[s[-1]] if s[-1] in u else int(s); print(min(f(sys.argv[1]), 64<<20))" "$max")
  echo "== $name: tune (4 KiB .. $top)"
  "$@" "$st" bench comm --tune-algorithms --tune-file "$out/tuning-$name.json" --ops allreduce,reduce_scatter,allgather \
    --max-bytes "$top" | tee "$out/tune-$name.txt"
  echo "== $name: shardtrain following it against the MPI library"
  "$@" "$st" bench comm --mode latency --tuning "$out/tuning-$name.json" --ops allreduce,reduce_scatter,allgather \
    --max-bytes "$top" --json "$out/bench-$name.json" | tee "$out/bench-$name.txt"
}

for n in 2 4; do bench "host-$n" build/bin/shardrun -n "$n" --; done
if "$emu" check >/dev/null 2>&1; then
  trap '"$emu" down --prefix "$prefix" >/dev/null 2>&1 || true' EXIT
  for nodes in 2 4; do
    for r in unshaped "$rate"; do
      if [ "$r" = unshaped ]; then "$emu" up "$nodes" --prefix "$prefix" >/dev/null
      else "$emu" up "$nodes" --prefix "$prefix" --rate "$r" >/dev/null; fi
      bench "nodes-$nodes-$r" "$emu" run --prefix "$prefix" -n "$nodes" --per-node 1 --
      "$emu" down --prefix "$prefix" >/dev/null
    done
  done
else
  echo "emulated nodes unavailable here ($("$emu" check 2>&1 | tail -1)): one host only"
fi

/usr/bin/python3 - "$out" <<'PY'
import glob, json, os, re, sys
out = sys.argv[1]
print("\nsummary: per topology and op, the lowest shardtrain/MPI ratio (time_mpi / time_shardtrain) over the sizes,")
print("and how much slower than the fastest the size thresholds were (their worst size)")
print("| topology | op | sizes | lowest ratio vs MPI (at) | thresholds' worst (at) |")
print("| --- | --- | --- | --- | --- |")
for path in sorted(glob.glob(f"{out}/bench-*.json")):
    name = os.path.basename(path)[6:-5]
    rows = json.load(open(path))
    tune = open(f"{out}/tune-{name}.txt").read()
    for op in ("allreduce", "reduce_scatter", "allgather"):
        by = {}
        for r in rows:
            if r["op"] == op:
                by.setdefault(r["bytes"], {})[r["impl"]] = r["time_us"]
        if not by:
            continue
        ratios = {b: v["mpi"] / v["shardtrain"] for b, v in by.items()}
        low = min(ratios, key=ratios.get)
        worst = (1.0, None)
        for m in re.finditer(rf"^{op}\s+(\d+) \| \S+\s+[0-9.]+ \| \S+\s+[0-9.]+ \|\s+([0-9.]+) \|", tune, re.M):
            if float(m.group(2)) > worst[0]:
                worst = (float(m.group(2)), int(m.group(1)))
        at = f"{worst[0]:.2f}x ({worst[1]} B)" if worst[1] else "1.00x (every size)"
        print(f"| {name} | {op} | {len(by)} | {ratios[low]:.2f} ({low} B) | {at} |")
PY
