# The byte-level GPT end to end on a small corpus (Genesis, from bible-kjv):
# `prep text --input`, 40 steps on 1 rank and on 2 ranks (DDP, FSDP). The
# per-token test loss falls well below ln(256) = 5.55 (a uniform guess); DDP
# and FSDP train to the same loss (equal gradients, summed in another order),
# and 1 rank to nearly the same; streamed from the shards, exactly the same.
source "$(dirname "$0")/lib.sh"
command -v bible >/dev/null || { echo "skip: bible (package bible-kjv) is not installed"; exit 77; }
bible "Gen1:1-Gen50:26" >genesis.txt
"$SHARDTRAIN" prep text --input genesis.txt --out kjv --block-size 64 >prep.txt || { cat prep.txt; fail "prep text"; }
grep -q '^\[prep\] text: .* train + .* test samples of 64 tokens' prep.txt || { cat prep.txt; fail "prep summary"; }
[ "$(json_get kjv/train/manifest.json 'j["num_classes"]')" = 256 ] || fail "num_classes != 256"
pass "$(tail -1 prep.txt)"

cfg="$SOURCE_DIR/examples/gpt_kjv.toml"
shardrun="$SOURCE_DIR/launch/shardrun"
common=(--set data.train=kjv/train --set data.test=kjv/test --set train.max_steps=40 --set target.value=0
        --set schedule.warmup_steps=10)
relclose() {  # relclose A B TOL: |a - b| <= tol |b|
  "$PY" -c "import sys; a, b, t = map(float, sys.argv[1:]); sys.exit(0 if abs(a - b) <= t * abs(b) else 1)" "$@"
}

"$SHARDTRAIN" train "$cfg" "${common[@]}" --set parallel.strategy=none --run-dir one >one.txt 2>&1 \
  || { cat one.txt; fail "1-rank run"; }
one=$(json_get one/result.json 'j["final"]["test_loss"]')
json_get one/result.json 'j["final"]["test_loss"] < 3.5 and j["final"]["test_accuracy"] > 0.2' | grep -q True \
  || { cat one.txt; fail "1 rank did not learn: final $(json_get one/result.json 'j["final"]')"; }
grep -q '^\[init\] data: .* sample shape \[65\] uint8, 256 classes' one.txt || { cat one.txt; fail "data line"; }
pass "1 rank, 40 steps: per-token test_loss $one (ln 256 = 5.55), $(grep -m1 '^\[done\]' one.txt | grep -o 'final test_accuracy [0-9.]*%')"

"$shardrun" -n 2 -- "$SHARDTRAIN" train "$cfg" "${common[@]}" --set parallel.strategy=ddp --run-dir ddp >ddp.txt 2>&1 \
  || { cat ddp.txt; fail "ddp run"; }
ddp=$(json_get ddp/result.json 'j["final"]["test_loss"]')
"$shardrun" -n 2 -- "$SHARDTRAIN" train "$cfg" "${common[@]}" --set parallel.strategy=fsdp --run-dir fsdp >fsdp.txt 2>&1 \
  || { cat fsdp.txt; fail "fsdp run"; }
fsdp=$(json_get fsdp/result.json 'j["final"]["test_loss"]')
relclose "$fsdp" "$ddp" 1e-4 || fail "fsdp test_loss $fsdp, ddp $ddp"
relclose "$ddp" "$one" 1e-3 || fail "2-rank ddp test_loss $ddp, 1 rank $one"
pass "2 ranks: ddp test_loss $ddp, fsdp $fsdp (1 rank $one)"

# Streamed from the shards (parallel HDF5, raw token bytes): the same
# batches, so the same training as from memory.
"$shardrun" -n 2 -- "$SHARDTRAIN" train "$cfg" "${common[@]}" --set parallel.strategy=ddp --set data.loader=stream \
  --run-dir stream >stream.txt 2>&1 || { cat stream.txt; fail "streamed run"; }
stream=$(json_get stream/result.json 'j["final"]["test_loss"]')
[ "$stream" = "$ddp" ] || fail "streamed GPT trained differently: test_loss $stream, from memory $ddp"
grep -q '^\[summary\] data (rank 0): read ' stream.txt || { cat stream.txt; fail "no loader summary"; }
pass "2 ranks, data.loader = stream: test_loss $stream, the same as from memory"
expect_error 'model.kind = "gpt" needs language-model data' \
  "$SHARDTRAIN" train "$cfg" --set data.train="$(prep_fmnist)/train" --set data.test="$(prep_fmnist)/test"
