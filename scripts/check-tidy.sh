#!/usr/bin/env bash
# clang-tidy 22 (.clang-tidy: bugprone-*, performance-*, a function-size limit)
# on every library and program source: runtime/, kernels/cpu, io/, cli/,
# bench/commands/ (the tests and the CUDA sources are not linted). Needs the
# compile commands of a configured unity build (CMAKE_UNITY_BUILD, as the
# cpu-only preset is): it lints the batches, each of which includes several
# .cpp files, so that the headers they share are parsed once per batch, not
# once per file (parsing is most of clang-tidy's time); diagnostics in the
# included .cpp files are reported (.clang-tidy's HeaderFilterRegex). Every
# source must be in a batch. BUILD_DIR (default build).
#   scripts/check-tidy.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
[ -f "$build/compile_commands.json" ] || { echo "check-tidy: no $build/compile_commands.json (configure first)" >&2; exit 2; }
mapfile -t sources < <(git ls-files 'runtime/*.cpp' 'kernels/*.cpp' 'io/*.cpp' 'cli/*.cpp' 'bench/commands/*.cpp' |
                       grep -v '^kernels/cuda/\|^runtime/comm/gpu/')
mapfile -t files < <(find "$build"/runtime "$build"/kernels "$build"/io "$build"/cli "$build"/bench/commands \
                       -path '*/Unity/unity_*_cxx.cxx' 2>/dev/null | grep -v '/kernels/cuda/\|/comm/gpu/\|shardtrain_comm_gpu' | sort)
[ ${#files[@]} -gt 0 ] || { echo "check-tidy: no unity batches in $build: configure it with -DCMAKE_UNITY_BUILD=ON" >&2; exit 2; }
included=$(cat "${files[@]}" | sed -n 's|^#include "'"$PWD"'/\(.*\.cpp\)"$|\1|p' | sort -u)
missing=$(comm -23 <(printf '%s\n' "${sources[@]}" | sort) <(printf '%s\n' "$included"))
[ -z "$missing" ] || { echo "check-tidy: not in any unity batch of $build, so not linted: $missing" >&2; exit 2; }
log=$(mktemp)
trap 'rm -f "$log"' EXIT
run-clang-tidy-22 -clang-tidy-binary clang-tidy-22 -p "$build" -j "$(nproc)" -quiet "${files[@]}" 2>&1 | sed 's/\x1b\[[0-9;]*m//g' >"$log" || true
if grep -E '^/.*: (warning|error):|^Error while processing' "$log"; then
  echo "check-tidy: findings above (.clang-tidy)" >&2
  exit 1
fi
echo "check-tidy: ${#sources[@]} files clean (${#files[@]} batches)"
