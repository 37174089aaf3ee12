#!/usr/bin/env bash
# Configures (once) and builds shardtrain in build/ (Release, Ninja).
# Extra arguments go to the CMake configure step, e.g. -DSHARDTRAIN_CUDA=OFF.
# A unity build (CMAKE_UNITY_BUILD: each library's sources compile in
# batches), the fastest way from a fresh checkout to a working program; when
# editing one file again and again, -DCMAKE_UNITY_BUILD=OFF rebuilds less.
set -euo pipefail
cd "$(dirname "$0")/.."
# scripts/test.sh, where no GPU is present, compiles device code for one
# architecture only (SHARDTRAIN_CUDA_COMPILE_CHECK, cmake/cuda.cmake); a
# build for running, as this is without arguments, gets every one again.
args=("$@")
if [ $# -eq 0 ] && grep -q '^SHARDTRAIN_CUDA_COMPILE_CHECK:BOOL=ON$' build/CMakeCache.txt 2>/dev/null; then
  args=(-DSHARDTRAIN_CUDA_COMPILE_CHECK=OFF)
fi
if [ ! -f build/build.ninja ] || [ ${#args[@]} -gt 0 ]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_UNITY_BUILD=ON "${args[@]}"
fi
cmake --build build
