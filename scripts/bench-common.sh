# Sourced by scripts/bench-*.sh: the repository root as working directory,
# OUT_DIR (the script's first argument, default bench-out/) created, the
# binaries (BIN_DIR, default build/bin), and Fashion-MNIST converted once.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out=${1:-bench-out}
mkdir -p "$out"
st=${BIN_DIR:-build/bin}/shardtrain
run=${BIN_DIR:-build/bin}/shardrun
[ -f data/fashion-mnist/test/part-00000.h5 ] || $st prep fashion-mnist

source "$(dirname "${BASH_SOURCE[0]}")/strategy-flags.sh"
