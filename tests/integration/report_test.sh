# `shardtrain report`: the HTML report of synthetic run directories
# (tests/data/make_run_dir.py), its content, and its errors on bad input.
# The report script is run directly (it sits next to the program in build/bin)
# so that this test does not depend on the C++ subcommand.
source "$(dirname "$0")/lib.sh"
report="$(dirname "$SHARDTRAIN")/shardtrain_report.py"
if [ ! -f "$report" ]; then
  # The top-level CMakeLists.txt copies it there through tools/CMakeLists.txt;
  # until a build tree has it, test the source (the copy is byte for byte).
  echo "note: $report missing (is add_subdirectory(tools) in CMakeLists.txt?); using the source copy"
  report="$SOURCE_DIR/tools/report/shardtrain_report.py"
fi
make_run="$SOURCE_DIR/tests/data/make_run_dir.py"
"$PY" -c "import matplotlib, numpy" 2>/dev/null || { echo "skipped: python3-matplotlib or python3-numpy missing"; exit 77; }

# count_images HTML: the number of PNGs embedded as data URIs.
count_images() { grep -o 'src="data:image/png;base64,' "$1" | wc -l; }

# self_contained HTML: no src or href that would fetch something.
self_contained() {
  if grep -Eiq '(src|href)[[:space:]]*=[[:space:]]*["'"'"']?(https?:)?//' "$1"; then
    grep -Eio '(src|href)[[:space:]]*=[[:space:]]*["'"'"']?(https?:)?//[^"'"'"' >]*' "$1" | head -3 >&2
    fail "$1 loads external resources"
  fi
}

# --- 4 ranks, rank 2 a compute straggler ---------------------------------------------
"$PY" "$make_run" run4 --ranks 4 --steps 300 --straggler 2 --cause compute --trace
"$PY" "$report" run4 > out4.txt
[ -s run4/report.html ] || fail "run4/report.html not written"
grep -q "straggler: rank 2 (busy [0-9]*% above the median: compute" out4.txt || { cat out4.txt; fail "the printed summary (summary.txt) is missing"; }
self_contained run4/report.html
n=$(count_images run4/report.html)
[ "$n" -ge 5 ] || fail "run4/report.html: $n embedded images, expected at least 5"
# The straggler section (from its heading to the next one) names rank 2 and its cause.
section=$("$PY" -c 'import re, sys
m = re.search(r"<h2>Stragglers</h2>(.*?)<h2>", open(sys.argv[1], encoding="utf-8").read(), re.S)
print(re.sub(r"<[^>]+>", "", m.group(1)) if m else "")' run4/report.html)
[ -n "$section" ] || fail "run4/report.html has no straggler section"
grep -q "rank 2" <<<"$section" || fail "the straggler section does not name rank 2: $section"
grep -q "compute" <<<"$section" || fail "the straggler section does not name the cause compute: $section"
if grep -Eq "rank [013]\b" <<<"$section"; then fail "the straggler section names a rank that is not slow: $section"; fi
grep -q '<tr class="straggler">' run4/report.html || fail "the straggler's row is not highlighted"
pass "4 ranks: $n plots, straggler rank 2 (compute) named, self-contained"

# --out elsewhere, --quiet prints nothing.
"$PY" "$report" run4 --out elsewhere.html --quiet > quiet.txt
[ -s elsewhere.html ] || fail "--out elsewhere.html not written"
[ ! -s quiet.txt ] || fail "--quiet printed: $(head -3 quiet.txt)"
pass "--out and --quiet"

# --- 1 rank, no collectives ---------------------------------------------------------------
"$PY" "$make_run" run1 --ranks 1 --steps 100 --strategy none
"$PY" "$report" run1 > out1.txt
self_contained run1/report.html
grep -q "No collectives recorded" run1/report.html || fail "run1: no note on the missing collectives"
grep -q "No reads during training (data held in memory)" run1/report.html || fail "run1: no note on the missing reads"
[ "$(count_images run1/report.html)" -ge 3 ] || fail "run1: too few plots"
pass "1 rank without collectives"

# --- a run still going: no result, no evaluation yet, last records cut half-way -----------
"$PY" "$make_run" running --ranks 2 --steps 60 --running
"$PY" "$report" running > outr.txt
grep -q "no summary.txt" outr.txt || fail "running: no message about the missing summary.txt"
grep -q "No evaluation yet" running/report.html || fail "running: no note on the missing metrics"
grep -q "running (no result.json yet)" running/report.html || fail "running: status not shown as running"
pass "a run still going"

# --- target not reached, reads from storage, a data straggler ----------------------------
"$PY" "$make_run" missed --ranks 3 --steps 200 --straggler 1 --cause data --storage --target-missed
"$PY" "$report" missed --quiet
grep -q "not reached" missed/report.html || fail "missed: the target not reached is not shown"
grep -q "Storage throughput over time (" missed/report.html || grep -q 'alt="Storage throughput over time"' missed/report.html \
  || fail "missed: no storage plot although the steps read data"
pass "target not reached, storage plot"

# --- telemetry off: no step records, no summary.json: result.json's per_rank
# (the summary's rows, computed in memory) is what the report has -----------------
"$PY" "$make_run" notel --ranks 2 --steps 50
rm -rf notel/telemetry notel/summary.json notel/summary.txt notel/trace.json
"$PY" "$report" notel > outn.txt || fail "notel: the report failed"
grep -q "per-rank summary (no telemetry files in this run)" notel/report.html || fail "notel: per-rank figures not taken from result.json"
if grep -q "No per-rank figures" notel/report.html; then fail "notel: says it has no per-rank figures"; fi
pass "telemetry off: per-rank figures from result.json"

# --- bad input: one line naming the file, exit status 1 ----------------------------------
expect_error "$WORK/missing-dir" "$PY" "$report" "$WORK/missing-dir"
cp -r run1 corrupt && echo '{"ranks": 1, "per_rank": [' > corrupt/summary.json
expect_error "corrupt/summary.json" "$PY" "$report" corrupt
cp -r run1 badrecord && sed -i '3s/"step_s":[^,]*/"step_s":"fast"/' badrecord/telemetry/rank-00000.jsonl
expect_error "badrecord/telemetry/rank-00000.jsonl:3" "$PY" "$report" badrecord
cp -r run1 badresult && echo '[]' > badresult/result.json
expect_error "badresult/result.json" "$PY" "$report" badresult
mkdir -p notarun
expect_error "not a shardtrain run directory" "$PY" "$report" notarun
