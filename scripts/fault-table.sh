#!/usr/bin/env bash
# The corrupt-data corpus at full size (docs/reliability.md, "A corrupt
# corpus"): CASES damaged splits (default 66, each of the 11 kinds of
# damage 6 times at positions drawn from SEED), each trained on with both
# loaders on 1 and 2 ranks; prints a line per run and the table of outcomes.
# Then 10 kills of a random rank at a random step of a 2-rank DDP job
# (tests/fault/ddp_faults_test.sh with KILL_RUNS=10, each resumed), the
# disk-full cases with 10 runs of a 2-rank checkpoint on a full disk
# (tests/fault/disk_full_test.sh with DISK_FULL_RUNS=10), and 10 kills of a
# random rank while it writes a checkpoint, each resumed from the one
# before (tests/fault/checkpoint_resume_test.sh with CKPT_KILL_RUNS=10), with
# their counts. Then 10 links of an emulated node set down mid-run and a
# 1 Mbit/s run (tests/fault/link_fault_test.sh with LINK_RUNS=10; needs
# root, skipped otherwise). Then 10 signals at random steps, each resumed
# (tests/fault/preemption_test.sh with PREEMPTION_RUNS=10). Then the object store's faults 5 times, each on
# a fresh S3 server (tests/fault/object_store_test.sh). About 17 minutes on
# 2 cores (11 for the corpus and the kills, 3.3 for the links, 2.5 for the
# store, 1 for the signals). The same tests run in ctest with 11 corpus cases
# on 2 ranks, one kill or cut link of each kind, one signal of each kind and
# the store's faults once.
#   scripts/fault-table.sh [CASES] [SEED]
set -euo pipefail
cd "$(dirname "$0")/.."
export PROBE_DIR=${BIN_DIR:-$PWD/build/bin} SOURCE_DIR=$PWD
CASES=${1:-66} SEED=${2:-1} RANKS="1 2" bash tests/fault/corrupt_corpus_test.sh
KILL_RUNS=10 SEED=${2:-1} bash tests/fault/ddp_faults_test.sh
DISK_FULL_RUNS=10 bash tests/fault/disk_full_test.sh || [ $? -eq 77 ]
CKPT_KILL_RUNS=10 SEED=${2:-1} bash tests/fault/checkpoint_resume_test.sh
LINK_RUNS=10 bash tests/fault/link_fault_test.sh || [ $? -eq 77 ]
PREEMPTION_RUNS=10 bash tests/fault/preemption_test.sh
passed=0
for run in 1 2 3 4 5; do
  bash tests/fault/object_store_test.sh >"/tmp/object-store-fault-$run.txt" 2>&1 && passed=$((passed + 1))
done
echo "object store: $passed of 5 runs passed every check (logs: /tmp/object-store-fault-N.txt)"
