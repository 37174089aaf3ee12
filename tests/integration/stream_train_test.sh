# Training from the streaming loader on 2 ranks: the reference MLP on the
# whole Fashion-MNIST split read through parallel HDF5 while it trains, with
# the shards staged into a cache directory at the same time; then the same
# results as from memory (same batches, same seed: same loss), the storage
# figures in every step record, and a cold-cache run.
source "$(dirname "$0")/lib.sh"
data=$(prep_fmnist)
cfg="$SOURCE_DIR/examples/fmnist_mlp.toml"
shardrun="$SOURCE_DIR/launch/shardrun"
common=(--set "data.train=$data/train" --set "data.test=$data/test" --set train.max_steps=40
        --set data.test_limit=2000 --set target.value=0 --set parallel.strategy=ddp)

# In memory and streamed (collective, with staging): identical training.
"$shardrun" -n 2 -- "$SHARDTRAIN" train "$cfg" "${common[@]}" --run-dir mem >mem.txt 2>&1 \
  || { cat mem.txt; fail "in-memory run"; }
"$shardrun" -n 2 -- "$SHARDTRAIN" train "$cfg" "${common[@]}" --set data.loader=stream --set data.transfer=collective \
  --set io.stage.enabled=true --set "io.stage.cache_dir=$PWD/cache" --set io.stage.rate_mb_s=200 \
  --run-dir stream >stream.txt 2>&1 || { cat stream.txt; fail "streamed run"; }
m=$(json_get mem/result.json 'j["final"]["test_loss"]')
s=$(json_get stream/result.json 'j["final"]["test_loss"]')
[ "$m" = "$s" ] || fail "streamed data trained differently: test_loss $s, in memory $m"
grep -q '^\[summary\] data (rank 0): read .* collective (HDF5 did: ' stream.txt || { cat stream.txt; fail "no loader summary"; }
grep -q '^\[summary\] stage (node of rank 0): copied .* into .*cache/train' stream.txt \
  || { cat stream.txt; fail "no stage summary"; }
cmp -s "$data/train/part-00000.h5" cache/train/part-00000.h5 || fail "the cache holds no verified copy of shard 0"
"$PY" - stream <<'PYEOF' || fail "step records lack the storage figures"
import json, sys
for rank in (0, 1):
    recs = [json.loads(l) for l in open(f"{sys.argv[1]}/telemetry/rank-{rank:05d}.jsonl")]
    assert len(recs) == 40, len(recs)
    # 64 samples of 784 bytes per rank and step
    assert all(r["io_bytes"] == 64 * 784 and r["io_requests"] >= 1 and r["io_queued"] >= 0 for r in recs), recs[0]
    assert sum(r["io_read_s"] for r in recs) > 0
PYEOF
pass "streamed (collective, staged) = in memory: test_loss $s; records carry io_bytes/io_requests/io_queued"

# Independent transfers, shard order, cold cache: trains, and the pages are gone after.
"$shardrun" -n 2 -- "$SHARDTRAIN" train "$cfg" "${common[@]}" --set data.loader=stream \
  --set data.transfer=independent --set data.order=shard --set data.shuffle_window=4096 \
  --set data.cold_cache=true --run-dir cold >cold.txt 2>&1 || { cat cold.txt; fail "cold run"; }
grep -q '^\[summary\] data (rank 0): read .* independent transfer' cold.txt || { cat cold.txt; fail "cold summary"; }
pass "independent, shard order, cold cache: trained $(json_get cold/result.json 'j["steps"]') steps"
