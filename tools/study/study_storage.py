"""`shardtrain study storage`: how many accelerators this storage keeps busy,
as MLPerf Storage asks it. Each point runs N emulated accelerators on this
host (runtime.device = "emulated": the real input pipeline, the compute
replaced by the accelerator's time per sample) and measures their AU: the
accelerator's time for the samples the rank computed over the measured
steps' wall time. That is the time the wait asked for, not the time it
took: ranks that share this host's cores wake late from their waits, and a
late wake-up is not time an accelerator would have computed (counting it
passed 4 H200-speed accelerators that together got 57% of the samples they
asked for). A storage mode passes N when every rank's AU is at least --au
(0.90). The search doubles N from 1 while it passes, then
bisects between the last pass and the first failure.

Modes, each a way of meeting the data set:
  page-cache    the data set's pages are read in first (it must fit in memory)
  memory-limit  the job runs in a memory cgroup (--memory-limit, launch/memlimit)
                and the data set's pages are dropped first; data.direct_io =
                "auto", which reads a global shuffle of a split larger than
                the limit with O_DIRECT
  memory-limit-buffered
                the same with buffered reads (data.direct_io = "off"), so
                the page cache works within the limit
  cold          data.cold_cache = true: pages dropped after each read, and
                O_DIRECT reads (data.direct_io = "auto") in the global shuffle
  object-store  the split in an S3 store (--store s3://..., the same files):
                each job fetches it into a node-local cache first
                (OUT/store-cache; emptied when the mode starts, so its first
                point fetches everything and the later ones find the
                copies), then reads the copies. Its points also record the
                store's rate, the copies found (the cache's hit rate) and the
                time to the first step's end.

Points go to OUT/points.jsonl as they finish (a run resumes from them);
OUT/table.md and OUT/au.png, OUT/throughput.png at the end.
"""
import glob
import json
import math
import os
import shutil
import statistics
import subprocess

import study_job

class MeasureError(Exception):
    pass


MODES = ("page-cache", "memory-limit", "memory-limit-buffered", "cold")
OBJECT_STORE = "object-store"
ALL_MODES = MODES + (OBJECT_STORE,)
WARMUP_STEPS = 5  # the prefetch queue filling: not the storage's pace


def log(msg):
    print(f"[study storage] {msg}", flush=True)


# MLPerf Storage's training workloads, from its DLIO configs
# (github.com/mlcommons/storage, configs/dlio/workload/<name>_<gpu>.yaml):
# the accelerator's time per batch (train.computation_time), the batch per
# accelerator (reader.batch_size), the AU a run must keep (metric.au), and
# the samples the data set holds: record_length_bytes (DLIO draws sizes
# around this mean with record_length_bytes_stdev; shardtrain's synthetic
# samples all have the mean) and num_samples_per_file.
WORKLOADS = {
    "unet3d": {"sample_bytes": 146600628, "per_file": 1, "batch": 7, "au": 0.90,
               "batch_s": {"a100": 0.636, "h100": 0.323}},
    "resnet50": {"sample_bytes": 114660, "per_file": 1251, "batch": 400, "au": 0.90,
                 "batch_s": {"a100": 0.435, "h100": 0.224}},
    "cosmoflow": {"sample_bytes": 2828486, "per_file": 1, "batch": 1, "au": 0.70,
                  "batch_s": {"a100": 0.00551, "h100": 0.00350}},
}


def parse_workload(text):
    """WORKLOAD:GPU, e.g. resnet50:h100: MLPerf Storage's accelerator."""
    workload, _, gpu = text.partition(":")
    w = WORKLOADS.get(workload)
    if w is None or gpu not in w["batch_s"]:
        raise ValueError(f"'{text}': expected WORKLOAD:GPU, WORKLOAD one of {', '.join(WORKLOADS)} and GPU one of "
                         f"{', '.join(WORKLOADS['unet3d']['batch_s'])}")
    return {"name": f"{workload}-{gpu}", "sample_ms": 1e3 * w["batch_s"][gpu] / w["batch"], "batch": w["batch"],
            "au": w["au"], "workload": workload}


# The streaming loader's batch slots per rank (data.prefetch_batches = 4,
# one being filled, the step's two: io::StreamLoader), each of floats, or
# of the stored bytes with --input bytes (runtime.emulate.input).
LOADER_SLOTS = 4 + 1 + 2


def check_workload_data(acc, split):
    """The split must hold the workload's samples, as many to a file, and
    one accelerator's batches must fit in this host's memory."""
    w = WORKLOADS[acc["workload"]]
    floats = acc.get("input", "floats") == "floats"
    need = LOADER_SLOTS * w["batch"] * w["sample_bytes"] * (4 if floats else 1)
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    if need > memory:
        raise ValueError(f"{acc['name']}: one accelerator's loader holds {LOADER_SLOTS} batches of {w['batch']} "
                         f"samples of {w['sample_bytes']} bytes {'as floats' if floats else 'as stored'}, "
                         f"{need / 1e9:.1f} GB, more than this host's {memory / 1e9:.1f} GB"
                         + (": the conversion to floats happens on the host; --input bytes hands the "
                            "accelerators the stored bytes" if floats else ""))
    with open(os.path.join(split, "manifest.json")) as f:
        m = json.load(f)
    per_file = {s["num_samples"] for s in m["shards"]}
    if m["dtype"] != "uint8" or math.prod(m["sample_shape"]) != w["sample_bytes"] or per_file != {w["per_file"]}:
        raise ValueError(
            f"{acc['name']}: {split} holds {m['dtype']} samples of {m['sample_shape']} with {sorted(per_file)} to a "
            f"file; {acc['workload']} reads {w['sample_bytes']} bytes per sample, {w['per_file']} to a file: "
            f"shardtrain prep synthetic --out DIR --sample-bytes {w['sample_bytes']} --shards F --samples "
            f"{w['per_file']} x F, for F files")


def parse_accelerator(text):
    """NAME=Xms (time per sample), NAME=RUN_DIR[*SCALE] (a measured profile)
    or WORKLOAD:GPU (MLPerf Storage's, WORKLOADS)."""
    if "=" not in text and ":" in text:
        return parse_workload(text)
    name, sep, spec = text.partition("=")
    if not sep or not name or not spec:
        raise ValueError(f"'{text}': expected NAME=Xms, NAME=RUN_DIR[*SCALE] or WORKLOAD:GPU")
    if spec.endswith("ms"):
        ms = float(spec[:-2])
        if ms <= 0:
            raise ValueError(f"'{text}': the time per sample must be positive")
        return {"name": name, "sample_ms": ms}
    path, _, scale = spec.partition("*")
    if not os.path.isdir(os.path.join(path, "telemetry")):
        raise ValueError(f"'{text}': {path} is not a run directory with telemetry/ (shardtrain train's)")
    return {"name": name, "profile": os.path.abspath(path), "scale": float(scale) if scale else 1.0}


def shard_files(split):
    files = sorted(glob.glob(os.path.join(split, "*.h5")))
    if not files:
        raise SystemExit(f"shardtrain study storage: {split} holds no shard files (*.h5)")
    return files


def drop_pages(files):
    for f in files:
        fd = os.open(f, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def read_in(files):
    for f in files:
        with open(f, "rb", buffering=0) as fh:
            while fh.read(8 << 20):
                pass


def point_config(args, acc, mode, n, steps):
    emulate = {"sample_ms": acc["sample_ms"]} if "sample_ms" in acc else \
        {"profile": acc["profile"], "scale": acc["scale"]}
    if acc.get("input", "floats") != "floats":
        emulate["input"] = acc["input"]
    cfg = {
        "train": {"epochs": 1000, "max_steps": steps, "global_batch_size": n * acc.get("batch", args.batch),
                  "progress_every_s": 30},
        "data": {"train": os.path.abspath(args.data), "test": os.path.abspath(args.test), "loader": "stream",
                 "cold_cache": mode == "cold", "direct_io": "off" if mode == "memory-limit-buffered" else "auto",
                 "verify_files": False},
        "model": {"kind": "mlp", "hidden": [8]},
        "runtime": {"device": "emulated", "emulate": emulate},
        "parallel": {"strategy": "ddp" if n > 1 else "none"},
        "telemetry": {"trace": False},
    }
    if mode == OBJECT_STORE:
        cfg["data"]["train"] = args.store
        cfg["io"] = {"stage": {"cache_dir": store_cache(args)}}
    lines = []
    for section, keys in cfg.items():
        flat = {k: v for k, v in keys.items() if not isinstance(v, dict)}
        lines.append(f"[{section}]")
        lines += [f"{k} = {json.dumps(v)}" for k, v in flat.items()]
        for k, v in keys.items():
            if isinstance(v, dict):
                lines.append(f"[{section}.{k}]")
                lines += [f"{kk} = {json.dumps(vv)}" for kk, vv in v.items()]
    return "\n".join(lines) + "\n"


def store_cache(args):
    return os.path.abspath(os.path.join(args.out, "store-cache"))


def measure_store(run_dir, first_step_s):
    """The object-store mode's figures: the training split's fetch, the time to the first step's end."""
    with open(os.path.join(run_dir, "object_store.json")) as f:
        fetch = next(s for s in json.load(f) if s["key"] == "data.train")
    with open(os.path.join(run_dir, "result.json")) as f:
        init_s = json.load(f)["init_time_s"]
    return {"store_mb_s": fetch["mb_s"], "store_bytes": fetch["bytes"], "store_retries": fetch["retries"],
            "store_hit_ratio": fetch["shards_kept"] / max(1, fetch["shards"]), "init_s": init_s,
            "first_step_done_s": init_s + first_step_s}


def measure(run_dir):
    """AU per rank over the measured steps, read rate, CPU cores busy, data wait, hit ratio."""
    ranks = []
    first_step_s = 0.0
    for path in sorted(glob.glob(os.path.join(run_dir, "telemetry", "rank-*.jsonl"))):
        with open(path) as f:
            recs = [json.loads(line) for line in f if line.strip()]
        first_step_s = max([first_step_s] + [r["t_start_s"] + r["step_s"] for r in recs if r["step"] == 0])
        recs = [r for r in recs if r["step"] >= WARMUP_STEPS]
        if recs:
            ranks.append(recs)
    if not ranks:
        raise MeasureError(f"{run_dir}: no step records after the warm-up")
    with open(os.path.join(run_dir, "result.json")) as f:
        result = json.load(f)
    if "emulated_device" in result:  # the time the accelerator's waits asked for (the module's comment)
        sample_s = result["emulated_device"]["sample_s"]
        au = [sum(r["samples"] * sample_s for r in recs) / sum(r["step_s"] for r in recs) for recs in ranks]
    else:  # a real job (study ingest's): its compute as measured
        au = [sum(r["step_s"] - r["data_wait_s"] - r["h2d_s"] - r["comm_exposed_s"] - r["blocked_on_peers_s"]
                  for r in recs) / sum(r["step_s"] for r in recs) for recs in ranks]
    start = min(recs[0]["t_start_s"] for recs in ranks)
    end = max(recs[-1]["t_start_s"] + recs[-1]["step_s"] for recs in ranks)
    wall = max(end - start, 1e-9)
    io_bytes = sum(r["io_bytes"] for recs in ranks for r in recs)
    cpu = sum(r["cpu_process_s"] for recs in ranks for r in recs)
    wait = sum(r["data_wait_s"] for recs in ranks for r in recs) / sum(r["step_s"] for recs in ranks for r in recs)
    storage = result.get("storage", {})
    step_median = statistics.median(max(r["step_s"] for r in step) for step in zip(*ranks))
    return {"au_min": min(au), "au_median": statistics.median(au), "mb_s": io_bytes / wall / 1e6,
            "step_median_s": step_median,
            "cpu_cores": cpu / wall, "data_wait_frac": wait, "cache_hit_ratio": storage.get("cache_hit_ratio"),
            "memory_limit_bytes": storage.get("memory_limit_bytes"), "data_bytes": storage.get("data_bytes"),
            "sample_s": result.get("emulated_device", {}).get("sample_s"), "measured_s": wall,
            "first_step_s": first_step_s}


def run_point(args, acc, mode, n):
    key = f"{acc['name']}/{mode}/{n}"
    point_dir = os.path.join(args.out, "points", f"{acc['name']}-{mode}-{n}")
    os.makedirs(point_dir, exist_ok=True)
    sample_s = acc.get("sample_ms", 0) * 1e-3
    if not sample_s:
        sample_s = profile_sample_s(args, acc)
    batch = acc.get("batch", args.batch)
    steps = WARMUP_STEPS + min(args.max_steps, max(args.min_steps, int(args.seconds / (batch * sample_s))))
    with open(os.path.join(point_dir, "config.toml"), "w") as f:
        f.write(point_config(args, acc, mode, n, steps))
    files = shard_files(args.data)
    if mode == "page-cache":
        read_in(files)
    elif mode != OBJECT_STORE:  # its job reads its own copies
        drop_pages(files)
    run_dir = os.path.join(point_dir, "run")
    cmd = [os.path.join(args.bin_dir, "shardrun"), "-n", str(n)]
    if mode.startswith("memory-limit"):
        cmd += ["--memory-limit", args.memory_limit]
    cmd += ["--", os.path.join(args.bin_dir, "shardtrain"), "train", os.path.join(point_dir, "config.toml"),
            "--set", f"run.dir={run_dir}", "--overwrite"]
    seconds, rc = study_job.run(cmd, os.path.join(point_dir, "output.txt"), args.point_timeout)
    point = {"key": key, "accelerator": acc["name"], "mode": mode, "accelerators": n, "steps": steps,
             "seconds": seconds}
    if rc != 0:
        point.update(status="failed", error="timed out" if rc is None else
                     study_job.last_error(os.path.join(point_dir, "output.txt")))
    else:
        try:
            point.update(measure(run_dir), status="ok")
            if mode == OBJECT_STORE:
                point.update(measure_store(run_dir, point["first_step_s"]))
            point["passes"] = point["au_min"] >= acc.get("au", args.au)
        except (OSError, ValueError, KeyError, MeasureError) as e:
            point.update(status="failed", error=str(e))
    return point


_profiles = {}


def profile_sample_s(args, acc):
    """The profile's time per sample, as the trainer computes it (its median, x scale)."""
    if acc["profile"] not in _profiles:
        per_sample = []
        for path in glob.glob(os.path.join(acc["profile"], "telemetry", "rank-*.jsonl")):
            with open(path) as f:
                for line in f:
                    r = json.loads(line)
                    if r["step"] >= 2 and r.get("samples", 0) > 0:
                        per_sample.append(r["compute_s"] / r["samples"])
        if not per_sample:
            raise SystemExit(f"shardtrain study storage: {acc['profile']} has no step records")
        # The element profile_sample_seconds (emulated_device.cpp) takes: the upper of two middles.
        _profiles[acc["profile"]] = statistics.median_high(per_sample)
    return _profiles[acc["profile"]] * acc["scale"]


def load_points(out):
    path = os.path.join(out, "points.jsonl")
    points = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                if line.strip():
                    p = json.loads(line)
                    points[p["key"]] = p
    return points


def record(out, points, p):
    """Adds a measured point to `points` and appends it to OUT/points.jsonl."""
    points[p["key"]] = p
    with open(os.path.join(out, "points.jsonl"), "a") as f:
        f.write(json.dumps(p) + "\n")


def search(args, acc, mode, points):
    """The largest N that passes (0 when 1 does not), running the points not yet in `points`."""
    def point(n):
        key = f"{acc['name']}/{mode}/{n}"
        if key not in points:
            log(f"{acc['name']}, {mode}: {n} accelerator(s) ...")
            p = run_point(args, acc, mode, n)
            record(args.out, points, p)
            if p["status"] == "ok":
                log(f"  AU min {100 * p['au_min']:.1f}% median {100 * p['au_median']:.1f}%, {p['mb_s']:.0f} MB/s, "
                    f"{p['cpu_cores']:.2f} cores busy: {'pass' if p['passes'] else 'fail'}")
            else:
                log(f"  failed: {p['error']}")
        p = points[key]
        return p["status"] == "ok" and p["passes"]

    good, bad, n = 0, None, 1
    while n <= args.max_accelerators:
        if not point(n):
            bad = n
            break
        good, n = n, n * 2
    if bad is None:
        return good
    while bad - good > 1:
        mid = (good + bad) // 2
        if point(mid):
            good = mid
        else:
            bad = mid
    return good


def pct(v):
    return "" if v is None else f"{100 * v:.1f}"


def table(points, results):
    out = ["| accelerator | mode | accelerators at AU >= target |", "| --- | --- | --- |"]
    for (acc, mode), best in results.items():
        out.append(f"| {acc} | {mode} | {best} |")
    out += ["", "| accelerator | mode | N | AU min % | AU median % | MB/s | data wait % | CPU cores busy | "
            "page-cache hits % | pass |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    ordered = sorted(points.values(), key=lambda p: (p["accelerator"], ALL_MODES.index(p["mode"]), p["accelerators"]))
    for p in ordered:
        if p["status"] != "ok":
            out.append(f"| {p['accelerator']} | {p['mode']} | {p['accelerators']} | failed: {p['error']} |")
            continue
        out.append(f"| {p['accelerator']} | {p['mode']} | {p['accelerators']} | {pct(p['au_min'])} | "
                   f"{pct(p['au_median'])} | {p['mb_s']:.0f} | {pct(p['data_wait_frac'])} | {p['cpu_cores']:.2f} | "
                   f"{pct(p['cache_hit_ratio'])} | {'yes' if p['passes'] else 'no'} |")
    store = [p for p in ordered if p["mode"] == OBJECT_STORE and p["status"] == "ok"]
    if store:
        out += ["", "The object-store tier, per point (in the order run: the first fetches, the others find "
                "the copies):", "",
                "| accelerator | N | fetched MB | store MB/s | copies found % | retries | set-up s | "
                "first step done s |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
        for p in store:
            out.append(f"| {p['accelerator']} | {p['accelerators']} | {p['store_bytes'] / 1e6:.1f} | "
                       f"{p['store_mb_s']:.0f} | {pct(p['store_hit_ratio'])} | {p['store_retries']} | "
                       f"{p['init_s']:.2f} | {p['first_step_done_s']:.2f} |")
    return "\n".join(out) + "\n"


def plots(out, points, au_targets):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    series = {}
    for p in points.values():
        if p["status"] == "ok":
            series.setdefault((p["accelerator"], p["mode"]), []).append(p)
    for name, field, label in (("au.png", "au_min", "AU, lowest rank"), ("throughput.png", "mb_s", "read MB/s")):
        fig, ax = plt.subplots(figsize=(7, 4.2))
        for (acc, mode), pts in sorted(series.items()):
            pts.sort(key=lambda p: p["accelerators"])
            ax.plot([p["accelerators"] for p in pts], [p[field] for p in pts], marker="o", label=f"{acc}, {mode}")
        if field == "au_min":  # each accelerator's target (MLPerf's workloads have their own)
            for target in sorted(set(au_targets)):
                ax.axhline(target, color="grey", linestyle="--", linewidth=1)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("emulated accelerators (ranks on this host)")
        ax.set_ylabel(label)
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
        fig.tight_layout()
        fig.savefig(os.path.join(out, name), dpi=110)
        plt.close(fig)


def main(args):
    try:
        accelerators = [parse_accelerator(a) for a in args.accelerator]
    except ValueError as e:
        raise SystemExit(f"shardtrain study storage: --accelerator {e}")
    if args.input != "floats":  # its own points: a study resumed with the other input runs them anew
        for acc in accelerators:
            acc.update(name=f"{acc['name']}-{args.input}", input=args.input)
    for split in (args.data, args.test):
        if not os.path.exists(os.path.join(split, "manifest.json")):
            raise SystemExit(f"shardtrain study storage: {split} is not a split (no manifest.json; "
                             "`shardtrain prep synthetic` makes one)")
    for acc in accelerators:
        if "workload" in acc:
            try:
                check_workload_data(acc, args.data)
            except ValueError as e:
                raise SystemExit(f"shardtrain study storage: --accelerator {e}")
    if any(m.startswith("memory-limit") for m in args.modes):
        check = subprocess.run([os.path.join(args.bin_dir, "memlimit"), "--limit", args.memory_limit,
                                          "--check"], capture_output=True, text=True)
        if check.returncode != 0:
            raise SystemExit(f"shardtrain study storage: mode memory-limit: {check.stderr.strip()}")
    if OBJECT_STORE in args.modes and not args.store:
        raise SystemExit("shardtrain study storage: mode object-store needs --store s3://bucket/prefix (the same "
                         "split, `shardtrain upload`)")
    if args.store and not args.store.startswith("s3://"):
        raise SystemExit(f"shardtrain study storage: --store {args.store}: expected s3://bucket/prefix")
    os.makedirs(args.out, exist_ok=True)
    points = load_points(args.out)
    results = {}
    for acc in accelerators:
        for mode in args.modes:
            if mode == OBJECT_STORE and not any(p["mode"] == mode for p in points.values()):
                shutil.rmtree(store_cache(args), ignore_errors=True)  # the mode's first point fetches cold
            results[(acc["name"], mode)] = search(args, acc, mode, points)
            log(f"{acc['name']}, {mode}: {results[(acc['name'], mode)]} accelerator(s) at AU >= "
                f"{100 * acc.get('au', args.au):.0f}%")
    text = table(points, results)
    with open(os.path.join(args.out, "table.md"), "w") as f:
        f.write(text)
    plots(args.out, points, [acc.get("au", args.au) for acc in accelerators])
    print(text, end="")
    log(f"wrote {args.out}/table.md, au.png, throughput.png")
    return 0
