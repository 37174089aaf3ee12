#!/usr/bin/env bash
# Collective algorithms chosen by measurement (docs/comm.md, "Algorithms
# chosen by measurement"): for each topology, `bench comm --tune-algorithms` times
# every algorithm of all-reduce, reduce-scatter and all-gather at each size
# and writes the fastest into a tuning file; then `bench comm` (latency
# mode) runs shardtrain's collectives following that file side by side with
# the MPI library's, and the summary prints, per topology and op, the
# lowest shardtrain / MPI ratio over the sizes (>= 1: never slower than the
# MPI library's), and the thresholds' (comm.tuning = "off") and the
# job-start probes' choice (comm.tuning = "probe", what a job over several
# nodes without a tuning file follows) against the fastest.
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
print("how much slower than the fastest algorithm the size thresholds' and the job-start probes' choices were")
print("(the chosen algorithm's time in the same rounds; worst size), and at how many sizes the probes chose the fastest")
print("| topology | op | sizes | lowest ratio vs MPI (at) | thresholds' worst (at) | probed's worst (at) | probed = fastest |")
print("| --- | --- | --- | --- | --- | --- | --- |")
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
        # A choice is judged by its algorithm's own time in the same rounds
        # (the "every algorithm" column): two communicators running the same
        # algorithm differ by the machine's noise.
        worst = {"thresholds": (1.0, None), "probed": (1.0, None)}
        same = 0
        rows_re = rf"^{op}\s+(\d+) \| (\S+)\s+[0-9.]+\s+[0-9.]+ \| (\S+)\s+[0-9.]+\s+[0-9.]+ \| (\S+)\s+[0-9.]+ \| (.*)$"
        for m in re.finditer(rows_re, tune, re.M):
            size, fastest = int(m.group(1)), m.group(4)
            every = {a: float(t) for a, t in re.findall(r"(\S+) ([0-9.]+)", m.group(5))}
            same += m.group(3) == fastest
            for key, ran in (("thresholds", m.group(2)), ("probed", m.group(3))):
                ratio = every.get(ran, every[fastest]) / every[fastest]
                if ratio > worst[key][0]:
                    worst[key] = (ratio, size)
        at = {k: f"{r:.2f}x ({b} B)" if b else "1.00x (every size)" for k, (r, b) in worst.items()}
        print(f"| {name} | {op} | {len(by)} | {ratios[low]:.2f} ({low} B) | {at['thresholds']} | {at['probed']} "
              f"| {same}/{len(by)} |")
print("\nper topology, over every op and size: how often each choice was the fastest algorithm, its mean time over")
print("the fastest's, and how many of its choices were more than 1.25x slower than the fastest")
print("| topology | cells | thresholds: fastest / mean / > 1.25x | probed: fastest / mean / > 1.25x |")
print("| --- | --- | --- | --- |")
row_re = re.compile(r"^\w+\s+\d+ \| (\S+)\s+[0-9.]+\s+[0-9.]+ \| (\S+)\s+[0-9.]+\s+[0-9.]+ \| (\S+)\s+[0-9.]+ \| (.*)$")
for path in sorted(glob.glob(f"{out}/tune-*.txt")):
    cells = {"thresholds": [], "probed": []}
    for line in open(path):
        m = row_re.match(line)
        if not m:
            continue
        every = {a: float(t) for a, t in re.findall(r"(\S+) ([0-9.]+)", m.group(4))}
        fastest = m.group(3)
        for key, ran in (("thresholds", m.group(1)), ("probed", m.group(2))):
            cells[key].append((ran == fastest, every.get(ran, every[fastest]) / every[fastest]))
    cols = [f"{sum(f for f, _ in c)} / {sum(r for _, r in c) / len(c):.2f} / {sum(r > 1.25 for _, r in c)}"
            for c in cells.values()]
    print(f"| {os.path.basename(path)[5:-4]} | {len(cells['probed'])} | {cols[0]} | {cols[1]} |")
PY
