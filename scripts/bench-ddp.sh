#!/usr/bin/env bash
# The communication and DDP benchmarks of docs/BENCHMARKS.md, one after the
# other on a quiet machine (about 10 minutes): bench comm on 2 and 4 local
# ranks (all-reduce, shardtrain against the MPI library in the same run), the
# reference CNN and MLP trained with DDP on 2 ranks (time to target, exposed
# communication), and the CNN's weak scaling from 1 to 2 ranks.
# OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are left as the machine sets them.
# Usage: scripts/bench-ddp.sh [OUT_DIR]   (default bench-out/)
source "$(dirname "$0")/bench-common.sh"

for n in 2 4; do
  $run -n $n -- $st bench comm --ops allreduce --json "$out/comm-allreduce-$n.json" | tee "$out/comm-allreduce-$n.txt"
done
$run -n 2 -- $st bench comm --ops reduce_scatter,allgather,broadcast --json "$out/comm-other-2.json" | tee "$out/comm-other-2.txt"

for model in cnn mlp; do
  $run -n 2 -- $st train "examples/fmnist_$model.toml" --run-dir "$out/ddp2-$model" --overwrite |
    grep -E '^\[(eval|summary|done)\]'
done

# Weak scaling: the same per-rank batch (128), 300 steps, 1 and 2 ranks.
$st train examples/fmnist_cnn.toml --set train.max_steps=300 --set target.value=0 \
  --run-dir "$out/weak-cnn-1" --overwrite | grep -E '^\[summary\]'
$run -n 2 -- $st train examples/fmnist_cnn.toml --set train.max_steps=300 --set target.value=0 \
  --set train.global_batch_size=256 --run-dir "$out/weak-cnn-2" --overwrite | grep -E '^\[summary\]'

/usr/bin/python3 - "$out" <<'PYEOF'
import json, sys
out = sys.argv[1]
print("\nsummary")
for n in (2, 4):
    rows = json.load(open(f"{out}/comm-allreduce-{n}.json"))
    by = {}
    for r in rows:
        by.setdefault(r["bytes"], {})[r["impl"]] = r
    worst = min(v["shardtrain"]["busbw_gbs"] / v["mpi"]["busbw_gbs"] for v in by.values())
    at64 = by.get(64 << 20)
    print(f"  allreduce, {n} ranks: lowest shardtrain/mpi busbw ratio {worst:.2f}"
          + (f"; 64 MiB: {at64['shardtrain']['busbw_gbs']:.2f} vs {at64['mpi']['busbw_gbs']:.2f} GB/s" if at64 else ""))
for m in ("cnn", "mlp"):
    r = json.load(open(f"{out}/ddp2-{m}/result.json"))
    t = r["timing"]
    print(f"  {m} DDP 2 ranks: final {100*r['final']['test_accuracy']:.2f}%, time to target {r['time_to_target_s']:.1f} s, "
          f"{r['samples_per_s']:.0f} samples/s; communication {1e3*t['comm_s']:.2f} ms/step, exposed {1e3*t['comm_exposed_s']:.3f} ms "
          f"({100*t['comm_exposed_of_comm']:.1f}%), blocked on other ranks {1e3*t['blocked_on_peers_s']:.3f} ms")
one = json.load(open(f"{out}/weak-cnn-1/result.json"))["per_rank"][0]["samples_per_s"]
two = json.load(open(f"{out}/weak-cnn-2/result.json"))["per_rank"]
two_mean = sum(p["samples_per_s"] for p in two) / len(two)
print(f"  CNN weak scaling 1 -> 2 ranks (128 samples per rank per step): {one:.0f} -> {two_mean:.0f} samples/s per rank, efficiency {two_mean/one:.2f}")
PYEOF
