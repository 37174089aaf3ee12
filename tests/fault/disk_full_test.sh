#!/usr/bin/env bash
# A full disk does not lose the results. The run directory sits on a small
# tmpfs, filled beforehand so that the disk runs full at different points of
# a 3-epoch run with a trace (telemetry writes most of the bytes):
#  - no room for the results' reserve: an error before training, naming
#    ENOSPC, exit 1;
#  - full during training: one warning per telemetry file naming the file
#    and ENOSPC, training goes on, and metrics.jsonl (3 evaluations) and
#    result.json ("completed", the final evaluation) are complete, exit 0;
#    on 1 rank at five points, on 2 DDP ranks at one;
#  - full at a checkpoint: the job ends with the cause, and result.json says
#    "failed" with the error. On 1 rank, the first checkpoint cannot fit; on
#    2 ranks (DISK_FULL_RUNS times, default 1), on a 2 MiB tmpfs, the
#    step-50 checkpoint fits and the step-100 one does not: every rank ends
#    within comm.timeout_s, the last line of shardrun's output names the
#    file and says the disk is full, metrics.jsonl keeps both evaluations,
#    no temporary file is left, and the step-50 checkpoint resumes; and on 2
#    ranks (4 here), the disk filled by another writer after the step-50 checkpoint:
#    the step-100 one ends the job the same way, no hang in the close.
# Needs to mount a tmpfs (root with CAP_SYS_ADMIN): skipped (77) otherwise.
source "$(dirname "$0")/lib.sh" disk-full
PY=/usr/bin/python3
"$st" prep fashion-mnist --out data >/dev/null || { echo "FAIL: prep"; exit 1; }
mkdir -p fs
if ! mount -t tmpfs -o size=16m tmpfs fs 2>/dev/null; then
  echo "skipped: cannot mount a tmpfs here (needs root with CAP_SYS_ADMIN)"
  exit 77
fi
trap 'umount "$work/fs" "$work/small" 2>/dev/null; rm -rf "$work"' EXIT
run3=(--set data.train=data/train --set data.test=data/test --set data.train_limit=6400 --set data.test_limit=2000
      --set train.epochs=3 --set target.value=0 --set telemetry.trace=true)
common=("${run3[@]}" --set parallel.strategy=none --set '~parallel.ddp')
failures=0
fail() { echo "FAIL $*"; failures=$((failures + 1)); }
json() { "$PY" -c "import json,sys; j=json.load(open(sys.argv[1])); print($2)" "$1" 2>/dev/null; }

# fill KIB: leaves KIB KiB free on the tmpfs (a filler file takes the rest).
fill() {
  rm -rf fs/*
  local free_kib; free_kib=$(df -k --output=avail fs | tail -1)
  [ "$free_kib" -gt "$1" ] && fallocate -l "$(((free_kib - $1) * 1024))" fs/filler
}

# Reference: the same run with room to spare, its telemetry's size.
"$st" train "$cfg" "${common[@]}" --run-dir ref >ref.txt 2>&1 || { tail ref.txt; exit 1; }
ref_loss=$(json ref/result.json 'repr(j["final"]["test_loss"])')
written_kib=$(du -sk ref | cut -f1)
echo "ok   reference: test_loss $ref_loss, the run directory takes $written_kib KiB"

fill 600
rc=0
"$st" train "$cfg" "${common[@]}" --run-dir fs/r >start.txt 2>start.err || rc=$?
if [ "$rc" -eq 1 ] && grep -q 'cannot reserve 1024 KiB for metrics.jsonl and result.json: No space left on device (ENOSPC)' start.err; then
  echo "ok   600 KiB free: refused before training: $(cat start.err)"
else
  fail "600 KiB free: exit $rc"; cat start.err
fi

# Free space from just above the reserve to about the run's size: the disk
# fills at a different point of the run each time.
for free in 1100 1150 1250 1400 $((written_kib * 2 / 3 + 1024)); do
  fill "$free"
  rc=0
  "$st" train "$cfg" "${common[@]}" --run-dir fs/r >"full-$free.txt" 2>"full-$free.err" || rc=$?
  status=$(json fs/r/result.json 'j["status"]')
  loss=$(json fs/r/result.json 'repr(j["final"]["test_loss"])')
  evals=$(grep -c test_loss fs/r/metrics.jsonl 2>/dev/null)
  warned=$(grep -c 'warning: .*No space left on device (ENOSPC)' "full-$free.err")
  files=$(grep -o 'warning: [^:]*: write failed' "full-$free.err" | sort | uniq -d)
  if [ "$rc" -eq 0 ] && [ "$status" = completed ] && [ "$loss" = "$ref_loss" ] && [ "$evals" = 3 ] &&
     [ "$warned" -ge 1 ] && [ -z "$files" ]; then
    echo "ok   $free KiB free: completed, result.json and 3 evaluations kept, test_loss as the reference;" \
         "$warned telemetry file(s) stopped, one warning each"
  else
    fail "$free KiB free: exit $rc, status '$status', test_loss $loss, $evals evaluations, $warned warnings" \
         "(files warned twice: ${files:-none})"
    tail -3 "full-$free.err"
  fi
done

# A checkpoint (23 MiB: parameters and AdamW's two moments) cannot fit.
fill 4000
rc=0
"$st" train "$cfg" "${common[@]}" --set optim.kind=adamw --set checkpoint.every_steps=50 --run-dir fs/r \
  >ckpt.txt 2>ckpt.err || rc=$?
status=$(json fs/r/result.json 'j["status"]')
if [ "$rc" -eq 1 ] && [ "$status" = failed ] && grep -q 'No space left on device\|the disk holding' ckpt.err &&
   [ -n "$(json fs/r/result.json 'j["error"]')" ]; then
  echo "ok   a checkpoint on a full disk: exit 1, result.json 'failed': $(json fs/r/result.json 'j["error"]')"
else
  fail "checkpoint on a full disk: exit $rc, status '$status'"; tail -3 ckpt.err
fi

# --- 2 ranks -------------------------------------------------------------------
two=("${mpirun[@]}" -np 2 "$st" train "$cfg" "${run3[@]}")
"${two[@]}" --run-dir ref2 >ref2.txt 2>&1 || { tail ref2.txt; exit 1; }
ref2_loss=$(json ref2/result.json 'repr(j["final"]["test_loss"])')
written_kib=$(du -sk ref2 | cut -f1)
fill $((written_kib * 2 / 3 + 1024))
rc=0
"${two[@]}" --run-dir fs/r >full2.txt 2>full2.err || rc=$?
status=$(json fs/r/result.json 'j["status"]')
loss=$(json fs/r/result.json 'repr(j["final"]["test_loss"])')
evals=$(grep -c test_loss fs/r/metrics.jsonl 2>/dev/null)
warned=$(grep -c 'warning: .*No space left on device (ENOSPC)' full2.txt full2.err | awk -F: '{ n += $2 } END { print n }')
if [ "$rc" -eq 0 ] && [ "$status" = completed ] && [ "$loss" = "$ref2_loss" ] && [ "$evals" = 3 ] && [ "$warned" -ge 1 ]; then
  echo "ok   2 ranks, full during training: completed, 3 evaluations, test_loss as the 2-rank reference; $warned warning(s)"
else
  fail "2 ranks, full during training: exit $rc, status '$status', test_loss $loss (reference $ref2_loss), $evals evaluations, $warned warnings"
  tail -3 full2.err
fi

# The checkpoint of step 100 on a 2 MiB disk: the MLP with hidden=[64], an
# epoch of 50 steps (an evaluation before each checkpoint).
mkdir -p small
ckpt=(--set data.train=data/train --set data.test=data/test --set model.hidden=[64] --set data.train_limit=6400
      --set checkpoint.every_steps=50 --set train.max_steps=1500 --set target.value=0 --set comm.timeout_s=20)
for run in $(seq 1 "${DISK_FULL_RUNS:-1}"); do
  umount small 2>/dev/null
  mount -t tmpfs -o size=2m tmpfs small || { fail "mount the 2 MiB tmpfs"; break; }
  start=$(date +%s.%N)
  rc=0
  timeout 120 "$SOURCE_DIR/launch/shardrun" -n 2 -- "$st" train "$cfg" "${ckpt[@]}" --run-dir small/r >ckpt2.txt 2>&1 || rc=$?
  took=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  last=$(grep -v '^$' ckpt2.txt | tail -1)
  leftover=$(find small/r/checkpoints -name '*.tmp*' 2>/dev/null | head -3 | tr '\n' ' ')
  status=$(json small/r/result.json 'j["status"]')
  evals=$(grep -c test_loss small/r/metrics.jsonl 2>/dev/null)
  resumed=""
  if [ -f small/r/checkpoints/step-00000050.h5 ]; then
    rm -rf resumed && cp -r small/r resumed
    "$st" train "$cfg" "${ckpt[@]}" --set train.max_steps=60 --run-dir resumed --resume auto >resume.txt 2>&1 &&
      grep -q '^\[resume\] .*step-00000050.h5: step 50' resume.txt && resumed=yes
  fi
  if [ "$rc" -eq 1 ] && awk -v t="$took" 'BEGIN { exit !(t < 20) }' &&
     grep -q '^shardtrain: error (rank 0): small/r/checkpoints/step-00000100.h5.tmp: writing the checkpoint failed: .*it is full (No space left on device, ENOSPC)$' <<<"$last" &&
     [ -z "$leftover" ] && [ "$status" = failed ] && [ "$evals" = 2 ] && [ "$resumed" = yes ]; then
    echo "ok   2 ranks, checkpoint #$run on a full disk: exit 1 after $took s, result.json failed, 2 evaluations kept," \
         "no temporary file, step 50 resumes; the last line: $last"
  else
    fail "2 ranks, checkpoint #$run on a full disk: exit $rc after $took s, status '$status', $evals evaluations," \
         "left: '${leftover}', step 50 resumed: '${resumed:-no}'; the last line: $last"
    tail -5 ckpt2.txt
  fi
done

# The disk filled by another writer once the step-50 checkpoint is there:
# telemetry stops (warnings), the next checkpoint fails at once on every
# rank, closes and removes its file (the close reserve gives the close
# room), and the job ends with the cause; the newest checkpoint resumes.
umount small 2>/dev/null
mount -t tmpfs -o size=4m tmpfs small || fail "mount the 4 MiB tmpfs"
start=$(date +%s.%N)
timeout 120 "$SOURCE_DIR/launch/shardrun" -n 4 -- "$st" train "$cfg" "${ckpt[@]}" --run-dir small/r >filled.txt 2>&1 &
job=$!
for _ in $(seq 600); do [ -f small/r/checkpoints/step-00000050.h5 ] && break; sleep 0.05; done
fallocate -l "$(($(df -k --output=avail small | tail -1) * 1024))" small/filler 2>/dev/null ||
  fallocate -l "$((($(df -k --output=avail small | tail -1) - 64) * 1024))" small/filler
rc=0
wait "$job" || rc=$?
took=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
last=$(grep -v '^$' filled.txt | tail -1)
leftover=$(find small/r/checkpoints -name '*.tmp*' 2>/dev/null | head -3 | tr '\n' ' ')
rm -f small/filler
resumed=""
newest=$(ls small/r/checkpoints | grep -E '^step-[0-9]+\.h5$' | tail -1)
"$st" train "$cfg" "${ckpt[@]}" --set train.max_steps=1 --run-dir small/r --resume auto >resume2.txt 2>&1 &&
  grep -q "^\[resume\] .*$newest: step" resume2.txt && resumed=$newest
if [ "$rc" -eq 1 ] && awk -v t="$took" 'BEGIN { exit !(t < 40) }' &&
   grep -Eq '^shardtrain: error \(rank 0\): small/r/checkpoints/step-[0-9]+\.h5\.tmp: writing the checkpoint failed: .*it is full \(No space left on device, ENOSPC\)$' <<<"$last" &&
   [ -z "$leftover" ] && [ -n "$resumed" ]; then
  echo "ok   4 ranks, the disk filled by another writer before a checkpoint: exit 1 after $took s, no temporary" \
       "file, $resumed resumes; the last line: $last"
else
  fail "4 ranks, the disk filled before a checkpoint: exit $rc after $took s, left: '${leftover}'," \
       "resumed: '${resumed:-no}'; the last line: $last"
  tail -5 filled.txt
fi

[ "$failures" -eq 0 ] && echo "PASS disk-full" || { echo "FAIL disk-full: $failures failure(s)"; exit 1; }
