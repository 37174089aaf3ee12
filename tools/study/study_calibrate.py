"""What the performance model needs from the machine a study runs on,
measured before the points (and kept in DIR/calibration/, so that a
resumed study and `study predict --validate` reuse it):

  profile   emulated compute (--compute emulated): per model, the per-Block
            profile every point's ranks wait (calibration/profile-MODEL.json):
            the compute of one rank alone at the whole global batch (the
            W = 1 compute below), or the file --compute emulated:FILE names.
  compute   per model and world size W: W one-rank runs (strategy none) at
            the per-rank batch of that world size, all at once and each
            under the launcher (shardrun), so that they share this host's
            cores as the W ranks of a point do;
            per-Block forward and backward times from the trace, the
            optimizer's and the rest of the step from the step records.
  comm      per group shape (nodes x ranks per node) and link rate: `bench
            comm` in latency mode (issue, wait, repeat) on those emulated
            nodes, at the very sizes the points' collectives have (the MPI
            library's algorithms do not scale smoothly between powers of
            2: an all-reduce of 3.2 MB took 103 ms where interpolating
            gave 77, docs/BENCHMARKS.md), plus
            anchors for other sizes; the world's collectives again without
            the arrival check (OP:ahead: what one costs when the runtime
            checked it while the one before it ran); `study fit` turns the
            runs of one rate into a measured fabric file
            (DIR/fabric-RATE.toml).
"""
import glob
import json
import os
import statistics
import tomllib

import study_fabric
import study_job
import study_model
import study_points

COMM_OPS = ("allreduce", "reduce_scatter", "allgather")


def log(msg):
    print(f"[study] {msg}", flush=True)


# --- compute -----------------------------------------------------------------

def global_batch(source_dir, model):
    with open(os.path.join(source_dir, study_points.MODELS[model][0]), "rb") as f:
        return int(tomllib.load(f)["train"]["global_batch_size"])


def compute_from_run(run_dir, warmup):
    """A study_model.Compute from one rank's run directory: medians over the
    steps after `warmup` (evaluation's forwards are outside every step)."""
    with open(os.path.join(run_dir, "trace.json")) as f:
        trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    steps = [(e["ts"], e["ts"] + e["dur"]) for e in events
             if e.get("name") == "step" and e.get("args", {}).get("seq", -1) >= warmup]
    if not steps:
        raise ValueError(f"{run_dir}/trace.json: no step after the {warmup} warm-up step(s)")
    per = {"block forward": {}, "block backward": {}}
    for e in events:
        if e.get("name") in per and any(a <= e["ts"] < b for a, b in steps):
            per[e["name"]].setdefault(e["args"]["seq"], []).append(e["dur"] * 1e-6)
    blocks = max(per["block forward"]) + 1
    forward = [statistics.median(per["block forward"][b]) for b in range(blocks)]
    backward = [statistics.median(per["block backward"][b]) for b in range(blocks)]
    records = []
    with open(os.path.join(run_dir, "telemetry", "rank-00000.jsonl")) as f:
        for line in f:
            r = json.loads(line)
            if r["step"] >= warmup:
                records.append(r)
    med = lambda k: statistics.median(r[k] for r in records)  # noqa: E731
    optimizer = med("optimizer_s")
    other = max(0.0, med("compute_s") - sum(forward) - sum(backward) - optimizer)
    return study_model.Compute(forward, backward, optimizer, other, med("data_wait_s"), run_dir)


def compute_path(study_dir, model, world):
    return os.path.join(study_dir, "calibration", f"compute-{model}-w{world}.json")


def calibrate_compute(args, model, world):
    """Runs (or reuses) the compute calibration of `model` at `world` ranks."""
    path = compute_path(args.out, model, world)
    if os.path.exists(path):
        return
    batch = global_batch(args.source_dir, model)
    if batch % world:
        raise RuntimeError(f"{model}: global batch {batch} does not divide among {world} ranks")
    log(f"calibrating compute: {model}, {world} one-rank run(s) of batch {batch // world} at once")
    point = study_points.Point(model, "none", 1, 1, study_points.UNSHAPED)
    procs = []
    for i in range(world):
        run_dir = os.path.join(args.out, "calibration", "runs", f"{model}-w{world}-{i}")
        cmd = [os.path.join(args.bin_dir, "shardrun"), "-n", "1", "--", os.path.join(args.bin_dir, "shardtrain"),
               "train"]
        cmd += study_points.train_args(point, args.source_dir, args.data_dir, args.warmup + args.steps,
                                       args.comm_timeout)
        cmd += ["--set", f"train.global_batch_size={batch // world}", "--run-dir", run_dir, "--overwrite"]
        os.makedirs(os.path.dirname(run_dir), exist_ok=True)
        out = open(run_dir + ".txt", "w")
        procs.append((study_job.start(cmd, out), out, run_dir))
    rcs = []
    try:
        for proc, out, _ in procs:
            rcs.append(study_job.wait(proc, args.point_timeout))
            out.close()
    finally:
        for proc, out, _ in procs:
            if proc.poll() is None:
                study_job.end(proc)
            out.close()
    computes = []
    for rc, (_, _, run_dir) in zip(rcs, procs):
        if rc != 0:
            why = "did not end in time" if rc is None else f"failed with exit {rc}: {study_job.last_error(run_dir + '.txt')}"
            raise RuntimeError(f"compute calibration {run_dir} {why} (see {run_dir}.txt)")
        computes.append(compute_from_run(run_dir, args.warmup))
    mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
    c = study_model.Compute([mean(x) for x in zip(*(c.forward for c in computes))],
                            [mean(x) for x in zip(*(c.backward for c in computes))],
                            mean([c.optimizer_s for c in computes]), mean([c.other_s for c in computes]),
                            mean([c.data_s for c in computes]),
                            f"{world} concurrent one-rank run(s), batch {batch // world}", batch // world)
    with open(path, "w") as f:
        json.dump(c.to_json(), f, indent=1)


def profile_path(study_dir, model):
    return os.path.join(study_dir, "calibration", f"profile-{model}.json")


def calibrate_profile(args, model):
    """The per-Block profile of an emulated study's `model`
    (runtime.emulate.profile of its points): the file --compute
    emulated:FILE names, or one rank's compute alone at the global batch."""
    path = profile_path(args.out, model)
    if os.path.exists(path):
        return path
    if args.compute_profile:
        with open(args.compute_profile) as f:
            c = study_model.Compute.from_json(json.load(f))
        source = args.compute_profile
    else:
        calibrate_compute(args, model, 1)
        c = load_compute(args.out, model, 1)
        source = compute_path(args.out, model, 1)
    if c.batch <= 0:  # a calibration written before files named their batch
        c.batch = global_batch(args.source_dir, model)
    log(f"emulated compute: {model} waits the profile of {source} (batch {c.batch})")
    with open(path, "w") as f:
        json.dump(c.to_json(), f, indent=1)
    return path


def load_profile(study_dir, model):
    with open(profile_path(study_dir, model)) as f:
        return study_model.Compute.from_json(json.load(f))


def load_compute(study_dir, model, world):
    path = compute_path(study_dir, model, world)
    with open(path) as f:
        return study_model.Compute.from_json(json.load(f))


# --- communication -----------------------------------------------------------

def comm_path(study_dir, nodes, g, rate):
    return os.path.join(study_dir, "calibration", f"comm-{nodes}x{g}-{rate}.json")


# Sizes measured on every shape besides the points' own, so that other
# configs interpolate: 16 KiB to 16 MiB in steps of 4.
ANCHORS = [16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20]


def comm_sizes(points, script_of):
    """{(nodes, ranks per node, rate): {op: {bytes}}}: what the points'
    collectives cost is looked up at (study_fabric.MeasuredFabric), on every
    group they run on. script_of(point) -> study_schedule.Script."""
    need = {}
    for p in points:
        if p.world <= 1:
            continue
        for c in script_of(p).collectives:
            nodes, g = study_fabric.group_shape(c["group"], p.nodes, p.ranks_per_node)
            if nodes * g <= 1:
                continue
            rate = p.rate if nodes > 1 else study_points.UNSHAPED
            nbytes = c["bytes"] * study_fabric.link_sharers(c["group"], p.nodes, p.ranks_per_node)
            op = c["op"]
            concurrent = study_fabric.concurrent_table(c, p.nodes, p.ranks_per_node)
            if concurrent:
                op, nodes, g = concurrent
                rate, nbytes = p.rate, c["bytes"]
            need.setdefault((nodes, g, rate), {}).setdefault(op, set()).add(nbytes)
            if nodes > 1 and p.compute == "emulated" and study_points.rate_bits(rate) != float("inf"):
                # Emulated compute leaves the shaped links idle between a
                # step's collectives: their buckets refill, and the bytes
                # they cover go at the unshaped links' speed
                # (study_model.ShapedLinks), measured here.
                need.setdefault((nodes, g, study_points.UNSHAPED), {}).setdefault(op, set()).add(nbytes)
    return need


def calibrate_comm(args, cluster, nodes, g, rate, sizes):
    """Measures what `sizes` ({op: {bytes}}) and the anchors add to the
    shape's calibration file (a resumed or extended study measures only
    what is new)."""
    path = comm_path(args.out, nodes, g, rate)
    rows = []
    if os.path.exists(path):
        with open(path) as f:
            rows = json.load(f)
    have = {}
    for r in rows:
        if r["impl"] == "shardtrain":
            have.setdefault(r["op"], set()).add(r["bytes"])
    # The world's collectives across nodes also without the arrival check:
    # what one costs when the runtime checked it ahead (study_fabric.AHEAD).
    ahead = tuple(op + study_fabric.AHEAD for op in COMM_OPS if op in sizes and nodes > 1)
    for op in COMM_OPS + ahead + tuple(sorted(o for o in sizes if o not in COMM_OPS)):
        base = op.removesuffix(study_fabric.AHEAD)
        # bench comm rounds a size down to whole elements per rank
        unit = 4 * nodes * g
        # A group's own table (op@group) and the world's without the check
        # are read only at the points' sizes (and the latter only up to its
        # largest): two anchors suffice to interpolate there.
        anchors = set(ANCHORS[:2] if "@" in op or op != base else ANCHORS)
        want = sorted({max(unit, b // unit * unit) for b in sizes.get(base, set()) | anchors} - have.get(op, set()))
        if not want:
            continue
        log(f"calibrating {op}: {nodes} node(s) x {g} rank(s), links {rate}, {len(want)} size(s) up to "
            f"{max(want) / 2**20:.2f} MiB")
        bench_op, _, group = base.partition("@")  # "allreduce@cross": on the groups across nodes, all at once
        tail = [os.path.join(args.bin_dir, "shardtrain"), "bench", "comm", "--mode", "latency", "--ops", bench_op,
                "--sizes", ",".join(str(b) for b in want), "--rounds", "3", "--json", path + ".part"]
        if group:
            tail += ["--group", group]
        if op != base:
            tail += ["--no-arrival-check"]
        cmd = cluster.command(study_points.Point("mlp", "ddp", nodes, g, rate), args.bin_dir, tail)
        if cmd is None:
            raise RuntimeError(f"emulated nodes {nodes} x {g} at {rate} could not be brought up")
        _, rc = study_job.run(cmd, f"{path}.{op}.txt", args.point_timeout)
        if rc != 0:
            why = (f"did not end within --point-timeout {args.point_timeout} s" if rc is None else
                   f"failed with exit {rc}: {study_job.last_error(f'{path}.{op}.txt')}")
            raise RuntimeError(f"bench comm {op} on {nodes} x {g} at {rate} {why} (see {path}.{op}.txt)")
        with open(path + ".part") as f:
            rows += [dict(r, op=op) for r in json.load(f)]
        with open(path + ".tmp", "w") as f:
            json.dump(rows, f)
        os.replace(path + ".tmp", path)
        os.remove(path + ".part")


def fit(study_dir, rate):
    """Writes DIR/fabric-RATE.toml from the comm calibrations at `rate` (and
    the one-node ones, whose links are not shaped). Returns its path."""
    rows = {}
    sources = []
    for path in sorted(glob.glob(os.path.join(study_dir, "calibration", "comm-*.json"))):
        shape, r = os.path.basename(path)[len("comm-"):-len(".json")].split("-", 1)
        nodes, g = (int(x) for x in shape.split("x"))
        if r != rate and nodes > 1:
            continue
        sources.append(os.path.basename(path))
        add_bench_rows(rows, path, nodes, g)
    out = os.path.join(study_dir, f"fabric-{rate}.toml")
    study_fabric.write_measured(out, f"emulated nodes, links {rate}", ", ".join(sources), rows,
                                host_cores=os.cpu_count(), shared_by="all")
    return out


def add_bench_rows(rows, bench_json, nodes, g):
    """Adds the shardtrain rows of a `bench comm --json` file (latency mode);
    a size measured twice keeps its last measurement. Rows timed without
    the arrival check (--no-arrival-check) go to the OP:ahead tables."""
    with open(bench_json) as f:
        data = json.load(f)
    for r in data:
        if r["impl"] == "shardtrain" and r["mode"] == "latency" and r["ok"]:
            op = r["op"]
            if r.get("arrival_check") is False and not op.endswith(study_fabric.AHEAD):
                op += study_fabric.AHEAD
            pts = dict(rows.get((op, nodes, g), []))
            pts[r["bytes"]] = r["time_us"] * 1e-6
            rows[(op, nodes, g)] = sorted(pts.items())
