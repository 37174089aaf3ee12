#!/usr/bin/env bash
# The failed tests of ctest logs (build/Testing/Temporary/LastTest.log, or
# copies), each with its verdict lines (FAIL, BAD, error) and its last
# lines: what a reader of the end of a long run needs to see why.
#   scripts/ctest-failures.sh LOG [LOG ...]   (TAIL=N lines per test, default 25)
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: scripts/ctest-failures.sh LOG [LOG ...]" >&2; exit 2; }
awk -v tail_n="${TAIL:-25}" '
  /^[0-9]+\/[0-9]+ Testing: / { name = $3; n = 0; inside = 0; next }
  /^Output:$/ { inside = 1; getline; next }
  /^<end of output>$/ { inside = 0; next }
  inside { out[++n] = $0; next }
  /^Test (Failed|Not Run)|^Test time|Timeout|Exception/ {
    if ($0 ~ /^Test time/ || name == "" ) next
    printf "=== %s: %s\n", name, $0
    for (i = 1; i <= n; i++)
      if (out[i] ~ /(FAIL|BAD|[Ee]rror|Segmentation|Assertion)/ && i <= n - tail_n) print "  " out[i]
    if (n > tail_n) printf "  ... (its last %d of %d lines:)\n", tail_n, n
    for (i = (n > tail_n ? n - tail_n + 1 : 1); i <= n; i++) print "  " out[i]
    name = ""
  }
' "$@"
