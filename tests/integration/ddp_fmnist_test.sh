# DDP end to end on 2 local ranks: the reference MLP on a 10k-sample subset
# past 80% test accuracy, the run's communication figures, determinism, and a
# model that differs across ranks stopping every rank with an error naming it.
source "$(dirname "$0")/lib.sh"
data=$(prep_fmnist)
cfg="$SOURCE_DIR/examples/fmnist_mlp.toml"
shardrun="$SOURCE_DIR/launch/shardrun"
common=(--set "data.train=$data/train" --set "data.test=$data/test" --set data.train_limit=10000
        --set train.epochs=3 --set target.value=0.80 --set parallel.strategy=ddp)

start=$(date +%s)
"$shardrun" -n 2 -- "$SHARDTRAIN" train "$cfg" "${common[@]}" --run-dir ddp1 | tee ddp1.txt
elapsed=$(( $(date +%s) - start ))
[ "$(json_get ddp1/result.json 'j["reached_target"]')" = True ] || fail "target not reached with 2 ranks"
[ "$(json_get ddp1/result.json 'j["world_size"]')" = 2 ] || fail "world_size != 2"
[ "$(json_get ddp1/result.json 'len(j["per_rank"])')" = 2 ] || fail "per_rank does not list 2 ranks"
json_get ddp1/result.json 'j["timing"]["comm_s"] > 0 and j["timing"]["comm_bytes"] > 7e6' | grep -q True \
  || fail "no communication recorded"
json_get ddp1/result.json '0 <= j["timing"]["comm_exposed_s"] <= j["timing"]["step_s"]' | grep -q True || fail "exposed time"
grep -q '^\[summary\].*communication' ddp1.txt || fail "no communication summary printed"
grep -q '^\[init\] ddp: ' ddp1.txt || fail "no bucket layout printed"
[ "$(grep -c '^\[done\]' ddp1.txt)" = 1 ] || fail "the final line must be printed once (rank 0)"
pass "2-rank DDP reached 80% in ${elapsed}s: $(grep '^\[summary\] communication' ddp1.txt)"

# Same seed, same world size: the same numbers. The second run stops at its
# first evaluation (a lower target; the schedule does not depend on it),
# which must equal the first run's, bit for bit.
"$shardrun" -n 2 -- "$SHARDTRAIN" train "$cfg" "${common[@]}" --set target.value=0.5 --run-dir ddp2 >/dev/null
strip='import json,sys
for l in open(sys.argv[1]):
    r = json.loads(l); print(r["step"], repr(r["train_loss"]), repr(r["test_loss"]), repr(r["test_accuracy"]))'
[ "$(wc -l <ddp2/metrics.jsonl)" -ge 1 ] || fail "the second run evaluated nothing"
diff <("$PY" -c "$strip" ddp1/metrics.jsonl | head -n "$(wc -l <ddp2/metrics.jsonl)") \
     <("$PY" -c "$strip" ddp2/metrics.jsonl) || fail "two 2-rank runs differ"
pass "deterministic with 2 ranks"

# Gradient accumulation (no_sync) and bf16 gradients run and learn.
"$shardrun" -n 2 -- "$SHARDTRAIN" train "$cfg" "${common[@]}" --set train.accumulation_steps=2 \
  --set parallel.ddp.grad_dtype=bf16 --set train.max_steps=150 --set target.value=0.75 --run-dir ddp3 >/dev/null
[ "$(json_get ddp3/result.json 'j["reached_target"]')" = True ] || fail "accumulation + bf16 did not learn"
pass "accumulation_steps=2 with bf16 gradients learns"

# A model that differs across ranks: every rank stops, the error names rank 1.
rc=0
timeout 120 $(mpirun_cmd) -np 1 "$SHARDTRAIN" train "$cfg" "${common[@]}" --run-dir mm0 : \
  -np 1 "$SHARDTRAIN" train "$cfg" "${common[@]}" --set 'model.hidden=[1024, 512]' --run-dir mm0 \
  >mismatch.txt 2>&1 || rc=$?
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || { cat mismatch.txt; fail "mismatched models: exit $rc"; }
grep -q 'the model differs across ranks: rank 0 has 3 blocks, 1863690 parameters.*rank 1 has 3 blocks, 1333770 parameters' mismatch.txt \
  || { cat mismatch.txt; fail "mismatch error does not name the ranks"; }
pass "model mismatch: $(grep -m1 'differs across ranks' mismatch.txt)"
