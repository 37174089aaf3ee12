#!/usr/bin/env bash
# The whole test suite, from a fresh machine: install what is needed, build,
# run every ctest test (labels unit, integration, mpi, gpu, fault, soak). Extra
# arguments go to ctest (e.g. -L unit).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
ctest --test-dir build --output-on-failure -j2 "$@"
