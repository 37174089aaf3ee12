#!/usr/bin/env bash
# Configures (once) and builds shardtrain in build/ (Release, Ninja).
# Extra arguments go to the CMake configure step, e.g. -DSHARDTRAIN_CUDA=OFF.
# A unity build (CMAKE_UNITY_BUILD: each library's sources compile in
# batches), the fastest way from a fresh checkout to a working program; when
# editing one file again and again, -DCMAKE_UNITY_BUILD=OFF rebuilds less.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -f build/build.ninja ] || [ $# -gt 0 ]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_UNITY_BUILD=ON "$@"
fi
cmake --build build
