# shellcheck shell=bash
# Sourced by tests/fault/*_test.sh as `source "$(dirname "$0")/lib.sh" NAME`:
# the program ($st), the reference config ($cfg), a scratch directory ($work,
# the current directory, removed at exit) and mpirun with the flags these
# machines need ("${mpirun[@]}": oversubscribed, unbound, as root if root),
# and strategy_flags (scripts/strategy-flags.sh).
# Environment: PROBE_DIR (build/bin, holds shardtrain), SOURCE_DIR.
st="${PROBE_DIR:?}/shardtrain"
cfg="${SOURCE_DIR:?}/examples/fmnist_mlp.toml"
source "$SOURCE_DIR/scripts/strategy-flags.sh"
work=$(mktemp -d "/tmp/shardtrain-${1:?fault test name}.XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
mpirun=(mpirun --oversubscribe --bind-to none)
[ "$(id -u)" -eq 0 ] && mpirun+=(--allow-run-as-root)
