#!/usr/bin/env bash
# How repeatable a study's measurements are: runs the same points REPEATS
# times (each in a study directory of its own that reuses STUDY's
# calibration, so only the points run), then prints, per point, STUDY's step
# time, each repeat's, and the spread (slowest / fastest), with the model's
# prediction. A point whose spread exceeds 1.25/0.75 = 1.67 cannot be
# predicted within 25% of every run by any one number.
#
# usage: scripts/study-repeat.sh STUDY REPEATS [study run options: the grid]
#   e.g. scripts/study-repeat.sh study 3 --models cnn,gpt --strategies hybrid \
#          --nodes 4 --ranks-per-node 2 --rates unshaped,2gbit --steps 10 --warmup 3
#
# The grid's --steps and --warmup must be STUDY's. Runs Debian's
# /usr/bin/python3 (through `shardtrain study`) and this script's summary
# with it too. Needs root for the emulated nodes, as `study run` does.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { sed -n 2,16p "$0" >&2; exit 2; }
study=$1 repeats=$2
shift 2
st=build/bin/shardtrain
[ -x "$st" ] || { echo "$0: $st not found (scripts/build.sh first)" >&2; exit 2; }
[ -f "$study/points.jsonl" ] && [ -d "$study/calibration" ] ||
  { echo "$0: $study is not a study directory (no points.jsonl or calibration/)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

for i in $(seq "$repeats"); do
  mkdir -p "$work/$i/calibration"
  cp "$study"/calibration/*.json "$work/$i/calibration/"
  echo "study-repeat: repeat $i of $repeats" >&2
  "$st" study run --out "$work/$i" "$@" >"$work/$i.log" 2>&1 || { tail -5 "$work/$i.log" >&2; exit 1; }
done

/usr/bin/python3 - "$study" "$work" "$repeats" <<'PY'
import json, statistics, sys
study, work, repeats = sys.argv[1], sys.argv[2], int(sys.argv[3])
def points(d):
    return {p["key"]: p for p in map(json.loads, open(f"{d}/points.jsonl")) if p.get("status") == "ok"}
base = points(study)
runs = [points(f"{work}/{i}") for i in range(1, repeats + 1)]
print(f"| point | model ms | {study} ms | " + " | ".join(f"repeat {i} ms" for i in range(1, repeats + 1))
      + " | slowest / fastest |")
print("|" + " --- |" * (repeats + 4))
spreads = []
for key in sorted(runs[0]):
    if runs[0][key]["world"] == 1:
        continue
    steps = [r[key]["step_s"] for r in [base] + runs if key in r]
    spread = max(steps) / min(steps)
    spreads.append(spread)
    model = runs[0][key].get("prediction", {}).get("step_s")
    cells = [f"{r[key]['step_s'] * 1e3:.1f}" if key in r else "-" for r in [base] + runs]
    print(f"| {key} | {model * 1e3:.1f} | " if model else f"| {key} | - | ", end="")
    print(" | ".join(cells) + f" | {spread:.2f} |")
print(f"\n{len(spreads)} points; spread median {statistics.median(spreads):.2f}, worst {max(spreads):.2f}; "
      f"{sum(s > 1.25 / 0.75 for s in spreads)} beyond 1.67 (no one prediction within 25% of every run)")
PY
