"""Writes a corpus of damaged copies of a good training split.

Usage: corrupt_corpus.py GOOD_SPLIT OUT_DIR CASES SEED

Every case is OUT_DIR/<name>/train, a copy of GOOD_SPLIT (part-*.h5 and
manifest.json) with one kind of damage, chosen in turn from KINDS, at a
position drawn from SEED. Prints one line per case: name, kind, the file
the error must name. Damage to a shard's bytes is caught by the manifest's
checksums; "resealed" cases also rewrite the manifest's size and checksum of
the damaged shard, so that the shard's own checks (schema, version, shape,
labels, the per-sample checksums in /crc32) must catch it. Needs h5py and numpy (Debian's python3-h5py: run it
with /usr/bin/python3).
"""
import json
import os
import random
import shutil
import sys
import zlib

import h5py
import numpy as np

KINDS = ["flip-data", "flip-labels", "flip-metadata", "truncate", "schema", "version", "shape",
         "labels-resealed", "schema-resealed", "manifest", "data-resealed"]


def regions(path):
    """Byte ranges [(begin, end)] of /x's chunks and of /y in the file."""
    with h5py.File(path, "r") as f:
        out = {}
        for name in ("x", "y"):
            ds = f[name].id
            if ds.get_offset() is not None:
                out[name] = [(ds.get_offset(), ds.get_offset() + ds.get_storage_size())]
            else:
                out[name] = [(c.byte_offset, c.byte_offset + c.size)
                             for c in (ds.get_chunk_info(i) for i in range(ds.get_num_chunks()))]
    return out


def flip(path, offsets):
    with open(path, "r+b") as f:
        for off in offsets:
            f.seek(off)
            b = f.read(1)
            f.seek(off)
            f.write(bytes([b[0] ^ 0xFF]))


def reseal(split, shard):
    """The manifest's size and CRC-32 of `shard` made to match the file."""
    path = os.path.join(split, "manifest.json")
    m = json.load(open(path))
    data = open(os.path.join(split, shard), "rb").read()
    for s in m["shards"]:
        if s["file"] == shard:
            s["bytes"], s["crc32"] = len(data), "%08x" % zlib.crc32(data)
    json.dump(m, open(path, "w"), indent=2)


def damage(kind, split, shard, rng):
    path = os.path.join(split, shard)
    size = os.path.getsize(path)
    r = regions(path)
    if kind in ("flip-data", "flip-labels", "data-resealed"):
        lo, hi = rng.choice(r["y" if kind == "flip-labels" else "x"])
        flip(path, rng.sample(range(lo, hi), rng.randint(1, min(16, hi - lo))))
        if kind == "data-resealed":
            reseal(split, shard)
        return shard
    if kind == "flip-metadata":
        data = set()
        for lo, hi in r["x"] + r["y"]:
            data.update(range(lo, hi))
        meta = [o for o in range(size) if o not in data]
        flip(path, rng.sample(meta, rng.randint(1, 16)))
        return shard
    if kind == "truncate":
        os.truncate(path, rng.randrange(0, size))
        return shard
    if kind in ("schema", "schema-resealed"):
        with h5py.File(path, "r+") as f:
            what = rng.choice(["drop-format", "drop-split", "classes-string", "split-other", "drop-y", "rename-x"])
            if what == "drop-format":
                del f.attrs["format"]
            elif what == "drop-split":
                del f.attrs["split"]
            elif what == "classes-string":
                f.attrs["num_classes"] = "ten"
            elif what == "split-other":
                f.attrs["split"] = "test"
            elif what == "drop-y":
                del f["y"]
            else:
                f.move("x", "samples")
        if kind == "schema-resealed":
            reseal(split, shard)
        return shard
    if kind == "version":
        with h5py.File(path, "r+") as f:
            f.attrs["format_version"] = rng.choice([0, 3, 99])
        reseal(split, shard)
        return shard
    if kind == "shape":
        with h5py.File(path, "r+") as f:
            x = f["x"][:]
            del f["x"]
            f.create_dataset("x", data=np.concatenate([x, x[:, :1]], axis=1))  # one byte more per sample
        reseal(split, shard)
        return shard
    if kind == "labels-resealed":
        with h5py.File(path, "r+") as f:
            y = f["y"][:]
            y[rng.randrange(len(y))] = rng.choice([-1, int(f.attrs["num_classes"]), 2**31 - 1])
            f["y"][:] = y
        reseal(split, shard)
        return shard
    if kind == "manifest":
        mpath = os.path.join(split, "manifest.json")
        m = json.load(open(mpath))
        entry = next(s for s in m["shards"] if s["file"] == shard)
        what = rng.choice(["samples", "bytes", "crc32", "drop", "phantom", "classes"])
        if what == "samples":
            entry["num_samples"] += 1
            m["num_samples"] += 1
        elif what == "bytes":
            entry["bytes"] -= 1
        elif what == "crc32":
            entry["crc32"] = "%08x" % (int(entry["crc32"], 16) ^ 1 << rng.randrange(32))
        elif what == "drop":
            m["shards"].remove(entry)
            m["num_samples"] -= entry["num_samples"]
        elif what == "phantom":
            m["shards"].append(dict(entry, file="part-%05d.h5" % len(m["shards"])))
        else:
            m["num_classes"] += 1
        json.dump(m, open(mpath, "w"), indent=2)
        return shard if what in ("samples", "bytes", "crc32") else "manifest.json"
    raise ValueError(kind)


def main():
    good, out, cases, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    rng = random.Random(seed)
    shards = sorted(f for f in os.listdir(good) if f.endswith(".h5"))
    for i in range(cases):
        kind = KINDS[i % len(KINDS)]
        name = "%03d-%s" % (i, kind)
        split = os.path.join(out, name, "train")
        shutil.copytree(good, split)
        named = damage(kind, split, rng.choice(shards), rng)
        print(name, kind, named)


if __name__ == "__main__":
    main()
