# `shardtrain plan` of the Llama shapes FSDP exists for, with no data at
# hand (the config names block_size and vocab_size): Llama-2 7B at 2 x 4096
# tokens per rank in bf16 on 128 ranks, 8 per node, fits 80 GiB per rank
# with FULL_SHARD and with HYBRID (which --ranks-per-node adds) without
# activation checkpointing; 13B with selective recomputation and 70B with
# full recomputation on 64 ranks fit too. The parameter counts are the
# published ones, in the table's header and in --json.
source "$(dirname "$0")/lib.sh"
cfg="$SOURCE_DIR/examples/llama2_7b.toml"
gib80=$((80 * 1024 * 1024 * 1024))
fits() {  # name params strategies... -- plan args: every named strategy's peak <= 80 GiB
  local name=$1 params=$2
  shift 2
  local want=()
  while [ "$1" != -- ]; do want+=("$1"); shift; done
  shift
  "$SHARDTRAIN" plan "$cfg" --json "$@" >"$name.json" || fail "$name: plan"
  "$PY" - "$name" "$params" "$gib80" "${want[@]}" <<'PY' || fail "$name: does not fit"
import json, sys
name, params, limit, want = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
plans = {p["strategy"]: p for p in json.load(open(f"{name}.json"))}
for s in want:
    p = plans[s]
    assert p["parameters"] == params, (s, p["parameters"], params)
    print(f"ok:   {name}: {s} peak {p['peak_bytes'] / 2**30:.1f} GiB per rank")
    assert p["peak_bytes"] <= limit, (s, p["peak_bytes"])
PY
}
fits 7b 6738415616 "fsdp full" "fsdp hybrid" -- --ranks 128 --ranks-per-node 8
fits 13b-selective 13015864320 "fsdp full" -- --ranks 128 --ranks-per-node 8 --set model.n_layer=40 \
  --set model.n_head=40 --set model.n_kv_head=40 --set model.n_embd=5120 --set model.ffn_hidden=13824 \
  --set parallel.activation_checkpointing=selective
fits 70b-full 68976648192 "fsdp full" -- --ranks 64 --ranks-per-node 8 --set train.global_batch_size=128 \
  --set model.n_layer=80 --set model.n_head=64 --set model.n_kv_head=8 --set model.n_embd=8192 \
  --set model.ffn_hidden=28672 --set parallel.activation_checkpointing=full
pass "7B (FULL_SHARD, HYBRID), 13B selective, 70B full: each within 80 GiB per rank"

"$SHARDTRAIN" plan "$cfg" --ranks 128 >table.txt || fail "plan table"
grep -q '(llama, 6738415616 parameters)' table.txt || { head -3 table.txt; fail "no parameter count in the header"; }
if grep -q 'fsdp hybrid' table.txt; then fail "HYBRID without --ranks-per-node"; fi
"$SHARDTRAIN" plan "$cfg" --ranks 128 --ranks-per-node 8 | grep -q 'fsdp hybrid' || fail "no HYBRID with --ranks-per-node"
pass "the header names 6738415616 parameters; HYBRID only with --ranks-per-node"
