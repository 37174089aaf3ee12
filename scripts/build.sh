#!/usr/bin/env bash
# Configures (once) and builds shardtrain in build/ (Release, Ninja).
# Extra arguments go to the CMake configure step, e.g. -DSHARDTRAIN_CUDA=OFF.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -f build/build.ninja ] || [ $# -gt 0 ]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "$@"
fi
cmake --build build
