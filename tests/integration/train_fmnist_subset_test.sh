# End to end: prepare Fashion-MNIST, train the reference MLP on a 10k-sample
# subset past 80% test accuracy in well under a minute, and check every file
# of the run directory, determinism, and that max_steps runs still evaluate.
source "$(dirname "$0")/lib.sh"
data=$(prep_fmnist)
common=(--set "data.train=$data/train" --set "data.test=$data/test" --set data.train_limit=10000
        --set train.epochs=3 --set target.value=0.80)

start=$(date +%s)
"$SHARDTRAIN" train "$SOURCE_DIR/examples/fmnist_mlp.toml" "${common[@]}" --run-dir run1 | tee train1.txt
elapsed=$(( $(date +%s) - start ))
[ "$elapsed" -lt 60 ] || fail "subset training took ${elapsed}s"
pass "trained in ${elapsed}s"

# result.json
for key in reached_target target final time_to_target_s train_time_s steps epochs world_size; do
  json_get run1/result.json "'$key' in j" | grep -q True || fail "result.json lacks $key"
done
[ "$(json_get run1/result.json 'j["reached_target"]')" = True ] || fail "target 0.80 not reached"
acc=$(json_get run1/result.json 'j["final"]["test_accuracy"]')
"$PY" -c "import sys; sys.exit(0 if $acc > 0.80 else 1)" || fail "final accuracy $acc <= 0.80"
[ "$(json_get run1/result.json 'j["world_size"]')" = 1 ] || fail "world_size"
pass "result.json: reached target, final test_accuracy $acc"

# metrics.jsonl: one object per evaluation with the documented keys
[ -s run1/metrics.jsonl ] || fail "metrics.jsonl is empty"
"$PY" - run1/metrics.jsonl <<'PYEOF' || fail "metrics.jsonl records"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert rows, "no rows"
for r in rows:
    for k in ("epoch", "step", "train_loss", "test_loss", "test_accuracy", "samples_per_s"):
        assert k in r, k
assert all(a["step"] < b["step"] for a, b in zip(rows, rows[1:]))
PYEOF
grep -q '^\[done\]' run1/log.txt || fail "log.txt lacks the final line"
grep -q '^\[train\].*samples/s.*ETA' train1.txt || fail "no progress line with samples/s and ETA"
"$SHARDTRAIN" config run1/config.toml >/dev/null || fail "config.toml in the run dir does not load"
grep -q 'train_limit = 10000' run1/config.toml || fail "config.toml is not the resolved config"
pass "run directory complete"

# Same seed, same result, bit for bit (every loss and accuracy digit).
"$SHARDTRAIN" train "$SOURCE_DIR/examples/fmnist_mlp.toml" "${common[@]}" --run-dir run2 >/dev/null
strip='import json,sys
for l in open(sys.argv[1]):
    r = json.loads(l); print(r["step"], repr(r["train_loss"]), repr(r["test_loss"]), repr(r["test_accuracy"]))'
diff <("$PY" -c "$strip" run1/metrics.jsonl) <("$PY" -c "$strip" run2/metrics.jsonl) || fail "two runs with one seed differ"
pass "deterministic: identical metrics from two runs"

# Another seed gives another result.
"$SHARDTRAIN" train "$SOURCE_DIR/examples/fmnist_mlp.toml" "${common[@]}" --set train.seed=2 --set train.max_steps=40 --run-dir run3 >/dev/null
"$SHARDTRAIN" train "$SOURCE_DIR/examples/fmnist_mlp.toml" "${common[@]}" --set train.max_steps=40 --run-dir run4 >/dev/null
[ "$(json_get run3/result.json 'j["final"]["test_loss"]')" != "$(json_get run4/result.json 'j["final"]["test_loss"]')" ] || fail "seed has no effect"

# max_steps: stops there and still evaluates `final`.
[ "$(json_get run4/result.json 'j["steps"]')" = 40 ] || fail "max_steps not honoured"
[ "$(tail -n1 run4/metrics.jsonl | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["step"])')" = 40 ] || fail "no evaluation at the last step"
json_get run4/result.json 'j["final"]["test_accuracy"] > 0' | grep -q True || fail "final not evaluated"
pass "max_steps run stops at 40 and evaluates"

# A diverging run stops with a clear line, status "diverged" and exit status 1.
rc=0
"$SHARDTRAIN" train "$SOURCE_DIR/examples/fmnist_mlp.toml" "${common[@]}" --set optim.lr=1e4 \
  --set schedule.warmup_steps=0 --set train.max_steps=100 --run-dir diverged >diverged.txt || rc=$?
[ "$rc" -eq 1 ] || fail "diverged run exited $rc"
grep -q 'training diverged at step' diverged.txt || fail "no divergence message"
[ "$(json_get diverged/result.json 'j["status"]')" = diverged ] || fail "status not diverged"
[ "$(json_get diverged/result.json 'j["final"]')" = None ] || fail "a diverged run reports final metrics"
pass "divergence detected"

# A run directory that holds a run is not overwritten by accident.
expect_error "already holds a run" "$SHARDTRAIN" train "$SOURCE_DIR/examples/fmnist_mlp.toml" "${common[@]}" --run-dir run4
"$SHARDTRAIN" train "$SOURCE_DIR/examples/fmnist_mlp.toml" "${common[@]}" --set train.max_steps=5 --run-dir run4 --overwrite >/dev/null
[ "$(json_get run4/result.json 'j["steps"]')" = 5 ] || fail "--overwrite did not rerun"

# The CNN trains too (a few steps).
"$SHARDTRAIN" train "$SOURCE_DIR/examples/fmnist_cnn.toml" "${common[@]}" --set train.max_steps=5 --set data.test_limit=500 --run-dir cnn >/dev/null
[ "$(json_get cnn/result.json 'j["steps"]')" = 5 ] || fail "cnn run"
pass "cnn runs"
