#!/usr/bin/env bash
# Fails, naming the files and lines, when a C++ or CUDA source of the
# repository differs from the style in .clang-format (apply it with
# `clang-format -i FILE`).
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files '*.cpp' '*.h' '*.cu' '*.cuh' '*.c')
clang-format --dry-run -Werror "${files[@]}"
echo "check-format: ${#files[@]} files follow .clang-format"
