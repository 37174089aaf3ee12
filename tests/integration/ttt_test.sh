# `shardtrain ttt`: 3 seeds of the MLP on a 6000-sample subset to a low
# target, each run's time to target and the MLPerf-style score (fastest
# and slowest dropped), the convergence plot; a rerun keeps the runs; bad
# arguments are refused.
source "$(dirname "$0")/lib.sh"
data=$(prep_fmnist)
args=(--seeds 3 --out ttt --set "data.train=$data/train" --set "data.test=$data/test" --set data.train_limit=6000
      --set target.value=0.6 --set train.epochs=3)
"$SHARDTRAIN" ttt "$SOURCE_DIR/examples/fmnist_mlp.toml" "${args[@]}" >out.txt 2>&1 || { cat out.txt; fail "ttt failed"; }
grep -q "^| 1 | [0-9.]* | " ttt/ttt.md && grep -q "^| 3 | [0-9.]* | " ttt/ttt.md || { cat ttt/ttt.md; fail "a row per seed"; }
[ "$(grep -c 'dropped (fastest)' ttt/ttt.md)" -eq 1 ] && [ "$(grep -c 'dropped (slowest)' ttt/ttt.md)" -eq 1 ] ||
  { cat ttt/ttt.md; fail "the fastest and the slowest dropped"; }
"$PY" - ttt/ttt.json <<'PY' || fail "the score is not the middle run's time"
import json, sys
j = json.load(open(sys.argv[1]))
t = sorted(r["time_to_target_s"] for r in j["runs"])
assert all(r["reached_target"] for r in j["runs"]) and [r["seed"] for r in j["runs"]] == [1, 2, 3], j
assert abs(j["score_s"] - t[1]) < 1e-9, (j["score_s"], t)
PY
grep -q "^Score (the mean of the 1 runs left): \*\*" ttt/ttt.md || fail "no score line"
[ -s ttt/convergence.png ] || fail "no convergence plot"
pass "3 seeds, each to its target; the score is the middle run"

"$SHARDTRAIN" ttt "$SOURCE_DIR/examples/fmnist_mlp.toml" "${args[@]}" >out.txt 2>&1 || fail "the rerun failed"
[ "$(grep -c 'kept from' out.txt)" -eq 3 ] || { cat out.txt; fail "a rerun trained again"; }
pass "a rerun keeps the 3 complete runs"

rc=0
"$SHARDTRAIN" ttt "$SOURCE_DIR/examples/fmnist_mlp.toml" --seeds 2 >out.txt 2>&1 || rc=$?
[ "$rc" -ne 0 ] && grep -q -- "--seeds: Value 2 not in range 3" out.txt || { cat out.txt; fail "--seeds 2 ran"; }
pass "fewer than 3 seeds refused"
