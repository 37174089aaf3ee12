#!/usr/bin/env bash
# The distributed cache study of docs/io.md ("The peer cache tier"): 4
# emulated nodes (launch/emunodes, each with its own node-local directory),
# one emulated accelerator of the reference CNN's speed per node (the
# profile of scripts/study-storage.sh, made first if missing), 2 epochs of a
# 1 GiB data set of 64 KiB samples, at two link rates. Three ways to feed
# them: every rank reads the shared store (here: this machine's disk, pages
# dropped before each run); io.stage on every node (a first run stages, the
# second is measured with every copy there); io.peer_cache (the same). The
# table: bytes copied from the shared store (the node-local directories'
# contents), the share of samples from other nodes, and the median step time.
# Needs root (network namespaces). About 10 minutes here.
#   scripts/study-peer-cache.sh [DIR]   (default: data/peer-cache-study)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$(realpath -m "${1:-data/peer-cache-study}")
st=$PWD/build/bin/shardtrain
emu=$PWD/launch/emunodes
[ -x "$st" ] || { echo "study-peer-cache: build first (scripts/build.sh)" >&2; exit 2; }
profile=data/storage-study/profile-cnn
[ -f "$profile/result.json" ] || scripts/study-storage.sh data/storage-study --modes page-cache --max-accelerators 1
profile=$(realpath "$profile")
mkdir -p "$dir"
: > "$dir/empty.toml"  # every setting is on the command line
[ -f "$dir/train/manifest.json" ] ||
  "$st" prep synthetic --out "$dir/train" --samples 16384 --sample-bytes 64K --shards 16 >/dev/null
[ -f "$dir/test/manifest.json" ] ||
  "$st" prep synthetic --out "$dir/test" --samples 16 --sample-bytes 64K --split test >/dev/null
P=pcs$$x
trap '"$emu" down --prefix "$P" >/dev/null 2>&1 || true' EXIT
local_dir="$dir/node-local"
drop() { /usr/bin/python3 -c "
import glob, os, sys
for f in glob.glob(sys.argv[1] + '/*.h5'):
    fd = os.open(f, os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED); os.close(fd)" "$dir/train"; }
run() {  # name, extra --set arguments...
  local name=$1; shift
  drop
  echo "[study peer-cache] $rate: $name" >&2
  "$emu" run --prefix "$P" -n 4 --per-node 1 --node-local "$local_dir" -- "$st" train "$dir/empty.toml" \
    --set "data.train=$dir/train" --set "data.test=$dir/test" --set data.loader=stream \
    --set data.verify_files=false --set model.kind=mlp --set 'model.hidden=[8]' \
    --set runtime.device=emulated --set "runtime.emulate.profile=$profile" --set train.global_batch_size=128 \
    --set train.epochs=2 --set parallel.strategy=ddp --set train.progress_every_s=30 \
    --run-dir "$dir/runs/$rate-$name" --overwrite "$@" > "$dir/runs/$rate-$name.txt" 2>&1 ||
    { tail -20 "$dir/runs/$rate-$name.txt"; exit 1; }
}
mkdir -p "$dir/runs"
for rate in 1gbit 200mbit; do
  "$emu" up 4 --prefix "$P" --rate "$rate" >/dev/null
  rm -rf "$local_dir.nodes"
  run shared-store
  run stage-first --set io.stage.enabled=true --set "io.stage.cache_dir=$local_dir/stage"
  run stage --set io.stage.enabled=true --set "io.stage.cache_dir=$local_dir/stage"
  run peer-first --set "io.peer_cache.dir=$local_dir/peer"
  run peer --set "io.peer_cache.dir=$local_dir/peer"
  du -sb "$local_dir.nodes"/*/stage "$local_dir.nodes"/*/peer > "$dir/runs/$rate-node-local.txt"
done
/usr/bin/python3 - "$dir" <<'PY' | tee "$dir/table.md"
import glob, json, os, statistics, sys
d = sys.argv[1]
store = sum(os.path.getsize(f) for f in glob.glob(f"{d}/train/*.h5"))
print(f"Shared store: {store / 1e9:.3f} GB. Step: the median over steps 5+ of the slowest rank's step time.\n")
print("| link | feeding | copied from the store (all nodes) | read from the store per epoch | samples from other nodes | step ms (median) | AU min % |")
print("| --- | --- | --- | --- | --- | --- | --- |")
def step_median(run):
    ranks = [[json.loads(l) for l in open(f)] for f in sorted(glob.glob(f"{run}/telemetry/rank-*.jsonl"))]
    steps = [max(r["step_s"] for r in rs) for rs in zip(*ranks) if rs[0]["step"] >= 5]
    au = min(sum(r["step_s"] - r["data_wait_s"] - r["comm_exposed_s"] - r["blocked_on_peers_s"] for r in rs[5:])
             / sum(r["step_s"] for r in rs[5:]) for rs in ranks)
    return 1e3 * statistics.median(steps), 100 * au
for rate in ("1gbit", "200mbit"):
    sizes = {}
    for line in open(f"{d}/runs/{rate}-node-local.txt"):
        n, path = line.split()
        sizes[os.path.basename(path)] = sizes.get(os.path.basename(path), 0) + int(n)
    for name in ("shared-store", "stage", "peer"):
        run = f"{d}/runs/{rate}-{name}"
        ms, au = step_median(run)
        result = json.load(open(f"{run}/result.json"))
        tiers = result["storage"].get("peer_cache")
        copied = sizes.get(name, 0)
        direct = result["storage"]["loader_bytes"] / result["epochs"] if name == "shared-store" else 0
        share = f"{100 * tiers['peer_bytes'] / (tiers['peer_bytes'] + tiers['node_cache_bytes']):.1f}%" if tiers else "0%"
        label = {"shared-store": "every rank reads the shared store", "stage": "io.stage on every node",
                 "peer": "io.peer_cache"}[name]
        print(f"| {rate} | {label} | {copied / 1e9:.3f} GB ({copied / store:.2f}x) | {direct / 1e9:.3f} GB | {share} | "
              f"{ms:.1f} | {au:.1f} |")
PY
