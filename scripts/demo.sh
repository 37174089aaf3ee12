#!/usr/bin/env bash
# The main job, from a fresh machine: install what is needed, build, convert
# Fashion-MNIST to HDF5 and train the reference MLP with DDP on 2 local ranks
# to its target (88% test accuracy), printing progress and the result. Extra
# arguments go to `shardtrain train` (e.g. --set train.epochs=2).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
if [ ! -f data/fashion-mnist/train/part-00000.h5 ] || [ ! -f data/fashion-mnist/test/part-00000.h5 ]; then
  build/bin/shardtrain prep fashion-mnist
fi
exec build/bin/shardrun -n 2 -- build/bin/shardtrain train examples/fmnist_mlp.toml "$@"
