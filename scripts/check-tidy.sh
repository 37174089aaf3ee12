#!/usr/bin/env bash
# clang-tidy 22 (.clang-tidy: bugprone-*, performance-*, a function-size limit)
# on every library and program source: runtime/, kernels/cpu, io/, cli/,
# bench/commands/ (the tests and the CUDA sources are not linted). Needs the
# compile commands of a configured build: BUILD_DIR (default build).
#   scripts/check-tidy.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
[ -f "$build/compile_commands.json" ] || { echo "check-tidy: no $build/compile_commands.json (configure first)" >&2; exit 2; }
mapfile -t files < <(git ls-files 'runtime/*.cpp' 'kernels/*.cpp' 'io/*.cpp' 'cli/*.cpp' 'bench/commands/*.cpp' |
                     grep -v '^kernels/cuda/\|^runtime/comm/gpu/')
log=$(mktemp)
trap 'rm -f "$log"' EXIT
run-clang-tidy-22 -clang-tidy-binary clang-tidy-22 -p "$build" -j "$(nproc)" -quiet "${files[@]}" 2>&1 | sed 's/\x1b\[[0-9;]*m//g' >"$log" || true
if grep -E '^/.*: (warning|error):|^Error while processing' "$log"; then
  echo "check-tidy: findings above (.clang-tidy)" >&2
  exit 1
fi
echo "check-tidy: ${#files[@]} files clean"
