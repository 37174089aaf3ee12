#!/usr/bin/env bash
# Runs each libFuzzer target (tests/fuzz/fuzz_*.cpp, built by the asan
# preset: clang, AddressSanitizer + UBSan, SHARDTRAIN_FUZZ=ON) for a bounded
# time: first on its committed seeds (tests/fuzz/corpus/<input>; the config
# target also on examples/*.toml) and the
# inputs of past findings (tests/fuzz/regressions/<input>), then on what it
# derives from them. Prints a table of executions and coverage per target;
# a crash, a sanitizer report, a timeout or an out-of-memory input fails,
# and the input is kept under BUILD_DIR/fuzz-findings/ (see docs/reliability.md).
#   scripts/fuzz.sh [SECONDS]      # per target, default 30; build dir: build-asan
#   scripts/fuzz.sh --seeds        # rewrite tests/fuzz/corpus/ with the targets' seed writers
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build-asan}
inputs=(config manifest shard checkpoint)
[ -x "$build/bin/fuzz_${inputs[0]}" ] || { echo "fuzz: no $build/bin/fuzz_${inputs[0]}: build the asan preset first (scripts/test-sanitizers.sh asan)" >&2; exit 2; }
supp=$PWD/tests/sanitizers
export LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
# Stacks name our functions when a symbolizer is installed (llvm's, of any
# version; the sanitizers find none on their own under clang 22's name).
symbolizer=$(command -v llvm-symbolizer || true)
[ -z "$symbolizer" ] || export ASAN_SYMBOLIZER_PATH=$symbolizer TSAN_SYMBOLIZER_PATH=$symbolizer
if [ "${1:-}" = "--seeds" ]; then
  for input in "${inputs[@]}"; do
    dir=tests/fuzz/corpus/$input
    rm -rf "$dir" && mkdir -p "$dir"
    SHARDTRAIN_FUZZ_WRITE_SEEDS=$PWD/$dir ASAN_OPTIONS=detect_leaks=0 "$build/bin/fuzz_$input"
    echo "fuzz: $dir: $(ls "$dir" | wc -l) seed(s)"
  done
  exit 0
fi
seconds=${1:-30}
[[ "$seconds" =~ ^[1-9][0-9]*$ ]] || { echo "fuzz: SECONDS must be a positive integer, got '$seconds'" >&2; exit 2; }
findings=$PWD/$build/fuzz-findings
mkdir -p "$findings"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf '%-11s %10s %8s %7s %7s %7s  %s\n' target executions exec/s cov ft corpus result
failed=0
for input in "${inputs[@]}"; do
  corpus=$work/$input
  mkdir -p "$corpus"
  compgen -G "tests/fuzz/corpus/$input/*" >/dev/null ||
    { echo "fuzz: tests/fuzz/corpus/$input is empty: write the seeds with scripts/fuzz.sh --seeds" >&2; exit 2; }
  cp tests/fuzz/corpus/"$input"/* "$corpus"/
  [ "$input" != config ] || cp examples/*.toml "$corpus"/  # the examples' configs seed it too
  regressions=tests/fuzz/regressions/$input
  [ -d "$regressions" ] || { regressions=$work/no-regressions; mkdir -p "$regressions"; }
  log=$work/$input.log
  # -seed fixes the mutation sequence (a run can be repeated); -timeout and
  # -rss_limit_mb make a hang or a runaway allocation a finding.
  result=ok
  if ! "$build/bin/fuzz_$input" -seed=1 -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
       -print_final_stats=1 -artifact_prefix="$findings/$input-" "$corpus" "$regressions" >"$log" 2>&1; then
    result="FAILED: input kept in $findings (log below)"
    failed=1
  fi
  done_line=$(grep -E '^#[0-9]+[[:space:]]+(DONE|pulse|NEW|REDUCE|INITED)' "$log" | tail -1 || true)
  stat() { grep -oE "^stat::$1: *[0-9]+" "$log" | grep -oE '[0-9]+$' || echo '?'; }
  cov=$(grep -oE 'cov: [0-9]+' <<<"$done_line" | grep -oE '[0-9]+' || echo '?')
  ft=$(grep -oE 'ft: [0-9]+' <<<"$done_line" | grep -oE '[0-9]+' || echo '?')
  printf '%-11s %10s %8s %7s %7s %7s  %s\n' "$input" "$(stat number_of_executed_units)" "$(stat average_exec_per_sec)" \
    "$cov" "$ft" "$(ls "$corpus" | wc -l)" "$result"
  if [ "$result" != ok ]; then tail -n 60 "$log"; fi
done
exit $failed
