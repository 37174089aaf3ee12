#!/usr/bin/env bash
# DDP training faults end the job with a clear message, never a hang:
#  - a rank killed mid-run (SIGKILL): Open MPI's launcher ends the job and
#    names the rank;
#  - a rank that leaves the training loop early (its own train.max_steps):
#    its next collective differs from the others', and the watchdog
#    (comm.timeout_s = 5) ends the job naming the operations and ranks.
# Environment: PROBE_DIR (build/bin, holds shardtrain), SOURCE_DIR.
set -uo pipefail
source "$(dirname "$0")/lib.sh" ddp-faults
"$st" prep fashion-mnist --out data >/dev/null || { echo "FAIL: prep"; exit 1; }
common=(--set data.train=data/train --set data.test=data/test --set parallel.strategy=ddp
        --set comm.timeout_s=5 --set train.epochs=100 --set target.value=0)
failures=0

# --- a rank killed mid-run ------------------------------------------------------
start=$(date +%s)
timeout 120 "${mpirun[@]}" -np 2 "$st" train "$cfg" "${common[@]}" --run-dir killed >killed.txt 2>&1 &
job=$!
victim=""
for _ in $(seq 1 100); do  # find rank 1 once it trains
  sleep 0.2
  grep -q '^\[train\]' killed.txt 2>/dev/null || continue
  for pid in $(pgrep -f "run-dir killed" || true); do
    if tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx 'OMPI_COMM_WORLD_RANK=1'; then victim=$pid; fi
  done
  [ -n "$victim" ] && break
done
if [ -z "$victim" ]; then
  echo "FAIL kill: rank 1 not found"; failures=$((failures + 1)); kill "$job" 2>/dev/null
else
  kill -9 "$victim"
  rc=0; wait "$job" || rc=$?
  took=$(( $(date +%s) - start ))
  if [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ] || ! grep -Eq 'rank 1 .*(exited on signal 9|Killed)|process rank 1' killed.txt; then
    echo "FAIL kill: exit $rc after ${took}s"; cat killed.txt | tail -20; failures=$((failures + 1))
  else
    echo "ok   kill: exit $rc after ${took}s: $(grep -Em1 'rank 1' killed.txt)"
  fi
fi

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
