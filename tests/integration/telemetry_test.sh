# Telemetry end to end on 3 ranks (oversubscribed on 2 cores): complete step
# records, a valid trace holding every rank, the MLPerf log, the summary's
# straggler report pointing at an injected slow rank with the right cause
# (compute, data, communication), and flight records after a failure.
source "$(dirname "$0")/lib.sh"
data=$(prep_fmnist)
cfg="$SOURCE_DIR/examples/fmnist_mlp.toml"
shardrun="$SOURCE_DIR/launch/shardrun"
common=(--set "data.train=$data/train" --set "data.test=$data/test" --set data.train_limit=6000
        --set data.test_limit=1000 --set target.value=0 --set parallel.strategy=ddp
        --set 'model.hidden=[256]' --set train.global_batch_size=96)

# --- records, trace, mllog ----------------------------------------------------------
"$shardrun" -n 3 -- "$SHARDTRAIN" train "$cfg" "${common[@]}" --set train.max_steps=20 --run-dir plain >plain.txt 2>&1 \
  || { cat plain.txt; fail "3-rank run"; }
"$PY" - plain <<'PYEOF' || fail "telemetry files"
import json, sys, os
run = sys.argv[1]
for r in range(3):
    rows = [json.loads(l) for l in open(f"{run}/telemetry/rank-{r:05d}.jsonl")]
    assert [x["step"] for x in rows] == list(range(20)), f"rank {r}: steps {[x['step'] for x in rows]}"
    for x in rows:
        assert x["rank"] == r
        parts = x["data_wait_s"] + x["h2d_s"] + x["comm_exposed_s"] + x["blocked_on_peers_s"] + x["compute_s"]
        assert abs(parts - x["step_s"]) < 1e-9, (parts, x["step_s"])
        assert x["collectives"], "no collectives recorded"
        assert x["mem_cpu_peak_bytes"] > 0 and x["cpu_process_s"] >= 0
trace = json.load(open(f"{run}/trace.json"))
pids = {e["pid"] for e in trace["traceEvents"]}
assert pids == {0, 1, 2}, pids
names = {e["name"] for e in trace["traceEvents"] if e.get("ph") == "X"}
for n in ("step", "forward", "backward", "allreduce", "data_wait"):
    assert n in names, f"no {n} span in the trace"
s = json.load(open(f"{run}/summary.json"))
assert len(s["per_rank"]) == 3 and "au_min" in s and "au_median" in s and "stragglers" in s
for p in s["per_rank"]:
    for k in ("rank", "step_time_median_s", "au", "data_wait_frac", "comm_exposed_frac"):
        assert k in p, k
keys = []
for line in open(f"{run}/mllog.txt"):
    assert line.startswith(":::MLLOG "), line
    j = json.loads(line[len(":::MLLOG "):])
    assert set(j) >= {"namespace", "time_ms", "event_type", "key", "value", "metadata"}, j
    keys.append(j["key"])
for k in ("init_start", "init_stop", "run_start", "run_stop", "epoch_start", "eval_start", "eval_stop",
          "eval_accuracy", "global_batch_size", "seed", "train_samples"):
    assert k in keys, f"mllog lacks {k}"
PYEOF
grep -q 'straggler\|stragglers' plain.txt || fail "no straggler line in the printed summary"
pass "3 ranks: 20 records each, trace with every rank, summary.json, mllog.txt"

# --- an injected straggler is found, with its cause ----------------------------------
# Three ranks on two cores stray 10-30% from the median busy time by
# themselves; the 30 ms injected is several times a step, hence threshold 0.5.
straggler() {  # straggler NAME KEY MS CAUSE
  "$shardrun" -n 3 -- "$SHARDTRAIN" train "$cfg" "${common[@]}" --set train.max_steps=30 \
    --set telemetry.straggler_threshold=0.5 --set debug.slow_rank=1 --set "debug.$2=$3" --run-dir "$1" >"$1.txt" 2>&1 || { cat "$1.txt"; fail "$1 run"; }
  got=$(json_get "$1/summary.json" '";".join(str(s["rank"]) + ":" + s["cause"] for s in j["stragglers"])')
  [ "$got" = "1:$4" ] || { cat "$1/summary.txt"; fail "$1: stragglers '$got', expected '1:$4'"; }
  grep -q "rank 1" "$1/summary.txt" || fail "$1: summary.txt does not name rank 1"
  pass "$2=$3 on rank 1 -> straggler rank 1, cause $4"
}
straggler slow-compute slow_compute_ms 30 compute
straggler slow-data slow_data_ms 30 data
straggler slow-comm slow_comm_ms 30 communication

# --- flight records after a failure --------------------------------------------------
# Rank 1 stops after 5 steps while rank 0 goes on: the watchdog (5 s) ends the job.
rc=0
timeout 120 $(mpirun_cmd) -np 1 "$SHARDTRAIN" train "$cfg" "${common[@]}" --set comm.timeout_s=5 --run-dir crash : \
  -np 1 "$SHARDTRAIN" train "$cfg" "${common[@]}" --set comm.timeout_s=5 --set train.max_steps=5 --run-dir crash \
  >crash.txt 2>&1 || rc=$?
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || { cat crash.txt; fail "mismatched run: exit $rc"; }
ls crash/flight/rank-*.json >/dev/null 2>&1 || { cat crash.txt; fail "no flight records"; }
for f in crash/flight/rank-*.json; do
  "$PY" -c "import json,sys; j=json.load(open(sys.argv[1])); assert j['reason'] and isinstance(j['spans'], list) and j['spans'], j" "$f" \
    || fail "$f is not a complete flight record"
done
pass "flight records: $(ls crash/flight | tr '\n' ' ')"
