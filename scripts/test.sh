#!/usr/bin/env bash
# The whole test suite, from a fresh machine: install what is needed, build,
# run every ctest test (labels unit, integration, mpi, gpu, fault, soak). Extra
# arguments go to ctest (e.g. -L unit), which then runs once, two at a time.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
run=(ctest --test-dir build --output-on-failure)
if [ $# -gt 0 ]; then
  exec "${run[@]}" -j2 "$@"
fi
# Two tests at a time, one per core; then the fault tests four at a time:
# they mostly wait (for a timeout, a signal, a rank slowed on purpose), and
# two at a time left the cores idle almost half the time
# (docs/BENCHMARKS.md, "How long CI takes"). Both parts run, and either's
# failure fails the suite.
rc=0
"${run[@]}" -j2 -LE fault || rc=$?
"${run[@]}" -j4 -L fault || rc=$?
exit "$rc"
