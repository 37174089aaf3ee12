#!/usr/bin/env bash
# The training benchmarks of docs/BENCHMARKS.md, one after the other on a quiet
# machine: time to target and samples/s of the reference configs, the step's
# GFLOP/s against the same GEMMs alone, and the kernel micro-benchmarks.
# OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are left as the machine sets them.
# Usage: scripts/bench-train.sh [OUT_DIR]   (default bench-out/)
source "$(dirname "$0")/bench-common.sh"

for model in mlp cnn; do
  $st bench step "examples/fmnist_$model.toml" --json "$out/step-$model.json" | tee "$out/step-$model.txt"
done
for model in mlp cnn; do
  $st train "examples/fmnist_$model.toml" --run-dir "$out/train-$model" --overwrite | grep -E '^\[(eval|done)\]'
done
build/bin/kernels_gemm_bench --benchmark_min_time=0.5 | tee "$out/kernels_gemm.txt"
build/bin/kernels_fused_bench --benchmark_min_time=0.5 | tee "$out/kernels_fused.txt"

/usr/bin/python3 - "$out" <<'PYEOF'
import json, sys
out = sys.argv[1]
print("\nsummary")
for m in ("mlp", "cnn"):
    r = json.load(open(f"{out}/train-{m}/result.json"))
    s = json.load(open(f"{out}/step-{m}.json"))
    print(f"  {m}: final test_accuracy {100*r['final']['test_accuracy']:.2f}%, "
          f"time to target {r['time_to_target_s']:.1f} s, {r['samples_per_s']:.0f} samples/s, "
          f"step {s['step_gflops']:.1f} GFLOP/s vs GEMM {s['gemm_gflops']:.1f} GFLOP/s = {100*s['ratio']:.1f}%")
PYEOF
