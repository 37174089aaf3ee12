"""`shardtrain study ingest`: what staging the next data set costs the job
that is running, the experiment of the study this project follows. A
training job (any config: a real model, or emulated accelerators) runs on
this host, under a memory limit when given, once alone and then once per
writer setting while `shardtrain stage` copies a second data set next to
its data again and again, at each block size, unlimited and rate-limited,
and at each CPU priority asked for (`--writer-nice`: the writer shares the
job's cores), buffered or with O_DIRECT (`--writer-direct`), in a cgroup
whose writes the kernel throttles (`--writer-io-max`, study_write_limit.py),
and inside the job's own memory limit (`--writer-inside-limit`: the
writer's page cache is charged where the job's is, and evicts it).
The job's step time (the median over its measured steps, the slowest rank's)
against the alone run is the slowdown; its data wait and AU stand beside it,
and what the host went through meanwhile (study_host.py: the share of the
time tasks stalled on the CPU, on I/O and on memory, page reclaim,
writeback, iowait), which says where the slowdown comes from.

Points go to OUT/points.jsonl as they finish (a run resumes from them), the
table to OUT/table.md.
"""
import os
import re
import shutil
import subprocess
import time

import study_host
import study_job
import study_storage
import study_write_limit

WARMUP = study_storage.WARMUP_STEPS


def log(msg):
    print(f"[study ingest] {msg}", flush=True)


def size_kib(text):
    units = {"K": 1, "M": 1024, "G": 1024 * 1024}
    t = text.strip().upper().rstrip("B").rstrip("I")
    if t and t[-1] in units:
        return int(float(t[:-1]) * units[t[-1]])
    return int(t) // 1024


class Writer:
    """`shardtrain stage` of the source split into a scratch directory, over
    and over until stopped: a writer as steady as the job is long."""

    def __init__(self, args, block_kib, rate, job_output=None):
        self.args, self.block_kib, self.rate = args, block_kib, rate
        self.proc, self.copies, self.stopped = None, 0, False
        # --writer-inside-limit: the job's memory cgroup, once memlimit has
        # said where it is (in the job's output); the writer waits for it.
        self.job_output, self.cgroup = job_output, None
        # --writer-io-max: the kernel throttles the writer's writes to the disk.
        self.limit = study_write_limit.WriteLimit(args.ingest_dir, args.writer_io_max) if args.writer_io_max else None
        self.start_s = time.monotonic()

    def _start(self):
        dest = os.path.join(self.args.ingest_dir, "copy")
        shutil.rmtree(dest, ignore_errors=True)
        cmd = ["nice", "-n", str(self.args.writer_nice)] if self.args.writer_nice else []
        cmd += [os.path.join(self.args.bin_dir, "shardtrain"), "stage", "--from", self.args.source, "--to", dest,
               "--block-kib", str(self.block_kib), "--rate-mb-s", str(self.rate), "--no-verify"]
        if self.args.writer_direct:
            cmd.append("--direct-io")
        enter = self.limit.enter if self.limit else None
        if self.cgroup:
            cgroup = self.cgroup

            def enter():
                with open(os.path.join(cgroup, "cgroup.procs"), "w") as f:
                    f.write(str(os.getpid()))
        try:
            self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                         preexec_fn=enter)
        except subprocess.SubprocessError:
            if not self.cgroup or os.path.isdir(self.cgroup):
                raise
            self.proc, self.stopped = None, True  # the job is done: memlimit removed its cgroup

    def _find_cgroup(self):
        """The cgroup `memlimit` made for the job ("memlimit: ... in DIR"), or None before it says."""
        with open(self.job_output) as f:
            for line in f:
                m = re.match(r"memlimit: memory\.(?:max|limit_in_bytes) = \d+ \(\S+\) in (\S+)$", line.strip())
                if m:
                    return m.group(1)
        return None

    def poll(self):
        if self.job_output and not self.cgroup:
            self.cgroup = self._find_cgroup()
            if not self.cgroup:
                return
        if self.stopped:
            return
        if self.proc is None:
            return self._start()
        rc = self.proc.poll()
        if rc is None:
            return
        if rc < 0 and self.cgroup:  # memlimit ends what is left in its cgroup once the job is done
            self.stopped = True
            return
        if rc != 0:
            raise SystemExit(f"shardtrain study ingest: the writer failed: {self.proc.stderr.read().strip()}")
        self.copies += 1
        self._start()

    def stop(self):
        """MB/s written (whole copies only, and the one cut short by its files so far)."""
        elapsed = time.monotonic() - self.start_s
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait()
        if self.limit:
            self.limit.close()
        partial = sum(os.path.getsize(os.path.join(root, f)) for root, _, files in
                      os.walk(os.path.join(self.args.ingest_dir, "copy")) for f in files)
        shutil.rmtree(os.path.join(self.args.ingest_dir, "copy"), ignore_errors=True)
        return (self.copies * self.args.source_bytes + partial) / elapsed / 1e6


def run_point(args, key, block_kib, rate):
    point_dir = os.path.join(args.out, "points", key.replace("/", "-"))
    os.makedirs(point_dir, exist_ok=True)
    study_storage.drop_pages(study_storage.shard_files(args.data))
    run_dir = os.path.join(point_dir, "run")
    cmd = [os.path.join(args.bin_dir, "shardrun"), "-n", str(args.ranks)]
    if args.memory_limit:
        cmd += ["--memory-limit", args.memory_limit]
    cmd += ["--", os.path.join(args.bin_dir, "shardtrain"), "train", args.config, "--set", f"run.dir={run_dir}",
            "--overwrite", "--set", f"data.train={os.path.abspath(args.data)}", "--set", "data.loader=stream"]
    for s in args.set or []:
        cmd += ["--set", s]
    out_path = os.path.join(point_dir, "output.txt")
    inside = out_path if args.writer_inside_limit else None
    writer = Writer(args, block_kib, rate, inside) if block_kib else None
    start = time.monotonic()
    host_before = study_host.snapshot()
    with open(out_path, "w") as out:
        out.write("$ " + " ".join(cmd) + "\n")
        out.flush()
        job = study_job.start(cmd, out)
        try:
            while job.poll() is None:
                if writer:
                    writer.poll()
                if time.monotonic() - start > args.point_timeout:
                    study_job.end(job)
                    break
                time.sleep(0.2)
        except BaseException:
            study_job.end(job)
            raise
        finally:
            host = study_host.delta(host_before, study_host.snapshot(), time.monotonic() - start)
            written = writer.stop() if writer else 0.0
    point = {"key": key, "block_kib": block_kib, "rate_mb_s": rate, "written_mb_s": written,
             "writer_nice": args.writer_nice if block_kib else None,
             "writer_direct": bool(args.writer_direct) if block_kib else None,
             "writer_io_max_mb_s": args.writer_io_max if block_kib else None,
             "writer_inside_limit": bool(args.writer_inside_limit) if block_kib else None,
             "writer_cgroup": writer.cgroup if writer else None, "host": host}
    if job.returncode != 0:
        point.update(status="failed", error=study_job.last_error(out_path))
        return point
    try:
        point.update(study_storage.measure(run_dir), status="ok")
    except (OSError, ValueError, KeyError, study_storage.MeasureError) as e:
        point.update(status="failed", error=str(e))
    return point


def host_cells(h):
    """The host's columns of a point's row (study_host.delta); "-" where the
    kernel does not say."""
    stalls = " / ".join(study_storage.pct(h[f"{k}_some"]) if f"{k}_some" in h else "-"
                        for k in ("cpu", "io", "memory"))
    if "reclaim_scanned_per_s" in h:
        reclaim = f"{h['reclaim_scanned_per_s']:.0f} ({h['direct_reclaim_scanned_per_s']:.0f})"
        written = f"{h['written_back_mb_s']:.0f}"
    else:
        reclaim = written = "-"
    return f"{stalls} | {reclaim} | {written} | {study_storage.pct(h['iowait']) if 'iowait' in h else '-'}"


def table(points, order):
    base = points.get("alone")
    columns = ["writer block", "writer rate", "writer nice, I/O", "written MB/s", "step ms (median)", "slowdown",
               "data wait %", "AU min %", "read MB/s", "page-cache hits %", "stalled on CPU / I/O / memory % (some)",
               "reclaim scans/s (direct)", "written back MB/s", "iowait %"]
    out = ["| " + " | ".join(columns) + " |", "|" + " --- |" * len(columns)]
    for key in order:
        p = points.get(key)
        if not p:
            continue
        block = "none (alone)" if not p["block_kib"] else (f"{p['block_kib'] // 1024} MiB" if p["block_kib"] >= 1024
                                                           else f"{p['block_kib']} KiB")
        rate = "" if not p["block_kib"] else ("unlimited" if not p["rate_mb_s"] else f"{p['rate_mb_s']:g} MB/s")
        if p["status"] != "ok":
            out.append(f"| {block} | {rate} | | failed: {p['error']} |")
            continue
        slow = p["step_median_s"] / base["step_median_s"] if base and base["status"] == "ok" else None
        nice = f"{p.get('writer_nice') or 0}, {'O_DIRECT' if p.get('writer_direct') else 'buffered'}" + \
            (f", io.max {p['writer_io_max_mb_s']:g} MB/s" if p.get("writer_io_max_mb_s") else "") + \
            (", inside the job's memory limit" if p.get("writer_inside_limit") else "") \
            if p["block_kib"] else ""
        out.append(f"| {block} | {rate} | {nice} | {p['written_mb_s']:.0f} | {1e3 * p['step_median_s']:.1f} | "
                   f"{'' if slow is None else f'{slow:.2f}x'} | {study_storage.pct(p['data_wait_frac'])} | "
                   f"{study_storage.pct(p['au_min'])} | {p['mb_s']:.0f} | {study_storage.pct(p['cache_hit_ratio'])} | "
                   f"{host_cells(p.get('host') or {})} |")
    return "\n".join(out) + "\n"


def main(args):
    for split in (args.data, args.source):
        if not os.path.exists(os.path.join(split, "manifest.json")):
            raise SystemExit(f"shardtrain study ingest: {split} is not a split (no manifest.json)")
    if not os.path.isfile(args.config):
        raise SystemExit(f"shardtrain study ingest: --config {args.config}: no such file")
    try:
        blocks = [size_kib(b) for b in args.blocks]
    except ValueError:
        raise SystemExit(f"shardtrain study ingest: --blocks {','.join(args.blocks)}: sizes like 128K,1M,4M")
    args.source_bytes = sum(os.path.getsize(f) for f in study_storage.shard_files(args.source))
    os.makedirs(args.out, exist_ok=True)
    os.makedirs(args.ingest_dir, exist_ok=True)
    points = study_storage.load_points(args.out)
    suffix = (f"/nice{args.writer_nice}" if args.writer_nice else "") + ("/direct" if args.writer_direct else "") + \
        (f"/iomax{args.writer_io_max:g}" if args.writer_io_max else "") + \
        ("/inside" if args.writer_inside_limit else "")
    if args.writer_inside_limit and not args.memory_limit:
        raise SystemExit("shardtrain study ingest: --writer-inside-limit needs --memory-limit (the job's cgroup)")
    if args.writer_io_max:
        try:  # the cgroup can be made and entered here (root, a controller), before any point runs
            limit = study_write_limit.WriteLimit(args.ingest_dir, args.writer_io_max)
            try:
                subprocess.run(["true"], check=True, preexec_fn=limit.enter)
            except (subprocess.SubprocessError, OSError) as e:
                raise ValueError(f"a process cannot enter {limit.dir}: {e}") from e
            finally:
                limit.close()
        except ValueError as e:
            raise SystemExit(f"shardtrain study ingest: --writer-io-max: {e}")
    plan = [("alone", 0, 0)] + [(f"{b}k/{r:g}{suffix}", b, r) for b in blocks for r in args.rates]
    for key, block, rate in plan:
        if key in points:
            continue
        writer = f"while writing {block} KiB blocks at {f'{rate:g} MB/s' if rate else 'full rate'}"
        log(f"{key}: the job {writer if block else 'alone'} ...")
        p = run_point(args, key, block, rate)
        study_storage.record(args.out, points, p)
        if p["status"] == "ok":
            log(f"  step {1e3 * p['step_median_s']:.1f} ms, data wait {100 * p['data_wait_frac']:.1f}%, "
                f"AU min {100 * p['au_min']:.1f}%, written {p['written_mb_s']:.0f} MB/s")
        else:
            log(f"  failed: {p['error']}")
    text = table(points, [k for k, _, _ in plan])
    with open(os.path.join(args.out, "table.md"), "w") as f:
        f.write(text)
    print(text, end="")
    return 0
