# `shardtrain stage`: copies a split into <to>/<split name>/ byte for byte at
# the rate asked, a rerun keeps what is there, a corrupted source is caught
# (exit 1, one error line) and a split without a manifest is refused.
source "$(dirname "$0")/lib.sh"

"$SHARDTRAIN" prep synthetic --out src/train --samples 4000 --sample-bytes 4K --shards 4 >/dev/null

# 16.4 MB at 16 MB/s: about 1 s. The summary's rate never above the limit
# (10% for the first block, sent before any wait), and not stalled: how
# close a loaded machine comes to the limit is a speed figure, not a check.
"$SHARDTRAIN" stage --from src/train --to cache --rate-mb-s 16 --block-kib 256 | tee out.txt
[ "$(grep -c ': copied ' out.txt)" -eq 4 ] || fail "expected a 'copied' line per shard"
for f in src/train/part-*.h5; do cmp "$f" "cache/train/$(basename "$f")" || fail "$f: the copy differs"; done
[ -z "$(find cache -name '*.tmp')" ] || fail "temp files left in the cache"
rate=$(sed -n 's/.*copied in [0-9.]* s (\([0-9.]*\) MB\/s).*/\1/p' out.txt | tail -1)
"$PY" -c "import sys; r=float(sys.argv[1]); sys.exit(0 if 4 <= r <= 17.6 else 1)" "$rate" \
  || fail "staged at $rate MB/s, limit 16"
pass "staged 4 shards at $rate MB/s (limit 16)"

# A rerun (a restarted stage) keeps the verified copies.
"$SHARDTRAIN" stage --from src/train/ --to cache > out.txt
[ "$(grep -c 'already in the cache (checksum verified), kept' out.txt)" -eq 4 ] || { cat out.txt; fail "rerun copied again"; }
pass "a rerun keeps the 4 verified copies"

# A corrupted source shard: its copy fails verification twice, exit 1.
"$PY" -c "
f = open('src/train/part-00002.h5', 'r+b'); f.seek(100000); b = f.read(1); f.seek(100000); f.write(bytes([b[0] ^ 1]))"
expect_error "checksum mismatch" "$SHARDTRAIN" stage --from src/train --to cache2
grep -q "gave up after 2 attempts" out.txt || fail "no 'gave up' line"
[ ! -e cache2/train/part-00002.h5 ] || fail "the corrupt copy was kept"
[ -e cache2/train/part-00003.h5 ] || fail "the other shards were not staged"

mkdir -p nomanifest
expect_error "run \`shardtrain prep manifest" "$SHARDTRAIN" stage --from nomanifest --to cache3
