#!/usr/bin/env python3
"""Writes a plausible synthetic shardtrain run directory, following
docs/telemetry.md and README.md, for testing `shardtrain report` without
training anything.

usage: make_run_dir.py OUT_DIR [--ranks N] [--steps S]
                       [--straggler R --cause compute|data|communication]
                       [--strategy ddp|none] [--storage] [--target-missed]
                       [--running] [--trace] [--seed K]

What it writes (OUT_DIR must not exist or be empty):
  config.toml, log.txt, mllog.txt, metrics.jsonl, result.json,
  summary.json, summary.txt, telemetry/rank-NNNNN.jsonl, and trace.json with
  --trace. With --running it writes a run still going: no result.json, no
  summary, no evaluation yet, and each rank's last record cut half-way (the
  writer was in the middle of it).

The timing model is that of a synchronous data-parallel job: each rank's own
work (compute + data wait + exposed communication) varies a little, and every
rank's wall step time is that of the slowest rank, the others spending the
difference blocked on their peers. A straggler gets extra time in the
component named by --cause, as the [debug] slow_* keys would inject it.
"""
import argparse
import json
import math
import os
import sys

import numpy as np

BASE_COMPUTE_S = 0.045  # the MLP's compute per step on one core
STRAGGLER_EXTRA = 0.35  # the straggler's extra time, as a fraction of BASE_COMPUTE_S
BATCH_PER_RANK = 64
# DDP's gradient buckets for the 1.86M-parameter MLP (f32): a 1 MiB first
# bucket, then up to 4 MiB each; they add up to 7454784 bytes.
BUCKETS = [1048576, 4194304, 2211904]
COALESCED_BYTES = 40960  # small all-reduces the engine coalesced (biases, norms)
RANKS_PER_NODE = 8
TARGET = 0.88
SAMPLE_BYTES = 150528  # a 224x224x3 uint8 image, for the storage-bound variant


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out_dir")
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--straggler", type=int, default=-1, help="rank to slow down (-1: none)")
    p.add_argument("--cause", choices=["compute", "data", "communication"], default="compute")
    p.add_argument("--strategy", choices=["ddp", "none"], default="ddp")
    p.add_argument("--storage", action="store_true",
                   help="read every batch from storage (io_bytes > 0), with a slow phase mid-run")
    p.add_argument("--target-missed", action="store_true", help="end below the target accuracy")
    p.add_argument("--running", action="store_true", help="a run still going (no result yet)")
    p.add_argument("--trace", action="store_true", help="also write trace.json")
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    if a.ranks < 1 or a.steps < 1:
        p.error("--ranks and --steps must be at least 1")
    if a.straggler >= a.ranks:
        p.error(f"--straggler {a.straggler}: there are only {a.ranks} ranks")
    if a.strategy == "none" and a.ranks > 1:
        p.error("--strategy none needs --ranks 1")
    return a


# ---- the simulated job --------------------------------------------------------

def algorithm_for(nbytes, ranks):
    """The MPI backend's choice by size and topology (docs/comm.md, simplified)."""
    if nbytes <= 65536:
        return "oneshot"
    return "shm" if ranks <= RANKS_PER_NODE else "hierarchical"


def collective_duration(nbytes, algorithm, factor, rng):
    """Seconds to move nbytes: latency plus size over a bandwidth that grows
    with message size, as a measured busbw curve does."""
    peak_gbs = {"oneshot": 2.0, "shm": 5.0, "hierarchical": 2.5}[algorithm]
    latency_s = {"oneshot": 8e-6, "shm": 15e-6, "hierarchical": 60e-6}[algorithm]
    busbw = peak_gbs * nbytes / (nbytes + 262144) * rng.uniform(0.85, 1.1)
    return latency_s + nbytes * factor / (busbw * 1e9)


def simulate(a, rng):
    """Per-step, per-rank arrays (shape [steps, ranks]) of every component."""
    S, N = a.steps, a.ranks
    slow = np.zeros((S, N), dtype=bool)
    if a.straggler >= 0:
        slow[:, a.straggler] = True
    extra = STRAGGLER_EXTRA * BASE_COMPUTE_S

    compute = BASE_COMPUTE_S * (1 + 0.03 * rng.standard_normal((S, N))).clip(0.9, 1.2)
    compute[:3] *= 1.6  # warm-up: first steps touch fresh memory
    data = rng.exponential(5e-5, (S, N))
    comm_exposed = rng.exponential(3e-4, (S, N)) if a.strategy == "ddp" and N > 1 else np.zeros((S, N))
    io_bytes = np.zeros((S, N))
    io_read_s = np.zeros((S, N))
    if a.storage:
        io_bytes[:] = BATCH_PER_RANK * SAMPLE_BYTES
        # Storage at ~1.8 GB/s per rank, and a tenth of that mid-run while a
        # concurrent ingest shares the file system: the loader cannot keep up.
        gbs = np.full((S, N), 1.8)
        mid = slice(int(0.45 * S), int(0.6 * S))
        gbs[mid] = 0.18
        io_read_s = io_bytes / (gbs * 1e9) * rng.uniform(0.9, 1.1, (S, N))
        data += np.maximum(io_read_s - 0.8 * compute, 0)  # prefetch hides part of it
    debug_delay = np.where(slow, extra, 0.0)
    if a.cause == "compute":
        compute += debug_delay
    elif a.cause == "data":
        data += debug_delay
    else:
        comm_exposed += debug_delay

    busy = compute + data + comm_exposed
    step = busy.max(axis=1, keepdims=True) + rng.exponential(2e-5, (S, 1))
    step = np.repeat(step, N, axis=1)
    blocked = step - busy
    return dict(compute=compute, data=data, comm_exposed=comm_exposed, blocked=blocked,
                step=step, debug_delay=debug_delay, io_bytes=io_bytes, io_read_s=io_read_s)


def eval_plan(a):
    """Steps after which the job evaluates (every epoch) and the results; the
    job stops at the first evaluation that reaches the target."""
    steps_per_epoch = max(1, a.steps // 5)
    evals = list(range(steps_per_epoch - 1, a.steps, steps_per_epoch))
    if evals[-1] != a.steps - 1:
        evals.append(a.steps - 1)
    final_acc = 0.861 if a.target_missed else 0.8855
    results = []
    for i, s in enumerate(evals):
        frac = (i + 1) / len(evals)
        # Accuracy rises quickly then flattens; only the last one reaches the target.
        acc = final_acc - (final_acc - 0.78) * (1 - frac) ** 1.5 - (0.0 if i == len(evals) - 1 else 0.006)
        test_loss = 0.32 + 0.6 * (1 - frac) ** 2
        train_loss = 0.27 + 0.9 * (1 - frac) ** 2
        results.append(dict(step=s, epoch=(s + 1) / steps_per_epoch, test_accuracy=round(acc, 4),
                            test_loss=test_loss, train_loss=train_loss))
    return steps_per_epoch, results


def collectives_for_step(a, step_index, rng):
    """The collectives one step issues (the same on every rank, by seq)."""
    if a.strategy != "ddp" or a.ranks == 1:
        return []
    factor = 2 * (a.ranks - 1) / a.ranks  # nccl-tests bus-bandwidth factor of all-reduce
    sizes = [COALESCED_BYTES] + BUCKETS
    out = []
    for i, nbytes in enumerate(sizes):
        alg = algorithm_for(nbytes, a.ranks)
        dur = collective_duration(nbytes, alg, factor, rng)
        out.append({"op": "allreduce", "algorithm": alg, "seq": step_index * len(sizes) + i,
                    "bytes": nbytes, "duration_s": dur, "peer_wait_s": 0.0,
                    "busbw_gbs": nbytes * factor / dur / 1e9})
    return out


# ---- the files ------------------------------------------------------------------

def r6(x):
    """Six significant digits: what a reader needs, and files half the size."""
    return float(f"{x:.6g}")


def write_telemetry(a, out, sim, t_start, epochs, rng):
    """telemetry/rank-NNNNN.jsonl: one step record per line."""
    os.makedirs(os.path.join(out, "telemetry"))
    colls = [collectives_for_step(a, s, rng) for s in range(a.steps)]
    records = [[None] * a.steps for _ in range(a.ranks)]
    for r in range(a.ranks):
        path = os.path.join(out, "telemetry", f"rank-{r:05d}.jsonl")
        with open(path, "w", encoding="utf-8") as f:
            for s in range(a.steps):
                rec = step_record(a, sim, colls[s], r, s, t_start[s], epochs[s], rng)
                records[r][s] = rec
                line = json.dumps(rec, separators=(",", ":"))
                if a.running and s == a.steps - 1:
                    f.write(line[: len(line) // 2])  # the writer was cut off mid-record
                else:
                    f.write(line + "\n")
    return records, colls


def step_record(a, sim, collectives, r, s, t_start, epoch, rng):
    compute = sim["compute"][s, r]
    comm_s = sum(c["duration_s"] for c in collectives)
    rec = {
        "rank": r, "step": s, "epoch": r6(epoch), "t_start_s": r6(t_start + 1e-5 * r),
        "step_s": r6(sim["step"][s, r]), "data_wait_s": r6(sim["data"][s, r]), "h2d_s": 0.0,
        "comm_exposed_s": r6(sim["comm_exposed"][s, r]),
        "blocked_on_peers_s": r6(sim["blocked"][s, r]), "compute_s": r6(compute),
        "debug_delay_s": r6(sim["debug_delay"][s, r]),
        "forward_s": r6(0.33 * compute), "backward_s": r6(0.64 * compute),
        "optimizer_s": r6(0.03 * compute),
        "comm_s": r6(comm_s), "comm_bytes": sum(c["bytes"] for c in collectives),
        "collectives": [dict(c, duration_s=r6(c["duration_s"] * rng.uniform(0.97, 1.03)),
                             busbw_gbs=r6(c["busbw_gbs"])) for c in collectives],
        "eval_s": 0.0, "checkpoint_s": 0.0,
        "io_bytes": int(sim["io_bytes"][s, r]), "io_requests": int(sim["io_bytes"][s, r] > 0) * 8,
        "io_read_s": r6(sim["io_read_s"][s, r]),
        "mem_cpu_current_bytes": 41234432 + 4096 * (s % 7),
        "mem_cpu_peak_bytes": 52428800 + 65536 * r,
        "cpu_train_thread_s": r6(compute + sim["data"][s, r]),
        "cpu_process_s": r6(1.04 * sim["step"][s, r]), "samples": BATCH_PER_RANK,
    }
    return rec


def median(x):
    return float(np.median(x))


def rank_stats(r, sim):
    """summary.json's per_rank entry, by docs/telemetry.md's definitions."""
    step, busy = sim["step"][:, r], sim["step"][:, r] - sim["blocked"][:, r]
    total = step.sum()
    return {
        "rank": r, "steps": len(step),
        "step_time_median_s": median(step), "step_time_p95_s": float(np.percentile(step, 95)),
        "step_time_mean_s": float(step.mean()),
        "busy_time_median_s": median(busy), "au": float(sim["compute"][:, r].sum() / total),
        "data_wait_frac": float(sim["data"][:, r].sum() / total),
        "comm_exposed_frac": float(sim["comm_exposed"][:, r].sum() / total),
        "blocked_on_peers_frac": float(sim["blocked"][:, r].sum() / total),
        "compute_median_s": median(sim["compute"][:, r]),
        "data_wait_median_s": median(sim["data"][:, r]),
        "comm_exposed_median_s": median(sim["comm_exposed"][:, r]),
        "blocked_on_peers_median_s": median(sim["blocked"][:, r]),
        "comm_s": 0.0, "samples_per_s": BATCH_PER_RANK * len(step) / total,
        "io_bytes": float(sim["io_bytes"][:, r].sum()),
        "io_requests": float((sim["io_bytes"][:, r] > 0).sum() * 8),
        "io_read_s": float(sim["io_read_s"][:, r].sum()),
        "mem_peak_bytes": 52428800 + 65536 * r, "mem_gpu_peak_bytes": 0, "cpu_process_s": float(1.04 * total),
    }


def spread(values):
    v = np.asarray(values)
    return {"min": float(v.min()), "median": median(v), "p95": float(np.percentile(v, 95)),
            "max": float(v.max())}


def stragglers(per_rank, threshold):
    """Ranks whose median busy time exceeds the median over ranks by more than
    the threshold, with the component that exceeds its median the most."""
    med_busy = median([p["busy_time_median_s"] for p in per_rank])
    med = {k: median([p[k] for p in per_rank])
           for k in ("compute_median_s", "data_wait_median_s", "comm_exposed_median_s")}
    out = []
    for p in per_rank:
        if p["busy_time_median_s"] <= med_busy * (1 + threshold):
            continue
        excess = {"compute": p["compute_median_s"] - med["compute_median_s"],
                  "data": p["data_wait_median_s"] - med["data_wait_median_s"],
                  "communication": p["comm_exposed_median_s"] - med["comm_exposed_median_s"]}
        out.append({"rank": p["rank"], "cause": max(excess, key=excess.get),
                    "busy_time_median_s": p["busy_time_median_s"],
                    "excess_frac": p["busy_time_median_s"] / med_busy - 1,
                    "excess_s": {k: max(v, 0.0) for k, v in excess.items()}})
    return out


def write_summary(a, out, sim, colls):
    per_rank = [rank_stats(r, sim) for r in range(a.ranks)]
    comm_total = sum(c["duration_s"] for step in colls for c in step)
    for p in per_rank:
        p["comm_s"] = comm_total
    keys = ["step_time_median_s", "busy_time_median_s", "au", "data_wait_frac",
            "comm_exposed_frac", "blocked_on_peers_frac"]
    au = [p["au"] for p in per_rank]
    summary = {
        "ranks": a.ranks, "steps": a.steps, "straggler_threshold": 0.05, "per_rank": per_rank,
        "across_ranks": {k: spread([p[k] for p in per_rank]) for k in keys},
        "au_min": min(au), "au_median": median(au),
        "samples_per_s": sum(p["samples_per_s"] for p in per_rank),
        "io": {"bytes": sum(p["io_bytes"] for p in per_rank),
               "requests": sum(p["io_requests"] for p in per_rank),
               "read_s": sum(p["io_read_s"] for p in per_rank)},
        "stragglers": stragglers(per_rank, 0.05),
    }
    write_json(os.path.join(out, "summary.json"), summary)
    with open(os.path.join(out, "summary.txt"), "w", encoding="utf-8") as f:
        f.write(summary_text(summary))
    return summary


def ms(seconds):
    v = 1e3 * seconds
    return f"{v:.2f}" if abs(v) < 10 else f"{v:.1f}"


def summary_text(s):
    """summary.txt as runtime/telemetry/summary_text.cpp prints it: the run,
    a table of at most 16 ranks (else the 8 with the longest busy time), a
    line per straggler."""
    p95 = max(p["step_time_p95_s"] for p in s["per_rank"])
    line = (f"telemetry: {s['ranks']} rank{'' if s['ranks'] == 1 else 's'}, {s['steps']} steps; "
            f"step {ms(s['across_ranks']['step_time_median_s']['median'])} ms median (p95 up to {ms(p95)} ms); "
            f"AU {100 * s['au_median']:.1f}% median, {100 * s['au_min']:.1f}% min; "
            f"{s['samples_per_s']:.1f} samples/s")
    if s["io"]["bytes"] > 0:
        line += (f"; read {s['io']['bytes'] / 1e9:.2f} GB in {s['io']['requests']:.0f} requests "
                 f"({s['io']['read_s']:.1f} s)")
    rows = s["per_rank"]
    if len(rows) > 16:
        rows = sorted(rows, key=lambda p: -p["busy_time_median_s"])[:8]
    lines = [line, f"{'rank':>6} {'step ms':>9} {'busy ms':>9} {'AU %':>6} {'data %':>7} {'comm %':>7} {'peers %':>8}"]
    for p in rows:
        lines.append(f"{p['rank']:>6} {ms(p['step_time_median_s']):>9} {ms(p['busy_time_median_s']):>9} "
                     f"{100 * p['au']:>6.1f} {100 * p['data_wait_frac']:>7.1f} "
                     f"{100 * p['comm_exposed_frac']:>7.1f} {100 * p['blocked_on_peers_frac']:>8.1f}")
    if len(rows) < len(s["per_rank"]):
        lines.append(f"  ... {len(s['per_rank']) - len(rows)} more ranks (the {len(rows)} with the longest "
                     "busy time shown; all in summary.json)")
    for st in s["stragglers"]:
        parts = [f"{st['cause']} +{ms(st['excess_s'][st['cause']])} ms/step"]
        parts += [f"{k} +{ms(v)} ms/step" for k, v in st["excess_s"].items() if k != st["cause"] and v >= 1e-4]
        lines.append(f"straggler: rank {st['rank']} (busy {100 * st['excess_frac']:.0f}% above the median: "
                     f"{', '.join(parts)})")
    if not s["stragglers"]:
        lines.append(f"no stragglers (threshold {100 * s['straggler_threshold']:g}%)")
    return "\n".join(lines) + "\n"


def write_json(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=2, sort_keys=True)
        f.write("\n")


def write_metrics(a, out, results, elapsed):
    with open(os.path.join(out, "metrics.jsonl"), "w", encoding="utf-8") as f:
        for m in results:
            t = elapsed[m["step"]]
            row = dict(m, elapsed_s=t, lr=0.05 * 0.5 * (1 + math.cos(math.pi * m["epoch"] / 6)),
                       samples_per_s=BATCH_PER_RANK * a.ranks * (m["step"] + 1) / t)
            row = {k: r6(v) if isinstance(v, float) else v for k, v in row.items()}
            f.write(json.dumps(row, sort_keys=True, separators=(",", ":")) + "\n")


def write_result(a, out, sim, results, elapsed, steps_per_epoch):
    def timing(r):
        steps = sim["step"][:, r]
        return {"step_s": float(steps.mean()), "data_s": float(sim["data"][:, r].mean()),
                "compute_s": float(sim["compute"][:, r].mean()),
                "comm_exposed_s": float(sim["comm_exposed"][:, r].mean()),
                "blocked_on_peers_s": float(sim["blocked"][:, r].mean()),
                "comm_s": float(sim["comm_exposed"][:, r].mean()),
                "comm_exposed_of_comm": 1.0}
    reached = [m for m in results if m["test_accuracy"] >= TARGET]
    last = results[-1]
    train_time = elapsed[a.steps - 1]
    result = {
        "status": "completed", "config": "examples/fmnist_mlp.toml", "strategy": a.strategy,
        "world_size": a.ranks, "seed": a.seed, "global_batch_size": BATCH_PER_RANK * a.ranks,
        "parameters": 1863690, "steps": a.steps, "epochs": a.steps / steps_per_epoch,
        "target": {"metric": "test_accuracy", "value": TARGET},
        "reached_target": bool(reached),
        "time_to_target_s": elapsed[reached[0]["step"]] if reached else None,
        "final": {"test_accuracy": last["test_accuracy"], "test_loss": last["test_loss"]},
        "train_time_s": train_time, "init_time_s": 0.042,
        "samples_per_s": BATCH_PER_RANK * a.ranks * a.steps / train_time,
        "timing": dict(timing(0), steps=a.steps),
        "per_rank": [rank_stats(r, sim) for r in range(a.ranks)],  # what run_telemetry.cpp writes
    }
    write_json(os.path.join(out, "result.json"), result)


def write_trace(a, out, records):
    """trace.json: step and phase spans per rank, collectives on a comm lane."""
    events = []
    for r, recs in enumerate(records):
        events.append({"ph": "M", "name": "process_name", "pid": r, "args": {"name": f"rank {r}"}})
        events.append({"ph": "M", "name": "thread_name", "pid": r, "tid": 0, "args": {"name": "train"}})
        events.append({"ph": "M", "name": "thread_name", "pid": r, "tid": 1, "args": {"name": "comm engine"}})
        for rec in recs:
            t = rec["t_start_s"] * 1e6
            events.append({"ph": "X", "name": "step", "pid": r, "tid": 0, "ts": t, "dur": rec["step_s"] * 1e6})
            t_phase = t
            for name, key in (("data_wait", "data_wait_s"), ("forward", "forward_s"),
                              ("backward", "backward_s"), ("optimizer", "optimizer_s")):
                events.append({"ph": "X", "name": name, "pid": r, "tid": 0, "ts": t_phase,
                               "dur": rec[key] * 1e6})
                t_phase += rec[key] * 1e6
            t_comm = t + (rec["data_wait_s"] + rec["forward_s"] + 0.3 * rec["backward_s"]) * 1e6
            for c in rec["collectives"]:
                events.append({"ph": "X", "name": c["op"], "pid": r, "tid": 1, "ts": t_comm,
                               "dur": c["duration_s"] * 1e6,
                               "args": {"bytes": c["bytes"], "seq": c["seq"], "algorithm": c["algorithm"]}})
                t_comm += c["duration_s"] * 1e6
    with open(os.path.join(out, "trace.json"), "w", encoding="utf-8") as f:
        json.dump({"traceEvents": events, "displayTimeUnit": "ms"}, f, separators=(",", ":"))


def write_text_files(a, out, steps_per_epoch):
    with open(os.path.join(out, "config.toml"), "w", encoding="utf-8") as f:
        f.write(f"[run]\ndir = '{out}'\n\n[train]\nseed = {a.seed}\nglobal_batch_size = {BATCH_PER_RANK * a.ranks}\n\n"
                f"[model]\nkind = 'mlp'\nhidden = [1024, 1024]\n\n[target]\nmetric = 'test_accuracy'\n"
                f"value = {TARGET}\n\n[parallel]\nstrategy = '{a.strategy}'\n\n[debug]\n"
                f"slow_rank = {a.straggler}\n")
    with open(os.path.join(out, "log.txt"), "w", encoding="utf-8") as f:
        f.write(f"synthetic run written by tests/data/make_run_dir.py: {a.ranks} ranks, {a.steps} steps\n")
    with open(os.path.join(out, "mllog.txt"), "w", encoding="utf-8") as f:
        for key, value in (("init_start", None), ("global_batch_size", BATCH_PER_RANK * a.ranks),
                           ("seed", a.seed), ("run_start", None)):
            f.write(":::MLLOG " + json.dumps({"namespace": "", "time_ms": 1796000000000, "event_type":
                                               "POINT_IN_TIME", "key": key, "value": value,
                                               "metadata": {"file": "make_run_dir.py", "lineno": 0}}) + "\n")


def main():
    a = parse_args()
    out = a.out_dir
    if os.path.isdir(out) and os.listdir(out):
        sys.exit(f"make_run_dir.py: {out}: not empty")
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(a.seed)
    sim = simulate(a, rng)
    steps_per_epoch, results = eval_plan(a)
    # Wall clock: steps back to back, plus an evaluation (0.4 s) after each epoch.
    eval_after = np.zeros(a.steps)
    for m in results:
        eval_after[m["step"]] = 0.4
    t_start = np.concatenate([[0.0], np.cumsum(sim["step"][:, 0] + eval_after)[:-1]])
    elapsed = list(t_start + sim["step"][:, 0] + eval_after)
    epochs = np.arange(a.steps) / steps_per_epoch

    write_text_files(a, out, steps_per_epoch)
    records, colls = write_telemetry(a, out, sim, t_start, epochs, rng)
    if a.running:
        open(os.path.join(out, "metrics.jsonl"), "w").close()  # no evaluation yet
        return
    write_metrics(a, out, results, elapsed)
    write_result(a, out, sim, results, elapsed, steps_per_epoch)
    write_summary(a, out, sim, colls)
    if a.trace:
        write_trace(a, out, records)


if __name__ == "__main__":
    main()
