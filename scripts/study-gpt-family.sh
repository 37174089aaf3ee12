#!/usr/bin/env bash
# The GPT family (124M, 1.3B, 7B) on 1 to 128 nodes of 8 H200s, on every
# shipped fabric, at two compute rates, from the performance model
# (`shardtrain study predict`, docs/scaling.md): writes docs/study/gpt-family.md
# (the summary, the crossovers and every step time) and the rows as JSON
# next to it.
#
# usage: scripts/study-gpt-family.sh [BUILD_DIR] [OUT.md]
#
# Runs Debian's /usr/bin/python3 (through `shardtrain study`); nothing is
# trained: every figure is the model's.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
out=${2:-docs/study/gpt-family.md}
st="$build/bin/shardtrain"
[ -x "$st" ] || { echo "$0: $st not found (scripts/build.sh first)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

fabrics=(tcp-25gbe tcp-100gbe rocev2-100g-staged rocev2-100g-gdr rocev2-200g-staged rocev2-200g-gdr
         rocev2-400g-staged rocev2-400g-gdr)
# 10.7: shardtrain's measured H200 rate (docs/BENCHMARKS.md); 400: an
# assumed tuned bf16 rate, about 40% of the H200's 989 dense TFLOP/s.
rates=(10.7 400)
for rate in "${rates[@]}"; do
  for f in "${fabrics[@]}"; do
    echo "study-gpt-family: $f at $rate TFLOP/s" >&2
    "$st" study predict --fabric "$f" --gpt 124m,1.3b,7b --nodes 1,2,4,8,16,32,64,128 --tflops "$rate" \
      --json "$work/$f-$rate.json" >"$work/$f-$rate.txt"
  done
done

/usr/bin/python3 - "$work" "$out" "${rates[*]}" "${fabrics[*]}" <<'PY'
import json, os, sys
work, out, rates, fabrics = sys.argv[1], sys.argv[2], sys.argv[3].split(), sys.argv[4].split()
members = ["gpt-124m", "gpt-1.3b", "gpt-7b"]
strategies = ["ddp", "zero1", "fsdp_full", "fsdp_grad_op", "hybrid"]
lines = ["# The GPT family on clusters of 8 x H200 nodes: the model's predictions", "",
         "Written by `scripts/study-gpt-family.sh` (`shardtrain study predict`, docs/scaling.md has",
         "the model, its assumptions and how it did against measurements). Nothing here was measured",
         "on these clusters. Step time of one optimizer step; efficiency = per-GPU throughput against",
         "the same strategy on one node (HYBRID: FULL_SHARD on one node); weak scaling: every GPU holds",
         "the same batch (124M: 16 x 1024 tokens, 1.3B: 4 x 2048, 7B: 2 x 2048).", ""]
crossings = []
for rate in rates:
    lines += [f"## At {rate} TFLOP/s per GPU", ""]
    lines += ["Efficiency at 128 nodes (1024 GPUs), and the fastest strategy there:", "",
              "| fabric | model | " + " | ".join(strategies) + " | fastest at 128 nodes |",
              "| --- | --- | " + " | ".join("---" for _ in strategies) + " | --- |"]
    for f in fabrics:
        rows = json.load(open(os.path.join(work, f"{f}-{rate}.json")))
        for m in members:
            cells, best = [], None
            for s in strategies:
                r = next((r for r in rows if r["model"] == m and r["strategy"] == s and r["nodes"] == 128), None)
                if r is None:
                    cells.append("-")
                elif not r["fits"]:
                    cells.append("no fit")
                else:
                    cells.append(f"{r['efficiency']:.2f}" if r["efficiency"] is not None else "-")
                    if best is None or r["step_s"] < best["step_s"]:
                        best = r
            fastest = f"{best['strategy']}, {best['step_s'] * 1e3:.0f} ms" if best else "none fits"
            lines.append(f"| {f} | {m} | " + " | ".join(cells) + f" | {fastest} |")
    lines += ["", "Crossovers (the model's, per fabric: the NIC line rate below which FULL_SHARD",
              "loses to DDP at that fabric's other figures, and the first node count at which HYBRID",
              "beats FULL_SHARD):", ""]
    for f in fabrics:
        text = open(os.path.join(work, f"{f}-{rate}.txt")).read().split("\n\n")[-1].strip()
        lines += [f"- **{f}**:"] + [f"  - {line}" for line in text.splitlines()]
    lines += [""]
lines += ["## Every step time", ""]
for rate in rates:
    for f in fabrics:
        text = open(os.path.join(work, f"{f}-{rate}.txt")).read().split("\n\n")
        lines += [f"### {f}, {rate} TFLOP/s", "", text[1].strip(), ""]
with open(out, "w") as fh:
    fh.write("\n".join(lines))
print(out)
PY
