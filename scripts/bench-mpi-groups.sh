#!/usr/bin/env bash
# The MPI library alone, on 4 emulated nodes of 2 ranks: a 100 KB all-reduce
# across the nodes, alone, beside a second thread's all-gather inside the
# node (as HYBRID's replica and shard groups run), and beside it but polled
# (MPI_Iallreduce + MPI_Test). docs/comm.md, "Groups that run at the same
# time", says what follows from it. Needs root (emulated nodes) and mpicxx.
#   scripts/bench-mpi-groups.sh [BYTES] [ITERS]   (default 102528 300)
set -euo pipefail
cd "$(dirname "$0")/.."
bytes=${1:-102528} iters=${2:-300}
work=$(mktemp -d)
trap 'build/bin/emunodes down --prefix mpigrp >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
mpicxx -O2 -std=c++17 bench/mpi/groups_at_once.cpp -o "$work/groups_at_once" -lpthread
build/bin/emunodes up 4 --prefix mpigrp --owner-pid $$ >/dev/null
for mode in "" "--beside" "--beside --polled"; do
  # shellcheck disable=SC2086
  build/bin/emunodes run --prefix mpigrp -n 8 --per-node 2 -- "$work/groups_at_once" 2 "$bytes" "$iters" $mode 2>&1 |
    grep '^rank' | sort -t' ' -k2n
done
