# `shardtrain plan` against the allocator: for DDP and each FSDP strategy, on
# the MLP (wide enough that parameters, their shards and the gather buffers
# dominate), the CNN (activations of the evaluation batch dominate) and the
# byte-level GPT, a short run's measured peak tensor bytes per rank
# (result.json "memory") are within 10% of what `plan --json` predicted for
# that strategy, and the trainer's own prediction is the same number. FULL_SHARD's
# parameter + gradient + optimizer bytes at 4 ranks are at most 0.3x DDP's.
source "$(dirname "$0")/lib.sh"
data=$(prep_fmnist)
shardrun="$SOURCE_DIR/launch/shardrun"
command -v bible >/dev/null || { echo "skip: bible (package bible-kjv) is not installed"; exit 77; }
bible "Gen1:1-Gen50:26" >genesis.txt
"$SHARDTRAIN" prep text --input genesis.txt --out kjv --block-size 32 >prep.txt || { cat prep.txt; fail "prep text"; }

check() {  # name ranks config [--set ...]: train, then compare with the plan
  local name=$1 ranks=$2 cfg="$SOURCE_DIR/examples/$3"
  shift 3
  "$shardrun" -n "$ranks" -- "$SHARDTRAIN" train "$cfg" "$@" --set train.max_steps=6 --set target.value=0 \
    --run-dir "$name" >"$name.txt" 2>&1 || { tail -20 "$name.txt"; fail "$name: training"; }
  "$SHARDTRAIN" plan "$cfg" --ranks "$ranks" --json "$@" >"$name-plan.json" || fail "$name: plan"
  "$PY" - "$name" <<'PY' || fail "$name: measured peak outside 10% of the plan"
import json, sys
name = sys.argv[1]
r = json.load(open(f"{name}/result.json"))["memory"]
plans = {p["strategy"]: p for p in json.load(open(f"{name}-plan.json"))}
mine = r["plan"]
cli = plans[mine["strategy"]]
assert cli["peak_bytes"] == mine["peak_bytes"], (cli["peak_bytes"], mine["peak_bytes"])
ratio = r["peak_bytes"] / mine["peak_bytes"]
print(f"ok:   {name}: {mine['strategy']} on {mine['ranks']} ranks: measured peak {r['peak_bytes'] / 2**20:.2f} MiB, "
      f"predicted {mine['peak_bytes'] / 2**20:.2f} MiB (ratio {ratio:.4f})")
sys.exit(0 if 0.9 <= ratio <= 1.1 else 1)
PY
}

wide=(--set "data.train=$data/train" --set "data.test=$data/test" --set data.train_limit=4096 --set data.test_limit=512
      --set model.hidden=[1024,1024] --set train.eval_batch_size=64)
# The examples' [parallel.ddp] is refused by FSDP, which does not read it.
fsdp=(--set parallel.strategy=fsdp --set '~parallel.ddp')
check mlp-ddp 2 fmnist_mlp.toml "${wide[@]}" --set parallel.strategy=ddp
check mlp-full 4 fmnist_mlp.toml "${wide[@]}" "${fsdp[@]}"
check mlp-grad-op 3 fmnist_mlp.toml "${wide[@]}" "${fsdp[@]}" --set parallel.fsdp.sharding=grad_op
check mlp-hybrid 4 fmnist_mlp.toml "${wide[@]}" "${fsdp[@]}" --set parallel.fsdp.sharding=hybrid \
  --set comm.ranks_per_node=2 --set train.accumulation_steps=2
# HYBRID over groups of 2 on nodes of 1: each group spans 2 nodes, its
# shard half the model, replicated over 2 groups.
check mlp-hybrid-groups 4 fmnist_mlp.toml "${wide[@]}" "${fsdp[@]}" --set parallel.fsdp.sharding=hybrid \
  --set comm.ranks_per_node=1 --set parallel.fsdp.shard_group_size=2
grep -q 'HYBRID (FULL_SHARD over the 2 ranks of each group, replicated over 2 group(s))' mlp-hybrid-groups.txt ||
  { grep fsdp mlp-hybrid-groups.txt; fail "HYBRID's groups in the layout line"; }
check mlp-bf16 4 fmnist_mlp.toml "${wide[@]}" "${fsdp[@]}" --set parallel.fsdp.param_dtype=bf16 \
  --set parallel.fsdp.reduce_dtype=bf16
check cnn-full 2 fmnist_cnn.toml --set "data.train=$data/train" --set "data.test=$data/test" --set data.train_limit=4096 \
  --set data.test_limit=600 "${fsdp[@]}"
check gpt-full 4 gpt_kjv.toml --set data.train=kjv/train --set data.test=kjv/test --set data.test_limit=256 \
  --set parallel.strategy=fsdp

# runtime.device = "cuda" (no GPU needed to plan): the second input slot,
# both slots' labels and the per-row losses on top of the CPU plan.
"$SHARDTRAIN" plan "$SOURCE_DIR/examples/fmnist_mlp.toml" --ranks 2 --json "${wide[@]}" >cpu-plan.json || fail "plan (cpu)"
"$SHARDTRAIN" plan "$SOURCE_DIR/examples/fmnist_mlp.toml" --ranks 2 --json "${wide[@]}" --set runtime.device=cuda \
  >gpu-plan.json || fail "plan (cuda)"
"$PY" - <<'PY' || fail "the GPU plan's input slots"
import json, sys
cpu, gpu = json.load(open("cpu-plan.json"))[0], json.load(open("gpu-plan.json"))[0]
local = 128 // 2  # fmnist_mlp.toml's global batch over 2 ranks
want = local * 784 * 4 + 3 * local * 4
got = gpu["peak_bytes"] - cpu["peak_bytes"]
print(f"ok:   cuda plan: {got} bytes more than the CPU's (second input slot, labels, row losses: {want})")
sys.exit(0 if got == want else 1)
PY

# bf16 GEMMs on a GPU: each linear layer keeps the bf16 copies of its input
# and weight for its backward, grown to the largest batch (here 64 samples
# both training, 128 over 2 ranks, and evaluating, train.eval_batch_size).
"$SHARDTRAIN" plan "$SOURCE_DIR/examples/fmnist_mlp.toml" --ranks 2 --json "${wide[@]}" --set runtime.device=cuda \
  --set runtime.gpu_gemm=bf16 >gpu-bf16-plan.json || fail "plan (cuda, bf16 GEMMs)"
"$PY" - <<'PY' || fail "the bf16 copies in the GPU plan"
import json, sys
plan = json.load(open("gpu-bf16-plan.json"))[0]["components"]
cap = 64
want = sum(2 * (cap * i + o * i) for i, o in [(784, 1024), (1024, 1024), (1024, 10)])
got = plan.get("bf16 copies for the backward")
print(f"ok:   bf16 copies for the backward: {got} bytes (want {want})")
sys.exit(0 if got == want else 1)
PY

# FULL_SHARD's persistent bytes against DDP's at 4 ranks (the plan's
# components, exact for what is allocated: see the ratios above).
"$PY" - <<'PY' || fail "FULL_SHARD persistent bytes above 0.3x DDP"
import json, sys
plans = {p["strategy"]: p for p in json.load(open("mlp-full-plan.json"))}
f, d = plans["fsdp full"]["persistent_bytes"], plans["ddp"]["persistent_bytes"]
print(f"ok:   4 ranks, MLP 784-1024-1024-10: FULL_SHARD parameter + gradient + optimizer bytes per rank "
      f"{f / 2**20:.2f} MiB = {f / d:.3f}x DDP's {d / 2**20:.2f} MiB")
sys.exit(0 if f <= 0.3 * d else 1)
PY

# Without the data: --sample-shape and --classes give the same plan as the
# split they describe, and a model larger than this machine's memory plans
# from its layout alone (7B parameters: 27 GB of f32 that are not allocated).
"$SHARDTRAIN" plan "$SOURCE_DIR/examples/fmnist_mlp.toml" --ranks 2 --json "${wide[@]}" --sample-shape 1x28x28 \
  --classes 10 --test-samples 512 >given-plan.json || fail "plan --sample-shape"
cmp -s <("$PY" -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))))' cpu-plan.json) \
  <("$PY" -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))))' given-plan.json) ||
  fail "plan --sample-shape 1x28x28 --classes 10 differs from the plan with the data"
"$SHARDTRAIN" plan "$SOURCE_DIR/examples/gpt_kjv.toml" --ranks 8 --json --sample-shape 2048 --classes 50257 \
  --set model.n_layer=32 --set model.n_head=32 --set model.n_embd=4096 --set model.block_size=2048 \
  --set train.global_batch_size=16 --set train.eval_batch_size=2 >big-plan.json || fail "plan of a 7B GPT"
"$PY" - <<'PY' || fail "the 7B plan"
import json
plans = {p["strategy"]: p for p in json.load(open("big-plan.json"))}
ddp, full = plans["ddp"], plans["fsdp full"]
assert 6.8e9 < ddp["parameters"] < 6.9e9, ddp["parameters"]
assert len(full["block_numel"]) == 34 and len(full["comm"]["gather_bytes"]) == 34, full["comm"]
assert full["persistent_bytes"] < 0.2 * ddp["persistent_bytes"]
print(f"ok:   GPT 32x4096 ({ddp['parameters'] / 1e9:.2f}B parameters) planned from its layout: DDP peak "
      f"{ddp['peak_bytes'] / 1e9:.0f} GB per rank, FULL_SHARD {full['peak_bytes'] / 1e9:.0f} GB on 8 ranks")
PY
"$SHARDTRAIN" plan "$SOURCE_DIR/examples/fmnist_mlp.toml" --ranks 2 --sample-shape 1x28xa --classes 10 >bad.txt 2>&1 &&
  fail "a bad --sample-shape accepted"
grep -q 'is not dimensions like 1x28x28' bad.txt || { cat bad.txt; fail "the --sample-shape message"; }
pass "plan without the data: same plan as with it; 7B planned from its layout"
