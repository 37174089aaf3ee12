#!/usr/bin/env bash
# The corrupt-data corpus (tests/fault/corrupt_corpus.py): damaged copies of
# a good 2-shard split (flipped bytes in the samples, the labels or the HDF5
# metadata, truncations, a broken schema, another format version, another
# sample shape, out-of-range labels, a manifest that disagrees, flipped
# sample bytes with the manifest rewritten to match them), each
# trained on with both loaders and with 1 and 2 ranks. Every run must end
# non-zero, within 120 s, not by a signal, with an error naming the split's
# damaged file (or its manifest.json): no silent training on bad data, no
# hang, no crash. Prints a line per run, then the counts per kind (the table
# in docs/reliability.md comes from CASES=66 via scripts/fault-table.sh).
# Environment: PROBE_DIR, SOURCE_DIR; CASES (default 11: each kind once),
# RANKS (default 2; the table runs "1 2"), SEED (default 1).
set -uo pipefail
source "$(dirname "$0")/lib.sh" corrupt-corpus
cases=${CASES:-11}
ranks=${RANKS:-2}
"$st" prep synthetic --out good/train --samples 200 --sample-bytes 784 --shards 2 >/dev/null || { echo "FAIL: prep"; exit 1; }
"$st" prep synthetic --out good/test --samples 50 --sample-bytes 784 --shards 1 --seed 2 >/dev/null || exit 1
/usr/bin/python3 "$SOURCE_DIR/tests/fault/corrupt_corpus.py" good/train corpus "$cases" "${SEED:-1}" >cases.txt ||
  { echo "FAIL: writing the corpus"; exit 1; }
# One whole epoch (5 batches of 40 of the 200 samples): the stream loader
# checks each sample against /crc32 when it reads it, so a damaged sample
# is found once it is read (data-resealed), not before.
common=(--set data.test=good/test --set model.kind=mlp --set train.max_steps=5 --set comm.timeout_s=20
        --set target.value=0 --set train.global_batch_size=40 $(strategy_flags "$cfg" ddp))
failures=0
: >outcomes.txt
while read -r name kind named; do
  for loader in memory stream; do
    for np in $ranks; do
      rc=0
      start=$(date +%s)
      timeout 120 "${mpirun[@]}" -np "$np" "$st" train "$cfg" --set "data.train=corpus/$name/train" \
        --set "data.loader=$loader" "${common[@]}" --run-dir "run-$name-$loader-$np" </dev/null >"$name-$loader-$np.txt" 2>&1 ||
        rc=$?
      took=$(($(date +%s) - start))
      error=$(grep -m1 -o 'shardtrain: error.*' "$name-$loader-$np.txt" | cut -c1-160)
      if [ "$rc" -eq 0 ]; then
        outcome=silent
      elif [ "$rc" -eq 124 ]; then
        outcome=hang
      elif [ "$rc" -gt 128 ] || ! grep -q "shardtrain: error" "$name-$loader-$np.txt"; then
        outcome=crash
      elif grep "shardtrain: error" "$name-$loader-$np.txt" | grep -q "corpus/$name/train.*\($named\|manifest.json\)"; then
        outcome=refused
      else
        outcome=unnamed
      fi
      echo "$kind $loader $np $outcome" >>outcomes.txt
      if [ "$outcome" = refused ]; then
        echo "ok   $name $loader np$np: exit $rc in ${took}s: $error"
      else
        echo "FAIL $name $loader np$np: $outcome (exit $rc in ${took}s)"; tail -5 "$name-$loader-$np.txt"
        failures=$((failures + 1))
      fi
    done
  done
done <cases.txt
echo
echo "| damage | runs | refused, naming the file | silent | hang | crash | error not naming the file |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
awk '{k = $1; runs[k]++; n[k " " $4]++; if (!(k in seen)) {seen[k] = 1; keys[++nk] = k}; all++; total[$4]++}
     END {for (i = 1; i <= nk; i++) {k = keys[i]; printf "| %s | %d | %d | %d | %d | %d | %d |\n", k, runs[k],
                                      n[k " refused"], n[k " silent"], n[k " hang"], n[k " crash"], n[k " unnamed"]}
          printf "| all | %d | %d | %d | %d | %d | %d |\n", all, total["refused"], total["silent"], total["hang"],
                 total["crash"], total["unnamed"]}' outcomes.txt
[ "$failures" -eq 0 ] || { echo "$failures run(s) failed"; exit 1; }
echo "every damaged split refused, naming the file, on both loaders"
