#!/usr/bin/env bash
# The performance model held against emulated nodes with emulated compute
# (docs/scaling.md, "Validation with emulated compute"): every strategy of
# the CNN, the GPT and the Llama of examples/ on 1, 2, 4 and 8 emulated
# nodes of 1 and 2 ranks (up to 16 ranks on this machine's cores), links
# shaped to 100 Mbit/s, 1 Gbit/s and 10 Gbit/s and unshaped; each point the
# median of 3 runs, with its spread. The ranks' compute is a wait of one
# rank's measured per-Block profile (runtime.emulate.compute), so that the
# ranks collide only where their communication does. About an hour on 2
# cores; run it on a quiet machine (a build beside it slows the collectives
# the calibration measured). Needs root (emulated nodes). Prints the
# model's error at the end; the table is in OUT/table.md.
#   scripts/study-emulated.sh [OUT]   (default bench-out/study-emulated)
# `shardtrain study` runs Debian's /usr/bin/python3.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-bench-out/study-emulated}
build/bin/shardtrain study run --out "$out" --compute emulated --repeats 3 --steps 8 --warmup 2 \
  --models cnn,gpt,llama --strategies ddp,zero1,fsdp_full,fsdp_grad_op,hybrid \
  --nodes 1,2,4,8 --ranks-per-node 1,2 --rates 100mbit,1gbit,10gbit,unshaped
