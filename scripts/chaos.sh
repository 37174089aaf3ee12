#!/usr/bin/env bash
# The chaos soak (docs/reliability.md, "The chaos soak"; not in CI): the
# GPT of examples/gpt_kjv.toml on 4 ranks over 2 emulated nodes
# (launch/emunodes), streamed through the peer cache, hit by at least 50
# faults over at least 30 minutes, drawn at random from: kill -9 of a rank,
# kill -9 while a checkpoint is written, SIGTERM to every rank, SIGUSR1 to
# mpirun, a node's link cut, every link at 1 Mbit/s for 30 s, the run
# directory's disk filled, the memory limit exceeded, a node's cached shard
# corrupted, a rank slowed 10x for 20 s, a node's peer-cache directory
# removed, every link at 10 Mbit/s for a minute, and the newest checkpoint
# damaged before a kill. After each fault that ends the job it is started
# again with --resume auto. The seed of the draw is printed; --seed S draws
# the same sequence again. At the end the run's parameters and optimizer
# state must equal an uninterrupted run's (made first, in DIR/reference),
# bit for bit, every fault must have been met as expected (the job's last
# line naming the cause, a restart that trains), and nothing may crash.
# Prints the table of faults by kind (also DIR/table.md; each fault in
# DIR/faults.jsonl, each job's output in DIR/segment-NNN.txt).
# Needs root (network namespaces, a tmpfs for the run directory, cgroups)
# and Debian's python3 with h5py (scripts/install-deps.sh). About 60
# minutes with the defaults (12 of them the uninterrupted run).
#   scripts/chaos.sh [--seed S] [--faults N] [--minutes M] [--steps N] [--dir DIR]
#                    [--only k1,k2] [--skip k1,k2] [--set KEY=VALUE ...]   (scripts/chaos.sh --help)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=/usr/bin/python3  # Debian's, with h5py and numpy
[ "$(id -u)" -eq 0 ] || { echo "chaos: needs root (network namespaces, a tmpfs, cgroups)" >&2; exit 2; }
"$PY" -c "import h5py, numpy" 2>/dev/null || { echo "chaos: $PY lacks h5py (scripts/install-deps.sh)" >&2; exit 2; }
[ -x build/bin/shardtrain ] || { echo "chaos: build first (scripts/build.sh)" >&2; exit 2; }
why=$(launch/emunodes check 2>&1) || { echo "chaos: $why" >&2; exit 2; }
exec "$PY" scripts/chaos.py "$@"
