# `shardtrain bench comm` under shardrun on 2 ranks: every op at two sizes
# in latency mode, with one busy GEMM thread per rank, one operation per
# round (so that, of the 16 buffer sets a small size cycles through, only
# the first 6 run after the warm-up's refill: the final check must look at
# those alone); every row is checked and says the load it ran under; a bad
# option is one clear error.
source "$(dirname "$0")/lib.sh"
shardrun="$SOURCE_DIR/launch/shardrun"

"$shardrun" -n 2 -- "$SHARDTRAIN" bench comm --mode latency --ops allreduce,reduce_scatter,allgather,broadcast \
  --sizes 16K,64K --iters 1 --rounds 1 --busy-threads 1 --json rows.json >out.txt 2>&1 ||
  { cat out.txt; fail "bench comm exited non-zero"; }
grep -q 'busy threads per rank 1' out.txt || { cat out.txt; fail "the header names the busy threads"; }
"$PY" - rows.json <<'PY' || fail "rows.json"
import json, sys
rows = json.load(open(sys.argv[1]))
assert len(rows) == 4 * 2 * 2, len(rows)  # ops x sizes x (shardtrain, mpi)
for r in rows:
    assert r["ok"] and r["busy_threads"] == 1 and r["ranks"] == 2 and r["time_us"] > 0, r
PY
pass "16 rows, all ok, with 1 busy thread per rank"

expect_error "busy_threads >= 0" "$SHARDTRAIN" bench comm --busy-threads -1

# --group: 4 ranks as 2 emulated nodes of 2; every node's pair (node) or
# the pairs across the nodes (cross) run at once, each checked, with the
# MPI library's side on the same groups (polled, as the runtime's groups).
for group in node cross; do
  "$shardrun" -n 4 -- "$SHARDTRAIN" bench comm --mode latency --ops allreduce,allgather --sizes 64K \
    --iters 1 --rounds 1 --ranks-per-node 2 --group "$group" --json "rows-$group.json" >"out-$group.txt" 2>&1 ||
    { cat "out-$group.txt"; fail "bench comm --group $group exited non-zero"; }
  grep -q "2 ranks in each $group group, all 2 groups at once" "out-$group.txt" ||
    { cat "out-$group.txt"; fail "the header names the groups"; }
  "$PY" - "rows-$group.json" "$group" <<'PY' || fail "rows-$group.json"
import json, sys
rows = json.load(open(sys.argv[1]))
assert len(rows) == 2 * 2, len(rows)
for r in rows:
    assert r["ok"] and r["ranks"] == 2 and r["group"] == sys.argv[2] and r["time_us"] > 0, r
PY
done
pass "--group node and cross: 2 groups of 2 at once, every row ok"

expect_error "--group must be world, node or cross" "$SHARDTRAIN" bench comm --group rack
