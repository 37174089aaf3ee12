# mllog.txt against MLPerf's own compliance checker (PyPI's mlperf-logging,
# in the venv scripts/install-deps.sh makes): a 2-rank DDP run of the MLP
# passes the training rules' common checks of the current ruleset (6.1.0)
# and of 4.1.0, with the submission fields from the config and cache_clear
# as the run read its data. What cannot apply is checked to fail the way
# it must: the division's file asks for one of MLPerf's benchmarks
# (open_common.yaml), and each benchmark's own rules (open_<name>.yaml: its
# model, optimizer, hyperparameters and target) exist only for those; the
# reference models are none of them.
source "$(dirname "$0")/lib.sh"
py="$SOURCE_DIR/.venv/mlperf-logging/bin/python"
[ -x "$py" ] || fail "$py missing: run scripts/install-deps.sh (it installs mlperf-logging)"
data=$(prep_fmnist)

mpirun_flags=(--oversubscribe --bind-to none)
[ "$(id -u)" -eq 0 ] && mpirun_flags+=(--allow-run-as-root)
mpirun "${mpirun_flags[@]}" -np 2 "$SHARDTRAIN" train "$SOURCE_DIR/examples/fmnist_mlp.toml" \
  --set "data.train=$data/train" --set "data.test=$data/test" --set parallel.strategy=ddp --set train.max_steps=30 \
  --set target.value=0 --set telemetry.mlperf_org=Example --set data.loader=stream --set data.cold_cache=true \
  --run-dir run >out.txt 2>&1 || { cat out.txt; fail "the run failed"; }
grep -q '"key": "submission_org", "value": "Example"' run/mllog.txt || fail "submission_org not from the config"
grep -q '"key": "cache_clear", "value": true' run/mllog.txt || fail "cache_clear not true with data.cold_cache"
grep -q '"key": "submission_platform", "value": "2x cpu (' run/mllog.txt || fail "the default platform"

# The common rules, without the division's file that only MLPerf's own
# benchmarks can meet: the same file with that one enqueue taken out.
for ruleset in 6.1.0 4.1.0; do
  "$py" - "$ruleset" common-$ruleset.yaml <<'PY' || fail "could not derive the common rules"
import os, re, sys
import mlperf_logging.compliance_checker as cc
src = os.path.join(os.path.dirname(cc.__file__), f"training_{sys.argv[1]}", "common.yaml")
text = open(src).read()
out = re.sub(r"enqueue_config\('training_[0-9.]+/\{\}_common\.yaml'\.format\(v\['value'\]\)\); ", "", text)
assert out != text, "the division's enqueue was not found: the rules changed"
open(sys.argv[2], "w").write(out)
PY
  "$py" -m mlperf_logging.compliance_checker --usage training --ruleset "$ruleset" --config "$PWD/common-$ruleset.yaml" \
    --log_output check-$ruleset.log run/mllog.txt >check-$ruleset.txt 2>&1 || { cat check-$ruleset.txt; fail "ruleset $ruleset: the common rules failed"; }
  grep -q SUCCESS check-$ruleset.txt || { cat check-$ruleset.txt; fail "ruleset $ruleset: no SUCCESS"; }
  pass "ruleset $ruleset: the training rules' common checks pass"
done

# The full rules: the division's file rejects the model (not an MLPerf
# benchmark) and has no benchmark file to load for it.
"$py" -m mlperf_logging.compliance_checker --usage training --ruleset 6.1.0 --log_output full.log run/mllog.txt \
  >full.txt 2>&1 && fail "the full rules passed a model MLPerf does not define"
grep -q "training_6.1.0/open_common.yaml" full.txt && grep -q "open_mlp.yaml" full.txt ||
  { cat full.txt; fail "the full rules failed otherwise than on the benchmark"; }
pass "the full rules stop at the benchmark: open_common.yaml's list and no open_mlp.yaml"
