# Bad input of every kind is one line naming the file, key or argument, and
# exit status 1: never a crash, a hang or a silent wrong result.
source "$(dirname "$0")/lib.sh"
data=$(prep_fmnist)
cfg="$SOURCE_DIR/examples/fmnist_mlp.toml"
ok_data=(--set "data.train=$data/train" --set "data.test=$data/test")

# --- configs -----------------------------------------------------------------
expect_error "nope.toml: cannot open the config file" "$SHARDTRAIN" train nope.toml
printf '[train]\nepoch = 3\n' > unknown.toml
expect_error "unknown config key train.epoch; valid keys in [train]:" "$SHARDTRAIN" train unknown.toml
printf '[train]\nepochs = "3"\n' > wrongtype.toml
expect_error "config key train.epochs: expected an integer, got a string" "$SHARDTRAIN" train wrongtype.toml
printf '[train\n' > syntax.toml
expect_error "syntax.toml:1:" "$SHARDTRAIN" train syntax.toml
expect_error "--set train.epochs: config key train.epochs: expected an integer" "$SHARDTRAIN" train "$cfg" --set train.epochs=many
expect_error "expected key=value" "$SHARDTRAIN" train "$cfg" --set train.epochs
# A directory is not an empty config; --set takes one value, not the path after it.
expect_error "$SOURCE_DIR/examples: not a config file" "$SHARDTRAIN" config "$SOURCE_DIR/examples"
"$SHARDTRAIN" config --set train.epochs=3 "$cfg" | grep -q '^epochs = 3$' || fail "--set before the config path"
pass "--set before the config path takes one value"
expect_error "unknown config key optim.learning_rate" "$SHARDTRAIN" train "$cfg" --set optim.learning_rate=0.1
expect_error "config key parallel.fsdp.sharding: \"zero3\" is not one of \"full\", \"grad_op\" or \"hybrid\"" "$SHARDTRAIN" train "$cfg" "${ok_data[@]}" --set parallel.strategy=fsdp --set parallel.fsdp.sharding=zero3 --run-dir r-fsdp
# Another strategy's section in the file: one notice, not an error, so one
# command line switches strategies across the examples.
"$SHARDTRAIN" config "$cfg" --set parallel.strategy=fsdp >fsdp.toml 2>fsdp.err || { cat fsdp.err; fail "fsdp over a ddp file"; }
[ "$(wc -l <fsdp.err)" -eq 1 ] && grep -q 'notice: .*\[parallel.ddp\] applies to parallel.strategy "ddp" or "zero1", not to "fsdp": not used' fsdp.err \
  || { cat fsdp.err; fail "no one-line notice for the file's [parallel.ddp]"; }
if grep -q '^\[parallel.ddp\]' fsdp.toml; then fail "the set-aside section is in the resolved config"; fi
"$SHARDTRAIN" config "$SOURCE_DIR/examples/gpt_kjv.toml" --set '~parallel.ddp' >/dev/null || fail "removing a known section the file lacks"
pass "another strategy's section: one notice; removing a known absent section: no error"
expect_error "--set parallel.fsdp.prefetch: config key parallel.fsdp.prefetch applies to parallel.strategy \"fsdp\", but the strategy is \"ddp\"" "$SHARDTRAIN" config "$cfg" --set parallel.fsdp.prefetch=1

# --- subcommand flags: refused when parsed, naming the flag (CLI11: exit 105) -----
expect_flag_error() {  # WANT CMD...
  local want="$1"; shift
  local rc=0
  "$@" >"$WORK/out.txt" 2>&1 || rc=$?
  [ "$rc" -eq 105 ] && grep -qF -- "$want" "$WORK/out.txt" || { cat "$WORK/out.txt"; fail "'$*': exit $rc"; }
  pass "flag refused: $(head -1 "$WORK/out.txt")"
}
expect_flag_error "--raw-block: 0 bytes is not a multiple of 4K" "$SHARDTRAIN" bench io --data x --raw-block 0
expect_flag_error "--raw-block: 5000 bytes is not a multiple of 4K" "$SHARDTRAIN" bench io --data x --raw-block 5000
expect_flag_error "--block-kib: Value 2 not in range 4" "$SHARDTRAIN" stage --from x --to y --block-kib 2
expect_flag_error "--steps: Value 0 not in range 1 to 1073741824" "$SHARDTRAIN" bench step "$cfg" --steps 0
expect_flag_error "--ranks: Value -2 not in range 1 to 1073741824" "$SHARDTRAIN" plan "$cfg" --ranks -2

# --- data sets ------------------------------------------------------------------
expect_error "$WORK/missing" "$SHARDTRAIN" train "$cfg" "${ok_data[@]}" --set "data.train=$WORK/missing" --run-dir r1
mkdir -p empty
expect_error "$WORK/empty" "$SHARDTRAIN" train "$cfg" "${ok_data[@]}" --set "data.train=$WORK/empty" --run-dir r2
mkdir -p garbage && head -c 4096 /dev/urandom > garbage/part-00000.h5
expect_error "garbage/part-00000.h5" "$SHARDTRAIN" train "$cfg" "${ok_data[@]}" --set "data.train=$WORK/garbage" --run-dir r3
# A real shard whose format_version was bumped.
mkdir -p v3 && cp "$data/test/part-00000.h5" v3/
"$PY" -c "import h5py; f = h5py.File('v3/part-00000.h5', 'r+'); f.attrs['format_version'] = 3; f.close()"
expect_error "format_version 3 is not supported" "$SHARDTRAIN" train "$cfg" "${ok_data[@]}" --set "data.test=$WORK/v3" --run-dir r4
# A shard missing its labels.
mkdir -p noy && cp "$data/test/part-00000.h5" noy/
"$PY" -c "import h5py; f = h5py.File('noy/part-00000.h5', 'r+'); del f['y']; f.close()"
expect_error "noy/part-00000.h5" "$SHARDTRAIN" train "$cfg" "${ok_data[@]}" --set "data.test=$WORK/noy" --run-dir r5
# The CNN on data that is not images.
"$PY" - <<'PYEOF'
import h5py, numpy as np
f = h5py.File("flat.h5", "w")
f.attrs.update(format="shardtrain.classification", format_version=1, split="train",
               num_classes=3, shard_index=0, num_shards=1)
f["x"] = np.zeros((300, 5), np.float32)
f["y"] = np.zeros(300, np.int32)
f.close()
PYEOF
expect_error 'model.kind = "cnn" needs image samples' "$SHARDTRAIN" train "$SOURCE_DIR/examples/fmnist_cnn.toml" --set data.train=flat.h5 --set data.test=flat.h5 --run-dir r6

# --- a split that disagrees with its manifest.json ---------------------------------
# Each is one line naming the shard; the manifest is what prep wrote.
[ -f "$data/test/manifest.json" ] || fail "prep fashion-mnist wrote no manifest"
cp -r "$data/test" mtrunc && truncate -s -1000 mtrunc/part-00000.h5
expect_error "mtrunc/part-00000.h5: truncated" "$SHARDTRAIN" train "$cfg" "${ok_data[@]}" --set "data.test=$WORK/mtrunc" --run-dir r7
cp -r "$data/test" mcount
"$PY" -c "import json; p='mcount/manifest.json'; j=json.load(open(p)); j['shards'][0]['num_samples']=9999; j['num_samples']=9999; json.dump(j, open(p,'w'))"
expect_error "mcount/part-00000.h5: the number of samples is 10000 but" "$SHARDTRAIN" train "$cfg" "${ok_data[@]}" --set "data.test=$WORK/mcount" --run-dir r8
cp -r "$data/test" mjson && printf '{"format": ' > mjson/manifest.json
expect_error "mjson/manifest.json: not valid JSON" "$SHARDTRAIN" train "$cfg" "${ok_data[@]}" --set "data.test=$WORK/mjson" --run-dir r9
# Synthetic data of Fashion-MNIST's shape, 3 shards, one removed / one added.
"$SHARDTRAIN" prep synthetic --out syn --samples 300 --sample-bytes 784 --shards 3 >/dev/null
cp -r syn syn-missing && rm syn-missing/part-00001.h5
expect_error "syn-missing/part-00001.h5: missing" "$SHARDTRAIN" train "$cfg" "${ok_data[@]}" --set "data.test=$WORK/syn-missing" --run-dir r10
cp -r syn syn-extra && cp syn/part-00002.h5 syn-extra/part-00003.h5
expect_error "syn-extra/part-00003.h5: shard file not listed in" "$SHARDTRAIN" train "$cfg" "${ok_data[@]}" --set "data.test=$WORK/syn-extra" --run-dir r11
# prep manifest rewrites it for the directory as it is now (h5py, an edit on purpose).
expect_error "both have shard_index 2" "$SHARDTRAIN" prep manifest syn-extra
rm syn-extra/part-00003.h5 && "$SHARDTRAIN" prep manifest syn-extra >/dev/null
cmp -s syn/manifest.json syn-extra/manifest.json || fail "prep manifest of the same files differs from prep synthetic's"
pass "prep manifest rewrites the manifest prep synthetic wrote, byte for byte"
expect_error "samples is 0" "$SHARDTRAIN" prep synthetic --out syn0 --samples 0 --sample-bytes 4K
expect_error "shards is 4 but there are only 3 samples" "$SHARDTRAIN" prep synthetic --out syn1 --samples 3 --sample-bytes 1 --shards 4
expect_error "syn: already holds a data set" "$SHARDTRAIN" prep synthetic --out syn --samples 3 --sample-bytes 1
expect_error "$WORK/empty: no shard files" "$SHARDTRAIN" prep manifest "$WORK/empty"

# --- the converter ----------------------------------------------------------------
mkdir -p src-missing
expect_error "train-images-idx3-ubyte.gz" "$SHARDTRAIN" prep fashion-mnist --source src-missing --out out1
mkdir -p src-bad && cp /usr/share/datasets/fashion-mnist/*.gz src-bad/
printf 'not an idx file at all' | gzip > src-bad/train-labels-idx1-ubyte.gz
expect_error "train-labels-idx1-ubyte.gz" "$SHARDTRAIN" prep fashion-mnist --source src-bad --out out2
mkdir -p src-trunc && cp /usr/share/datasets/fashion-mnist/*.gz src-trunc/
{ gzip -dc /usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz || true; } | head -c 100000 | gzip > src-trunc/t10k-images-idx3-ubyte.gz
expect_error "t10k-images-idx3-ubyte.gz" "$SHARDTRAIN" prep fashion-mnist --source src-trunc --out out3
expect_error "shards" "$SHARDTRAIN" prep fashion-mnist --out out4 --shards 0

# --- more ranks than the strategy uses: an error on every rank, no hang ----------
mpi=(mpirun -np 2 --oversubscribe)
[ "$(id -u)" -eq 0 ] && mpi+=(--allow-run-as-root)
rc=0
timeout 120 "${mpi[@]}" "$SHARDTRAIN" train "$cfg" "${ok_data[@]}" --set parallel.strategy=none --set '~parallel.ddp' --run-dir r-mpi >mpi.out 2>&1 || rc=$?
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || { cat mpi.out; fail "2 ranks with strategy none: rc $rc"; }
grep -q 'trains on one rank, but the job has 2 ranks' mpi.out || { cat mpi.out; fail "no clear error under mpirun"; }
pass "2 ranks with strategy none: clear error, exit $rc"

# Accumulation steps that only some ranks' shares cannot hold (128 over 3
# ranks: 42, 43, 43): every rank refuses alike, at once; a rank refusing
# alone left the others waiting in their first all-reduce.
rc=0
mpi3=("${mpi[@]}")
mpi3[2]=3
timeout 120 "${mpi3[@]}" "$SHARDTRAIN" train "$cfg" "${ok_data[@]}" --set train.accumulation_steps=43 \
  --run-dir r-acc >acc.out 2>&1 || rc=$?
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || { cat acc.out; fail "accumulation 43 on 3 ranks: rc $rc"; }
grep -q 'train.accumulation_steps = 43 exceeds the 42 samples per step of the smallest rank' acc.out ||
  { cat acc.out; fail "accumulation 43 on 3 ranks: no clear error"; }
pass "accumulation steps beyond the smallest share on 3 ranks: clear error, exit $rc"
