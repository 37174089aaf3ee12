# FSDP in the trainer on 2 ranks: the reference MLP on a 10k-sample subset with
# parallel.strategy = "fsdp" (FULL_SHARD and SHARD_GRAD_OP) trains to the same
# test loss as DDP (the same gradients, summed in another order: equal to
# f32 rounding; the MPI test train_fsdp_test checks the parameters to 1e-5),
# and prints its per-rank shard sizes; bf16 mixed precision tracks it.
source "$(dirname "$0")/lib.sh"
data=$(prep_fmnist)
cfg="$SOURCE_DIR/examples/fmnist_mlp.toml"
shardrun="$SOURCE_DIR/launch/shardrun"
common=(--set "data.train=$data/train" --set "data.test=$data/test" --set data.train_limit=10000
        --set data.test_limit=2000 --set train.max_steps=30 --set target.value=0)
# The example's [parallel.ddp] is refused by FSDP, which does not read it.
fsdp=(--set parallel.strategy=fsdp --set '~parallel.ddp')

"$shardrun" -n 2 -- "$SHARDTRAIN" train "$cfg" "${common[@]}" --set parallel.strategy=ddp --run-dir ddp >ddp.txt 2>&1 \
  || { cat ddp.txt; fail "ddp run"; }
ref=$(json_get ddp/result.json 'j["final"]["test_loss"]')
for sharding in full grad_op; do
  "$shardrun" -n 2 -- "$SHARDTRAIN" train "$cfg" "${common[@]}" "${fsdp[@]}" \
    --set parallel.fsdp.sharding=$sharding --run-dir "fsdp-$sharding" >"fsdp-$sharding.txt" 2>&1 \
    || { cat "fsdp-$sharding.txt"; fail "fsdp $sharding run"; }
  grep -q '^\[init\] fsdp: .* per rank: parameter + gradient + optimizer shards' "fsdp-$sharding.txt" \
    || { cat "fsdp-$sharding.txt"; fail "no fsdp init line"; }
  got=$(json_get "fsdp-$sharding/result.json" 'j["final"]["test_loss"]')
  "$PY" -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(0 if abs(a - b) <= 1e-4 * abs(b) else 1)" \
    "$got" "$ref" || fail "fsdp $sharding: test_loss $got, ddp $ref"
  pass "fsdp $sharding on 2 ranks: test_loss $got (ddp $ref)"
done

# Mixed precision: bf16 parameters (gathers and GEMM operands) and bf16
# reduce-scatters, f32 master weights: the test loss tracks f32's within 2%,
# and the step sends half the bytes.
"$shardrun" -n 2 -- "$SHARDTRAIN" train "$cfg" "${common[@]}" "${fsdp[@]}" \
  --set parallel.fsdp.param_dtype=bf16 --set parallel.fsdp.reduce_dtype=bf16 --run-dir fsdp-bf16 >fsdp-bf16.txt 2>&1 \
  || { cat fsdp-bf16.txt; fail "fsdp bf16 run"; }
grep -q 'parameters gathered in bf16, gradients reduced in bf16, GEMMs on bf16 operands' fsdp-bf16.txt \
  || { grep fsdp fsdp-bf16.txt; fail "no bf16 init line"; }
got=$(json_get fsdp-bf16/result.json 'j["final"]["test_loss"]')
"$PY" -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(0 if abs(a - b) <= 2e-2 * abs(b) else 1)" \
  "$got" "$ref" || fail "fsdp bf16: test_loss $got, f32 $ref"
ratio=$(grep -o 'measured/theory [0-9.]*' fsdp-bf16.txt | grep -o '[0-9.]*$')
"$PY" -c "import sys; sys.exit(0 if 0.95 <= float(sys.argv[1]) <= 1.05 else 1)" "$ratio" \
  || { grep volume fsdp-bf16.txt; fail "bf16 bytes against theory"; }
pass "fsdp bf16 mixed precision on 2 ranks: test_loss $got (f32 $ref); $(grep -o 'volume per step.*' fsdp-bf16.txt)"
