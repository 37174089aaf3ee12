# telemetry.op_timing on the byte-level GPT (2 layers), 2 ranks DDP: every
# step record names each class of op with its exact number of calls (each op
# timed once: 9 linear layers, 2 attentions and 5 layer norms, forward and
# backward), the ops' host time fits inside the step and is most of the
# rank's own part of it (without waits for peers and data), and
# result.json, the summary and `shardtrain report` show the table and bar.
# Off (the default), no record carries op times.
source "$(dirname "$0")/lib.sh"
command -v bible >/dev/null || { echo "skip: bible (package bible-kjv) is not installed"; exit 77; }
bible "Gen1:1-Gen10:32" >genesis.txt
"$SHARDTRAIN" prep text --input genesis.txt --out kjv --block-size 64 >/dev/null
common=(--set data.train=kjv/train --set data.test=kjv/test --set train.max_steps=6 --set target.value=0
        --set train.eval_batch_size=64)
cfg="$SOURCE_DIR/examples/gpt_kjv.toml"

"$SOURCE_DIR/launch/shardrun" -n 2 -- "$SHARDTRAIN" train "$cfg" "${common[@]}" --set telemetry.op_timing=true \
  --run-dir on >on.txt 2>&1 || { cat on.txt; fail "run with op timing"; }
"$PY" - on <<'PY' || fail "op times in the step records"
import glob, json, sys
run = sys.argv[1]
want = {"linear": 18, "attention": 4, "norm": 10, "embedding": 2, "loss": 1}
files = sorted(glob.glob(f"{run}/telemetry/rank-*.jsonl"))
assert len(files) == 2, files
for f in files:
    recs = [json.loads(l) for l in open(f)]
    assert len(recs) == 6, (f, len(recs))
    for r in recs:
        ops = r["ops"]
        for name, calls in want.items():
            assert ops[name]["calls"] == calls, (f, r["step"], name, ops[name])
        for name in ("elementwise", "optimizer"):
            assert ops[name]["calls"] > 0 and ops[name]["s"] > 0, (f, name, ops.get(name))
        total = sum(o["s"] for o in ops.values())
        own = r["step_s"] - r["blocked_on_peers_s"] - r["comm_exposed_s"] - r["data_wait_s"]
        assert 0.5 * own <= total <= r["step_s"], (f, r["step"], total, r["step_s"], own)
    print(f"{f}: step {recs[-1]['step_s'] * 1e3:.1f} ms, ops {sum(o['s'] for o in recs[-1]['ops'].values()) * 1e3:.1f} ms")
res = json.load(open(f"{run}/result.json"))["op_timing"]
assert res["rank"] == 0 and res["steps"] == 5, res
names = [r["name"] for r in res["rows"]]
assert names[0] == "linear" and "other (host, gaps)" in names, names
assert abs(sum(r["frac"] for r in res["rows"] if r["part"] == "op") - sum(r["s"] for r in res["rows"] if r["part"] == "op") / res["step_s"]) < 1e-9
PY
grep -q '^\[summary\] op time (rank 0, mean of 5 steps' on.txt || { cat on.txt; fail "no op table in the summary"; }
grep -q '^\[summary\]   linear  .* ms .*%  *#* *18 calls$' on.txt || { cat on.txt; fail "linear row"; }
pass "$(grep -A1 '^\[summary\] op time' on.txt | tail -1)"

"$SHARDTRAIN" report on >report.txt || { cat report.txt; fail "report"; }
grep -q "op time (rank 0" report.txt || fail "report does not print the op table"
grep -q "Where a step goes, by op</h2>.*<img" on/report.html || fail "report.html has no op bar"
pass "report shows the table and the bar"

"$SHARDTRAIN" train "$cfg" "${common[@]}" --set train.max_steps=2 --run-dir off >off.txt 2>&1 || { cat off.txt; fail "run without"; }
! grep -q '"ops"' off/telemetry/rank-00000.jsonl || fail "op times recorded with op_timing off"
! grep -q 'op time' off.txt || fail "op table printed with op_timing off"
[ "$(json_get off/result.json '"op_timing" in j')" = False ] || fail "result.json op_timing with op_timing off"
"$SHARDTRAIN" report off >/dev/null
grep -q "run with telemetry.op_timing = true" off/report.html || fail "report.html does not say how to get op times"
pass "off: nothing recorded, the report says how to turn it on"
