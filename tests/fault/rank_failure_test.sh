#!/usr/bin/env bash
# One rank failing mid-training (debug.fail_step on debug.slow_rank) ends a
# 2-rank job at once with that rank's message and both ranks' flight records,
# not after the watchdog's timeout: the failing rank aborts the job before
# unwinding through collective destructors (runtime/train/fatal_error.h).
# With the data in memory and streamed (parallel HDF5 files open), DDP and
# FSDP.
# Environment: PROBE_DIR (build/bin, holds shardtrain), SOURCE_DIR.
set -uo pipefail
source "$(dirname "$0")/lib.sh" rank-failure
"$st" prep fashion-mnist --out data >/dev/null || { echo "FAIL: prep"; exit 1; }
common=(--set data.train=data/train --set data.test=data/test --set comm.timeout_s=100
        --set debug.slow_rank=1 --set debug.fail_step=5 --set target.value=0)
failures=0
for variant in "memory ddp" "stream ddp" "stream fsdp"; do
  set -- $variant
  name="$1-$2"
  start=$(date +%s)
  rc=0
  timeout 150 "${mpirun[@]}" -np 2 "$st" train "$cfg" "${common[@]}" --set data.loader=$1 \
    $(strategy_flags "$cfg" "$2") --run-dir "$name" >"$name.txt" 2>&1 || rc=$?
  took=$(($(date +%s) - start))
  if [ "$rc" -eq 0 ] || [ "$took" -ge 60 ]; then
    echo "FAIL $name: exit $rc after ${took}s (expected a quick failure)"; cat "$name.txt"; failures=$((failures + 1))
  elif ! grep -q "shardtrain: error (rank 1): debug.fail_step: injected failure on rank 1 at step 5" "$name.txt"; then
    echo "FAIL $name: the failing rank's message is missing"; cat "$name.txt"; failures=$((failures + 1))
  elif ! grep -q '"reason":"debug.fail_step' "$name/flight/rank-00001.json" 2>/dev/null || [ ! -f "$name/flight/rank-00000.json" ]; then
    echo "FAIL $name: flight records missing"; ls -R "$name" | head; failures=$((failures + 1))
  else
    echo "ok: $name: ended in ${took}s (exit $rc) with rank 1's error and both flight records"
  fi
done
[ "$failures" -eq 0 ] || exit 1
