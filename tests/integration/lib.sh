# Helpers for the integration tests (sourced). ctest sets SHARDTRAIN (the
# program), SOURCE_DIR and WORK_ROOT; each test gets a fresh work directory.
set -euo pipefail
: "${SHARDTRAIN:?run through ctest, or set SHARDTRAIN=build/bin/shardtrain}"
: "${SOURCE_DIR:=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
: "${WORK_ROOT:=/tmp/shardtrain-it}"
PY=/usr/bin/python3  # Debian's Python, which has h5py and numpy
WORK="$WORK_ROOT/$(basename "$0" .sh)"
mkdir -p "$WORK_ROOT"
rm -rf "$WORK"
mkdir -p "$WORK"
cd "$WORK"

fail() { echo "FAIL: $*" >&2; exit 1; }
pass() { echo "ok: $*"; }

# expect_error "substring" cmd...: the command must exit 1 (not crash, not
# succeed), print exactly one line on stderr, and that line must contain the
# substring.
expect_error() {
  local want="$1"; shift
  local rc=0
  "$@" >"$WORK/out.txt" 2>"$WORK/err.txt" || rc=$?
  [ "$rc" -eq 1 ] || { cat "$WORK/err.txt" >&2; fail "'$*' exited $rc, expected 1"; }
  [ "$(wc -l <"$WORK/err.txt")" -eq 1 ] || { cat "$WORK/err.txt" >&2; fail "'$*': expected one error line"; }
  grep -qF -- "$want" "$WORK/err.txt" || { cat "$WORK/err.txt" >&2; fail "'$*': error does not mention '$want'"; }
  pass "error names '$want': $(cat "$WORK/err.txt")"
}

# json_get FILE EXPR: evaluates a Python expression over the parsed JSON `j`.
json_get() { "$PY" -c "import json,sys; j=json.load(open(sys.argv[1])); print($2)" "$1"; }

# The real Fashion-MNIST data in HDF5, converted once per build tree; a lock
# keeps tests that run in parallel from converting it at the same time.
prep_fmnist() {
  local out="$WORK_ROOT/fashion-mnist"
  (
    flock 9
    if [ ! -f "$out/test/manifest.json" ]; then  # converted by a shardtrain that writes manifests
      rm -rf "$out"
      "$SHARDTRAIN" prep fashion-mnist --out "$out" >/dev/null
    fi
  ) 9>"$WORK_ROOT/fashion-mnist.lock"
  echo "$out"
}

# mpirun with the flags this machine needs (2 cores: --oversubscribe; root:
# --allow-run-as-root), for tests that need mpirun's own syntax (MPMD ':').
mpirun_cmd() {
  local cmd=(mpirun --oversubscribe --bind-to none)
  [ "$(id -u)" -eq 0 ] && cmd+=(--allow-run-as-root)
  echo "${cmd[@]}"
}

# require_emunodes: sets EMU (launch/emunodes); exits 77 (skipped) where
# network namespaces cannot be made here (not root, no CAP_SYS_ADMIN, ...).
require_emunodes() {
  EMU="$SOURCE_DIR/launch/emunodes"
  local rc=0 why
  why=$("$EMU" check 2>&1) || rc=$?
  if [ "$rc" -ne 0 ]; then
    [ "$rc" -eq 77 ] || fail "emunodes check exited $rc: $why"
    echo "skipped: cannot create network namespaces here: ${why#emunodes: cannot create network namespaces here: }"
    exit 77
  fi
}
