#!/usr/bin/env bash
# What checking the shards against manifest.json costs (data.verify_checksums,
# on by default): the set-up time of a 2-rank MLP job ("ready in X s" of the
# [init] line, which includes loading or checking the data), with the check
# on and off, alternating, ROUNDS times each (default 5), for
#  - the memory loader on Fashion-MNIST (train 47 MB + test 7.8 MB), and
#  - the stream loader on a synthetic split of 200000 784-byte samples in 8
#    shards (157 MB; a synthetic test split of 2000, in memory).
# The files are in the page cache (the runs before warm it): this is the
# CRC's cost, not the disk's. Training itself reads nothing more either way.
# OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are left as the machine sets them.
# Usage: scripts/bench-verify.sh [OUT_DIR] [ROUNDS]   (default bench-out/, 5)
source "$(dirname "$0")/bench-common.sh"
rounds=${2:-5}
syn="$out/synthetic-784/train"
syn_test="$out/synthetic-784/test"
[ -f "$syn/manifest.json" ] || $st prep synthetic --out "$syn" --samples 200000 --sample-bytes 784 --shards 8 >/dev/null
[ -f "$syn_test/manifest.json" ] || $st prep synthetic --out "$syn_test" --samples 2000 --sample-bytes 784 --seed 2 >/dev/null

# ready LOADER VERIFY: the set-up seconds of one job.
ready() {
  local data=()
  [ "$1" = stream ] && data=(--set "data.train=$syn" --set "data.test=$syn_test" --set data.loader=stream)
  $run -n 2 -- $st train examples/fmnist_mlp.toml "${data[@]}" --set "data.verify_checksums=$2" \
    --set train.max_steps=1 --set target.value=0 --set telemetry.enabled=false \
    --run-dir "$out/verify-run" --overwrite 2>/dev/null | sed -n 's/.*ready in \([0-9.]*\) s.*/\1/p'
}

for loader in memory stream; do
  ready "$loader" true >/dev/null  # warms the page cache
  on=() off=()
  for i in $(seq "$rounds"); do
    on+=("$(ready "$loader" true)")
    off+=("$(ready "$loader" false)")
    echo "  $loader round $i: on ${on[-1]} s, off ${off[-1]} s" >&2
  done
  /usr/bin/python3 - "$loader" "${on[*]}" "${off[*]}" <<'PY'
import statistics, sys
loader, on, off = sys.argv[1], [float(x) for x in sys.argv[2].split()], [float(x) for x in sys.argv[3].split()]
m_on, m_off = statistics.median(on), statistics.median(off)
print(f"{loader:7s} set-up median: verify on {m_on:.2f} s, off {m_off:.2f} s, "
      f"cost {m_on - m_off:+.2f} s ({m_on / m_off:.2f}x), rounds {len(on)}")
PY
done
