#!/usr/bin/env bash
# The whole test suite, from a fresh machine: install what is needed, build,
# run every ctest test (labels unit, integration, mpi, gpu, fault, soak). Extra
# arguments go to ctest (e.g. -L unit), which then runs once, two at a time.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
# The whole suite boots two Soft-RoCE nodes (rocenodes_test), whose image is
# built once per machine: mostly dpkg in a chroot, one core for about 2
# minutes. Built beside the compiler rather than as a test alone, the other
# core is not left idle. A failed build is reported, and the image's test
# (a ctest fixture, which takes the same lock) tries again and fails with
# its log.
image=
if [ $# -eq 0 ] && launch/rocenodes check >/dev/null 2>&1; then
  image_log=$(mktemp /tmp/shardtrain-rocenodes-image.XXXXXX)
  echo "test.sh: building the Soft-RoCE nodes' image beside the build (log: $image_log)"
  launch/rocenodes image >"$image_log" 2>&1 &
  image=$!
fi
# Without a GPU the device code only has to compile: for sm_90 alone, half
# the time of sm_80 and sm_90 (cmake/cuda.cmake).
check=ON
nvidia-smi -L >/dev/null 2>&1 && check=OFF
scripts/build.sh -DSHARDTRAIN_CUDA_COMPILE_CHECK=$check
if [ -n "$image" ]; then
  if wait "$image"; then
    echo "test.sh: the Soft-RoCE image is ready"
    rm -f "$image_log"
  else
    echo "test.sh: building the Soft-RoCE image failed; its last lines ($image_log):"
    tail -15 "$image_log"
  fi
fi
run=(ctest --test-dir build --output-on-failure)
if [ $# -gt 0 ]; then
  exec "${run[@]}" -j2 "$@"
fi
# Two tests at a time, one per core; then the fault tests four at a time:
# they mostly wait (for a timeout, a signal, a rank slowed on purpose), and
# two at a time left the cores idle almost half the time
# (docs/BENCHMARKS.md, "How long CI takes"). Both parts run, and either's
# failure fails the suite.
rc=0 logs=()
for part in "-j2 -LE fault" "-j4 -L fault"; do
  # shellcheck disable=SC2086  # the part's words are ctest's arguments
  "${run[@]}" $part || rc=$?
  log=$(mktemp /tmp/shardtrain-ctest-log.XXXXXX)
  cp build/Testing/Temporary/LastTest.log "$log" 2>/dev/null && logs+=("$log")
done
# The suite prints thousands of lines, and a reader of its tail alone (CI
# keeps the last screenful) would see only a failed test's name: its
# verdict lines and last lines are repeated here, at the very end.
if [ "$rc" -ne 0 ] && [ ${#logs[@]} -gt 0 ]; then
  scripts/ctest-failures.sh "${logs[@]}" || true
fi
rm -f "${logs[@]}"
exit "$rc"
