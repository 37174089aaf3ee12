# The peer cache tier (io.peer_cache.dir) across 4 emulated nodes, each with
# its own node-local directory (emunodes run --node-local) and a 1 Gbit/s
# link: the stream loader's peer-cache tests (the same batches as the
# in-memory data set, every sample once per epoch, the shared store's shards
# emptied once the loader is up, copied once in all; copies kept on a second
# start, a torn one copied again), then a training run whose summary reports
# the tiers: the shared store read once, 3/4 of the samples from other
# nodes. Skips (77) where namespaces cannot be made.
source "$(dirname "$0")/lib.sh"
require_emunodes
bin=$(dirname "$SHARDTRAIN")
[ -x "$bin/io_stream_loader_test" ] || fail "$bin/io_stream_loader_test not built"

P="st$$p"
local_dir="$WORK/node-local"
"$EMU" gc
trap '"$EMU" down --prefix "$P" >/dev/null 2>&1 || true' EXIT
trap 'exit 130' INT TERM
"$EMU" up 4 --prefix "$P" --owner-pid $$ --rate 1gbit

export PEER_CACHE_NODES=4 PEER_CACHE_DIR="$local_dir"
timeout 240 "$EMU" run --prefix "$P" -n 4 --per-node 1 --node-local "$local_dir" \
  --mpirun-args "-x PEER_CACHE_NODES -x PEER_CACHE_DIR" -- "$bin/io_stream_loader_test" --gtest_filter='PeerCache*' --gtest_color=no \
  >gtest.txt 2>&1 || { cat gtest.txt; fail "peer-cache tests across 4 emulated nodes"; }
grep -q '\[  PASSED  \] 4 tests' gtest.txt || { cat gtest.txt; fail "not all 4 peer-cache tests passed"; }
pass "peer-cache tests on 4 emulated nodes: $(grep '\[  PASSED  \]' gtest.txt)"
unset PEER_CACHE_NODES PEER_CACHE_DIR

# 8 shards, 2 per node; 4 ranks train 20 steps of an emulated accelerator
# (every setting on the command line).
: > empty.toml
"$SHARDTRAIN" prep synthetic --out data/train --samples 4096 --sample-bytes 16K --shards 8 >/dev/null
"$SHARDTRAIN" prep synthetic --out data/test --samples 16 --sample-bytes 16K --split test >/dev/null
timeout 240 "$EMU" run --prefix "$P" -n 4 --per-node 1 --node-local "$local_dir" -- "$SHARDTRAIN" train \
  --set "data.train=$WORK/data/train" --set "data.test=$WORK/data/test" --set data.loader=stream \
  --set "io.peer_cache.dir=$local_dir/cache" --set model.kind=mlp --set 'model.hidden=[8]' \
  --set runtime.device=emulated --set runtime.emulate.sample_ms=0.2 --set train.global_batch_size=128 \
  --set train.max_steps=20 --set parallel.strategy=ddp --run-dir "$WORK/run" "$WORK/empty.toml" >train.txt 2>&1 ||
  { cat train.txt; fail "training with the peer cache across emulated nodes"; }
grep "storage tiers" train.txt || { cat train.txt; fail "no tiers line"; }
"$PY" - <<'PY' || fail "the tiers"
import json, os
t = json.load(open("run/result.json"))["storage"]["peer_cache"]
store = sum(os.path.getsize(f"data/train/{f}") for f in os.listdir("data/train") if f.endswith(".h5"))
assert t["shared_store_bytes"] == store, (t, store)  # once per job, not once per node
share = t["peer_bytes"] / (t["peer_bytes"] + t["node_cache_bytes"])
assert 0.6 < share < 0.9, share  # 3/4 of a node's samples are in the other nodes' shards
print(f"shared store {store} bytes, copied once; {100 * share:.1f}% of samples from other nodes")
PY
for i in 0 1 2 3; do
  n=$(ls "$local_dir.nodes/${P}$i/cache" 2>/dev/null | grep -c '\.h5$' || true)
  [ "$n" -eq 2 ] || fail "node $i holds $n shards in its own directory, expected 2"
done
pass "training: the shared store copied once, each node holding its 2 of the 8 shards"

# io.stage into node-local directories across the nodes: every node copies
# every shard, and the loader's collective reopening of the copies (the same
# path, another file on each node) completes (Open MPI's default
# shared-file-pointer component hung there: runtime/comm/transport/mpi_env.cpp).
timeout 120 "$EMU" run --prefix "$P" -n 4 --per-node 1 --node-local "$local_dir" -- "$SHARDTRAIN" train \
  --set "data.train=$WORK/data/train" --set "data.test=$WORK/data/test" --set data.loader=stream \
  --set io.stage.enabled=true --set "io.stage.cache_dir=$local_dir/stage" --set model.kind=mlp \
  --set 'model.hidden=[8]' --set runtime.device=emulated --set runtime.emulate.sample_ms=0.2 \
  --set train.global_batch_size=128 --set train.epochs=3 --set parallel.strategy=ddp --run-dir "$WORK/run-stage" \
  "$WORK/empty.toml" >stage.txt 2>&1 || { cat stage.txt; fail "io.stage into node-local directories"; }
for i in 0 1 2 3; do
  n=$(ls "$local_dir.nodes/${P}$i/stage/train" 2>/dev/null | grep -c '\.h5$' || true)
  [ "$n" -eq 8 ] || fail "node $i staged $n shards into its own directory, expected 8"
done
pass "io.stage on 4 nodes: every node staged all 8 shards; $(grep -o 'completed: [0-9]* steps' stage.txt)"
