# The small Llama (examples/llama_kjv.toml, on Genesis) under every strategy
# (none, ddp, zero1, fsdp full / grad_op / hybrid) and every activation
# checkpointing mode (none, selective, full): each mode trains to the same
# final losses as `none`, bit for bit (recomputing runs the same kernels on
# the same values), and each run's measured peak tensor bytes are within 3%
# of what `shardtrain plan` predicted for it. Then bf16 activations against
# f32 over the same steps: the stated tolerance (docs/config.md).
source "$(dirname "$0")/lib.sh"
command -v bible >/dev/null || { echo "skip: bible (package bible-kjv) is not installed"; exit 77; }
bible "Gen1:1-Gen50:26" >genesis.txt
"$SHARDTRAIN" prep text --input genesis.txt --out kjv --block-size 32 >prep.txt || { cat prep.txt; fail "prep text"; }
cfg="$SOURCE_DIR/examples/llama_kjv.toml"
shardrun="$SOURCE_DIR/launch/shardrun"
common=(--set data.train=kjv/train --set data.test=kjv/test --set data.test_limit=256 --set train.max_steps=6
        --set target.value=0 --set schedule.warmup_steps=2 --set train.eval_batch_size=64)
fsdp=(--set parallel.strategy=fsdp)

run() {  # name ranks [--set ...]: train; print "final test_loss train_loss"; check the plan within 3%
  local name=$1 ranks=$2
  shift 2
  "$shardrun" -n "$ranks" -- "$SHARDTRAIN" train "$cfg" "${common[@]}" "$@" --run-dir "$name" >"$name.txt" 2>&1 \
    || { tail -20 "$name.txt"; fail "$name: training"; }
  "$SHARDTRAIN" plan "$cfg" --ranks "$ranks" --json "${common[@]}" "$@" >"$name-plan.json" || fail "$name: plan"
  "$PY" - "$name" <<'PY' || fail "$name: measured peak outside 3% of the plan"
import json, sys
name = sys.argv[1]
r = json.load(open(f"{name}/result.json"))
mine = r["memory"]["plan"]
cli = {p["strategy"]: p for p in json.load(open(f"{name}-plan.json"))}[mine["strategy"]]
assert cli["peak_bytes"] == mine["peak_bytes"], (cli["peak_bytes"], mine["peak_bytes"])
ratio = r["memory"]["peak_bytes"] / mine["peak_bytes"]
last = [json.loads(line) for line in open(f"{name}/metrics.jsonl")][-1]
print(f"{last['test_loss']!r} {last['train_loss']!r} {ratio:.4f}")
sys.exit(0 if 0.97 <= ratio <= 1.03 else 1)
PY
}

strategies=(
  "none 1 --set parallel.strategy=none"
  "ddp 2 --set parallel.strategy=ddp"
  "zero1 2 --set parallel.strategy=zero1"
  "full 2 ${fsdp[*]}"
  "grad_op 2 ${fsdp[*]} --set parallel.fsdp.sharding=grad_op"
  "hybrid 4 ${fsdp[*]} --set parallel.fsdp.sharding=hybrid --set comm.ranks_per_node=2"
)
for s in "${strategies[@]}"; do
  read -r -a args <<<"$s"
  strategy=${args[0]} ranks=${args[1]}
  base=""
  for mode in none selective full; do
    out=$(run "$strategy-$mode" "$ranks" "${args[@]:2}" --set parallel.activation_checkpointing=$mode) || exit 1
    read -r test_loss train_loss ratio <<<"$out"
    if [ "$mode" = none ]; then
      base="$test_loss $train_loss"
    else
      [ "$test_loss $train_loss" = "$base" ] \
        || fail "$strategy, $mode: losses $test_loss $train_loss, without checkpointing $base"
    fi
    pass "$strategy on $ranks rank(s), checkpointing $mode: test_loss $test_loss train_loss $train_loss; measured/planned peak $ratio"
  done
done

# Every second Block, with gradient accumulation (no_sync micro-batches).
out=$(run every2 2 --set parallel.strategy=ddp --set parallel.activation_checkpointing=full \
  --set parallel.checkpoint_every=2 --set train.accumulation_steps=2) || exit 1
out0=$(run every2-none 2 --set parallel.strategy=ddp --set train.accumulation_steps=2) || exit 1
[ "${out% *}" = "${out0% *}" ] || fail "checkpoint_every = 2 with accumulation: $out, without checkpointing $out0"
pass "full on every second Block, 2 micro-batches: the losses of none ($out)"

# Tied embeddings (the head's weight is the token embedding): DDP with full
# recomputation gives the losses of none; FSDP refuses it.
out=$(run tied-full 2 --set parallel.strategy=ddp --set model.tie_embeddings=true \
  --set parallel.activation_checkpointing=full) || exit 1
out0=$(run tied-none 2 --set parallel.strategy=ddp --set model.tie_embeddings=true) || exit 1
[ "${out% *}" = "${out0% *}" ] || fail "tied embeddings, full: $out, without checkpointing $out0"
grep -q "total 402048 parameters" tied-none.txt || { grep total tied-none.txt; fail "tied: not one [256, 128] weight fewer"; }
pass "tied embeddings (434816 - 256 x 128 = 402048 parameters), full: the losses of none ($out)"
expect_error 'model.tie_embeddings = true needs' "$SHARDTRAIN" plan "$cfg" --ranks 2 "${common[@]}" "${fsdp[@]}" \
  --set model.tie_embeddings=true

# bf16 activations: the same steps within 2% of f32's final test loss.
bf=$(run bf16 2 --set parallel.strategy=ddp --set runtime.precision=bf16 --set train.max_steps=40) || exit 1
f32=$(run f32 2 --set parallel.strategy=ddp --set train.max_steps=40) || exit 1
"$PY" -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(0 if abs(a - b) <= 0.02 * b else 1)" \
  "${bf%% *}" "${f32%% *}" || fail "bf16 activations: test_loss ${bf%% *}, f32 ${f32%% *}"
pass "40 steps, bf16 activations: test_loss ${bf%% *}, f32 ${f32%% *}"

expect_error 'needs model.kind = "llama"' "$SHARDTRAIN" plan "$SOURCE_DIR/examples/gpt_kjv.toml" --ranks 1 \
  --sample-shape 32 --classes 256 --set parallel.activation_checkpointing=full
