# DDP and FSDP across 2 emulated nodes (network namespaces on a bridge,
# launch/emunodes): the DDP test suite (same parameters as one rank, no_sync,
# bf16, model mismatch, distributed evaluation) with 2 ranks per node, so
# gradients cross the emulated network and the hierarchical all-reduce runs;
# the collectives' suite with one rank per node (the one-shot's messages
# and the rings' chunks at 64 KiB); the FSDP suite on 2 nodes x 2 ranks (HYBRID: shards within each node,
# gradient shards all-reduced across them); then short training runs of the
# reference MLP across the nodes, DDP and HYBRID, which must agree.
# Skips (77) where namespaces cannot be made.
source "$(dirname "$0")/lib.sh"
require_emunodes
bin=$(dirname "$SHARDTRAIN")
[ -x "$bin/train_ddp_test" ] || fail "$bin/train_ddp_test not built"

P="st$$d"
"$EMU" gc
trap '"$EMU" down --prefix "$P" >/dev/null 2>&1 || true' EXIT
trap 'exit 130' INT TERM
"$EMU" up 2 --prefix "$P" --owner-pid $$

for per_node in 1 2; do
  n=$((2 * per_node))
  timeout 240 "$EMU" run --prefix "$P" -n "$n" --per-node "$per_node" -- "$bin/train_ddp_test" >gtest-$n.txt 2>&1 ||
    { cat gtest-$n.txt; fail "DDP tests across 2 emulated nodes, $n ranks"; }
  grep -q '\[  PASSED  \]' gtest-$n.txt || { cat gtest-$n.txt; fail "no PASSED line"; }
  pass "DDP test suite: $n ranks on 2 emulated nodes: $(grep '\[  PASSED  \]' gtest-$n.txt)"
done

# The collectives' own suite with one rank per node: no two ranks share a
# node, so the one-shot all-reduce's messages and the rings' chunks are of
# the TCP transport's eager size (64 KiB) instead of 4 KiB and 256 KiB.
[ -x "$bin/comm_collectives_test" ] || fail "$bin/comm_collectives_test not built"
timeout 180 "$EMU" run --prefix "$P" -n 2 --per-node 1 -- "$bin/comm_collectives_test" >collectives-2.txt 2>&1 ||
  { cat collectives-2.txt; fail "collective tests across 2 emulated nodes, 2 ranks"; }
grep -q '\[  PASSED  \]' collectives-2.txt || { cat collectives-2.txt; fail "no PASSED line"; }
pass "collective test suite: 2 ranks on 2 emulated nodes: $(grep '\[  PASSED  \]' collectives-2.txt)"

timeout 240 "$EMU" run --prefix "$P" -n 4 --per-node 2 -- "$bin/train_fsdp_test" >fsdp-4.txt 2>&1 ||
  { cat fsdp-4.txt; fail "FSDP tests across 2 emulated nodes, 4 ranks"; }
grep -q '\[  PASSED  \]' fsdp-4.txt || { cat fsdp-4.txt; fail "no PASSED line"; }
pass "FSDP test suite: 4 ranks on 2 emulated nodes: $(grep '\[  PASSED  \]' fsdp-4.txt); $(grep -m1 'HYBRID vs DDP' fsdp-4.txt)"

# The CLI across the nodes; the data is read from the shared file system.
data=$(prep_fmnist)
before=$(cat "/sys/class/net/$P-v1/statistics/tx_bytes")
timeout 240 "$EMU" run --prefix "$P" -n 4 --per-node 2 -- "$SHARDTRAIN" train "$SOURCE_DIR/examples/fmnist_mlp.toml" \
  --set "data.train=$data/train" --set "data.test=$data/test" --set data.train_limit=4000 \
  --set train.max_steps=30 --set parallel.strategy=ddp --run-dir "$WORK/run" >train.txt 2>&1 ||
  { cat train.txt; fail "training across emulated nodes"; }
crossed=$(( $(cat "/sys/class/net/$P-v1/statistics/tx_bytes") - before ))
[ "$(json_get run/result.json 'j["world_size"]')" = 4 ] || fail "world_size"
[ "$(json_get run/result.json 'j["steps"]')" = 30 ] || fail "steps"
# 30 steps of 7.1 MiB gradients: the cross-node half of the traffic is MBs.
[ "$crossed" -gt $((30 << 20)) ] || fail "only $crossed bytes crossed the emulated network"
pass "4 ranks on 2 emulated nodes trained 30 steps; $((crossed >> 20)) MiB crossed node 1's link"

# HYBRID across the same nodes: the node groups are the emulated nodes
# (comm.ranks_per_node = 2, ranks placed 2 per node in order).
before=$(cat "/sys/class/net/$P-v1/statistics/tx_bytes")
timeout 240 "$EMU" run --prefix "$P" -n 4 --per-node 2 -- "$SHARDTRAIN" train "$SOURCE_DIR/examples/fmnist_mlp.toml" \
  --set "data.train=$data/train" --set "data.test=$data/test" --set data.train_limit=4000 \
  --set train.max_steps=30 --set parallel.strategy=fsdp --set '~parallel.ddp' --set parallel.fsdp.sharding=hybrid \
  --set comm.ranks_per_node=2 --run-dir "$WORK/run-hybrid" >hybrid.txt 2>&1 ||
  { cat hybrid.txt; fail "HYBRID training across emulated nodes"; }
crossed=$(( $(cat "/sys/class/net/$P-v1/statistics/tx_bytes") - before ))
grep -q 'HYBRID (FULL_SHARD over the 2 ranks of each node, replicated over 2 node(s))' hybrid.txt ||
  { grep fsdp hybrid.txt; fail "HYBRID layout line"; }
ddp_loss=$(json_get run/result.json 'j["final"]["test_loss"]')
hybrid_loss=$(json_get run-hybrid/result.json 'j["final"]["test_loss"]')
"$PY" -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(0 if abs(a - b) <= 1e-4 * a else 1)" \
  "$ddp_loss" "$hybrid_loss" || fail "HYBRID test loss $hybrid_loss, DDP $ddp_loss"
pass "HYBRID on 2 emulated nodes x 2 ranks trained 30 steps: test loss $hybrid_loss (DDP $ddp_loss); $((crossed >> 20)) MiB crossed node 1's link; $(grep -o 'communication volume.*' hybrid.txt)"
