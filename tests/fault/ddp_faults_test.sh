#!/usr/bin/env bash
# DDP training faults end the job with a clear message, never a hang:
#  - a rank killed mid-run (SIGKILL; a random rank at a random step,
#    KILL_RUNS times): Open MPI's launcher ends the job and names the rank,
#    and `--resume auto` continues from the newest checkpoint (one every 10
#    steps) and completes 20 more steps;
#  - a rank that leaves the training loop early (its own train.max_steps):
#    its next collective differs from the others', and the watchdog
#    (comm.timeout_s = 5) ends the job naming the operations and ranks.
# Environment: PROBE_DIR (build/bin, holds shardtrain), SOURCE_DIR; KILL_RUNS,
# SEED.
set -uo pipefail
source "$(dirname "$0")/lib.sh" ddp-faults
"$st" prep fashion-mnist --out data >/dev/null || { echo "FAIL: prep"; exit 1; }
common=(--set data.train=data/train --set data.test=data/test --set parallel.strategy=ddp
        --set comm.timeout_s=5 --set train.epochs=100 --set target.value=0)
failures=0

# --- a rank killed mid-run ------------------------------------------------------
# KILL_RUNS times (default 1; scripts/fault-table.sh runs 10): SIGKILL to a
# random rank once the job has printed 1 to 3 progress lines and written a
# checkpoint (a random step), drawn from SEED (default 1). Each kill must end
# the job non-zero within 120 s with Open MPI's line naming the killed rank,
# and the resumed run must start from the newest checkpoint and complete.
RANDOM=${SEED:-1}
ended=0
for run in $(seq 1 "${KILL_RUNS:-1}"); do
  rank=$((RANDOM % 2)) lines=$((1 + RANDOM % 3)) name=killed-$run
  start=$(date +%s)
  timeout 120 "${mpirun[@]}" -np 2 "$st" train "$cfg" "${common[@]}" --set checkpoint.every_steps=10 \
    --run-dir "$name" >"$name.txt" 2>&1 &
  job=$!
  victim=""
  for _ in $(seq 1 150); do  # find the rank once it has trained that far
    sleep 0.2
    [ "$(grep -c '^\[train\]' "$name.txt" 2>/dev/null)" -ge "$lines" ] || continue
    grep -q '^\[checkpoint\]' "$name.txt" || continue  # a checkpoint to resume from
    for pid in $(pgrep -f "run-dir $name\$" || true); do
      if tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$rank"; then victim=$pid; fi
    done
    [ -n "$victim" ] && break
  done
  if [ -z "$victim" ]; then
    echo "FAIL kill $run: rank $rank not found after $lines progress line(s)"; failures=$((failures + 1))
    kill "$job" 2>/dev/null; wait "$job"; continue
  fi
  kill -9 "$victim"
  rc=0; wait "$job" || rc=$?
  took=$(( $(date +%s) - start )) killed_rc=$rc
  if [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ] || ! grep -Eq "rank $rank .*(exited on signal 9|Killed)|process rank $rank" "$name.txt"; then
    echo "FAIL kill $run: rank $rank after $lines progress line(s): exit $rc after ${took}s"; tail -20 "$name.txt"
    failures=$((failures + 1))
    continue
  fi
  # The resumed run: 20 steps past the newest checkpoint (or from step 0
  # when the kill came before the first).
  newest=$(find "$name/checkpoints" -name 'step-*.h5' 2>/dev/null | sort | tail -1)
  from=$(basename "${newest:-step-00000000.h5}" .h5); from=$((10#${from#step-}))
  rc=0
  timeout 120 "${mpirun[@]}" -np 2 "$st" train "$cfg" "${common[@]}" --set checkpoint.every_steps=10 \
    --set train.max_steps=$((from + 20)) --run-dir "$name" --resume auto >"$name-resumed.txt" 2>&1 || rc=$?
  if [ "$rc" -ne 0 ] || ! grep -Eq "^\[resume\] (.*: step $from |no complete checkpoint)" "$name-resumed.txt" ||
     ! grep -q '^\[done\] completed' "$name-resumed.txt"; then
    echo "FAIL kill $run: the resumed run (from step $from): exit $rc"; tail -5 "$name-resumed.txt"
    failures=$((failures + 1))
  else
    ended=$((ended + 1))
    echo "ok   kill $run: rank $rank after $lines progress line(s): exit $killed_rc after ${took}s:" \
         "$(grep -Em1 "rank $rank .*(exited on signal 9|Killed)|process rank $rank" "$name.txt");" \
         "resumed from step $from and completed"
  fi
done
echo "kills: ${KILL_RUNS:-1} runs, $ended ended non-zero naming the killed rank within 120 s and resumed"

# --- a rank that stops training early --------------------------------------------
start=$(date +%s)
rc=0
timeout 120 "${mpirun[@]}" -np 1 "$st" train "$cfg" "${common[@]}" --run-dir early : \
  -np 1 "$st" train "$cfg" "${common[@]}" --set train.max_steps=20 --run-dir early >early.txt 2>&1 || rc=$?
took=$(( $(date +%s) - start ))
if [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ] || [ "$took" -gt 90 ] ||
   ! grep -Eq 'shardtrain: watchdog: .* #[0-9]+ .*never arrived: [01] ' early.txt; then
  echo "FAIL early exit: exit $rc after ${took}s"; tail -20 early.txt; failures=$((failures + 1))
else
  echo "ok   early exit: exit $rc after ${took}s: $(grep -m1 'shardtrain: watchdog' early.txt)"
fi

[ "$failures" -eq 0 ] || { echo "$failures case(s) failed"; exit 1; }
