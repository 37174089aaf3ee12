#!/usr/bin/env bash
# Checkpoint write and load times of a GPT (examples/gpt_kjv.toml made 8
# layers of width 256: 77.6 MB of parameters and both AdamW moments in one
# file, FSDP FULL_SHARD on 4 ranks, the file in the page cache): a run of 5 steps writing a checkpoint after each, then 5 runs that
# resume from the last; prints the median of the 5 writes and of the 5 loads,
# as the run log's "[checkpoint] ... written in" and "[resume]" lines report
# them. BIN_DIR (default build/bin) selects the build, to compare two.
# OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are left as the machine sets them.
# Usage: scripts/bench-checkpoint.sh [OUT_DIR]   (default bench-out/)
source "$(dirname "$0")/bench-common.sh"
[ -f data/kjv/test/manifest.json ] || $st prep text --out data/kjv --block-size 64
cfg=examples/gpt_kjv.toml
flags=($(strategy_flags $cfg fsdp) --set model.n_layer=8 --set model.n_embd=256 --set data.test_limit=64
       --set target.value=0 --set checkpoint.every_steps=1 --set checkpoint.keep=1)
dir=$out/checkpoint-gpt
$run -n 4 -- $st train $cfg "${flags[@]}" --set train.max_steps=5 --run-dir "$dir" --overwrite >"$dir.write.txt" 2>&1
: >"$dir.load.txt"
for i in 1 2 3 4 5; do
  $run -n 4 -- $st train $cfg "${flags[@]}" --set train.max_steps=5 --run-dir "$dir" --resume auto >>"$dir.load.txt" 2>&1
done
/usr/bin/python3 - "$dir" <<'PY'
import re, statistics, sys
d = sys.argv[1]
writes = [float(x) for x in re.findall(r"\[checkpoint\] step \d+ written to \S+ in ([0-9.]+) s", open(d + ".write.txt").read())]
loads = [float(x) for x in re.findall(r"\[resume\].* in ([0-9.]+) s", open(d + ".load.txt").read())]
size = re.findall(r"written to (\S+)", open(d + ".write.txt").read())
assert len(writes) >= 5 and len(loads) == 5, (writes, loads)
print(f"checkpoint of the 8-layer GPT, FSDP on 4 ranks: write median {statistics.median(writes):.3f} s ({len(writes)} writes), "
      f"load median {statistics.median(loads):.3f} s ({len(loads)} loads)")
PY
