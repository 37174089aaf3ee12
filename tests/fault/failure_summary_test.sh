#!/usr/bin/env bash
# A failed job ends with its error, once, naming the rank(s): launch/failure-summary
# on recorded launcher output (held fatal lines, ranks merged, redundant
# Open MPI banners dropped, informative ones kept), then shardrun on 2-rank
# jobs that fail on one rank and on both.
source "$(dirname "$0")/lib.sh" failure-summary
summary="${SOURCE_DIR}/launch/failure-summary"
failures=0
fail() { echo "FAIL $*"; failures=$((failures + 1)); }
rule=--------------------------------------------------------------------------

# check NAME INPUT EXPECTED: the filter turns INPUT into EXPECTED exactly.
check() {
  local got
  got=$(printf '%s\n' "$2" | "$summary")
  if [ "$got" = "$3" ]; then echo "ok   $1"; else fail "$1"; diff <(echo "$3") <(echo "$got"); fi
}

check "one rank's error comes last, its MPI_ABORT banner dropped" \
"shardtrain: error (rank 1): shard data/train: checksum mismatch
$rule
MPI_ABORT was invoked on rank 1 in communicator MPI_COMM_WORLD
with errorcode 1.
$rule
[vm:123] [[1,0],0] ORTE_ERROR_LOG: Not found in file base.c at line 5
[vm:123] 1 more process has sent help message help-mpi-api.txt / mpi-abort
[vm:123] Set MCA parameter \"orte_base_help_aggregate\" to 0 to see all help / error messages
a rank's last output" \
"a rank's last output
shardtrain: error (rank 1): shard data/train: checksum mismatch"

check "an abort banner that mpirun prints before the rank's error line is dropped too" \
"$rule
MPI_ABORT was invoked on rank 1 in communicator MPI_COMM_WORLD
with errorcode 1.
$rule
[init] a line of the run
shardtrain: error (rank 1): data.train: missing/train: no such file or directory" \
"[init] a line of the run
shardtrain: error (rank 1): data.train: missing/train: no such file or directory"

check "the same error on several ranks is one line naming them" \
"shardtrain: error (rank 3): bad shard
shardtrain: error (rank 0): bad shard
shardtrain: error (rank 3): bad shard
shardtrain: error (rank 2): another cause
shardtrain: watchdog: allreduce #3 on communicator 'world' (rank 0 of 4) not complete after 5.0 s" \
"shardtrain: error (ranks 0, 3): bad shard
shardtrain: error (rank 2): another cause
shardtrain: watchdog: allreduce #3 on communicator 'world' (rank 0 of 4) not complete after 5.0 s"

check "a rank killed by a signal: the banner stays, the line naming it comes last" \
"shardtrain: error (rank 0): peer lost
$rule
mpirun noticed that process rank 1 with PID 7 on node vm exited on signal 9 (Killed).
$rule" \
"$rule
mpirun noticed that process rank 1 with PID 7 on node vm exited on signal 9 (Killed).
$rule
shardtrain: error (rank 0): peer lost
shardtrain: rank 1 (pid 7 on vm) ended by signal 9 (Killed): killed from outside (kill -9, the out-of-memory killer, the scheduler); the job was aborted"

check "a rank killed by a signal, no fatal line: the abort banner that follows is dropped" \
"$rule
mpirun noticed that process rank 3 with PID 9 on node 10.0.0.3 exited on signal 11 (Segmentation fault).
$rule
$rule
Primary job  terminated normally, but 1 process returned
a non-zero exit code. Per user-direction, the job has been aborted.
$rule" \
"$rule
mpirun noticed that process rank 3 with PID 9 on node 10.0.0.3 exited on signal 11 (Segmentation fault).
$rule
shardtrain: rank 3 (pid 9 on 10.0.0.3) ended by signal 11 (Segmentation fault): it crashed (its output above, a core file); the job was aborted"

check "a preempted run (exit status 75): the abort banners are dropped" \
"$rule
Primary job  terminated normally, but 1 process returned
a non-zero exit code. Per user-direction, the job has been aborted.
$rule
$rule
mpirun detected that one or more processes exited with non-zero status, thus causing
the job to be terminated. The first process to do so was:

  Process name: [[28529,1],2]
  Exit code:    75
$rule
last line" \
"last line"

check "no fatal line: everything passes, banners included" \
"shardtrain: warning: trace.json not written: No space left on device (ENOSPC)
$rule
MPI_ABORT was invoked on rank 0 in communicator MPI_COMM_WORLD
$rule" \
"shardtrain: warning: trace.json not written: No space left on device (ENOSPC)
$rule
MPI_ABORT was invoked on rank 0 in communicator MPI_COMM_WORLD
$rule"

# launch/supervise: a launcher that does not end after the job's failure
# (as mpirun waiting for a node behind a lost link) is ended after the grace,
# with one line saying so, the error still last and the status 1.
hung_launcher='echo "shardtrain: error (rank 1): lost" >&2; trap "" TERM; sleep 60'
start=$SECONDS
rc=0
out=$(SHARDRUN_ABORT_GRACE_S=1 "${SOURCE_DIR}/launch/supervise" bash -c "$hung_launcher" 2>&1) || rc=$?
took=$((SECONDS - start))
if [ "$rc" != 1 ] || [ "$took" -gt 15 ]; then
  fail "supervise: exit $rc after $took s (want 1 within 15 s)"
elif ! grep -q '^supervise: the job failed 1 s ago and its launcher (bash, pid [0-9]*) has not ended' <<<"$out"; then
  fail "supervise: no line saying it ended the launcher: $out"
elif [ "$(tail -1 <<<"$out")" != "shardtrain: error (rank 1): lost" ]; then
  fail "supervise: the last line: $(tail -1 <<<"$out")"
else
  echo "ok   supervise ended a launcher that ignores SIGTERM in $took s (exit $rc)"
fi

# The real launcher: an injected error on rank 1, then an error on both ranks.
"$st" prep fashion-mnist --out data >/dev/null || { echo "FAIL: prep"; exit 1; }
common=(--set data.train=data/train --set data.test=data/test --set data.train_limit=1280
        --set data.test_limit=1000 --set target.value=0 --set train.max_steps=20)
# expect_last NAME PATTERN ARGS...: the job fails and its output ends with
# one line matching PATTERN, printed once, with no MPI_ABORT banner.
expect_last() {
  local name=$1 pattern=$2 rc=0; shift 2
  "${SOURCE_DIR}/launch/shardrun" -n 2 -- "$st" train "$cfg" "${common[@]}" --run-dir "$name" "$@" >"$name.txt" 2>&1 || rc=$?
  local last
  last=$(grep -v '^$' "$name.txt" | tail -1)
  if [ "$rc" = 0 ]; then fail "$name: exit 0"
  elif ! grep -Eqx "$pattern" <<<"$last"; then fail "$name: last line: $last"
  elif [ "$(grep -Ec "$pattern" "$name.txt")" != 1 ]; then fail "$name: the error is printed more than once"; cat "$name.txt"
  elif grep -q "MPI_ABORT was invoked" "$name.txt"; then fail "$name: Open MPI's MPI_ABORT banner is still there"
  else echo "ok   $name (exit $rc): $last"; fi
}
expect_last one-rank 'shardtrain: error \(rank 1\): debug\.fail_step: injected failure on rank 1 at step 3' \
  --set debug.slow_rank=1 --set debug.fail_step=3
expect_last both-ranks 'shardtrain: error \(ranks? [01](, 1)?\): data\.train: missing/train: .*' \
  --set data.train=missing/train

[ "$failures" = 0 ] || { echo "$failures failure(s)"; exit 1; }
echo "failure summary: all cases passed"
