#!/usr/bin/env python3
"""Checks with h5py a shard written by shardtrain's C++ ShardWriter, so that
files shardtrain writes are readable by the Python tools users have.

usage: check_shard_with_h5py.py FILE

Expected (tests/unit/io_h5py_compat_test.cpp writes exactly this):
  format "shardtrain.classification", format_version 2, split "val",
  num_classes 4, shard_index 0, num_shards 1;
  /x uint8 [7, 2, 3], x.flat[k] = (37 * k + 11) % 256, chunked along the
  first dimension only, unfiltered, normalize_mean 0.25, normalize_std 0.5;
  /y int32 [7], y[i] = i % 4;
  /crc32 uint32 [7]: zlib.crc32 of x[i]'s bytes, continued over y[i] as a
  little-endian int32 (docs/formats.md).
Exits non-zero with a message naming every mismatch.
"""
import sys
import zlib

import h5py
import numpy as np


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    problems = []

    def expect(what, got, want):
        if not (got == want if not isinstance(want, np.ndarray) else np.array_equal(got, want)):
            problems.append(f"{what}: got {got!r}, expected {want!r}")

    with h5py.File(sys.argv[1], "r") as f:
        attrs = f.attrs
        expect("format", attrs.get("format"), "shardtrain.classification")
        expect("format_version", attrs.get("format_version"), 2)
        expect("split", attrs.get("split"), "val")
        expect("num_classes", attrs.get("num_classes"), 4)
        expect("shard_index", attrs.get("shard_index"), 0)
        expect("num_shards", attrs.get("num_shards"), 1)
        for name in ("format", "split"):
            expect(f"type of {name}", type(attrs.get(name)), str)

        x, y = f["x"], f["y"]
        expect("x.dtype", x.dtype, np.dtype(np.uint8))
        expect("x.shape", x.shape, (7, 2, 3))
        expect("x", x[...], ((37 * np.arange(42) + 11) % 256).astype(np.uint8).reshape(7, 2, 3))
        expect("x.chunks[1:]", x.chunks[1:] if x.chunks else None, (2, 3))
        expect("x.compression", x.compression, None)
        expect("x.normalize_mean", float(x.attrs.get("normalize_mean", np.nan)), 0.25)
        expect("x.normalize_std", float(x.attrs.get("normalize_std", np.nan)), 0.5)
        expect("y.dtype", y.dtype, np.dtype(np.int32))
        expect("y", y[...], (np.arange(7) % 4).astype(np.int32))
        crcs = [zlib.crc32(np.int32(y[i]).astype("<i4").tobytes(), zlib.crc32(x[i].tobytes())) for i in range(7)]
        expect("crc32.dtype", f["crc32"].dtype, np.dtype("<u4"))
        expect("crc32", f["crc32"][...], np.array(crcs, dtype=np.uint32))

    if problems:
        print(f"{sys.argv[1]}:", *problems, sep="\n  ")
        sys.exit(1)
    print(f"{sys.argv[1]}: ok")


if __name__ == "__main__":
    main()
