#!/usr/bin/env bash
# Sharded checkpoints end to end (runtime/checkpoint, docs/formats.md), on the
# MLP with AdamW (its state: two moments and the step count of the bias
# correction), 40 steps, a checkpoint every 10:
#  - a 4-rank FSDP job killed at step 15 and resumed with --resume auto ends
#    bit-identical to an uninterrupted one (parameters and optimizer state);
#  - its step-10 checkpoint continues on 2 and 3 FSDP ranks, 2 DDP ranks and
#    1 rank: the same evaluations and final parameters within 1e-5 (only the
#    order of the gradient sums differs); a DDP checkpoint continues as FSDP;
#    HYBRID (2 emulated nodes x 2 ranks) writes and resumes its own; ZeRO-1
#    on 2 ranks ends where FSDP does and its checkpoint continues on 3 FSDP
#    ranks, an FSDP one on 3 ZeRO-1 ranks;
#  - a rank killed while writing the step-20 or step-30 checkpoint leaves
#    the one before loadable, and --resume auto continues from it
#    (CKPT_KILL_RUNS times, a random rank and step drawn from SEED);
#  - another model's checkpoint, a truncated and a corrupted one are refused
#    on every rank with the file named, at once; under --resume auto a
#    damaged newest checkpoint is skipped for the one before it (the run ends
#    bit-identical), and a directory of damaged ones is refused.
# Environment: PROBE_DIR (build/bin, holds shardtrain), SOURCE_DIR; CKPT_KILL_RUNS,
# SEED.
set -uo pipefail
source "$(dirname "$0")/lib.sh" checkpoint-resume
PY=/usr/bin/python3  # Debian's, with h5py
"$PY" -c "import h5py, numpy" 2>/dev/null || { echo "FAIL: python3-h5py missing (scripts/install-deps.sh)"; exit 1; }
"$st" prep fashion-mnist --out data >/dev/null || { echo "FAIL: prep"; exit 1; }
common=(--set data.train=data/train --set data.test=data/test --set data.train_limit=2560
        --set data.test_limit=1000 --set model.hidden=[128] --set train.epochs=2 --set target.value=0
        --set optim.kind=adamw --set optim.lr=0.002 --set optim.weight_decay=0.01
        --set checkpoint.every_steps=10 --set checkpoint.keep=5 --set comm.timeout_s=30)
failures=0
fail() { echo "FAIL $*"; failures=$((failures + 1)); }
train() {  # ranks strategy run-dir [args...]
  local n=$1 strategy=$2 dir=$3
  shift 3
  timeout 120 "${mpirun[@]}" -np "$n" "$st" train "$cfg" "${common[@]}" $(strategy_flags "$cfg" "$strategy") \
    --run-dir "$dir" "$@" >"$dir.txt" 2>&1
}
# compare A B TOLERANCE: every dataset of two checkpoints, max |a-b| / max |a|.
compare() {
  "$PY" - "$1" "$2" "$3" <<'PYEOF'
import sys, h5py, numpy as np
a, b, tol = h5py.File(sys.argv[1]), h5py.File(sys.argv[2]), float(sys.argv[3])
names = ["params"] + ["optimizer/" + k for k in a["optimizer"]]
worst = 0.0
for n in names:
    x, y = a[n][:], b[n][:]
    d = 0.0 if np.array_equal(x, y) else float(np.abs(x - y).max() / max(np.abs(x).max(), 1e-30))
    worst = max(worst, d)
print(f"{worst:.3g}")
sys.exit(0 if (worst == 0.0 if tol == 0 else worst <= tol) else 1)
PYEOF
}
# The test losses of metrics.jsonl, one per evaluation.
losses() { "$PY" -c "import json,sys; print(' '.join(f\"{json.loads(l)['test_loss']:.6f}\" for l in open(sys.argv[1])))" "$1"; }

# --- uninterrupted reference ------------------------------------------------------
train 4 fsdp A || { fail "reference run"; tail -5 A.txt; exit 1; }
n=$(ls A/checkpoints | grep -c '^step-.*\.h5$')
[ "$n" -eq 4 ] && echo "ok   reference: 4 ranks FSDP, checkpoints at steps 10..40, test losses $(losses A/metrics.jsonl)" ||
  fail "reference: $n checkpoints, expected 4"
# Each checkpoint's time is in the record of the step it follows (checkpoint_s).
ck=$("$PY" -c "
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
print(' '.join(str(r['step'] + 1) for r in recs if r['checkpoint_s'] > 0))" A/telemetry/rank-00000.jsonl 2>&1)
[ "$ck" = "10 20 30 40" ] && echo "ok   checkpoint_s in the records of steps 10, 20, 30, 40" ||
  fail "checkpoint_s: after steps '$ck', expected '10 20 30 40'"

# --- preempted and resumed at the same world size: bit-identical ----------------------
train 4 fsdp B --set debug.slow_rank=1 --set debug.kill_step=15
rc=$?
if [ "$rc" -eq 0 ] || [ -e B/checkpoints/step-00000020.h5 ]; then fail "preemption: exit $rc"; fi
if train 4 fsdp B --resume auto && grep -q 'resume\] B/checkpoints/step-00000010.h5: step 10' B.txt &&
   d=$(compare A/checkpoints/step-00000040.h5 B/checkpoints/step-00000040.h5 0); then
  echo "ok   killed at step 15, resumed from step 10 on 4 ranks: step-40 parameters and AdamW state bit-identical"
else
  fail "resume at the same world size: difference ${d:-none}"; tail -5 B.txt
fi
# The killed run's telemetry is kept beside the resumed run's, not overwritten.
kept=$(ls B/telemetry B | grep -cE '^(rank-0000[0-3]\.jsonl|mllog\.txt)\.before-[0-9]+$')
[ "$kept" -eq 5 ] && echo "ok   the killed run's step records (4 ranks) and mllog.txt kept as *.before-<time>" ||
  fail "earlier telemetry kept: $kept files, expected 5: $(ls B/telemetry B | tr '\n' ' ')"

# --- resharded: 4 -> 2, 3 (FSDP), 2 (DDP), 1 -----------------------------------------
for run in "2 fsdp" "3 fsdp" "2 ddp" "1 none"; do
  set -- $run
  dir="R$1$2"
  if ! train "$1" "$2" "$dir" --resume A/checkpoints/step-00000010.h5; then fail "$dir: exit"; tail -5 "$dir.txt"; continue; fi
  d=$(compare A/checkpoints/step-00000040.h5 "$dir/checkpoints/step-00000040.h5" 1e-5)
  ok=$?
  la=$(losses A/metrics.jsonl); lb=$(losses "$dir/metrics.jsonl")
  # Evaluations at steps 20 and 40 (the resumed run has no step-10 one).
  same=$("$PY" -c "import sys; a=[float(x) for x in sys.argv[1].split()]; b=[float(x) for x in sys.argv[2].split()]; print(int(len(b)==2 and all(abs(x-y)<=1e-4*abs(x) for x,y in zip(a[-2:],b))))" "$la" "$lb")
  if [ "$ok" -eq 0 ] && [ "$same" = 1 ]; then
    echo "ok   4 FSDP ranks -> $1 $2 rank(s) from step 10: test losses $lb (reference ${la}), state differs by $d"
  else
    fail "4 -> $1 $2: state differs by $d, test losses $lb against $la"
  fi
done
# HYBRID (2 emulated nodes x 2 ranks): only the first node writes the shards.
if train 4 fsdp H --set parallel.fsdp.sharding=hybrid --set comm.ranks_per_node=2 &&
   d=$(compare A/checkpoints/step-00000040.h5 H/checkpoints/step-00000040.h5 1e-5) &&
   train 4 fsdp H2 --set parallel.fsdp.sharding=hybrid --set comm.ranks_per_node=2 \
     --resume H/checkpoints/step-00000020.h5 &&
   d2=$(compare A/checkpoints/step-00000040.h5 H2/checkpoints/step-00000040.h5 1e-5); then
  echo "ok   HYBRID 2x2 writes and resumes its own checkpoints: state differs from FULL_SHARD by $d, resumed by $d2"
else
  fail "HYBRID checkpoints: ${d:-} ${d2:-}"; tail -5 H.txt H2.txt
fi
if train 3 fsdp D --resume R2ddp/checkpoints/step-00000020.h5 &&
   d=$(compare A/checkpoints/step-00000040.h5 D/checkpoints/step-00000040.h5 1e-5); then
  echo "ok   2 DDP ranks -> 3 FSDP ranks from step 20: state differs by $d"
else
  fail "DDP -> FSDP: ${d:-}"; tail -5 D.txt
fi

# ZeRO-1 writes each rank's chunk of every gradient bucket (two buckets
# here, so a rank's shard is several pieces of the flat buffer); its
# checkpoint continues on 3 FSDP ranks and an FSDP one on 3 ZeRO-1 ranks.
buckets=(--set parallel.ddp.bucket_mb=0.1 --set parallel.ddp.first_bucket_mb=0.05)
if train 2 zero1 Z "${buckets[@]}" && d=$(compare A/checkpoints/step-00000040.h5 Z/checkpoints/step-00000040.h5 1e-5) &&
   train 3 fsdp ZF --resume Z/checkpoints/step-00000020.h5 &&
   d2=$(compare A/checkpoints/step-00000040.h5 ZF/checkpoints/step-00000040.h5 1e-5) &&
   train 3 zero1 FZ --resume A/checkpoints/step-00000020.h5 "${buckets[@]}" &&
   d3=$(compare A/checkpoints/step-00000040.h5 FZ/checkpoints/step-00000040.h5 1e-5); then
  echo "ok   2 ZeRO-1 ranks: state differs from FULL_SHARD by $d; ZeRO-1 -> 3 FSDP ranks by $d2, FSDP -> 3 ZeRO-1 ranks by $d3"
else
  fail "ZeRO-1 checkpoints: ${d:-} ${d2:-} ${d3:-}"; tail -5 Z.txt ZF.txt FZ.txt
fi

# --- a rank killed while writing a checkpoint -----------------------------------------
# CKPT_KILL_RUNS times (default 1; scripts/fault-table.sh runs 10): a random
# rank kills itself in the middle of writing the checkpoint of step 20 or 30
# (drawn from SEED); --resume auto must continue from the one before.
RANDOM=${SEED:-1}
intact=0
for run in $(seq 1 "${CKPT_KILL_RUNS:-1}"); do
  rank=$((RANDOM % 2)) step=$((20 + 10 * (RANDOM % 2))) dir=C$run
  killed=$(printf 'step-%08d.h5' "$step") prev=$(printf 'step-%08d.h5' $((step - 10)))
  train 2 fsdp "$dir" --set checkpoint.keep=2 --set debug.slow_rank=$rank --set debug.kill_in_checkpoint=$step
  if [ -e "$dir/checkpoints/$killed" ] || [ ! -e "$dir/checkpoints/$killed.tmp" ]; then
    fail "kill in write $run (rank $rank, step $step): $(ls "$dir/checkpoints")"
  elif train 2 fsdp "$dir" --set checkpoint.keep=2 --resume auto && grep -q "resume\] $dir/checkpoints/$prev" "$dir.txt" &&
       [ "$(ls "$dir/checkpoints")" = "$(printf 'step-00000030.h5\nstep-00000040.h5')" ]; then
    intact=$((intact + 1))
    echo "ok   rank $rank killed while writing step $step: $prev intact, resumed from it; left: $(ls "$dir/checkpoints" | tr '\n' ' ')"
  else
    fail "resume after a kill in write $run (rank $rank, step $step)"; tail -5 "$dir.txt"; ls "$dir/checkpoints"
  fi
done
echo "kills in a checkpoint write: ${CKPT_KILL_RUNS:-1} runs, the previous checkpoint resumed from in $intact"

# --- bad checkpoints: every rank refuses, naming the file ------------------------------
ck=A/checkpoints/step-00000030.h5
cp "$ck" trunc.h5 && truncate -s 300000 trunc.h5
cp "$ck" corrupt.h5
off=$("$PY" -c "import h5py; print(h5py.File('corrupt.h5')['params'].id.get_offset())")
printf '\x7f' | dd of=corrupt.h5 bs=1 seek=$((off + 4001)) conv=notrunc status=none
check_refused() {  # name file pattern [args...]
  local name=$1 file=$2 pattern=$3
  shift 3
  local start rc=0
  start=$(date +%s)
  train 2 fsdp "bad-$name" --resume "$file" "$@" || rc=$?
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && grep -q "$file" "bad-$name.txt" && grep -Eq "$pattern" "bad-$name.txt"; then
    echo "ok   $name refused after $(( $(date +%s) - start ))s: $(grep -m1 -o 'shardtrain: error.*' "bad-$name.txt" | cut -c1-200)"
  else
    fail "$name: exit $rc"; tail -5 "bad-$name.txt"
  fi
}
check_refused "another model" "$ck" "models differ at parameter 0" --set model.hidden=[64]
check_refused "truncated" trunc.h5 "cannot open as an HDF5 file|truncated"
check_refused "corrupted" corrupt.h5 "its bytes fail their checksum"
check_refused "missing" nothere.h5 "no such file"
check_refused "a directory" A/checkpoints "is a directory"

# --- a damaged newest checkpoint under --resume auto ----------------------------------
# A copy of A's run directory without its step-40 checkpoint, one byte of the
# step-30 file flipped: --resume auto says so, goes on from step 20, sets the
# damaged file aside and ends bit-identical to A. Every file damaged: refused.
flip() { printf '\x5a' | dd of="$1" bs=1 seek=$(($(stat -c %s "$1") / 2)) conv=notrunc status=none; }
cp -r A DA && rm DA/checkpoints/step-00000040.h5 && flip DA/checkpoints/step-00000030.h5
if train 4 fsdp DA --resume auto && grep -q 'resume\] skipped: DA/checkpoints/step-00000030.h5: its bytes fail their checksum' DA.txt &&
   grep -q 'resume\] DA/checkpoints/step-00000020.h5: step 20' DA.txt && ls DA/checkpoints | grep -q 'step-00000030.h5.superseded' &&
   d=$(compare A/checkpoints/step-00000040.h5 DA/checkpoints/step-00000040.h5 0); then
  echo "ok   damaged step-30 skipped by --resume auto, resumed from step 20: step-40 bit-identical ($(grep -m1 -o 'skipped:.*' DA.txt | cut -c1-120))"
else
  fail "damaged newest checkpoint: difference ${d:-none}"; tail -5 DA.txt
fi
cp -r A EA && for f in EA/checkpoints/step-*.h5; do flip "$f"; done
if ! train 2 fsdp EA --resume auto && grep -q 'every checkpoint in EA/checkpoints is damaged' EA.txt; then
  echo "ok   every checkpoint damaged: refused ($(grep -m1 -o 'every checkpoint.*' EA.txt | cut -c1-100))"
else
  fail "every checkpoint damaged: not refused"; tail -5 EA.txt
fi

# --- runs that reuse a directory ----------------------------------------------------
# A fresh run (--overwrite) where an earlier run left checkpoints 10..40:
# they are set aside, retention keeps this run's, --resume auto finds them.
cp -r A O
if train 1 none O --overwrite --set train.max_steps=15 &&
   [ "$(ls O/checkpoints | grep -E '^step-[0-9]+\.h5$' | tr '\n' ' ')" = "step-00000010.h5 step-00000015.h5 " ] &&
   [ "$(ls O/checkpoints | grep -c superseded)" -eq 4 ] &&
   train 1 none O --set train.max_steps=15 --resume auto && grep -q 'resume\] O/checkpoints/step-00000015.h5' O.txt; then
  echo "ok   a fresh run over an earlier run's checkpoints sets them aside: $(ls O/checkpoints | tr '\n' ' ')"
else
  fail "fresh run over old checkpoints"; tail -5 O.txt; ls O/checkpoints
fi
# A run that reached its target at the end of epoch 1 (step 20): its
# checkpoint there follows the evaluation and records the target, so that a
# resumed run (a requeued job) trains no further.
if train 1 none T --set target.value=0.5 && grep -q 'target .* reached at epoch 1.00 (step 20)' T.txt &&
   train 1 none T --set target.value=0.5 --resume auto && grep -q 'reached its target' T.txt &&
   [ "$("$PY" -c "import json; r=json.load(open('T/result.json')); print(r['steps'], r['time_to_target_s'] is not None)")" = "20 True" ]; then
  echo "ok   target reached at step 20, resumed: nothing left to train ($(grep -m1 -o 'reached its target.*' T.txt | cut -c1-80))"
else
  fail "resume after the target"; tail -5 T.txt
fi
# --resume auto with no directory to look in is an error, not a fresh start.
if ! timeout 60 "${mpirun[@]}" -np 1 "$st" train "$cfg" "${common[@]}" --resume auto >noauto.txt 2>&1 &&
   grep -q 'resume auto resumes the newest checkpoint of a run directory' noauto.txt; then
  echo "ok   --resume auto without a run directory: $(grep -m1 -o 'error.*' noauto.txt | cut -c1-100)"
else
  fail "--resume auto without a run directory"; tail -3 noauto.txt
fi

[ "$failures" -eq 0 ] || { echo "$failures case(s) failed"; exit 1; }
