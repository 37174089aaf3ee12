#!/usr/bin/env bash
# A corpus of broken training splits, each streamed by a 2-rank job
# (data.loader = "stream"): every one must end the job with an error that
# names the broken shard, a non-zero exit, and no hang (every rank checks the
# split and the ranks agree on the outcome before any collective read; the
# MPI test io_stream_loader_test checks that each rank gets the same error).
#  missing shard, truncated shard, corrupt HDF5 header, wrong format version,
#  a manifest that disagrees with a shard, a checksum mismatch
#  (data.verify_checksums, on by default; also with the memory loader),
#  and the stager refusing a corrupt copy.
# Environment: PROBE_DIR (build/bin, holds shardtrain), SOURCE_DIR.
set -uo pipefail
source "$(dirname "$0")/lib.sh" io-bad
failures=0

# A good split (784-byte samples, like the MLP's input) and a test split.
"$st" prep synthetic --out good/train --samples 2000 --sample-bytes 784 --shards 4 >/dev/null || { echo "FAIL: prep"; exit 1; }
"$st" prep synthetic --out good/test --samples 200 --sample-bytes 784 --shards 1 --seed 2 >/dev/null || exit 1
/usr/bin/python3 - good/train/part-00000.h5 <<'PY' || { echo "FAIL: the synthetic shape"; exit 1; }
import h5py, sys
assert h5py.File(sys.argv[1], "r")["x"].shape[1:] == (784,)
PY

common=(--set data.loader=stream --set data.test=good/test --set model.kind=mlp --set train.max_steps=3
        --set comm.timeout_s=20 --set target.value=0 --set parallel.strategy=ddp)

# case NAME "what it breaks" EXPECTED_SUBSTRING [extra --set ...]; the split is in NAME/train.
case_run() {
  local name=$1 expect=$2
  shift 2
  local start rc=0
  start=$(date +%s)
  timeout 120 "${mpirun[@]}" -np 2 "$st" train "$cfg" --set "data.train=$name/train" "${common[@]}" "$@" \
    --run-dir "run-$name" >"$name.txt" 2>&1 || rc=$?
  local took=$(($(date +%s) - start))
  if [ "$rc" -eq 0 ]; then
    echo "FAIL $name: the job succeeded"; failures=$((failures + 1))
  elif [ "$rc" -eq 124 ]; then
    echo "FAIL $name: hung (killed after 120 s)"; failures=$((failures + 1))
  elif ! grep -q "shardtrain: error.*$expect" "$name.txt"; then
    echo "FAIL $name: no error naming '$expect':"; cat "$name.txt"; failures=$((failures + 1))
  else
    echo "ok: $name -> exit $rc in ${took}s: $(grep -m1 'shardtrain: error' "$name.txt" | cut -c1-200)"
  fi
}
fresh() { rm -rf "$1"; mkdir -p "$1"; cp -r good/train "$1/train"; }

fresh missing;   rm missing/train/part-00002.h5
case_run missing "part-00002.h5"
fresh truncated; truncate -s 50000 truncated/train/part-00001.h5
case_run truncated "part-00001.h5"
fresh header;    dd if=/dev/zero of=header/train/part-00003.h5 bs=512 count=1 conv=notrunc status=none
case_run header "part-00003.h5"
fresh version
/usr/bin/python3 - version/train/part-00001.h5 <<'PY'
import h5py, sys
with h5py.File(sys.argv[1], "r+") as f:
    f.attrs["format_version"] = 3
PY
rm version/train/manifest.json  # no manifest to disagree: the shard header itself is checked
case_run version "part-00001.h5: format_version 3"
fresh manifest
/usr/bin/python3 - manifest/train/manifest.json <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
m["shards"][2]["num_samples"] += 1
m["num_samples"] += 1
json.dump(m, open(sys.argv[1], "w"))
PY
case_run manifest "part-00002.h5"
# A flipped byte near the end of a shard (its data, not its header): only the checksum sees it.
fresh checksum
size=$(stat -c %s checksum/train/part-00001.h5)
printf '\xff' | dd of=checksum/train/part-00001.h5 bs=1 seek=$((size - 100)) conv=notrunc status=none
case_run checksum "part-00001.h5: checksum mismatch"
rm -rf checksum-memory; cp -r checksum checksum-memory
case_run checksum-memory "part-00001.h5: checksum mismatch" --set data.loader=memory

# The stager: the corrupt shard is copied, fails its check twice, and `stage` exits 1 naming it.
rc=0
timeout 60 "$st" stage --from checksum/train --to cache >stage.txt 2>&1 || rc=$?
if [ "$rc" -ne 0 ] && grep -q "part-00001.h5" stage.txt; then
  echo "ok: stage of a corrupt shard -> exit $rc, names part-00001.h5"
else
  echo "FAIL stage: exit $rc"; cat stage.txt; failures=$((failures + 1))
fi

[ "$failures" -eq 0 ] || { echo "$failures case(s) failed"; exit 1; }
echo "all bad-input cases end with a named shard and no hang"
