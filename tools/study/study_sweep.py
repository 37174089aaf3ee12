"""`shardtrain study run`: run every point of a study, one after another,
each on emulated nodes (launch/emunodes, links shaped with tc) or, for one
node, on this host (launch/shardrun); or on a real cluster's nodes (a Slurm
allocation, an Open MPI hostfile); and append what it measured to
points.jsonl as it finishes. A point that fails is recorded with its error
and the sweep goes on; points already in points.jsonl are not run again, so
an interrupted study resumes where it stopped.
"""
import json
import os
import subprocess
import sys

import study_calibrate
import study_job
import study_measure
import study_points
import study_predict
import study_schedule


def log(msg):
    print(f"[study] {msg}", flush=True)


class Cluster:
    """The emulated nodes of the sweep, brought to each point's shape."""

    def __init__(self, emunodes):
        self.emunodes = emunodes
        self.prefix = f"sd{os.getpid() % 10**7}x"  # <= 10 characters, ends with a letter
        self.shape = None

    def available(self):
        """None when namespaces can be made here, else why not."""
        r = subprocess.run([self.emunodes, "check"], capture_output=True, text=True)
        return None if r.returncode == 0 else (r.stderr or r.stdout).strip()

    def up(self, nodes, rate):
        if self.shape == (nodes, rate):
            return
        if self.shape is not None and self.shape[0] != nodes:
            self.down()
        cmd = [self.emunodes, "up", str(nodes), "--prefix", self.prefix, "--owner-pid", str(os.getpid())]
        if rate != study_points.UNSHAPED:
            cmd += ["--rate", rate]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        self.shape = (nodes, rate)

    def command(self, point, bin_dir, cmd_tail):
        """The command that runs cmd_tail on the point's ranks (None when
        its nodes could not be brought up)."""
        if point.nodes == 1:
            return [os.path.join(bin_dir, "shardrun"), "-n", str(point.world), "--"] + cmd_tail
        try:
            self.up(point.nodes, point.rate)
        except subprocess.CalledProcessError:
            return None
        return [self.emunodes, "run", "--prefix", self.prefix, "-n", str(point.world), "--per-node",
                str(point.ranks_per_node), "--"] + cmd_tail

    def down(self):
        if self.shape is not None:
            subprocess.run([self.emunodes, "down", "--prefix", self.prefix], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
            self.shape = None


class RealNodes:
    """Nodes of a real cluster: a Slurm allocation (srun) or an Open MPI
    hostfile (mpirun). Links are what they are: the study's rate is the
    fabric's name (--rates), nothing is shaped."""

    def __init__(self, hostfile):
        self.hostfile = hostfile

    def command(self, point, bin_dir, cmd_tail):
        if self.hostfile is None:  # inside a Slurm allocation
            return ["srun", f"--nodes={point.nodes}", f"--ntasks-per-node={point.ranks_per_node}",
                    f"--ntasks={point.world}", "--kill-on-bad-exit=1"] + cmd_tail
        return [os.path.join(bin_dir, "shardrun"), "-n", str(point.world), "--launcher-args",
                f"--hostfile {self.hostfile} --map-by ppr:{point.ranks_per_node}:node", "--"] + cmd_tail

    def down(self):
        pass


def append_line(path, line):
    """Appends one line, on a line of its own even after a write that an
    interruption cut short (which read_points then skips)."""
    with open(path, "a+b") as f:
        f.seek(0, os.SEEK_END)
        cut = False
        if f.tell() > 0:
            f.seek(-1, os.SEEK_END)
            cut = f.read(1) != b"\n"
        f.write((("\n" if cut else "") + line + "\n").encode())


def run_point(point, args, cluster, run_dir, output_path):
    cmd_tail = [os.path.join(args.bin_dir, "shardtrain"), "train"]
    profile = study_calibrate.profile_path(args.out, point.model) if point.compute == "emulated" else None
    cmd_tail += study_points.train_args(point, args.source_dir, args.data_dir, args.warmup + args.steps,
                                        args.comm_timeout, profile)
    cmd_tail += ["--run-dir", run_dir, "--overwrite"]
    cmd = cluster.command(point, args.bin_dir, cmd_tail)
    if cmd is None:
        return 0.0, f"emunodes up {point.nodes} (rate {point.rate}) failed"
    seconds, rc = study_job.run(cmd, output_path, args.point_timeout)
    if rc is None:
        return seconds, f"did not end within --point-timeout {args.point_timeout} s"
    if rc != 0:
        return seconds, f"exit {rc}: {study_job.last_error(output_path)}"
    return seconds, None


def run_repeats(point, args, cluster, run_dir):
    """Runs the point args.repeats times (run_dir, then run_dir-2, ...) and
    measures each; returns the seconds taken, the first error (or None) and
    the figures of the run whose step time is the median, with every run's
    step time and their spread (slowest / fastest)."""
    runs, total = [], 0.0
    for r in range(1, args.repeats + 1):
        rd = run_dir if r == 1 else f"{run_dir}-{r}"
        seconds, error = run_point(point, args, cluster, rd, rd + ".txt")
        total += seconds
        if error is None:
            try:
                runs.append(study_measure.measure(rd, args.warmup))
            except study_measure.MeasureError as e:
                error = str(e)
        if error is not None:
            return total, (error if args.repeats == 1 else f"repeat {r}: {error}"), None
    runs.sort(key=lambda m: m["step_s"])
    median = dict(runs[(len(runs) - 1) // 2])
    if args.repeats > 1:
        median["repeats_step_s"] = [m["step_s"] for m in runs]
        median["spread"] = runs[-1]["step_s"] / runs[0]["step_s"]
    return total, None, median


def calibrate(args, cluster, validator, points):
    """The model's measurements of this machine (study_calibrate.py), for
    every point of the grid, before the points run."""
    os.makedirs(os.path.join(args.out, "calibration"), exist_ok=True)
    for model, world in sorted({(p.model, p.world) for p in points if p.compute == "real"}):
        study_calibrate.calibrate_compute(args, model, world)
    for model in sorted({p.model for p in points if p.compute == "emulated"}):
        study_calibrate.calibrate_profile(args, model)
    need = study_calibrate.comm_sizes(points, lambda p: study_schedule.step_script(validator.plan(p)))
    for (nodes, g, rate), sizes in sorted(need.items(), key=lambda kv: (kv[0][2], kv[0][0], kv[0][1])):
        study_calibrate.calibrate_comm(args, cluster, nodes, g, rate, sizes)
    for rate in sorted({p.rate for p in points if p.nodes > 1} | {study_points.UNSHAPED}):
        study_calibrate.fit(args.out, rate)


def sweep(args, points):
    os.makedirs(os.path.join(args.out, "runs"), exist_ok=True)
    settings = {"steps": args.steps, "warmup": args.warmup, "compute": args.compute, "repeats": args.repeats}
    settings_path = os.path.join(args.out, "study.json")
    if os.path.exists(settings_path):
        with open(settings_path) as f:
            before = json.load(f)
        before.setdefault("compute", "real")  # a study from before emulated compute and repeats
        before.setdefault("repeats", 1)
        if {k: before.get(k) for k in settings} != settings:
            sys.exit(f"shardtrain study: {args.out} was run with {before}; this run asks for {settings} "
                     "(use another --out, or the same settings to resume)")
    with open(settings_path, "w") as f:
        json.dump(settings, f)
    points_path = os.path.join(args.out, "points.jsonl")
    def cut_line(number):
        log(f"{points_path}:{number}: not a JSON line (an interrupted write?); that point runs again")

    done = {r["key"]: r for r in study_points.read_points(points_path, cut_line)}

    no_namespaces = None
    if args.hostfile or args.slurm:
        cluster = RealNodes(args.hostfile)
    else:
        cluster = Cluster(os.path.join(args.bin_dir, "emunodes"))
    if isinstance(cluster, Cluster) and any(p.nodes > 1 for p in points):
        no_namespaces = cluster.available()
        if no_namespaces:
            log(f"emulated nodes are not available here ({no_namespaces}); running the one-node points only")
    todo = [p for p in points if p.key not in done]
    skipped = [p for p in todo if p.nodes > 1 and no_namespaces]
    todo = [p for p in todo if p not in skipped]
    validator = study_predict.Validator(args.out, args.bin_dir, args.source_dir, args.data_dir)
    runnable = [p for p in points if not (p.nodes > 1 and no_namespaces)]
    try:
        calibrate(args, cluster, validator, runnable)
    except (RuntimeError, study_predict.PredictError, OSError, ValueError) as e:
        # The measurements stand without the model: say so and go on.
        log(f"calibration failed, so points get no prediction: {e}")
    except BaseException:
        cluster.down()
        raise
    log(f"{len(points)} points: {len(points) - len(todo) - len(skipped)} already in {points_path}, "
        f"{len(todo)} to run, {len(skipped)} left out (no emulated nodes)")
    failed = 0
    try:
        for i, point in enumerate(todo, 1):
            run_dir = os.path.join(args.out, "runs", point.dirname)
            seconds, error, measured = run_repeats(point, args, cluster, run_dir)
            record = {"key": point.key, "model": point.model, "strategy": point.strategy, "nodes": point.nodes,
                      "ranks_per_node": point.ranks_per_node, "world": point.world, "rate": point.rate,
                      "compute": point.compute,
                      "warmup": args.warmup, "steps": args.steps, "seconds": round(seconds, 1),
                      "run_dir": os.path.relpath(run_dir, args.out)}
            if error is None:
                record.update(measured)
            record["status"] = "failed" if error else "ok"
            if error:
                record["error"] = error
                failed += 1
                log(f"{i}/{len(todo)} {point.describe()}: FAILED ({error})")
            else:
                study_predict.add_prediction(validator, record)
                pred = record["prediction"]
                said = (f"model {pred['step_s'] * 1e3:.1f} ms ({pred['step_error']:+.0%})" if "step_error" in pred
                        else f"no prediction: {pred.get('error')}")
                log(f"{i}/{len(todo)} {point.describe()}: {record['step_s'] * 1e3:.1f} ms/step, "
                    f"{record['samples_per_s']:.0f} samples/s ({seconds:.0f} s); {said}")
            append_line(points_path, json.dumps(record))
    finally:
        cluster.down()
    log(f"done: {len(todo) - failed} measured, {failed} failed; {points_path}")
    return failed
