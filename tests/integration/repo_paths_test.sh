#!/usr/bin/env bash
# Every repository path that a comment, a script or a doc names exists: a
# file renamed or removed leaves no pointer to nowhere. A path is a word that
# starts with one of the repository's top folders and ends in a known
# extension (runtime/train/config.cpp, docs/io.md); a path ending in / names
# a folder. Text quoted as an example of user input is not a path: it names
# a folder the user makes (data/, runs/, build/) or has <placeholders>.
# Environment: SOURCE_DIR.
set -uo pipefail
cd "${SOURCE_DIR:?}" || exit 1
top='(runtime|kernels|io|launch|tests|examples|docs|scripts|bench|cli|tools|cmake|\.ci)'
ext='(h|cpp|cu|cuh|c|sh|md|py|toml|txt|json|cmake)'
missing=0 checked=0
while IFS= read -r file; do
  while IFS= read -r path; do
    checked=$((checked + 1))
    [ -e "$path" ] && continue
    echo "FAIL: $file names $path, which does not exist"
    missing=$((missing + 1))
  done < <(grep -oE "(^|[^A-Za-z0-9_./<-])$top/[A-Za-z0-9_./-]*[A-Za-z0-9_](\\.$ext|/)" "$file" |
           sed -E 's/^[^a-z.]//' | grep -v '\*' | sort -u)
done < <(git ls-files '*.cpp' '*.h' '*.cu' '*.cuh' '*.c' '*.sh' '*.md' '*.py' '*.toml' '*.txt' 'CMakeLists.txt' \
           '.ci/*' | grep -v '^docs/gpu-check-h200-table.txt$')
# A bare file name (config.cpp) must be some tracked file's name; names of
# other projects' files that our text mentions are listed here.
external='^(cblas\.h|nccl\.h|libdeflate\.h|env\.sh)$'
names=$(git ls-files | sed 's|.*/||' | sort -u)
while IFS= read -r file; do
  while IFS= read -r name; do
    checked=$((checked + 1))
    grep -qxF "$name" <<<"$names" && continue
    [[ "$name" =~ $external ]] && continue
    echo "FAIL: $file names $name, which no file of the repository is called"
    missing=$((missing + 1))
  done < <(grep -v '#include' "$file" | grep -oE '(^|[^A-Za-z0-9_./*<-])[a-z0-9][a-z0-9_]+\.(h|cpp|cu|cuh|sh|py)\b' |
           sed -E 's/^[^a-z0-9_]//' | sort -u)
done < <(git ls-files '*.cpp' '*.h' '*.cu' '*.cuh' '*.c' '*.sh' '*.md' '*.py' '*.toml' | grep -v '^docs/gpu-check-h200-table.txt$')
echo "repo paths: $checked named, $missing missing"
[ "$missing" -eq 0 ]
