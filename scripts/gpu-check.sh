#!/usr/bin/env bash
# GPU check on a lent machine (docs/gpu-check.md): run from the repo root with
# the bundle from scripts/bundle.sh:
#
#   scripts/gpu-check.sh [TARBALL]        # default bundle/shardtrain-bundle.tar.gz
#
# Sections: a environment, b bundle, c `shardtrain info` and `shardtrain doctor`, d gpu_* tests,
# e MPI on 2 ranks (device buffers), f training CPU vs GPU
# (scripts/gpu-check-train.sh), s speed against the GEMM rate and PyTorch
# (scripts/gpu-check-speed.sh), n every strategy on one rank over NCCL and
# determinism, z compute-sanitizer (scripts/gpu-check-strategies.sh), then
# the summary tables, printed last. GPU_CHECK_SECTIONS picks sections
# (default "info tests speed strategies sanitizer mpi train doctor", in
# that order; the environment and the bundle always run), so a rerun can
# take only what failed or ran out of time.
# Each step has a timeout and a failing step does not stop the others; the
# whole run stays under GPU_CHECK_BUDGET_S (default 450 s).
# Logs: $OUT/gpu-check.log (everything), $OUT/table.txt, $OUT/checks.tsv,
# $OUT/train.tsv, $OUT/runs.tar.gz (result/bench JSON, per-step logs);
# without $OUT they stay in $GPU_CHECK_WORK (default /tmp/gpu-check).
START_S=$SECONDS
REPO=$(cd "$(dirname "$0")/.." && pwd)
cd "$REPO" || exit 1
TARBALL=${1:-bundle/shardtrain-bundle.tar.gz}
BUDGET_S=${GPU_CHECK_BUDGET_S:-540}
SECTIONS=" ${GPU_CHECK_SECTIONS:-info tests speed strategies sanitizer mpi train doctor} "
TEST_TIMEOUT_S=${GPU_CHECK_TEST_TIMEOUT_S:-90}
UNPACK=${GPU_CHECK_UNPACK:-/tmp/stb}
W=${GPU_CHECK_WORK:-/tmp/gpu-check}
rm -rf "$W"; mkdir -p "$W/logs"
OUTDIR=${OUT:-$W}
mkdir -p "$OUTDIR"
LOG=$OUTDIR/gpu-check.log
: > "$LOG"
CHECKS=$W/checks.tsv   # section  check  dtype  relerr  limit  result
TRAIN=$W/train.tsv     # model  device  steps  loss  test_loss  step_ms  samples_s  tflops  result
: > "$CHECKS"; : > "$TRAIN"

say() { printf '%s\n' "$*" | tee -a "$LOG"; }
section() { say ""; say "=== $* ($((SECONDS - START_S)) s) ==="; }
check_row() { printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "${3:--}" "${4:--}" "${5:--}" "$6" >> "$CHECKS"; }
train_row() { printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "${3:--}" "${4:--}" "${5:--}" "${6:--}" "${7:--}" "${8:--}" "${9:--}" >> "$TRAIN"; }
left() { echo $((BUDGET_S - (SECONDS - START_S))); }

# run NAME SECONDS CMD...: output to $W/logs/NAME.log (appended to the main
# log), the timeout cut to what is left of the budget; returns the command's
# status, 124 on timeout, 125 when no time was left to start it.
run() {
  local name=$1 t=$2; shift 2
  local l; l=$(left)
  [ "$t" -gt $((l - 10)) ] && t=$((l - 10))
  local f=$W/logs/$name.log
  if [ "$t" -lt 5 ]; then echo "SKIPPED: out of time budget" > "$f"; cat "$f" >> "$LOG"; return 125; fi
  { echo "\$ $*"; echo "(timeout ${t}s)"; } > "$f"
  local rc=0
  timeout -k 5 "$t" "$@" >> "$f" 2>&1 < /dev/null || rc=$?
  echo "(exit $rc)" >> "$f"
  { echo "----- $name -----"; cat "$f"; } >> "$LOG"
  return $rc
}
# show FILE [N]: print a log's first and last lines to the console (the whole
# file is already in the main log).
show() {
  local f=$1 n=${2:-15} lines; lines=$(wc -l < "$f")
  if [ "$lines" -le $((2 * n)) ]; then body "$f" | sed "s/^/  /"
  else head -n "$n" "$f" | sed 's/^/  /'; echo "  ... ($((lines - 2 * n)) lines, full text in $LOG)"; tail -n "$n" "$f" | sed 's/^/  /'; fi
}
# body FILE: a run log without run's header and footer lines, to the console.
body() { grep -v '^\$ \|^(timeout [0-9]*s)$\|^(exit [0-9]*)$' "$1"; }
rc_word() { case $1 in 0) echo PASS ;; 124|137) echo TIMEOUT ;; 125) echo SKIP-TIME ;; *) echo "FAIL(rc=$1)" ;; esac; }

PY=""
for p in "${ST_PYTHON:-}" /opt/torch/.venv/bin/python3 python3; do
  [ -n "$p" ] && command -v "$p" >/dev/null 2>&1 && { PY=$(command -v "$p"); break; }
done
# json_get FILE EXPR: a Python expression over the parsed JSON `j` ("-" if it fails).
json_get() { [ -n "$PY" ] && "$PY" -c "import json,sys; j=json.load(open(sys.argv[1])); print($2)" "$1" 2>/dev/null || echo -; }

# --- a. environment ---------------------------------------------------------
step_env() {
  section "a. environment"
  say "$(uname -a)"
  say "$(ldd --version 2>&1 | head -1)"
  say "date: $(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) cores, $(awk '/MemTotal/{printf "%.0f GiB", $2/1048576}' /proc/meminfo) memory"
  if command -v nvidia-smi >/dev/null 2>&1; then
    run nvidia-smi 30 nvidia-smi; local rc=$?
    body "$W/logs/nvidia-smi.log"
    check_row env nvidia-smi - - - "$(rc_word $rc)"
    local gpu; gpu=$(timeout 20 nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)
    [ -n "$gpu" ] && say "GPU: $gpu"
  else
    say "nvidia-smi: not found"
    check_row env nvidia-smi - - - "NOT-FOUND"
  fi
  local nvcc; nvcc=$(command -v nvcc || { [ -x /usr/local/cuda/bin/nvcc ] && echo /usr/local/cuda/bin/nvcc; })
  if [ -n "$nvcc" ]; then say "nvcc: $("$nvcc" --version 2>&1 | tail -2 | tr '\n' ' ')"; else say "nvcc: not found"; fi
  if [ -n "$PY" ]; then
    run torch 60 "$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version() if torch.cuda.is_available() else "(no device)", "devices", torch.cuda.device_count())'
    local rc=$?
    say "python: $PY: $(body "$W/logs/torch.log" | tail -1)"
    check_row env torch - - - "$(rc_word $rc)"
  else
    say "python3: not found"
  fi
  say "CUDA libraries found (toolkit, pip packages, ldconfig):"
  {
    for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib; do
      ls "$d"/libcudart.so.* "$d"/libcublas.so.* "$d"/libcublasLt.so.* "$d"/libnccl.so.* "$d"/libcudnn.so.* 2>/dev/null
    done
    for s in /opt/torch/.venv/lib/python3*/site-packages /usr/local/lib/python3*/dist-packages \
             $( [ -n "$PY" ] && "$PY" -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null); do
      ls "$s"/nvidia/*/lib/libcudart.so.* "$s"/nvidia/*/lib/libcublas.so.* "$s"/nvidia/*/lib/libnccl.so.* "$s"/nvidia/*/lib/libcudnn.so.* 2>/dev/null
    done
    ldconfig -p 2>/dev/null | grep -E 'libcuda\.so\.1|libnccl|libcublas\.so|libcudnn\.so' | awk '{print $NF}'
  } | sort -u | sed 's/^/  /' | tee -a "$LOG"
}

# --- b. bundle ----------------------------------------------------------------
step_bundle() {
  section "b. bundle"
  if [ ! -f "$TARBALL" ]; then
    say "bundle: $TARBALL not found (make it with scripts/bundle.sh and carry it)"
    check_row bundle unpack - - - "FAIL(no tarball)"; return 1
  fi
  rm -rf "$UNPACK"; mkdir -p "$UNPACK"
  run unpack 120 tar -xf "$TARBALL" -C "$UNPACK" --strip-components=1
  local rc=$?
  check_row bundle unpack - - - "$(rc_word $rc)"
  [ $rc -eq 0 ] && [ -f "$UNPACK/env.sh" ] || { say "bundle: unpack failed"; show "$W/logs/unpack.log"; return 1; }
  # shellcheck disable=SC1091
  source "$UNPACK/env.sh"
  say "bundle: $TARBALL ($(du -h "$TARBALL" | cut -f1)) -> $UNPACK"
  sed 's/^/  /' "$UNPACK/BUNDLE-INFO" | tee -a "$LOG"
  say "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  say "libstdc++: $ST_LIBSTDCXX"
  ldd "$UNPACK/bin/shardtrain" > "$W/logs/ldd.log" 2>&1
  grep -E 'cudart|cublas|nccl|libcuda|stdc\+\+|not found' "$W/logs/ldd.log" | sed 's/^/  /' | tee -a "$LOG"
  if grep -q 'not found' "$W/logs/ldd.log"; then check_row bundle "ldd shardtrain" - - - "FAIL(not found)"; else check_row bundle "ldd shardtrain" - - - PASS; fi
  BUNDLE_OK=1
}

# --- c. shardtrain info ---------------------------------------------------------
step_info() {
  section "c. shardtrain info"
  run info 60 shardtrain info; local rc=$?
  show "$W/logs/info.log"
  local cuda; cuda=$(grep -m1 'CUDA' "$W/logs/info.log" | sed 's/^ *CUDA *//')
  local res; res=$(rc_word $rc)
  [ $rc -eq 0 ] && grep -qi 'no device\|not built' <<<"$cuda" && res="NO-DEVICE"
  check_row info "shardtrain info" - - - "$res"
}

# --- c2. shardtrain doctor: the lent machine's GPUs, NICs and their affinity ----
step_doctor() {
  section "c2. shardtrain doctor"
  run doctor 90 shardtrain doctor --out "$W/logs/doctor.json"; local rc=$?
  show "$W/logs/doctor.log"
  # Exit 1 is a failed check (reported in the table), not a failed step.
  local res; res=$(rc_word $rc)
  [ $rc -eq 1 ] && res="FINDINGS(fail)"
  check_row doctor "shardtrain doctor" - - - "$res"
}

# --- d. GPU tests ----------------------------------------------------------------
step_gpu_tests() {
  section "d. gpu tests"
  local t found=0
  for t in "$UNPACK"/tests/gpu_${GPU_CHECK_TESTS:-*}; do
    [ -x "$t" ] || continue
    found=1
    local b; b=$(basename "$t")
    run "$b" "$TEST_TIMEOUT_S" "$t" --gtest_color=no; local rc=$?
    local f=$W/logs/$b.log
    local pass fail skip
    pass=$(grep -oE '^\[  PASSED  \] [0-9]+' "$f" | grep -oE '[0-9]+$'); fail=$(grep -oE '^\[  FAILED  \] [0-9]+ test' "$f" | grep -oE '[0-9]+'); skip=$(grep -oE '^\[  SKIPPED \] [0-9]+ test' "$f" | grep -oE '[0-9]+')
    say "$b: exit $rc, passed ${pass:-0}, failed ${fail:-0}, skipped ${skip:-0}"
    grep -E '^GPUCHECK|^\[  FAILED  \] [A-Za-z]|skipped: ' "$f" | sort -u | head -40 | sed 's/^/  /' | tee -a "$LOG"
    [ $rc -ne 0 ] && grep -E 'Failure|error|Error' "$f" | head -10 | sed 's/^/  ! /' | tee -a "$LOG"
    local res; res=$(rc_word $rc)
    [ $rc -eq 0 ] && [ "${skip:-0}" -gt 0 ] && [ "${pass:-0}" -eq 0 ] && res=SKIP
    check_row tests "$b" - - - "$res p=${pass:-0} f=${fail:-0} s=${skip:-0}"
    # GPUCHECK kernel=<name> dtype=<d> relerr=<e> limit=<l> ok=<0|1>
    sed -n 's/^GPUCHECK kernel=\([^ ]*\) dtype=\([^ ]*\) relerr=\([^ ]*\) limit=\([^ ]*\) ok=\([01]\).*/\1 \2 \3 \4 \5/p' "$f" |
      while read -r k d e l ok; do check_row kernel "$k" "$d" "$e" "$l" "$([ "$ok" = 1 ] && echo PASS || echo FAIL)"; done
  done
  [ $found = 1 ] || { say "no gpu_* tests in the bundle"; check_row tests "gpu_*" - - - "SKIP(none in bundle)"; }
}

# --- e. MPI --------------------------------------------------------------------
step_mpi() {
  section "e. MPI, 2 ranks"
  local t=$UNPACK/tests/comm_collectives_test
  if [ -x "$t" ]; then  # host buffers: the bundled Open MPI works here at all
    run mpi-host 90 mpirun -n 2 "$t" --gtest_color=no; local rc=$?
    say "mpirun -n 2 comm_collectives_test (host buffers): $(rc_word $rc); $(grep -E '^\[  (PASSED|FAILED) ' "$W/logs/mpi-host.log" | sort -u | tr '\n' ' ')"
    [ $rc -eq 0 ] || show "$W/logs/mpi-host.log" 10
    check_row mpi "comm_collectives (host)" - - - "$(rc_word $rc)"
  fi
  local found=0
  for t in "$UNPACK"/tests/*device_mpi*; do
    [ -x "$t" ] || continue
    found=1
    local b; b=$(basename "$t")
    run "$b" 120 mpirun -n 2 "$t" --gtest_color=no; local rc=$?
    local f=$W/logs/$b.log
    say "mpirun -n 2 $b: $(rc_word $rc)"
    show "$f" 20
    local pass fail skip
    pass=$(grep -oE '^\[  PASSED  \] [0-9]+' "$f" | grep -oE '[0-9]+$' | sort -n | head -1); fail=$(grep -oE '^\[  FAILED  \] [0-9]+ test' "$f" | grep -oE '[0-9]+' | sort -n | tail -1); skip=$(grep -oE '^\[  SKIPPED \] [0-9]+ test' "$f" | grep -oE '[0-9]+' | sort -n | tail -1)
    check_row mpi "$b" - - - "$(rc_word $rc) p=${pass:-0} f=${fail:-0} s=${skip:-0}"
    sed -n 's/^GPUCHECK kernel=\([^ ]*\) dtype=\([^ ]*\) relerr=\([^ ]*\) limit=\([^ ]*\) ok=\([01]\).*/\1 \2 \3 \4 \5/p' "$f" | sort -u |
      while read -r k d e l ok; do check_row mpi "$k" "$d" "$e" "$l" "$([ "$ok" = 1 ] && echo PASS || echo FAIL)"; done
  done
  [ $found = 1 ] || { say "no *device_mpi* test in the bundle"; check_row mpi "device_mpi" - - - "SKIP(none in bundle)"; }
}

# --- f. training -----------------------------------------------------------------
step_train() {
  section "f. training CPU vs GPU"
  if [ ! -f "$REPO/scripts/gpu-check-train.sh" ]; then
    say "scripts/gpu-check-train.sh missing"; check_row train hook - - - "FAIL(missing)"; return 1
  fi
  # shellcheck disable=SC1091
  source "$REPO/scripts/gpu-check-train.sh"
  if ! declare -F gpu_training_checks >/dev/null; then
    say "gpu-check-train.sh defines no gpu_training_checks"; check_row train hook - - - "FAIL(no hook)"; return 1
  fi
  gpu_training_checks
}

# --- s. speed -------------------------------------------------------------------
step_speed() {
  section "s. speed: GEMM rate, shardtrain and PyTorch"
  # shellcheck disable=SC1091
  source "$REPO/scripts/gpu-check-speed.sh"
  gpu_speed_checks
}

# --- n, z. strategies on one rank, determinism, compute-sanitizer ----------------
step_strategies() {
  section "n. strategies on one rank over NCCL, determinism"
  # shellcheck disable=SC1091
  source "$REPO/scripts/gpu-check-strategies.sh"
  gpu_strategy_checks
}
step_sanitizer() {
  section "z. compute-sanitizer"
  # shellcheck disable=SC1091
  source "$REPO/scripts/gpu-check-strategies.sh"
  gpu_sanitizer_checks
}

# --- g. table --------------------------------------------------------------------
table() {
  local t=$OUTDIR/table.txt
  {
    echo "GPU CHECK SUMMARY ($(date -u +%H:%M:%SZ), $((SECONDS - START_S)) s)"
    printf '%-7s | %-34s | %-5s | %-10s | %-6s | %s\n' section check dtype "rel. error" limit result
    printf '%s\n' "--------+------------------------------------+-------+------------+--------+----------------"
    while IFS=$'\t' read -r s c d e l r; do
      printf '%-7s | %-34.34s | %-5s | %-10s | %-6s | %s\n' "$s" "$c" "$d" "$e" "$l" "$r"
    done < "$CHECKS"
    local total pass fail skip
    total=$(wc -l < "$CHECKS"); pass=$(awk -F'\t' '$6 ~ /^PASS/' "$CHECKS" | wc -l)
    fail=$(awk -F'\t' '$6 ~ /^(FAIL|TIMEOUT)/' "$CHECKS" | wc -l); skip=$((total - pass - fail))
    local kt kp; kt=$(awk -F'\t' '$1=="kernel"' "$CHECKS" | wc -l); kp=$(awk -F'\t' '$1=="kernel" && $6=="PASS"' "$CHECKS" | wc -l)
    echo "TOTAL: $total checks: $pass pass, $fail fail/timeout, $skip skip/other; kernel comparisons $kp/$kt within limit"
    if [ -s "$TRAIN" ]; then
      echo
      printf '%-6s | %-10s | %5s | %-9s | %-9s | %8s | %10s | %7s | %s\n' model device steps "loss@K" test_loss "step ms" samples/s TFLOP/s result
      printf '%s\n' "-------+------------+-------+-----------+-----------+----------+------------+---------+---------------"
      while IFS=$'\t' read -r m dv k lo tl ms sp tf r; do
        printf '%-6s | %-10s | %5s | %-9s | %-9s | %8s | %10s | %7s | %s\n' "$m" "$dv" "$k" "$lo" "$tl" "$ms" "$sp" "$tf" "$r"
      done < "$TRAIN"
    fi
    if [ -s "$W/speed.tsv" ]; then
      echo
      printf '%-10s | %-24s | %-4s | %5s | %9s | %9s | %7s | %6s | %s\n' model impl prec batch "step ms" tokens/s TFLOP/s "% GEMM" result
      printf '%s\n' "-----------+--------------------------+------+-------+-----------+-----------+---------+--------+-------"
      while IFS=$'\t' read -r m i p b ms tk tf pc r; do
        printf '%-10s | %-24s | %-4s | %5s | %9s | %9s | %7s | %6s | %s\n' "$m" "$i" "$p" "$b" "$ms" "$tk" "$tf" "$pc" "$r"
      done < "$W/speed.tsv"
    fi
    # Step throughput of the training step on the GPU (gpu_train_gpu_step_test):
    # model GEMM FLOPs per step (counted on the CPU) over the measured time.
    if grep -qh '^GPUTRAIN' "$W"/logs/*.log 2>/dev/null; then
      echo
      printf '%-9s | %-9s | %5s | %9s | %10s | %s
' model precision batch "step ms" samples/s TFLOP/s
      printf '%s
' "----------+-----------+-------+-----------+------------+--------"
      grep -h '^GPUTRAIN' "$W"/logs/*.log | sed 's/[a-z_]*=//g' |
        while read -r _ m p b ms sps tf; do
          printf '%-9s | %-9s | %5s | %9s | %10s | %s\n' "$m" "$p" "$b" "$ms" "$sps" "$tf"
        done
    fi
  } > "$t"
  cp "$CHECKS" "$TRAIN" "$OUTDIR/" 2>/dev/null
  [ -s "$W/speed.tsv" ] && cp "$W/speed.tsv" "$OUTDIR/" 
  [ "$OUTDIR" = "$W" ] || tar -czf "$OUTDIR/runs.tar.gz" -C "$W" logs $([ -d "$W/runs" ] && echo runs) 2>/dev/null
  echo >> "$LOG"; cat "$t" >> "$LOG"
  echo; cat "$t"
}

BUNDLE_OK=0
step_env
step_bundle
if [ "$BUNDLE_OK" = 1 ]; then
  # Subshells: whatever goes wrong in one step stays there (rows are files).
  want() { [[ $SECTIONS == *" $1 "* ]]; }
  want info && ( step_info )
  want tests && ( step_gpu_tests )
  want speed && ( step_speed )
  want strategies && ( step_strategies )
  want sanitizer && ( step_sanitizer )
  want mpi && ( step_mpi )
  want train && ( step_train )
  want doctor && ( step_doctor )
else
  check_row info "shardtrain info" - - - "SKIP(no bundle)"
fi
table
