#!/usr/bin/env bash
# A job that needs more memory than its limit (shardrun --memory-limit, a
# memory cgroup: launch/memlimit): the out-of-memory killer ends its ranks,
# and the job ends at once, non-zero, with memlimit's line naming the killer
# and the limit as its last line; no hang. result.json says "running": a
# rank killed by the kernel writes nothing (docs/reliability.md).
# Skipped (77) where no memory cgroup can be made.
source "$(dirname "$0")/lib.sh" memory-limit-fault
PY=/usr/bin/python3
if ! why=$("$SOURCE_DIR/launch/memlimit" --limit 1G --check 2>&1); then
  echo "skipped: no memory limit can be set on this machine: $why"
  exit 77
fi
"$st" prep fashion-mnist --out data >/dev/null || { echo "FAIL: prep"; exit 1; }
# 2 ranks of an MLP with 20 M parameters (80 MB each of parameters and
# gradients per rank): well past 256 MiB for the two.
start=$(date +%s.%N)
rc=0
timeout 120 "$SOURCE_DIR/launch/shardrun" -n 2 --memory-limit 256M -- "$st" train "$cfg" \
  --set data.train=data/train --set data.test=data/test --set 'model.hidden=[4096,4096]' \
  --set train.max_steps=20 --set target.value=0 --run-dir oom >oom.txt 2>&1 || rc=$?
took=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
last=$(grep -v '^$' oom.txt | tail -1)
status=$("$PY" -c 'import json; print(json.load(open("oom/result.json"))["status"])' 2>/dev/null)
if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] &&
   grep -Eq '^memlimit: the out-of-memory killer ended [0-9]+ process\(es\) of the command: .*--limit 256M' <<<"$last" &&
   [ "$status" = running ]; then
  echo "ok   over the memory limit: exit $rc after $took s, result.json '$status'; the last line: $last"
  echo "PASS memory-limit-fault"
else
  echo "FAIL over the memory limit: exit $rc after $took s, result.json '${status:-missing}'; the last line: $last"
  tail -20 oom.txt
  exit 1
fi
