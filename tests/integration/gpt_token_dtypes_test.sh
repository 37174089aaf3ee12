# Token ids wider than a byte. The same byte corpus (`prep text`) rewritten
# with h5py as uint16 and as int32 windows (docs/formats.md's write_split,
# then `prep manifest`) trains a gpt bit for bit as the uint8
# original: the same train_loss, test_loss and test_accuracy after every
# epoch, from memory on 1 rank and streamed on 2 (DDP). Then `prep tokens`
# data (vocabulary 1000 as uint16, 70000 as int32) trains end to end with
# its loss falling below ln V, and examples/gpt2_small.toml plans at the
# parameter count it states.
source "$(dirname "$0")/lib.sh"

# Any text will do, as long as every variant reads the same: this repo's docs.
head -c 9000 "$SOURCE_DIR/docs/formats.md" >corpus.txt
"$SHARDTRAIN" prep text --input corpus.txt --out u8 --block-size 32 --test-fraction 0.15 >prep.txt \
  || { cat prep.txt; fail "prep text"; }

"$PY" - "$SOURCE_DIR/tests/data" <<'EOF' || fail "h5py copy as uint16 / int32"
import sys
import h5py
import numpy as np
sys.path.insert(0, sys.argv[1])
from make_h5py_dataset import load_example  # docs/formats.md's write_split, as printed there
write_split = load_example()
for dtype, name in ((np.uint16, "u16"), (np.int32, "i32")):
    for split in ("train", "test"):
        with h5py.File(f"u8/{split}/part-00000.h5", "r") as src:
            assert src["x"].dtype == np.uint8 and src.attrs["num_classes"] == 256
            write_split(f"{name}/{split}", split, src["x"][:].astype(dtype), src["y"][:], num_classes=256)
EOF
for v in u16 i32; do
  for split in train test; do
    "$SHARDTRAIN" prep manifest "$v/$split" >/dev/null || fail "prep manifest $v/$split"
  done
done
[ "$(json_get u16/train/manifest.json 'j["dtype"]')" = uint16 ] || fail "u16 manifest dtype"
[ "$(json_get i32/train/manifest.json 'j["dtype"]')" = int32 ] || fail "i32 manifest dtype"
pass "$(tail -1 prep.txt); copied as uint16 and int32 with h5py, manifests written"

cfg="$SOURCE_DIR/examples/gpt_kjv.toml"
shardrun="$SOURCE_DIR/launch/shardrun"
# A small model and a few steps per epoch, so that several evaluations compare.
tiny=(--set model.n_layer=1 --set model.n_head=2 --set model.n_embd=32 --set model.block_size=32
      --set train.global_batch_size=16 --set train.epochs=3 --set train.max_steps=0 --set target.value=0
      --set schedule.warmup_steps=4 --set train.eval_batch_size=64)
metrics() {  # every evaluation's figures, exactly (repr of the floats)
  "$PY" -c 'import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l); print(r["step"], repr(r["train_loss"]), repr(r["test_loss"]), repr(r["test_accuracy"]))' "$1"
}
train() {  # train RUN_DIR DATA [more args]: trains on DATA/{train,test}
  local run="$1" data="$2"
  shift 2
  "$@" --set data.train="$data/train" --set data.test="$data/test" "${tiny[@]}" --run-dir "$run" >"$run.txt" 2>&1 \
    || { cat "$run.txt"; fail "run $run"; }
}

for v in u8 u16 i32; do
  train "mem-$v" "$v" "$SHARDTRAIN" train "$cfg" --set parallel.strategy=none
done
[ "$(metrics mem-u8/metrics.jsonl | wc -l)" -eq 3 ] || { cat mem-u8/metrics.jsonl; fail "expected 3 evaluations"; }
for v in u16 i32; do
  name=$([ "$v" = u16 ] && echo uint16 || echo int32)
  grep -q "^\[init\] data: .* sample shape \[33\] $name, 256 classes" "mem-$v.txt" || { cat "mem-$v.txt"; fail "$v data line"; }
  [ "$(metrics "mem-$v/metrics.jsonl")" = "$(metrics mem-u8/metrics.jsonl)" ] \
    || { metrics mem-u8/metrics.jsonl; metrics "mem-$v/metrics.jsonl"; fail "$v trained differently from uint8"; }
done
pass "from memory, 1 rank: uint16 and int32 train as uint8, bit for bit: $(metrics mem-u8/metrics.jsonl | tail -1)"

for v in u8 u16; do
  train "stream-$v" "$v" "$shardrun" -n 2 -- "$SHARDTRAIN" train "$cfg" --set parallel.strategy=ddp \
    --set data.loader=stream
done
[ "$(metrics stream-u16/metrics.jsonl)" = "$(metrics stream-u8/metrics.jsonl)" ] \
  || { metrics stream-u8/metrics.jsonl; metrics stream-u16/metrics.jsonl; fail "streamed uint16 trained differently"; }
# The read pool reads uint16 shards at HDF5's offsets as it does uint8 ones.
grep -q '^\[summary\] data (rank 0): read .*pool' stream-u16.txt || { cat stream-u16.txt; fail "no read pool"; }
pass "streamed, 2 ranks (DDP): uint16 trains as uint8, bit for bit: $(metrics stream-u16/metrics.jsonl | tail -1)"

# prep tokens: uint16 below 65537 ids, int32 above; the loss falls below ln V.
for vocab in 1000 70000; do
  "$SHARDTRAIN" prep tokens --out "tok-$vocab" --vocab "$vocab" --block-size 16 --samples 640 --shards 2 \
    --seed 3 >"prep-$vocab.txt" || { cat "prep-$vocab.txt"; fail "prep tokens $vocab"; }
done
grep -q '^\[prep\] tokens: 640 train + 64 test samples of 16 tokens (+1), vocabulary 1000, uint16' prep-1000.txt \
  || { cat prep-1000.txt; fail "prep tokens summary"; }
[ "$(json_get tok-70000/train/manifest.json 'j["dtype"], j["num_classes"]')" = "int32 70000" ] \
  || fail "tok-70000 manifest"
for vocab in 1000 70000; do
  "$SHARDTRAIN" train "$cfg" --set data.train="tok-$vocab/train" --set data.test="tok-$vocab/test" \
    --set model.n_layer=1 --set model.n_head=2 --set model.n_embd=32 --set model.block_size=16 \
    --set train.global_batch_size=32 --set train.max_steps=20 --set target.value=0 --set optim.lr=0.01 \
    --set schedule.warmup_steps=2 --set parallel.strategy=none --run-dir "tok-run-$vocab" >"tok-run-$vocab.txt" 2>&1 \
    || { cat "tok-run-$vocab.txt"; fail "training on prep tokens $vocab"; }
  loss=$(json_get "tok-run-$vocab/result.json" 'j["final"]["test_loss"]')
  "$PY" -c "import math, sys; sys.exit(0 if float(sys.argv[1]) < math.log($vocab) - 0.5 else 1)" "$loss" \
    || { cat "tok-run-$vocab.txt"; fail "vocabulary $vocab: test_loss $loss is not below ln V - 0.5"; }
  pass "prep tokens, vocabulary $vocab: 20 steps, test_loss $loss (ln V = $("$PY" -c "import math; print(round(math.log($vocab), 2))"))"
done

# examples/gpt2_small.toml's model at the size its comment states.
"$SHARDTRAIN" plan "$SOURCE_DIR/examples/gpt2_small.toml" --ranks 8 --sample-shape 1024 --classes 50257 >plan.txt \
  || { cat plan.txt; fail "plan gpt2_small"; }
grep -q '(gpt, 163037184 parameters)' plan.txt || { head -3 plan.txt; fail "gpt2_small is not 163,037,184 parameters"; }
pass "examples/gpt2_small.toml: $(grep -o '163037184 parameters' plan.txt)"

expect_error "prep tokens: vocabulary is 1, it must be in [2, 2147483647]" \
  "$SHARDTRAIN" prep tokens --out bad --vocab 1 --block-size 4 --samples 10
expect_error "prep tokens: block size is 0" "$SHARDTRAIN" prep tokens --out bad --vocab 10 --block-size 0 --samples 10
expect_error "already holds a data set" "$SHARDTRAIN" prep tokens --out tok-1000 --vocab 10 --block-size 4 --samples 10
