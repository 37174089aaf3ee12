# runtime.device = "emulated": a step's compute is the wait asked for (the
# rank's share of the batch times the time per sample, within the tolerance
# below), the input pipeline runs as in training, a profile run's measured
# time is taken over, bad settings are refused; and `study storage` searches
# and writes its table and plots, MLPerf Storage's workloads included.
source "$(dirname "$0")/lib.sh"

"$SHARDTRAIN" prep synthetic --out d/train --samples 2048 --sample-bytes 16K --shards 4 >/dev/null
"$SHARDTRAIN" prep synthetic --out d/test --samples 16 --sample-bytes 16K --split test >/dev/null
cat > emu.toml <<'TOML'
[train]
epochs = 1
max_steps = 40
global_batch_size = 32
[data]
train = "d/train"
test = "d/test"
loader = "stream"
[model]
kind = "mlp"
hidden = [8]
[runtime]
device = "emulated"
[runtime.emulate]
sample_ms = 1.5
[parallel]
strategy = "ddp"
TOML

# Tolerance: a step's compute may exceed the wait by the wake-up latency and
# the step's own bookkeeping; it is never shorter (an absolute deadline).
# Checked: every step >= 0.99 x asked, the median <= 1.05 x asked + 1 ms.
check_compute() {  # run dir, ranks, ms per step asked
  "$PY" - "$@" <<'PY' || fail "emulated compute is not the wait asked for in $1"
import glob, json, statistics, sys
run, ranks, want = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]) / 1e3
files = sorted(glob.glob(f"{run}/telemetry/rank-*.jsonl"))
assert len(files) == ranks, files
for f in files:
    c = [json.loads(l)["compute_s"] for l in open(f)][2:]
    med = statistics.median(c)
    print(f"{f}: {len(c)} steps, compute median {med * 1e3:.2f} ms (asked {want * 1e3:.2f}), min {min(c) * 1e3:.2f}")
    assert min(c) >= 0.99 * want and med <= 1.05 * want + 1e-3
r = json.load(open(f"{run}/result.json"))
assert r["final"] is None and abs(r["emulated_device"]["sample_s"] - 1.5e-3) < 1e-9, r["emulated_device"]
PY
}

"$SHARDTRAIN" train emu.toml --set run.dir=one --set parallel.strategy=none | tee out.txt
grep -q "\[init\] device: emulated accelerator (nothing trained or evaluated), 1.5 ms per sample" out.txt ||
  fail "no emulated device line"
grep -q "not evaluated" out.txt || fail "an emulated run was evaluated"
check_compute one 1 48
pass "1 rank: 32 samples x 1.5 ms = 48 ms per step"

"$SOURCE_DIR/launch/shardrun" -n 2 -- "$SHARDTRAIN" train emu.toml --set run.dir=two > out.txt 2>&1 ||
  { cat out.txt; fail "2 ranks"; }
check_compute two 2 24
grep -q "\[summary\] storage: data set" out.txt || fail "no storage line"
pass "2 ranks: 16 samples each x 1.5 ms = 24 ms per step"

# The profile of a run: its median compute per sample, here 1.5 ms, x 2.
"$SHARDTRAIN" train emu.toml --set run.dir=prof --set '~runtime.emulate.sample_ms' \
  --set runtime.emulate.profile=one --set runtime.emulate.scale=2 --set train.max_steps=12 | tee out.txt
sample_ms=$(json_get prof/result.json "j['emulated_device']['sample_s'] * 1e3")
"$PY" -c "import sys; sys.exit(0 if 3.0 <= float(sys.argv[1]) <= 3.0 * 1.05 + 0.05 else 1)" "$sample_ms" ||
  fail "profile x 2 gave $sample_ms ms per sample, expected about 3"
grep -q "the median compute of .* steps in one x 2" out.txt || fail "the profile's source is not logged"
pass "a profile's time taken over and scaled: $sample_ms ms per sample"

# runtime.emulate.input = "bytes": the same waits on the stored bytes; the
# plan holds the loader's 7 slots of 32 samples at 16384 bytes, not floats.
"$SHARDTRAIN" train emu.toml --set run.dir=bytes --set parallel.strategy=none --set runtime.emulate.input=bytes |
  tee out.txt
check_compute bytes 1 48
"$SHARDTRAIN" plan emu.toml --set runtime.emulate.input=bytes --ranks 1 --json > plan.json
"$PY" - plan.json <<'PY' || fail "the plan of an emulated accelerator's bytes"
import json, sys
p = json.load(open(sys.argv[1]))[0]["components"]
assert p["stream loader's batches"] == 7 * 32 * 16384, p
assert p["step input"] == 32 * 4 and "evaluation input" not in p, p
PY
pass "input = bytes: 32 samples x 1.5 ms, the slots planned as stored"

expect_error "needs the accelerator's time" "$SHARDTRAIN" train emu.toml --set '~runtime.emulate.sample_ms'
expect_error "needs runtime.device = \"emulated\" and data.loader = \"stream\"" "$SHARDTRAIN" train emu.toml \
  --set runtime.device=cpu --set runtime.emulate.input=bytes
expect_error "not both" "$SHARDTRAIN" train emu.toml --set runtime.emulate.profile=one
expect_error "trains nothing" "$SHARDTRAIN" train emu.toml --set target.value=0.5
mkdir -p empty
expect_error "empty/telemetry" "$SHARDTRAIN" train emu.toml --set '~runtime.emulate.sample_ms' \
  --set runtime.emulate.profile=empty --set run.dir=bad

# The search: at 1.5 ms per sample (11 MB/s per accelerator of 16 KiB
# samples) 1 and 2 accelerators pass from the page cache; the profile's
# accelerator is searched in both modes too, whatever it finds.
"$SHARDTRAIN" study storage --out study --data d/train --test d/test --accelerator slow=1.5ms \
  --accelerator prof=one --modes page-cache,cold --max-accelerators 2 --seconds 0.5 --min-steps 20 | tee out.txt
grep -q "| slow | page-cache | 2 |" study/table.md || fail "1.5 ms per sample did not pass with 2 accelerators"
grep -q "| prof | cold | " study/table.md || fail "no row for the profile's accelerator"
[ -s study/au.png ] && [ -s study/throughput.png ] || fail "no plots"
[ "$(wc -l < study/points.jsonl)" -ge 4 ] || fail "fewer points than searched"
n=$(wc -l < study/points.jsonl)
"$SHARDTRAIN" study storage --out study --data d/train --test d/test --accelerator slow=1.5ms \
  --accelerator prof=one --modes page-cache,cold --max-accelerators 2 --seconds 0.5 --min-steps 20 > out.txt
[ "$(wc -l < study/points.jsonl)" -eq "$n" ] || fail "a rerun ran measured points again"
pass "study storage: table, plots, resumed without rerunning"

# MLPerf Storage's workloads: cosmoflow on an H100 (3.5 ms per sample of
# 2828486 bytes, one to a file, batch 1, AU >= 70%); data of another layout
# and an unknown workload are errors that say what is needed.
"$SHARDTRAIN" prep synthetic --out cosmo/train --samples 12 --sample-bytes 2828486 --shards 12 >/dev/null
"$SHARDTRAIN" prep synthetic --out cosmo/test --samples 1 --sample-bytes 2828486 --split test >/dev/null
"$SHARDTRAIN" study storage --out cosmo/study --data cosmo/train --test cosmo/test --accelerator cosmoflow:h100 \
  --modes page-cache --max-accelerators 1 --seconds 0.1 --min-steps 20 | tee out.txt
grep -q "cosmoflow-h100, page-cache: 1 accelerator(s) at AU >= 70%" out.txt || fail "cosmoflow:h100 did not run at its AU"
"$PY" - cosmo/study <<'PY' || fail "the cosmoflow point's settings"
import json, re, sys
p = [json.loads(line) for line in open(f"{sys.argv[1]}/points.jsonl")][0]
cfg = open(f"{sys.argv[1]}/points/cosmoflow-h100-page-cache-1/config.toml").read()
assert "global_batch_size = 1\n" in cfg and abs(float(re.search(r"sample_ms = (\S+)", cfg)[1]) - 3.5) < 1e-9, cfg
assert abs(p["sample_s"] - 0.0035) < 1e-12 and p["status"] == "ok", p
PY
"$SHARDTRAIN" study storage --out cosmo/bytes --data cosmo/train --test cosmo/test --accelerator cosmoflow:h100 \
  --input bytes --modes page-cache --max-accelerators 1 --seconds 0.1 --min-steps 20 | tee out.txt
grep -q "cosmoflow-h100-bytes, page-cache: 1 accelerator(s) at AU >= 70%" out.txt ||
  fail "cosmoflow:h100 on the stored bytes did not run at its AU"
grep -q '^input = "bytes"$' cosmo/bytes/points/cosmoflow-h100-bytes-page-cache-1/config.toml ||
  fail "--input bytes did not reach the job's config"
expect_error "resnet50 reads 114660 bytes per sample, 1251 to a file" \
  "$SHARDTRAIN" study storage --out bad --data d/train --test d/test --accelerator resnet50:a100
expect_error "expected WORKLOAD:GPU, WORKLOAD one of unet3d, resnet50, cosmoflow" \
  "$SHARDTRAIN" study storage --out bad --data d/train --test d/test --accelerator bert:h100
pass "study storage: MLPerf Storage's cosmoflow at its AU; wrong data and workloads named"

# study ingest: the job alone and while a writer stages a second split next
# to its data, in a table with the slowdown and what the host went through.
"$SHARDTRAIN" prep synthetic --out d/next --samples 512 --sample-bytes 16K --shards 2 >/dev/null
"$SHARDTRAIN" study ingest --out ingest --config emu.toml --set parallel.strategy=none --set train.max_steps=30 \
  --data d/train --source d/next --ingest-dir scratch --blocks 128K --rates 0 | tee out.txt
grep -q "| none (alone) |  |  | 0 | .* | 1.00x |" ingest/table.md || fail "no row for the job alone"
grep -q "| 128 KiB | unlimited | 0, buffered | [1-9][0-9]* | .* | [0-9.]*x |" ingest/table.md || fail "no row with the writer"
[ ! -e scratch/copy ] || fail "the writer's copy was left behind"
"$PY" - ingest <<'PY' || fail "the host's figures beside each point"
import json, os, sys
for p in map(json.loads, open(f"{sys.argv[1]}/points.jsonl")):
    h = p["host"]
    assert 0 <= h["iowait"] <= 1, h
    if os.path.exists("/proc/pressure/io"):  # a kernel with PSI
        assert all(0 <= h[f"{k}_some"] <= 1.01 for k in ("cpu", "io", "memory")), h
    assert h["written_back_mb_s"] >= 0 and h["reclaim_scanned_per_s"] >= 0, h
PY
pass "study ingest: the job alone and beside a writer, with the host's stalls, reclaim and writeback"
"$SHARDTRAIN" study ingest --out ingest-direct --config emu.toml --set parallel.strategy=none \
  --set train.max_steps=30 --data d/train --source d/next --ingest-dir scratch --blocks 128K --rates 0 --writer-direct
grep -q "| 128 KiB | unlimited | 0, O_DIRECT | [1-9][0-9]* | " ingest-direct/table.md || fail "no row with the O_DIRECT writer"
pass "study ingest: the writer with O_DIRECT"
# --writer-io-max: the kernel throttles the writer's cgroup (root and an I/O
# controller; said and skipped where this host has neither).
if "$SHARDTRAIN" study ingest --out ingest-iomax --config emu.toml --set parallel.strategy=none \
  --set train.max_steps=60 --data d/train --source d/next --ingest-dir scratch --blocks 128K --rates 0 \
  --writer-io-max 20 >iomax.txt 2>&1; then
  "$PY" - ingest-iomax <<'PY' || { cat iomax.txt; fail "the throttled writer"; }
import json, sys
p = [json.loads(line) for line in open(f"{sys.argv[1]}/points.jsonl")][-1]
assert p["writer_io_max_mb_s"] == 20 and 0 < p["written_mb_s"] <= 24, p  # the copy's first block may come before
PY
  grep -q "| 128 KiB | unlimited | 0, buffered, io.max 20 MB/s | " ingest-iomax/table.md || fail "no io.max row"
  pass "study ingest: the writer in a cgroup throttled to 20 MB/s wrote $(grep -o '"written_mb_s": [0-9.]*' \
    ingest-iomax/points.jsonl | tail -1)"
else
  grep -q "^shardtrain study ingest: --writer-io-max: " iomax.txt || { cat iomax.txt; fail "--writer-io-max"; }
  echo "skip: --writer-io-max: $(cat iomax.txt)"
fi

# A real job's AU is its measured compute (no accelerator's time to ask for).
printf '[train]\nglobal_batch_size = 32\nmax_steps = 20\n[model]\nkind = "mlp"\nhidden = [8]\n' >real.toml
"$SHARDTRAIN" study ingest --out ingest-real --config real.toml --set data.test=d/test --data d/train --source d/next \
  --ingest-dir scratch --blocks 128K --rates 0
"$PY" - ingest-real <<'PY' || fail "a real job's points"
import json, sys
points = [json.loads(line) for line in open(f"{sys.argv[1]}/points.jsonl")]
assert len(points) == 2 and all(p["status"] == "ok" and 0 < p["au_min"] <= 1 for p in points), points
PY
pass "study ingest: a real training job"
