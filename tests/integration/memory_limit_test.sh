# A job under a real memory limit (launch/memlimit, shardrun --memory-limit):
# the run records the limit, the data set's size against it and the page
# cache's hit ratio; a data set larger than the limit is read from storage
# again in its second epoch, while without the limit it comes from the page
# cache. Skipped, saying why, where no cgroup can be written.
source "$(dirname "$0")/lib.sh"
memlimit="$SOURCE_DIR/launch/memlimit"
if ! why=$("$memlimit" --limit 1G --check 2>&1); then
  echo "SKIP: no memory limit can be set on this machine: $why"
  exit 77
fi

# The cgroups memlimit made here and did not remove: new since this test
# began, and holding no process. Others are not this test's: a job that
# another test runs beside it under memlimit (ctest -j2) holds its
# processes, and an empty one from before was left by something else (a
# memlimit killed from outside cannot remove its own).
cgroups_before=$(find /sys/fs/cgroup -maxdepth 6 -name "shardtrain-memlimit-*" 2>/dev/null)
left_behind() {
  local d
  for d in $(find /sys/fs/cgroup -maxdepth 6 -name "shardtrain-memlimit-*" 2>/dev/null); do
    grep -qxF -- "$d" <<<"$cgroups_before" && continue
    [ -z "$(cat "$d/cgroup.procs" 2>/dev/null)" ] || continue
    echo "$d"
    return
  done
}

expect_status() {  # status, substring of stderr, command...
  local want="$1" text="$2" rc=0; shift 2
  "$@" > out.txt 2> err.txt || rc=$?
  [ "$rc" -eq "$want" ] && grep -qF -- "$text" err.txt || { cat err.txt; fail "'$*': exit $rc, expected $want with '$text'"; }
  pass "exit $rc: $(grep -F -- "$text" err.txt | head -1)"
}
expect_status 2 "is below 64 MiB" "$memlimit" --limit 10M -- true
expect_status 2 "is not a size" "$memlimit" --limit lots -- true
# A process that needs more than the limit: the OOM killer's end is named.
expect_status 137 "out-of-memory killer ended" "$memlimit" --limit 64M -- "$PY" -c "b = bytearray(200 << 20)"
leftover=$(left_behind)
[ -z "$leftover" ] || fail "cgroup left behind: $leftover"
pass "the cgroups are removed"

# 512 MiB of samples; one rank needs about 250 MB itself, so a 450 MiB limit
# leaves the page cache about 200 MB of them.
"$SHARDTRAIN" prep synthetic --out d/train --samples 8192 --sample-bytes 64K --shards 4 >/dev/null
"$SHARDTRAIN" prep synthetic --out d/test --samples 16 --sample-bytes 64K --split test >/dev/null
: > empty.toml  # every setting below
run() {  # run dir, shardrun flags...
  local dir="$1"; shift
  "$SOURCE_DIR/launch/shardrun" -n 1 "$@" -- "$SHARDTRAIN" train empty.toml --set run.dir="$dir" --set train.epochs=2 \
    --set train.global_batch_size=64 --set data.train=d/train --set data.test=d/test --set data.loader=stream \
    --set data.direct_io=off --set data.verify_files=false --set model.kind=mlp --set 'model.hidden=[8]' \
    --set runtime.device=emulated --set runtime.emulate.sample_ms=0.01 --set parallel.strategy=none \
    > "$dir.txt" 2>&1 || { cat "$dir.txt"; fail "run $dir"; }
  grep "\[summary\] storage" "$dir.txt"
}
"$PY" -c "
import glob, os
for f in glob.glob('d/train/*.h5'):
    fd = os.open(f, os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED); os.close(fd)"
run limited --memory-limit 450M
"$PY" - <<'PY' || fail "the limited run's storage figures"
import json
s = json.load(open("limited/result.json"))["storage"]
print(s)
assert s["memory_limit_bytes"] == 450 << 20, "the limit is not recorded"
assert s["data_bytes"] > s["memory_limit_bytes"] and s["data_bytes"] / s["memory_bytes"] > 1.1
assert s["loader_bytes"] >= 2 * (8192 << 16), "two epochs not read"
# The second epoch cannot come from a cache of 450 MiB less the job's own memory.
assert s["storage_read_bytes"] >= 0.6 * s["loader_bytes"] and s["cache_hit_ratio"] <= 0.4, s
PY
pass "limited: $(json_get limited/result.json "round(100 * j['storage']['cache_hit_ratio'], 1)")% page-cache hits"

run unlimited  # the pages the limited run left, then the first epoch's, stay cached
"$PY" - <<'PY' || fail "the unlimited run's storage figures"
import json
s = json.load(open("unlimited/result.json"))["storage"]
print(s)
assert s["memory_limit_bytes"] is None or s["memory_limit_bytes"] > 8 << 30
assert s["cache_hit_ratio"] >= 0.45, s  # the second epoch at least
PY
pass "unlimited: $(json_get unlimited/result.json "round(100 * j['storage']['cache_hit_ratio'], 1)")% page-cache hits"

# study ingest --writer-inside-limit: the writer runs in the job's cgroup,
# where its page cache is charged and evicts the job's. 128 MiB of samples
# read 10 times under 450 MiB: alone, all but the first epoch come from the
# page cache; beside a writer copying 512 MiB again and again in the same
# cgroup, fewer do (how many fewer depends on what the kernel reclaims
# first: docs/BENCHMARKS.md has a job it squeezes harder).
"$SHARDTRAIN" prep synthetic --out small --samples 2048 --sample-bytes 64K --shards 2 >/dev/null
"$SHARDTRAIN" prep synthetic --out src --samples 8192 --sample-bytes 64K --shards 2 --seed 2 >/dev/null
cat > emu.toml <<'TOML'
[train]
epochs = 10
global_batch_size = 64
[data]
direct_io = "off"
verify_files = false
[model]
kind = "mlp"
hidden = [8]
[runtime]
device = "emulated"
[runtime.emulate]
sample_ms = 0.1
[parallel]
strategy = "none"
TOML
"$SHARDTRAIN" study ingest --out ingest --config emu.toml --set "data.test=$PWD/d/test" --data small --source src \
  --ingest-dir scratch --memory-limit 450M --blocks 1M --rates 0 --writer-inside-limit | tee ingest.txt
"$PY" - ingest/points.jsonl <<'PY' || fail "the writer inside the job's limit"
import json, sys
p = {r["key"]: r for r in map(json.loads, open(sys.argv[1]))}
alone, inside = p["alone"], p["1024k/0/inside"]
assert alone["status"] == inside["status"] == "ok", (alone, inside)
assert inside["writer_inside_limit"] and inside["written_mb_s"] > 0, inside
assert "/shardtrain-memlimit-" in inside["writer_cgroup"], inside  # the job's, as memlimit named it
print("page-cache hits alone", alone["cache_hit_ratio"], "beside the writer", inside["cache_hit_ratio"])
assert alone["cache_hit_ratio"] >= 0.8 and inside["cache_hit_ratio"] < alone["cache_hit_ratio"], (alone, inside)
PY
grep -q "inside the job's memory limit" ingest/table.md || fail "the table does not say where the writer ran"
leftover=$(left_behind)
[ -z "$leftover" ] || fail "cgroup left behind: $leftover"
pass "a writer inside the job's limit evicts its page cache"
