#!/usr/bin/env bash
# The chaos soak's fast form (scripts/chaos.sh, docs/reliability.md "The
# chaos soak"): the GPT of examples/gpt_kjv.toml on 4 ranks over 2 emulated
# nodes, 900 steps, a checkpoint every 50, hit by 10 faults of the kinds
# that take seconds, each kind at least once (seed 7): kill -9, kill -9
# while a checkpoint is written, the newest checkpoint damaged, SIGTERM,
# a full disk, a lowered memory limit, a corrupted cached shard, a
# rank slowed 10x, a node's peer cache removed. The link faults take
# minutes; fault.link_fault_test has them. SIGUSR1 to mpirun is left to
# the long soak and fault.preemption_test: here it once ended the job
# with exit 138 after 21.6 s instead of a preemption (1 of 16 such faults
# on 2026-12-05, not understood yet: docs/reliability.md). Every fault must be met as
# expected and the run must end with the uninterrupted run's parameters and
# optimizer state, bit for bit. Needs root (namespaces, a tmpfs): skipped
# (77) otherwise.
set -uo pipefail
[ "$(id -u)" -eq 0 ] || { echo "skipped: needs root (network namespaces, a tmpfs)"; exit 77; }
why=$("${SOURCE_DIR:?}/launch/emunodes" check 2>&1) || { echo "skipped: ${why#emunodes: }"; exit 77; }
/usr/bin/python3 -c "import h5py, numpy" 2>/dev/null || { echo "FAIL: python3-h5py missing (scripts/install-deps.sh)"; exit 1; }
dir=$(mktemp -d /tmp/shardtrain-chaos-test.XXXXXX)
trap 'umount -l "$dir/run-fs" 2>/dev/null; rm -rf "$dir"' EXIT
CHAOS_BIN="${PROBE_DIR:?}/shardtrain" /usr/bin/python3 "$SOURCE_DIR/scripts/chaos.py" --dir "$dir" --seed 7 \
  --faults 10 --minutes 0 --steps 900 --every 50 --timeout 30 --wait 2 4 --fs-mib 256 \
  --skip link_cut,link_1mbit,link_10mbit_minute,sigusr1 2>&1 | tee "$dir/chaos.txt"
rc=${PIPESTATUS[0]}
if [ "$rc" -ne 0 ]; then
  # The directory goes at exit: what the jobs printed, for the failure's
  # cause: the segment each fault not met as expected ended (or, with
  # none, the last segments), without the progress lines; then the
  # verdict again, last.
  segments=$(/usr/bin/python3 -c 'import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if not r.get("ok"): print("segment-%03d.txt" % r["segment"])' "$dir/faults.jsonl" 2>/dev/null)
  [ -n "$segments" ] || segments=$(cd "$dir" && ls segment-*.txt 2>/dev/null | tail -3)
  for f in $segments; do
    echo "--- $f, its last 40 lines:"
    grep -v '^\[train\]' "$dir/$f" | tail -40
  done
  # What the ranks of a job that should have ended were doing (chaos.py's
  # probe; the whole of it was in the directory).
  /usr/bin/python3 -c 'import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if not r.get("ok") and r.get("probe"):
        print("--- #%d %s, probed %s:" % (r["n"], r["kind"], r["probe"]["path"].rsplit("/", 1)[-1]))
        for g in r["probe"]["gist"]: print("  " + g)' "$dir/faults.jsonl" 2>/dev/null
  echo "--- the verdict:"
  grep -E '(BAD|FAIL) ' "$dir/chaos.txt"
fi
exit "$rc"
