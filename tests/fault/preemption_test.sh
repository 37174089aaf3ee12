#!/usr/bin/env bash
# Preemption: a signal at a random step of a 2-rank DDP run (SIGTERM to both
# ranks as Slurm sends it, SIGTERM to one rank only, SIGUSR1 to mpirun, which
# forwards it) stops every rank after the same step with a checkpoint of it,
# result.json "preempted", MLLOG run_stop "aborted" and exit status 75; then
# `--resume auto` ends with the uninterrupted run's final test loss, bit for
# bit. The same for SIGTERM during set-up with telemetry off. Also: no
# checkpoint when checkpointing is off, and a job whose step
# cannot finish within checkpoint.signal_grace_s ends at the grace, saying so.
#   PREEMPTION_RUNS (default 3, one of each kind; scripts/fault-table.sh
#   runs 10): signals at random steps.
source "$(dirname "$0")/lib.sh" preemption
PY=/usr/bin/python3
"$st" prep fashion-mnist --out data >/dev/null || { echo "FAIL: prep"; exit 1; }
common=(--set data.train=data/train --set data.test=data/test --set data.train_limit=2560
        --set data.test_limit=2000 --set train.epochs=2 --set target.value=0 --set optim.kind=adamw
        --set optim.lr=0.002 --set comm.timeout_s=60)
# 40 steps of at least 60 ms (rank 1 sleeps, rank 0 waits for it): the
# signal lands at a step that depends on when it is sent.
slow=(--set debug.slow_rank=1 --set debug.slow_compute_ms=60)
failures=0
fail() { echo "FAIL $*"; failures=$((failures + 1)); }
json() { "$PY" -c "import json,sys; j=json.load(open(sys.argv[1])); print($2)" "$1" 2>/dev/null; }

# start NAME ARGS...: the job in the background; $job is mpirun's pid.
start() {
  local name=$1; shift
  "${mpirun[@]}" -np 2 "$st" train "$cfg" "${common[@]}" --run-dir "$name" "$@" >"$name.txt" 2>&1 &
  job=$!
}
# ranks: the pids of the job's two ranks (mpirun's children).
ranks() { pgrep -P "$job" -x shardtrain; }
# rank_pid R: the pid of rank R.
rank_pid() {
  local p
  for p in $(ranks); do
    tr '\0' '\n' <"/proc/$p/environ" | grep -qx "OMPI_COMM_WORLD_RANK=$1" && echo "$p"
  done
}

"${mpirun[@]}" -np 2 "$st" train "$cfg" "${common[@]}" --run-dir ref >ref.txt 2>&1 || { tail ref.txt; exit 1; }
ref=$(json ref/result.json 'repr(j["final"]["test_loss"])')
echo "ok   uninterrupted: 40 steps, final test_loss $ref"

# wait_for_setup NAME: until the run directory has its result.json.
wait_for_setup() {
  for _ in $(seq 1000); do [ -e "$1/result.json" ] && return; sleep 0.01; done
  fail "$1: no result.json after 10 s"
}

# check_preempted NAME HOW: the job $job ends with 75, result.json
# "preempted", run_stop aborted, one [preempted] line and a checkpoint of its
# last step; `--resume auto` ends with the uninterrupted run's bits.
check_preempted() {
  local name=$1 how=$2 rc=0
  wait "$job" || rc=$?
  local status step line got
  status=$(json "$name/result.json" 'j["status"]')
  step=$(json "$name/result.json" 'j["steps"]')
  if [ "$rc" -ne 75 ] || [ "$status" != preempted ]; then
    fail "$how: exit $rc, status '$status' (expected 75, preempted)"; tail -5 "$name.txt"; return
  fi
  grep -q '"key": "run_stop".*"status": "aborted"' "$name/mllog.txt" 2>/dev/null || [ ! -e "$name/mllog.txt" ] ||
    fail "$how: no run_stop aborted in mllog.txt"
  line=$(grep -c '^\[preempted\] SIG[A-Z0-9]*\|^\[preempted\] a signal to another rank' "$name.txt")
  [ "$line" = 1 ] || fail "$how: $line [preempted] lines"
  [ -e "$name/checkpoints/step-$(printf %08d "$step").h5" ] || fail "$how: no checkpoint of step $step"
  "${mpirun[@]}" -np 2 "$st" train "$cfg" "${common[@]}" --set checkpoint.every_steps=15 --run-dir "$name" \
    --resume auto >"$name-resume.txt" 2>&1 || { fail "$how: resume"; tail -5 "$name-resume.txt"; return; }
  got=$(json "$name/result.json" 'repr(j["final"]["test_loss"])')
  if [ "$got" = "$ref" ]; then
    echo "ok   $how at step $step: exit 75, checkpoint, resumed: final test_loss $got (bit-identical)"
    stopped_at+=("$step")
  else
    fail "$how at step $step: resumed final test_loss $got, uninterrupted $ref"
  fi
}

runs=${PREEMPTION_RUNS:-3}
stopped_at=()
for i in $(seq "$runs"); do
  name=p$i
  case $((i % 3)) in
    0) how="SIGTERM to both ranks" ;;
    1) how="SIGTERM to rank 1 only" ;;
    2) how="SIGUSR1 to mpirun" ;;
  esac
  start "$name" "${slow[@]}" --set checkpoint.every_steps=15
  # From when the ranks handle signals (result.json "running" is written
  # after that); before it, a signal ends a process as it would any other.
  wait_for_setup "$name"
  sleep "$("$PY" -c "import random; print(round(random.uniform(0.2, 2.4), 2))")"
  case $((i % 3)) in
    0) kill -TERM $(ranks) ;;
    1) kill -TERM "$(rank_pid 1)" ;;
    2) kill -USR1 "$job" ;;
  esac
  check_preempted "$name" "$how"
done

# During set-up, with telemetry off (no flight recorder): as soon as
# result.json says "running" (the run directory is made; data, model and
# communicators are not), SIGTERM to both ranks; the job stops after its
# first steps all the same.
start setup "${slow[@]}" --set checkpoint.every_steps=15 --set telemetry.enabled=false
wait_for_setup setup
kill -TERM $(ranks)
check_preempted setup "SIGTERM during set-up, telemetry off"
echo "     stopped at steps: ${stopped_at[*]}"

# Checkpointing off: preempted all the same, without a checkpoint, and says so.
start off "${slow[@]}"
wait_for_setup off
sleep 0.5
kill -TERM $(ranks)
rc=0
wait "$job" || rc=$?
if [ "$rc" -eq 75 ] && [ "$(json off/result.json 'j["status"]')" = preempted ] && [ ! -d off/checkpoints ] &&
   grep -q '^\[preempted\] SIGTERM: .*no checkpoint (checkpoint.every_steps = 0' off.txt; then
  echo "ok   checkpointing off: exit 75, result.json preempted, no checkpoint, and the line says so"
else
  fail "checkpointing off: exit $rc"; tail -5 off.txt
fi

# A step of 4 s with a grace of 1 s: the job ends at the grace, saying why.
start grace --set debug.slow_rank=1 --set debug.slow_compute_ms=4000 --set checkpoint.on_signal=true \
  --set checkpoint.signal_grace_s=1
wait_for_setup grace
sleep 1
t0=$(date +%s.%N)
kill -TERM $(ranks)
rc=0
wait "$job" || rc=$?
took=$("$PY" -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$t0" "$(date +%s.%N)")
if [ "$rc" -ne 0 ] && [ "$rc" -ne 75 ] && grep -q 'did not stop within checkpoint.signal_grace_s = 1 s' grace.txt &&
   "$PY" -c "import sys; sys.exit(0 if float(sys.argv[1]) < 4 else 1)" "$took"; then
  echo "ok   step longer than the grace: ended ${took} s after the signal (exit $rc), saying so"
else
  fail "grace: exit $rc after ${took} s"; tail -5 grace.txt
fi

[ "$failures" -eq 0 ] && echo "PASS preemption" || { echo "FAIL preemption: $failures failure(s)"; exit 1; }
