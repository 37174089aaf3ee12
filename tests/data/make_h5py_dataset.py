#!/usr/bin/env python3
"""Writes a small float32 split with h5py by running the write_split example
of docs/formats.md as printed there, so the documented recipe is tested.

usage: make_h5py_dataset.py OUT_DIR

The data (tests/unit/io_h5py_compat_test.cpp computes the same):
  11 samples of shape [5], x[i, j] = 0.5 * i - j (float32),
  labels y[i] = (7 * i) % 3 as int64, num_classes 3, 2 shards,
  normalize_mean 1.5, normalize_std 2.5, split "train".
"""
import os
import re
import sys

import numpy as np


def load_example():
    """Executes the ```python block of docs/formats.md that defines write_split."""
    docs = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "formats.md")
    with open(docs, encoding="utf-8") as f:
        blocks = re.findall(r"```python\n(.*?)```", f.read(), re.S)
    example = [b for b in blocks if "def write_split(" in b]
    if len(example) != 1:
        sys.exit(f"{docs}: expected one python block defining write_split, found {len(example)}")
    namespace = {}
    exec(compile(example[0], docs, "exec"), namespace)
    return namespace["write_split"]


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    write_split = load_example()
    n = 11
    x = (0.5 * np.arange(n)[:, None] - np.arange(5)[None, :]).astype(np.float32)
    y = (7 * np.arange(n)) % 3  # int64
    write_split(sys.argv[1], "train", x, y, num_classes=3, num_shards=2, mean=1.5, std=2.5)


if __name__ == "__main__":
    main()
