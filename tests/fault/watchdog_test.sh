#!/usr/bin/env bash
# The communicator's watchdog ends a job whose collective is stuck or
# mismatched, with one line naming the communicator, the operation, its
# sequence number and size, and the ranks that never arrived (and what they
# do instead). Runs tests/fault/comm_watchdog_probe under mpirun with 2 and 3
# ranks (timeout_s = 2): each case must exit non-zero within 30 s with that
# line on stderr. Environment: PROBE_DIR (where comm_watchdog_probe is),
# SOURCE_DIR (the repository, for launch/shardrun).
set -uo pipefail

probe="${PROBE_DIR:?PROBE_DIR must name the directory of comm_watchdog_probe}/comm_watchdog_probe"
shardrun="${SOURCE_DIR:?SOURCE_DIR must name the repository}/launch/shardrun"
[ -x "$probe" ] || { echo "watchdog_test: $probe not built" >&2; exit 1; }
failures=0

# case NAME RANKS "PROBE ARGS" "PATTERN"... : a non-zero exit within 30 s, and
# every extended regular expression PATTERN found in the output.
case_() {
  local name="$1" ranks="$2" args="$3"
  shift 3
  local out start end rc
  start=$(date +%s.%N)
  # shellcheck disable=SC2086  # probe arguments are split on purpose
  out=$(timeout 60 bash "$shardrun" -n "$ranks" -- "$probe" $args 2>&1)
  rc=$?
  end=$(date +%s.%N)
  local took
  took=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
  local ok=1
  if [ "$rc" -eq 0 ]; then
    echo "FAIL $name: exited 0 (the watchdog did not end the job)"; ok=0
  fi
  if awk -v t="$took" 'BEGIN { exit !(t > 30) }'; then
    echo "FAIL $name: took ${took} s (more than 30)"; ok=0
  fi
  for pattern in "$@"; do
    if ! grep -Eq -- "$pattern" <<<"$out"; then
      echo "FAIL $name: no match for /$pattern/"; ok=0
    fi
  done
  if [ "$ok" -eq 1 ]; then
    echo "ok   $name (${took} s, exit $rc): $(grep -m1 'shardtrain: watchdog' <<<"$out")"
  else
    failures=$((failures + 1))
    echo "---- output of $name (exit $rc):"; echo "$out" | head -40; echo "----"
  fi
}

# Rank 1 never issues allreduce #1 and sits in "compute": it is named with
# what it last completed. Shared memory (auto on one machine), the one-shot,
# MPI's collective, then the ring (large).
case_ skip-shm-2 2 "skip --bytes 4096" \
  "watchdog: allreduce #1 \(4096 bytes, f32, shm\) on communicator 'world' \(rank 0 of 2\) not complete after 2\.[0-9] s" \
  "ranks that never arrived: 1 \(last completed #0, nothing in flight\)"
case_ skip-oneshot-3 3 "skip --bytes 4096 --algorithm oneshot" \
  "watchdog: allreduce #1 \(4096 bytes, f32, oneshot\) on communicator 'world' \(rank [02] of 3\) not complete after 2\.[0-9] s" \
  "ranks that never arrived: 1 \(last completed #0, nothing in flight\)"
case_ skip-mpi-2 2 "skip --bytes 4096 --algorithm mpi" \
  "watchdog: allreduce #1 \(4096 bytes, f32, mpi\) on communicator 'world' \(rank 0 of 2\) not complete after 2\.[0-9] s" \
  "ranks that never arrived: 1 \(last completed #0, nothing in flight\)"
case_ skip-ring-3 3 "skip --bytes 1048576 --algorithm ring" \
  "allreduce #1 \(1048576 bytes, f32, ring\) on communicator 'world' \(rank [02] of 3\) not complete" \
  "ranks that never arrived: 1 \(last completed #0, nothing in flight\)"

# The same inside a group: #2 and #3 queued behind #1 run as one, and rank
# 1 never issues #3. The report names #3 and rank 1, not #2 (which rank 1
# completed) as if every rank had arrived.
case_ skip-in-group-shm-2 2 "skip-in-group --bytes 4096" \
  "watchdog: allreduce #3 \(4096 bytes, f32, shm\) on communicator 'world' \(rank 0 of 2\) not complete" \
  "ranks that never arrived: 1 \(last completed #2, nothing in flight\)"
case_ skip-in-group-oneshot-3 3 "skip-in-group --bytes 4096 --algorithm oneshot" \
  "watchdog: allreduce #3 \(4096 bytes, f32, oneshot\) on communicator 'world' \(rank [02] of 3\) not complete" \
  "ranks that never arrived: 1 \(last completed #2, nothing in flight\)"

# Rank 1 issues a broadcast where the others all-reduce: caught at once in
# shared memory (what each rank announced) and by the one-shot (its first
# message meets the broadcast's arrival check).
case_ mismatch-op-2 2 "mismatch-op --bytes 4096" \
  "allreduce #1 \(4096 bytes, f32, shm\) on communicator 'world' \(rank 0 of 2\) failed: the ranks issued different collectives as #1: rank 1 runs broadcast" \
  "never arrived: 1 \(issued broadcast #1 \(4096 bytes, f32, root 0\) instead\)"
case_ mismatch-op-oneshot-2 2 "mismatch-op --bytes 4096 --algorithm oneshot" \
  "(allreduce #1 \(4096 bytes, f32, oneshot\)|broadcast #1 \(4096 bytes, f32, root 0, mpi\)) on communicator 'world' \(rank [01] of 2\) failed" \
  "never arrived: [01] \(issued (broadcast|allreduce) #1 \(4096 bytes, f32"
# Whichever side times out first reports: an all-reducing rank naming rank 1's
# broadcast, or rank 1 naming the others' all-reduce (seen in CI, loaded).
case_ mismatch-op-3 3 "mismatch-op --bytes 1048576 --algorithm ring" \
  "(allreduce #1 \(1048576 bytes, f32, ring\) on communicator 'world' \(rank [02] of 3\)|broadcast #1 \(1048576 bytes, f32, root 0, mpi\) on communicator 'world' \(rank 1 of 3\))" \
  "never arrived: (1 \(issued broadcast #1 \(1048576 bytes, f32, root 0\) instead\)|0 \(issued allreduce #1 \(1048576 bytes, f32\) instead\))"

# Rank 1 all-gathers where the others reduce-scatter, in shared memory:
# caught at once (what each rank announced, or the step's descriptors).
case_ mismatch-gather-shm-2 2 "mismatch-gather --bytes 4096" \
  "(reduce_scatter|allgather) #1 \([0-9]+ bytes, f32, shm\) on communicator 'world' \(rank [01] of 2\) failed: the ranks issued different collectives as #1: rank [01] runs (allgather|reduce_scatter)" \
  "issued (allgather|reduce_scatter) #1 \([0-9]+ bytes, f32\) instead"

# Rank 1 all-reduces twice the bytes: the ring notices the wrong message
# sizes at once, MPI's collective errs or hangs until the timeout.
case_ mismatch-size-ring-2 2 "mismatch-size --bytes 1048576 --algorithm ring" \
  "allreduce #1 \((1048576|2097152) bytes, f32, ring\) on communicator 'world'" \
  "issued allreduce #1 \((2097152|1048576) bytes, f32\) instead"
case_ mismatch-size-shm-2 2 "mismatch-size --bytes 4096" \
  "allreduce #1 \((4096|8192) bytes, f32, shm\) on communicator 'world' \(rank [01] of 2\) failed: the ranks issued different collectives as #1" \
  "issued allreduce #1 \((8192|4096) bytes, f32\) instead"
case_ mismatch-size-oneshot-3 3 "mismatch-size --bytes 4096 --algorithm oneshot" \
  "allreduce #1 \((4096|8192) bytes, f32, oneshot\) on communicator 'world' \(rank [012] of 3\) failed" \
  "issued allreduce #1 \((8192|4096) bytes, f32\) instead"
case_ mismatch-size-mpi-3 3 "mismatch-size --bytes 4096 --algorithm mpi" \
  "allreduce #1 \((4096|8192) bytes, f32, mpi\) on communicator 'world'" \
  "issued allreduce #1 \((8192|4096) bytes, f32\) instead"

# Rank 1's whole process is stopped: nobody answers for it, the wait for
# answers is bounded, and the job still ends.
case_ freeze-2 2 "freeze --bytes 4096" \
  "allreduce #1 \(4096 bytes, f32, shm\) on communicator 'world' \(rank 0 of 2\) not complete" \
  "ranks that never arrived: 1 \(no answer: exited, dead, or its process is hung\)"

# Rank 1 arrives at #1 after the others asked every rank what it does
# (0.5 s before the 2 s timeout) but before the timeout: no verdict, the
# job goes on and completes #2 (the asking left no request behind).
for ranks in 2 3; do
  out=$(timeout 60 bash "$shardrun" -n "$ranks" -- "$probe" late --bytes 4096 --algorithm oneshot 2>&1)
  if [ $? -ne 0 ] || ! grep -q "late: every collective completed" <<<"$out" || grep -q "shardtrain: watchdog" <<<"$out"; then
    echo "FAIL late-$ranks: a collective that completes before the timeout must not end the job"
    echo "$out" | head -20; failures=$((failures + 1))
  else
    echo "ok   late-$ranks"
  fi
done

# Sanity: without a fault the probe completes and exits 0.
out=$(timeout 60 bash "$shardrun" -n 2 -- "$probe" ok 2>&1)
if [ $? -ne 0 ] || ! grep -q "every collective completed" <<<"$out"; then
  echo "FAIL ok-2: the probe failed without a fault"; echo "$out" | head -20; failures=$((failures + 1))
else
  echo "ok   ok-2"
fi

[ "$failures" -eq 0 ] || { echo "watchdog_test: $failures case(s) failed"; exit 1; }
echo "watchdog_test: all cases passed"
