#!/usr/bin/env python3
"""The device's dense GEMM rate: the denominator of a model's achieved
TFLOP/s. Times C = A @ B for square bf16 (or f16, f32, tf32) matrices on
cuda:0 through PyTorch, which calls cuBLAS(Lt) for them: warm-up calls,
then the median of timed rounds, each a batch of calls between two CUDA
events. Prints one JSON object.

    python3 bench/gemm_rate.py --size 8192 --dtype bf16 --json gemm.json

Needs torch with a CUDA device (the GPU check runs it with the machine's
PyTorch, scripts/gpu-check-speed.sh).
"""
import argparse
import json
import statistics
import sys

import torch


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=8192, help="M = N = K (default 8192)")
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "f16", "f32", "tf32"])
    ap.add_argument("--calls", type=int, default=20, help="GEMMs per timed round (default 20)")
    ap.add_argument("--rounds", type=int, default=5, help="timed rounds (default 5)")
    ap.add_argument("--json", help="also write the result here")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("gemm_rate: no CUDA device")
    dtype = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32, "tf32": torch.float32}[a.dtype]
    torch.backends.cuda.matmul.allow_tf32 = a.dtype == "tf32"
    n = a.size
    g = torch.Generator(device="cuda").manual_seed(1)
    x = torch.randn(n, n, device="cuda", dtype=dtype, generator=g)
    y = torch.randn(n, n, device="cuda", dtype=dtype, generator=g)
    out = torch.empty(n, n, device="cuda", dtype=dtype)
    for _ in range(3):
        torch.mm(x, y, out=out)
    torch.cuda.synchronize()
    times = []
    for _ in range(a.rounds):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(a.calls):
            torch.mm(x, y, out=out)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3 / a.calls)
    t = statistics.median(times)
    r = {"size": n, "dtype": a.dtype, "seconds_per_gemm": t, "tflops": 2.0 * n ** 3 / t / 1e12,
         "tflops_rounds": [2.0 * n ** 3 / s / 1e12 for s in times], "device": torch.cuda.get_device_name(0),
         "torch": torch.__version__, "cuda": torch.version.cuda}
    print(json.dumps(r))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(r, f, indent=1)


if __name__ == "__main__":
    main()
