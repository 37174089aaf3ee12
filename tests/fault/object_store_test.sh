#!/usr/bin/env bash
# An s3:// split on a real S3 server (radosgw on a one-node Ceph,
# launch/s3store), and its failures: each ends with a clear error or is
# retried, the secret key is never printed, and nothing trains from a bad
# object.
#  - the split round trip: upload, stage (parallel ranged GETs) byte for byte,
#    a rerun keeps the verified copies; a shard larger than a part uploaded
#    in parts (S3's multipart upload) and staged back byte for byte, and
#    one whose parts fail for good (the proxy) aborted;
#  - a 2-rank DDP job reading data.train and data.test from s3://, the
#    same under the peer cache (each of 2 nodes fetches only its shards and
#    serves them to the other), and `study storage`'s object-store mode (a
#    fetch, then the copies found);
#  - bad credentials: a wrong access key, a wrong secret key;
#  - a missing bucket, a missing split;
#  - 503 SlowDown answers (through a fault proxy): retried, then the copy;
#    and 503s that do not end: the request is given up, with what S3 said;
#  - transfers cut halfway (the proxy): retried, then the copy;
#  - an object in the store that is not the manifest's: shorter (truncated)
#    or corrupted; the training job ends before its first step.
# Environment: PROBE_DIR (build/bin, holds shardtrain), SOURCE_DIR.
set -uo pipefail
source "$(dirname "$0")/lib.sh" object-store
failures=0
check() {  # check "what" COMMAND...: counts a failure, goes on
  local what=$1
  shift
  if "$@"; then echo "ok: $what"; else echo "FAIL: $what"; failures=$((failures + 1)); fi
}
store="$work/store"
proxy_pid=""
cleanup() {
  [ -n "$proxy_pid" ] && kill "$proxy_pid" 2>/dev/null
  "$SOURCE_DIR/launch/s3store" down "$store" >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT
[ -n "${KEEP_WORK:-}" ] && trap '"$SOURCE_DIR/launch/s3store" down "$store"' EXIT

"$SOURCE_DIR/launch/s3store" up "$store" --memory-gb 1 || { echo "FAIL: the S3 server did not start"; exit 1; }
# shellcheck disable=SC1091
source "$store/env"
endpoint=$AWS_ENDPOINT_URL secret=$AWS_SECRET_ACCESS_KEY

# A split of 4 shards of 2.5 MB (784-byte samples, the MLP's input), parts
# of 1 MiB: several ranged GETs per object, 4 in flight.
"$st" prep synthetic --out src/train --samples 12800 --sample-bytes 784 --shards 4 >/dev/null || exit 1
"$st" prep synthetic --out src/test --samples 400 --sample-bytes 784 --shards 1 --seed 2 >/dev/null || exit 1
s3=(--s3-part-mib 1 --s3-connections 4)
"$st" upload --from src/train --to s3://shardtrain-test/synth/train --create-bucket "${s3[@]}" >upload.txt 2>&1 ||
  { cat upload.txt; echo "FAIL: upload"; exit 1; }
"$st" upload --from src/test --to s3://shardtrain-test/synth/test >>upload.txt 2>&1 || { cat upload.txt; exit 1; }

# A shard larger than a part (12.7 MB, parts of 5 MiB): S3's multipart
# upload, its 3 parts 2 at a time, staged back byte for byte.
"$st" prep synthetic --out src/big --samples 16000 --sample-bytes 784 --shards 1 --seed 3 >/dev/null || exit 1
"$st" upload --from src/big --to s3://shardtrain-test/synth/big --s3-part-mib 5 --s3-connections 2 >big-upload.txt 2>&1 ||
  { cat big-upload.txt; echo "FAIL: multipart upload"; exit 1; }
check "a 12.7 MB shard went up in 3 parts" grep -q "part-00000.h5: 12.[0-9]* MB in .*, 3 parts)" big-upload.txt
"$st" stage --from s3://shardtrain-test/synth/big --to big-cache >big-stage.txt 2>&1
check "the multipart object staged back byte for byte" cmp -s src/big/part-00000.h5 big-cache/big/part-00000.h5

same_as_source() {  # the cache's copies are the source's, no temp files left
  for f in src/train/part-*.h5; do cmp -s "$f" "$1/train/$(basename "$f")" || return 1; done
  [ -z "$(find "$1" -name '*.tmp')" ]
}
no_secret() { ! grep -qF "$secret" "$@"; }

"$st" stage --from s3://shardtrain-test/synth/train --to cache "${s3[@]}" >stage.txt 2>&1
check "staged from s3:// byte for byte" same_as_source cache
check "4 shards copied" test "$(grep -c ': copied ' stage.txt)" -eq 4
"$st" stage --from s3://shardtrain-test/synth/train --to cache "${s3[@]}" >rerun.txt 2>&1
check "a rerun keeps the 4 verified copies" test "$(grep -c 'already in the cache (checksum verified)' rerun.txt)" -eq 4

# A 2-rank DDP job from s3://, both splits; the second run finds the copies.
job=(train "$cfg" --set data.train=s3://shardtrain-test/synth/train --set data.test=s3://shardtrain-test/synth/test
     --set io.stage.cache_dir="$work/jobcache" --set io.s3.part_mib=1 --set model.kind=mlp --set train.max_steps=5
     --set parallel.strategy=ddp --set target.value=0 --set comm.timeout_s=30)
timeout 180 "${mpirun[@]}" -np 2 "$st" "${job[@]}" --run-dir run1 >job1.txt 2>&1
check "a DDP job trains from s3://" grep -q '"status": "completed"' run1/result.json
check "the job logged what it fetched" grep -q 'data: s3://shardtrain-test/synth/train fetched' job1.txt
timeout 180 "${mpirun[@]}" -np 2 "$st" "${job[@]}" --run-dir run2 >job2.txt 2>&1
check "a second job keeps the cached copies" grep -q '4 of 4 shard(s) already in the cache' job2.txt

# The peer cache over s3://: 2 nodes of one rank each on this host
# (io.peer_cache.ranks_per_node = 1). Each node fetches only the 2 of the 4
# shards it holds (s % 2), byte for byte, and reads the other 2 from the
# other node over MPI: the store is read once per job.
peer=(train "$cfg" --set data.train=s3://shardtrain-test/synth/train --set data.test=s3://shardtrain-test/synth/test
      --set "io.peer_cache.dir=$work/peer/node%n" --set io.peer_cache.ranks_per_node=1 --set data.loader=stream
      --set io.s3.part_mib=1 --set model.kind=mlp --set train.max_steps=5 --set parallel.strategy=ddp
      --set target.value=0 --set comm.timeout_s=30)
timeout 180 "${mpirun[@]}" -np 2 "$st" "${peer[@]}" --run-dir run-peer >peer.txt 2>&1
check "peer cache over s3://: a DDP job trains" grep -q '"status": "completed"' run-peer/result.json
check "peer cache over s3://: each node fetched its 2 of the 4 shards" grep -q 'on each node: its 2 of the 4 shard(s)' peer.txt
held_by_node() {  # held_by_node N SHARD...: node N's directory holds exactly these shards, the source's bytes
  local dir="$work/peer/node$1/train"
  shift
  [ "$(cd "$dir" && ls part-*.h5 | tr '\n' ' ')" = "$(printf 'part-%05d.h5 ' "$@")" ] || return 1
  for s in "$@"; do cmp -s "$dir/$(printf 'part-%05d.h5' "$s")" "src/train/$(printf 'part-%05d.h5' "$s")" || return 1; done
}
check "peer cache over s3://: the tiers line names the fetch" grep -q 'GB fetched from the object store at start' peer.txt
check "peer cache over s3://: node 0 holds shards 0 and 2" held_by_node 0 0 2
check "peer cache over s3://: node 1 holds shards 1 and 3" held_by_node 1 1 3
check "peer cache over s3://: half the samples came from the other node" python3 - run-peer/result.json <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))["storage"]["peer_cache"]
assert t["peer_bytes"] > 0 and t["node_cache_bytes"] > 0, t
assert t["shared_store_bytes"] == 0, t  # nothing copied from a shared file system: the fetch read the store
fetched = sum(f["bytes"] for f in json.load(open("run-peer/object_store.json")) if f["key"] == "data.train")
assert 0 < fetched < t["object_store_bytes"], (t, fetched)  # rank 0's node, and the other's
PY
# 5 nodes for 4 shards: node 4 holds none, fetches none, and trains on
# what the others serve.
peer5=("${peer[@]}" --set train.global_batch_size=120)
peer5[7]="io.peer_cache.dir=$work/peer5/node%n"
timeout 180 "${mpirun[@]}" -np 5 "$st" "${peer5[@]}" --run-dir run-peer5 >peer5.txt 2>&1
check "peer cache over s3://, 5 nodes for 4 shards: trains" grep -q '"status": "completed"' run-peer5/result.json
check "peer cache over s3://, 5 nodes for 4 shards: node 4 fetched nothing" \
  test -z "$(find "$work/peer5/node4/train" -name 'part-*')"

# `study storage`'s object-store mode: its first point fetches, the next
# finds the copies; the tier's table says so.
"$st" study storage --out study --data src/train --test src/test --store s3://shardtrain-test/synth/train \
  --accelerator slow=1.5ms --max-accelerators 2 --seconds 0.5 --min-steps 20 --modes object-store >study.txt 2>&1
check "study storage: the object-store mode's table" grep -q '| slow | object-store | ' study/table.md
check "study storage: the first point fetched, the second found the copies" python3 - study/points.jsonl <<'PY'
import json, sys
p = [json.loads(line) for line in open(sys.argv[1])]
assert len(p) >= 2 and all(q["status"] == "ok" for q in p), p
assert p[0]["store_hit_ratio"] == 0 and p[0]["store_bytes"] > 10e6, p[0]
assert p[1]["store_hit_ratio"] == 1 and p[1]["store_bytes"] == 0, p[1]
assert all(q["first_step_done_s"] > q["init_s"] > 0 for q in p), p
PY

# Bad credentials: a clear error naming the key's source, never the secret.
AWS_ACCESS_KEY_ID=NOSUCHKEY0000000 "$st" stage --from s3://shardtrain-test/synth/train --to c2 >badkey.txt 2>&1
check "a wrong access key: InvalidAccessKeyId, exit 1" grep -q 'rejected the access key from the environment' badkey.txt
AWS_SECRET_ACCESS_KEY=wrong-secret-0123456789 "$st" stage --from s3://shardtrain-test/synth/train --to c3 \
  >badsecret.txt 2>&1
check "a wrong secret key: SignatureDoesNotMatch" grep -q "rejected the request's signature" badsecret.txt
check "no secret key in any output" no_secret ./*.txt
"$st" stage --from s3://no-such-bucket-here/synth/train --to c4 >nobucket.txt 2>&1
check "a missing bucket: said so" grep -q 's3://no-such-bucket-here: no such bucket' nobucket.txt
"$st" stage --from s3://shardtrain-test/nothing/train --to c5 >nosplit.txt 2>&1
check "a missing split: no manifest object" grep -q 'nothing/train/manifest.json: no such object' nosplit.txt

# The fault proxy in front of the server.
start_proxy() {
  rm -f port
  python3 "$SOURCE_DIR/tests/fault/s3_fault_proxy.py" --upstream "$endpoint" --port-file port "$@" &
  proxy_pid=$!
  for _ in $(seq 100); do [ -s port ] && break; sleep 0.05; done
  export AWS_ENDPOINT_URL="http://127.0.0.1:$(cat port)"
}
stop_proxy() { kill "$proxy_pid"; wait "$proxy_pid" 2>/dev/null; proxy_pid=""; export AWS_ENDPOINT_URL=$endpoint; }

start_proxy --fail 5 --status 503 --ranged-only
"$st" stage --from s3://shardtrain-test/synth/train --to c6 "${s3[@]}" >slow.txt 2>&1
stop_proxy
check "5 x 503 SlowDown: retried" test "$(grep -c 'bytes [0-9]*-[0-9]*: HTTP 503 SlowDown (Please reduce your request rate.); retry' slow.txt)" -eq 5
check "5 x 503 SlowDown: then copied whole" same_as_source c6

start_proxy --fail 1000 --status 503
"$st" stage --from s3://shardtrain-test/synth/train --to c7 --s3-retries 2 >down.txt 2>&1
rc=$?
stop_proxy
check "503 without end: exit 1" test "$rc" -ne 0
check "503 without end: given up, saying what S3 answered" grep -q 'gave up after 3 tries.*HTTP 503 SlowDown' down.txt

# A multipart upload whose parts fail for good: given up, and aborted (S3
# answers the abort with 204: the parts stored so far are gone).
start_proxy --fail-parts 1000 --status 503 --log proxy.log
"$st" upload --from src/big --to s3://shardtrain-test/synth/aborted --s3-part-mib 5 --s3-retries 1 >abort.txt 2>&1
rc=$?
stop_proxy
check "parts failing for good: exit 1, saying what S3 answered" \
  bash -c "[ $rc -ne 0 ] && grep -q 'gave up after 2 tries.*HTTP 503 SlowDown' abort.txt"
check "parts failing for good: the upload aborted" \
  grep -qE '^DELETE /shardtrain-test/synth/aborted/part-00000.h5\?uploadId=[^ ]+ 204$' proxy.log

start_proxy --truncate 3 --ranged-only
"$st" stage --from s3://shardtrain-test/synth/train --to c8 "${s3[@]}" >cut.txt 2>&1
stop_proxy
check "3 transfers cut halfway: retried" test "$(grep -c 'bytes [0-9]*-[0-9]*: Transferred a partial file.*retry' cut.txt)" -eq 3
check "3 transfers cut halfway: then copied whole" same_as_source c8

# Objects in the store that are not the manifest's: shorter (a truncated
# object), then corrupted (the same size). Each is caught, the stage exits 1
# and a training job ends before its first step, on both ranks.
"$st" upload --from src/train --to s3://shardtrain-test/bad/train >/dev/null 2>&1 || exit 1
head -c 1000000 src/train/part-00001.h5 >short.h5
"$st" upload --object short.h5 --to s3://shardtrain-test/bad/train/part-00001.h5 >/dev/null 2>&1 || exit 1
"$st" stage --from s3://shardtrain-test/bad/train --to c9 >short.txt 2>&1
rc=$?
check "a truncated object: exit 1" test "$rc" -ne 0
check "a truncated object: its size and the manifest's" grep -q 'the object is 1000000 bytes, the manifest says' short.txt
check "a truncated object: no copy kept" test ! -e c9/train/part-00001.h5

cp src/train/part-00001.h5 corrupt.h5
python3 -c "
f = open('corrupt.h5', 'r+b'); f.seek(900000); b = f.read(1); f.seek(900000); f.write(bytes([b[0] ^ 1]))"
"$st" upload --object corrupt.h5 --to s3://shardtrain-test/bad/train/part-00001.h5 >/dev/null 2>&1 || exit 1
"$st" stage --from s3://shardtrain-test/bad/train --to c10 >corrupt.txt 2>&1
check "a corrupted object: checksum mismatch, not kept" grep -q 'checksum mismatch' corrupt.txt
check "a corrupted object: no copy kept" test ! -e c10/train/part-00001.h5
bad_job=("${job[@]}")
bad_job[3]=data.train=s3://shardtrain-test/bad/train
bad_job[7]=io.stage.cache_dir=$work/badcache
timeout 180 "${mpirun[@]}" -np 2 "$st" "${bad_job[@]}" --run-dir run3 >job3.txt 2>&1
rc=$?
check "a job from a corrupted object: ends (no hang), exit != 0" test "$rc" -ne 0 -a "$rc" -ne 124
check "a job from a corrupted object: nothing trained" grep -q 'nothing was trained' job3.txt
check "a job from a corrupted object: no step ran" test ! -s run3/metrics.jsonl

[ "$failures" -eq 0 ] || { echo "$failures check(s) failed"; exit 1; }
echo "PASS: object store: round trip, DDP from s3://, credentials, bucket, 503s, cut transfers, bad objects"
