#!/usr/bin/python3
"""shardtrain report: a run directory's summary and a self-contained HTML report.

usage: shardtrain_report.py RUN_DIR [--out FILE] [--quiet]

Prints the run's text summary (summary.txt) and writes RUN_DIR/report.html
(or FILE): the result, the per-rank summary table with the stragglers and
their cause, and plots of where each rank's step time went, the loss and
accuracy curves, collective bus bandwidth by message size, storage throughput
and stalls over time, and step time per rank over the steps. The HTML has no
external resources: the plots are PNGs embedded as data URIs, so the file can
be mailed or attached to a ticket as it is.

It reads the files docs/telemetry.md describes (result.json, metrics.jsonl,
summary.json, summary.txt, telemetry/rank-NNNNN.jsonl) and works on partial
run directories too: a run still going (no result yet, the last record of a
rank cut half-way), telemetry off (only result.json), one rank, no
collectives. Bad input (a missing directory, a file that is not what it
should be) ends with exit status 1 and one line naming the file.

Needs only Debian's python3-matplotlib and python3-numpy.
"""
import argparse
import base64
import html
import io
import json
import math
import os
import re
import sys
import tempfile

import numpy as np

PROG = "shardtrain report"

# One colour per component, the same in every plot: the stacked bars, the
# stall curves and the storage plot (storage is the data component).
COLORS = {
    "compute": "#4C72B0",
    "data": "#DD8452",
    "communication": "#55A868",
    "peers": "#C44E52",
}
LABELS = {
    "compute": "compute",
    "data": "data wait (storage)",
    "communication": "communication exposed",
    "peers": "blocked on peers",
}
# Collective algorithms get colours that are not those of the components.
ALGORITHM_COLORS = ["#8172B3", "#937860", "#DA8BC3", "#8C8C8C", "#CCB974", "#64B5CD"]
# Ranks (when a plot has a line per rank), again apart from the components'.
RANK_COLORS = ["#6A3D9A", "#B15928", "#E7298A", "#17BECF", "#666666", "#BCBD22", "#000080", "#9E9AC8"]
STALL_WINDOW = 20         # steps in the rolling mean of the stall fractions
MAX_LINE_POINTS = 1500    # points per line after downsampling
MAX_SCATTER_POINTS = 4000  # points per algorithm in the bandwidth scatter
FEW_RANKS = 8             # up to this many ranks get a line each
DEFAULT_THRESHOLD = 0.05  # telemetry.straggler_threshold's default


class ReportError(Exception):
    """Bad input: the message is one line naming the file."""


# ---- reading the run directory ------------------------------------------------

class RankSeries:
    """One rank's step records as arrays (one element per step)."""

    def __init__(self, rank, path, rows, truncated):
        self.rank = rank
        self.path = path
        self.truncated = truncated  # its last line was cut (the run is writing it)
        a = np.array(rows, dtype=float).reshape(-1, 7)
        (self.step, self.t_start, self.step_s, self.data, self.comm,
         self.peers, self.io_bytes) = a.T
        # compute is what remains of the step (docs/telemetry.md).
        self.compute = self.step_s - self.data - self.comm - self.peers
        self.busy = self.step_s - self.peers

    def __len__(self):
        return len(self.step)


class Run:
    """Everything the report shows, read from one run directory."""

    def __init__(self, run_dir):
        self.dir = run_dir
        self.result = None        # result.json (None while the run is going)
        self.summary = None       # summary.json
        self.summary_text = None  # summary.txt
        self.config = None        # config.toml, only read when result.json is missing
        self.metrics = []         # metrics.jsonl rows
        self.ranks = []           # RankSeries, by rank
        self.collectives = {}     # label -> ([bytes...], [busbw_gbs...])
        self.ops = {}             # rank -> (op class -> seconds summed, steps): telemetry.op_timing
        self.warnings = []


def path_in(run, name):
    return os.path.join(run.dir, name)


def load_json_file(path):
    """A JSON object from a file, or None when the file does not exist."""
    if not os.path.exists(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            value = json.load(f)
    except json.JSONDecodeError as e:
        raise ReportError(f"{path}: not valid JSON (line {e.lineno} column {e.colno}: {e.msg})")
    except (OSError, UnicodeDecodeError) as e:
        raise ReportError(f"{path}: cannot read: {one_line(e)}")
    if not isinstance(value, dict):
        raise ReportError(f"{path}: expected a JSON object, got {type(value).__name__}")
    return value


def one_line(e):
    return str(getattr(e, "strerror", None) or e).replace("\n", " ")


def read_jsonl(path):
    """(records, truncated): records yields (line number, object) for each
    line of a JSONL file, read line by line. A last line without its newline
    that does not parse is the record a running job is writing: it is
    skipped, and its line number is appended to `truncated`."""
    truncated = []

    def lines():
        try:
            with open(path, encoding="utf-8") as f:
                for lineno, line in enumerate(f, 1):
                    if not line.strip():
                        continue
                    try:
                        yield lineno, json.loads(line)
                    except json.JSONDecodeError as e:
                        if not line.endswith("\n"):
                            truncated.append(lineno)
                            return
                        raise ReportError(f"{path}:{lineno}: not valid JSON ({e.msg})")
        except (OSError, UnicodeDecodeError) as e:
            raise ReportError(f"{path}: cannot read: {one_line(e)}")

    return lines(), truncated


def load_metrics(run):
    path = path_in(run, "metrics.jsonl")
    if not os.path.exists(path):
        return
    rows, _ = read_jsonl(path)
    for lineno, m in rows:
        if not isinstance(m, dict) or not is_number(m.get("step")):
            raise ReportError(f"{path}:{lineno}: an evaluation record needs a numeric 'step'")
        for key in ("train_loss", "test_loss", "test_accuracy", "elapsed_s"):
            if m.get(key) is not None and not is_number(m[key]):
                raise ReportError(f"{path}:{lineno}: '{key}' is not a number")
        run.metrics.append(m)


def is_number(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def rank_files(run):
    """(rank, path) of telemetry/rank-NNNNN.jsonl, by rank."""
    tdir = path_in(run, "telemetry")
    if not os.path.isdir(tdir):
        return []
    found = []
    for name in os.listdir(tdir):
        m = re.fullmatch(r"rank-(\d+)\.jsonl", name)
        if m:
            found.append((int(m.group(1)), os.path.join(tdir, name)))
    return sorted(found)


def load_rank(run, rank, path):
    """One rank's step records; its collectives go into run.collectives."""
    records, truncated = read_jsonl(path)
    rows = []
    colls = run.collectives
    op_steps = []  # each timed step's op seconds by class
    for lineno, rec in records:
        try:
            rows.append((float(rec["step"]), float(rec.get("t_start_s", math.nan)),
                         float(rec["step_s"]),
                         float(rec.get("data_wait_s", 0.0)) + float(rec.get("h2d_s", 0.0)),
                         float(rec.get("comm_exposed_s", 0.0)),
                         float(rec.get("blocked_on_peers_s", 0.0)),
                         float(rec.get("io_bytes", 0))))
            for c in rec.get("collectives") or ():
                label = (c.get("op", "?"), c.get("algorithm", "?"))
                sizes, bws = colls.setdefault(label, ([], []))
                sizes.append(float(c["bytes"]))
                bws.append(float(c["busbw_gbs"]))
            if rec.get("ops"):
                op_steps.append({name: float(t["s"]) for name, t in rec["ops"].items()})
        except (KeyError, TypeError, ValueError, AttributeError):
            raise ReportError(f"{path}:{lineno}: {what_is_wrong(rec)}")
    # As the run's summary: the first timed step (set-up) left out when there are others.
    if len(op_steps) > 1:
        op_steps = op_steps[1:]
    if op_steps:
        sums = {}
        for step in op_steps:
            for name, sec in step.items():
                sums[name] = sums.get(name, 0.0) + sec
        run.ops[rank] = (sums, len(op_steps))
    return RankSeries(rank, path, rows, bool(truncated))


STEP_FIELDS = ("step", "t_start_s", "step_s", "data_wait_s", "h2d_s", "comm_exposed_s",
               "blocked_on_peers_s", "io_bytes")


def what_is_wrong(rec):
    """Names the field of a step record that could not be read (slow path,
    for the error message only)."""
    if not isinstance(rec, dict):
        return f"a step record should be a JSON object, got {type(rec).__name__}"
    for key in ("step", "step_s"):
        if key not in rec:
            return f"step record without '{key}'"
    for key in STEP_FIELDS:
        if key in rec and not is_number(rec[key]):
            return f"step record field '{key}' is not a number: {json.dumps(rec[key])[:40]}"
    colls = rec.get("collectives")
    if not isinstance(colls, (list, type(None))):
        return "step record field 'collectives' is not a list"
    for i, c in enumerate(colls or ()):
        if not isinstance(c, dict):
            return f"collectives[{i}] is not an object"
        for key in ("bytes", "busbw_gbs"):
            if key not in c:
                return f"collectives[{i}] has no '{key}'"
            if not is_number(c[key]):
                return f"collectives[{i}].{key} is not a number"
    return "not a valid step record"


def load_telemetry(run):
    files = rank_files(run)
    for rank, path in files:
        series = load_rank(run, rank, path)
        if len(series):
            run.ranks.append(series)
        else:
            run.warnings.append(f"{path}: no step records")
    cut = [s for s in run.ranks if s.truncated]
    if cut:
        run.warnings.append(f"the last record of {len(cut)} rank file(s) is incomplete (still being "
                            "written) and was skipped")
    world = world_size(run)
    if files and world:
        missing = sorted(set(range(world)) - {r for r, _ in files})
        if missing:
            run.warnings.append(f"no telemetry for rank(s) {compact_ranks(missing)} of {world}")


def compact_ranks(ranks):
    shown = ", ".join(str(r) for r in ranks[:10])
    return shown + (f" and {len(ranks) - 10} more" if len(ranks) > 10 else "")


def load_config(run):
    """config.toml: only the strategy is used, while result.json is missing."""
    path = path_in(run, "config.toml")
    if not os.path.exists(path):
        return None
    import tomllib  # Python 3.11, Debian 12
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except (tomllib.TOMLDecodeError, OSError, UnicodeDecodeError) as e:
        raise ReportError(f"{path}: not a valid config: {one_line(e)}")


def check_result(run):
    """Types of the result.json fields the report shows."""
    path = path_in(run, "result.json")
    r = run.result
    expect_type(path, r, "status", str)
    expect_type(path, r, "world_size", int)
    expect_type(path, r, "final", dict)
    expect_type(path, r, "target", dict)
    expect_type(path, r, "per_rank", list)
    for key in ("time_to_target_s", "train_time_s", "samples_per_s", "steps"):
        if r.get(key) is not None and not is_number(r[key]):
            raise ReportError(f"{path}: '{key}' is not a number")


def check_summary(run):
    """summary.json's per_rank rows and stragglers, as docs/telemetry.md has them."""
    path = path_in(run, "summary.json")
    s = run.summary
    expect_type(path, s, "per_rank", list)
    expect_type(path, s, "stragglers", list)
    for i, row in enumerate(s.get("per_rank", [])):
        if not isinstance(row, dict) or not isinstance(row.get("rank"), int):
            raise ReportError(f"{path}: per_rank[{i}] needs an integer 'rank'")
        for key, value in row.items():
            if key != "rank" and value is not None and not is_number(value):
                raise ReportError(f"{path}: per_rank[{i}].{key} is not a number")
    for i, st in enumerate(s.get("stragglers", [])):
        if (not isinstance(st, dict) or not isinstance(st.get("rank"), int)
                or not isinstance(st.get("cause"), str)):
            raise ReportError(f"{path}: stragglers[{i}] needs an integer 'rank' and a 'cause'")


def expect_type(path, obj, key, kind):
    if obj.get(key) is not None and not isinstance(obj[key], kind):
        raise ReportError(f"{path}: '{key}' should be {'an' if kind is int else 'a'} "
                          f"{kind.__name__}, got {type(obj[key]).__name__}")


def load_run(run_dir):
    if not os.path.exists(run_dir):
        raise ReportError(f"{run_dir}: no such run directory")
    if not os.path.isdir(run_dir):
        raise ReportError(f"{run_dir}: not a directory (expected a run directory)")
    run = Run(run_dir)
    run.result = load_json_file(path_in(run, "result.json"))
    if run.result is not None:
        check_result(run)
    else:
        run.config = load_config(run)
    run.summary = load_json_file(path_in(run, "summary.json"))
    if run.summary is not None:
        check_summary(run)
    txt = path_in(run, "summary.txt")
    if os.path.exists(txt):
        try:
            with open(txt, encoding="utf-8") as f:
                run.summary_text = f.read()
        except (OSError, UnicodeDecodeError) as e:
            raise ReportError(f"{txt}: cannot read: {one_line(e)}")
    load_metrics(run)
    load_telemetry(run)
    if (run.result is None and run.summary is None and not run.ranks and not run.metrics
            and not os.path.exists(path_in(run, "metrics.jsonl"))):
        raise ReportError(f"{run_dir}: not a shardtrain run directory (no result.json, "
                          "summary.json, metrics.jsonl or telemetry/rank-*.jsonl)")
    return run


# ---- figures the report computes ------------------------------------------------

def world_size(run):
    if run.result and run.result.get("world_size"):
        return run.result["world_size"]
    if run.summary and is_number(run.summary.get("ranks")):
        return int(run.summary["ranks"])
    return len(run.ranks) or None


def rank_stats(s):
    """A summary.json per_rank row computed from the records (docs/telemetry.md)."""
    total = s.step_s.sum()
    frac = (lambda x: float(x.sum() / total)) if total > 0 else (lambda x: 0.0)
    return {
        "rank": s.rank, "steps": len(s),
        "step_time_median_s": float(np.median(s.step_s)),
        "step_time_p95_s": float(np.percentile(s.step_s, 95)),
        "step_time_mean_s": float(np.mean(s.step_s)),
        "busy_time_median_s": float(np.median(s.busy)),
        "au": frac(s.compute), "data_wait_frac": frac(s.data),
        "comm_exposed_frac": frac(s.comm), "blocked_on_peers_frac": frac(s.peers),
        "compute_median_s": float(np.median(s.compute)),
        "data_wait_median_s": float(np.median(s.data)),
        "comm_exposed_median_s": float(np.median(s.comm)),
    }


def find_stragglers(rows, threshold):
    """The summary's straggler rule, for runs without summary.json yet."""
    if len(rows) < 2:
        return []
    med_busy = np.median([r["busy_time_median_s"] for r in rows])
    parts = {"compute": "compute_median_s", "data": "data_wait_median_s",
             "communication": "comm_exposed_median_s"}
    med = {k: np.median([r[key] for r in rows]) for k, key in parts.items()}
    out = []
    for r in rows:
        if r["busy_time_median_s"] <= med_busy * (1 + threshold):
            continue
        excess = {k: float(r[key] - med[k]) for k, key in parts.items()}
        out.append({"rank": r["rank"], "cause": max(excess, key=excess.get),
                    "busy_time_median_s": r["busy_time_median_s"],
                    "excess_frac": float(r["busy_time_median_s"] / med_busy - 1),
                    "excess_s": {k: max(v, 0.0) for k, v in excess.items()}})
    return out


def table_rows(run):
    """Per-rank rows: summary.json's when there is one, else computed from the
    records; result.json's mean timing when telemetry was off."""
    computed = {s.rank: rank_stats(s) for s in run.ranks}
    if run.summary and run.summary.get("per_rank"):
        rows = []
        for row in run.summary["per_rank"]:
            merged = dict(computed.get(row["rank"], {}))
            merged.update({k: v for k, v in row.items() if v is not None})
            rows.append(merged)
        return rows, "summary.json"
    if computed:
        return [computed[r] for r in sorted(computed)], "the step records (no summary.json yet)"
    # Without telemetry files, result.json's per_rank holds the same rows as
    # summary.json would (the summary is computed in memory either way).
    rows = [dict(r, rank=r.get("rank", i)) for i, r in enumerate((run.result or {}).get("per_rank") or [])
            if isinstance(r, dict) and is_number(r.get("step_time_mean_s")) and r["step_time_mean_s"] > 0]
    return rows, "result.json's per-rank summary (no telemetry files in this run)"


def stragglers(run, rows):
    if run.summary is not None and "stragglers" in run.summary:
        return run.summary["stragglers"], "summary.json"
    threshold = DEFAULT_THRESHOLD
    if run.summary and is_number(run.summary.get("straggler_threshold")):
        threshold = run.summary["straggler_threshold"]
    if all("busy_time_median_s" in r for r in rows):
        return find_stragglers(rows, threshold), "computed from the step records"
    return [], None


def rolling_mean(x, window):
    """Mean over the last `window` values (fewer at the start), same length as x."""
    c = np.concatenate([[0.0], np.cumsum(x)])
    idx = np.arange(1, len(x) + 1)
    lo = np.maximum(idx - window, 0)
    return (c[idx] - c[lo]) / (idx - lo)


def stride_for(n, limit=MAX_LINE_POINTS):
    return max(1, math.ceil(n / limit))


# ---- plots ------------------------------------------------------------------------

def import_matplotlib():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib import ticker
    except ImportError as e:
        raise ReportError(f"cannot import matplotlib ({e}): apt-get install python3-matplotlib")
    plt.rcParams.update({"figure.dpi": 100, "axes.grid": True, "grid.alpha": 0.3,
                         "axes.spines.top": False, "axes.spines.right": False,
                         "font.size": 10, "axes.titlesize": 11})
    return plt, ticker


def png_data_uri(plt, fig):
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def rank_color(plt, i):
    """Ranks are told apart by colours that are not the components' colours."""
    return RANK_COLORS[i % len(RANK_COLORS)]


def straggler_causes(strag):
    return {s["rank"]: s["cause"] for s in strag}


def plot_breakdown(plt, ticker, run, strag):
    """Stacked bars: each rank's mean step split into its components (means,
    so that the bar's height is the mean step time)."""
    if run.ranks:
        ranks = [s.rank for s in run.ranks]
        parts = {"compute": [s.compute.mean() for s in run.ranks],
                 "data": [s.data.mean() for s in run.ranks],
                 "communication": [s.comm.mean() for s in run.ranks],
                 "peers": [s.peers.mean() for s in run.ranks]}
        source = "telemetry"
    else:
        per_rank = [r for r in (run.result or {}).get("per_rank") or []
                    if isinstance(r, dict) and is_number(r.get("step_time_mean_s"))]
        if not per_rank:
            return None
        ranks = [r.get("rank", i) for i, r in enumerate(per_rank)]
        # The mean step split by the summary's fractions (they add up to 1).
        def part(key):
            return [r["step_time_mean_s"] * (r.get(key) or 0) for r in per_rank]
        parts = {"compute": part("au"), "data": part("data_wait_frac"),
                 "communication": part("comm_exposed_frac"), "peers": part("blocked_on_peers_frac")}
        source = "result.json"
    n = len(ranks)
    fig, ax = plt.subplots(figsize=(min(18, max(8, 0.22 * n + 4)), 4.2))
    x = np.arange(n)
    bottom = np.zeros(n)
    for comp, values in parts.items():
        ms = 1e3 * np.asarray(values, dtype=float)
        ax.bar(x, ms, bottom=bottom, color=COLORS[comp], label=LABELS[comp], width=0.8)
        bottom += ms
    causes = straggler_causes(strag)
    for i, r in enumerate(ranks):
        if r in causes:
            ax.annotate(f"straggler\n({causes[r]})", (i, bottom[i]), ha="center", va="bottom",
                        xytext=(0, 3), textcoords="offset points", color="#8B0000", fontsize=8)
    ax.set_ylim(0, bottom.max() * 1.18 if bottom.max() > 0 else 1)
    ax.set_xticks(x[::stride_for(n, 32)])
    ax.set_xticklabels([str(r) for r in ranks][::stride_for(n, 32)])
    ax.set_xlim(-0.6, n - 0.4)
    ax.set_xlabel("rank")
    ax.set_ylabel("mean time per step (ms)")
    ax.set_title(f"Step time breakdown per rank (mean per step, from {source})")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    return png_data_uri(plt, fig)


OP_COLORS = ["#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3", "#8C8C8C",
             "#CCB974", "#64B5CD", "#6A3D9A", "#B15928"]


def plot_ops(plt, ticker, run):
    """Horizontal stacked bars, one per rank: the mean step split into the
    op classes' time (telemetry.op_timing) and the rest of the step."""
    series = {s.rank: s for s in run.ranks}
    ranks = [r for r in sorted(run.ops) if r in series]
    if not ranks:
        return None
    totals = {}
    for r in ranks:
        sums, n = run.ops[r]
        for name, sec in sums.items():
            totals[name] = totals.get(name, 0.0) + sec / n
    names = sorted(totals, key=lambda k: -totals[k])
    fig, ax = plt.subplots(figsize=(10, max(2.2, 0.45 * len(ranks) + 1.6)))
    y = np.arange(len(ranks))
    left = np.zeros(len(ranks))
    for i, name in enumerate(names):
        ms = np.array([1e3 * run.ops[r][0].get(name, 0.0) / run.ops[r][1] for r in ranks])
        ax.barh(y, ms, left=left, color=OP_COLORS[i % len(OP_COLORS)], label=name, height=0.7)
        left += ms
    # Mean step over the same steps (the first left out where there are others).
    step = np.array([1e3 * (series[r].step_s[1:] if len(series[r]) > 1 else series[r].step_s).mean()
                     for r in ranks])
    ax.barh(y, np.maximum(step - left, 0), left=left, color="#DDDDDD", label="rest of the step", height=0.7)
    ax.set_yticks(y)
    ax.set_yticklabels([f"rank {r}" for r in ranks])
    ax.invert_yaxis()
    ax.set_xlabel("mean time per step (ms)")
    ax.set_title("Where a step goes, by class of op (telemetry.op_timing)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    return png_data_uri(plt, fig)


def plot_curves(plt, ticker, run):
    """Loss (train, test) and test accuracy against the step, with the target."""
    ms = sorted(run.metrics, key=lambda m: m["step"])
    if not ms:
        return None
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4))
    steps = [m["step"] for m in ms]
    for key, color, label in (("train_loss", "#333333", "train loss"),
                              ("test_loss", "#8172B3", "test loss")):
        pts = [(s, m[key]) for s, m in zip(steps, ms) if is_number(m.get(key))]
        if pts:
            ax1.plot(*zip(*pts), marker="o", ms=4, color=color, label=label)
    ax1.set_xlabel("step")
    ax1.set_ylabel("loss (cross-entropy)")
    ax1.set_title("Loss")
    ax1.legend(frameon=False)
    acc = [(s, m["test_accuracy"]) for s, m in zip(steps, ms) if is_number(m.get("test_accuracy"))]
    if acc:
        ax2.plot(*zip(*acc), marker="o", ms=4, color="#2F4B7C", label="test accuracy")
    target = target_of(run)
    if target and target.get("metric") == "test_accuracy" and is_number(target.get("value")):
        ax2.axhline(target["value"], color="#555555", ls="--", lw=1,
                    label=f"target {target['value']:g}")
        hit = [s for s, a in acc if a >= target["value"]]
        if hit:
            ax2.axvline(hit[0], color="#555555", ls=":", lw=1, label=f"target reached (step {hit[0]:g})")
    ax2.set_xlabel("step")
    ax2.set_ylabel("test accuracy")
    ax2.yaxis.set_major_formatter(ticker.PercentFormatter(1.0, decimals=1))
    ax2.set_title("Test accuracy")
    ax2.legend(frameon=False, loc="lower right")
    return png_data_uri(plt, fig)


def target_of(run):
    if run.result and isinstance(run.result.get("target"), dict):
        return run.result["target"]
    if run.config and isinstance(run.config.get("target"), dict):
        return run.config["target"]
    return None


def format_bytes(n, _pos=None):
    for unit, size in (("GiB", 2 ** 30), ("MiB", 2 ** 20), ("KiB", 2 ** 10)):
        if n >= size:
            return f"{n / size:g} {unit}"
    return f"{n:g} B"


def plot_busbw(plt, ticker, run):
    """Bus bandwidth of every collective against its size, per algorithm:
    a (downsampled) scatter and the median per size."""
    if not run.collectives:
        return None
    rng = np.random.default_rng(0)  # the same picture for the same run
    fig, ax = plt.subplots(figsize=(11, 4.5))
    ops = {op for op, _ in run.collectives}
    for i, (label, (sizes, bws)) in enumerate(sorted(run.collectives.items())):
        sizes, bws = np.asarray(sizes), np.asarray(bws)
        color = ALGORITHM_COLORS[i % len(ALGORITHM_COLORS)]
        name = label[1] if len(ops) == 1 else f"{label[0]} {label[1]}"
        pick = np.arange(len(sizes))
        if len(pick) > MAX_SCATTER_POINTS:
            pick = rng.choice(len(sizes), MAX_SCATTER_POINTS, replace=False)
        # Jitter sideways so that thousands of equal sizes show as a cloud.
        jitter = 2 ** rng.uniform(-0.12, 0.12, len(pick))
        ax.scatter(sizes[pick] * jitter, bws[pick], s=6, alpha=0.25, color=color, linewidths=0)
        # Median per size bin (quarter octaves).
        bins = np.round(np.log2(np.maximum(sizes, 1)) * 4)
        centers, medians = [], []
        for b in np.unique(bins):
            sel = bins == b
            centers.append(np.median(sizes[sel]))
            medians.append(np.median(bws[sel]))
        ax.plot(centers, medians, marker="o", color=color, lw=1.5,
                label=f"{name} (median; {len(sizes):,} calls)")
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(ticker.FuncFormatter(format_bytes))
    ax.set_ylim(bottom=0)
    ax.set_xlabel("message size (bytes, log scale)")
    ax.set_ylabel("bus bandwidth (GB/s)")
    ax.set_title("Collective bus bandwidth by message size (nccl-tests busbw)")
    ax.legend(frameon=False, loc="upper left")
    return png_data_uri(plt, fig)


def time_bins(run, n_max=300):
    t_end = max(np.nanmax(s.t_start + s.step_s) for s in run.ranks)
    steps = max(len(s) for s in run.ranks)
    return np.linspace(0, t_end, min(n_max, steps) + 1)


def plot_storage(plt, ticker, run):
    """Read throughput per rank over time: bytes read for the steps in a time
    bin over the time those steps took."""
    edges = time_bins(run)
    mid = 0.5 * (edges[:-1] + edges[1:])
    rates = []
    for s in run.ranks:
        ok = np.isfinite(s.t_start)
        b, _ = np.histogram(s.t_start[ok], edges, weights=s.io_bytes[ok])
        t, _ = np.histogram(s.t_start[ok], edges, weights=s.step_s[ok])
        with np.errstate(invalid="ignore", divide="ignore"):
            rates.append(np.where(t > 0, b / t / 1e6, np.nan))
    rates = np.array(rates)
    fig, ax = plt.subplots(figsize=(11, 4))
    if len(run.ranks) <= FEW_RANKS:
        for i, s in enumerate(run.ranks):
            ax.plot(mid, rates[i], lw=1.2, color=rank_color(plt, i), label=f"rank {s.rank}")
    else:
        lo, med, hi = np.nanpercentile(rates, [0, 50, 100], axis=0)
        ax.fill_between(mid, lo, hi, color=COLORS["data"], alpha=0.25, lw=0,
                        label=f"min to max over {len(run.ranks)} ranks")
        ax.plot(mid, med, color=COLORS["data"], lw=1.5, label="median rank")
    total = sum(s.io_bytes.sum() for s in run.ranks)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("time since the start of training (s)")
    ax.set_ylabel("read throughput per rank (MB/s)")
    ax.set_title(f"Storage throughput over time ({total / 1e9:.2f} GB read, "
                 f"{total / 1e6 / max(edges[-1], 1e-9):.0f} MB/s for the whole job on average)")
    ax.legend(frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return png_data_uri(plt, fig)


def stall_ranks(run, rows, strag, limit=4):
    """The ranks to show stalls for: all when few, else the stragglers and the
    ranks that stall the most (the reason is part of the panel's title)."""
    if len(run.ranks) <= limit:
        return [(s, "") for s in run.ranks]
    by_rank = {s.rank: s for s in run.ranks}
    chosen = [(by_rank[st["rank"]], " (straggler)") for st in strag if st["rank"] in by_rank][:2]
    stall = {r["rank"]: 1 - r.get("au", 0) for r in rows}
    for rank in sorted(stall, key=stall.get, reverse=True):
        if len(chosen) >= limit:
            break
        if rank in by_rank and all(s.rank != rank for s, _ in chosen):
            chosen.append((by_rank[rank], " (high stall)"))
    return chosen


def plot_stalls(plt, ticker, run, rows, strag):
    """Stall fractions over the steps, rolling over STALL_WINDOW steps: the
    ratio of summed component time to summed step time in the window."""
    shown = stall_ranks(run, rows, strag)
    cols = 2 if len(shown) > 1 else 1
    nrows = math.ceil(len(shown) / cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(12 if cols == 2 else 11, 3.2 * nrows),
                             squeeze=False, sharex=True, sharey=True)
    top = 0.0
    for ax, (s, why) in zip(axes.flat, shown):
        window_step = rolling_mean(s.step_s, STALL_WINDOW)
        k = stride_for(len(s))
        for comp, arr in (("data", s.data), ("communication", s.comm), ("peers", s.peers)):
            with np.errstate(invalid="ignore", divide="ignore"):
                frac = rolling_mean(arr, STALL_WINDOW) / window_step
            ax.plot(s.step[::k], 100 * frac[::k], color=COLORS[comp], lw=1.2, label=LABELS[comp])
            top = max(top, float(np.nanmax(100 * frac, initial=0.0)))
        ax.set_title(f"rank {s.rank}{why}")
    # The panels share one scale (set once all are drawn) so that they compare.
    axes.flat[0].set_ylim(0, top * 1.08 if top > 0 else 1)
    for ax in axes[:, 0]:
        ax.set_ylabel("% of step time")
    for ax in axes.flat[len(shown):]:
        ax.set_visible(False)
    for ax in axes[-1]:
        ax.set_xlabel("step")
    # One legend for all panels, above them, where it hides no curve.
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.995 - 0.06 / nrows),
               ncol=3, frameon=False)
    many = f" ({len(shown)} of {len(run.ranks)} ranks)" if len(shown) < len(run.ranks) else ""
    fig.suptitle(f"Stall fractions over the steps, rolling mean over {STALL_WINDOW} steps{many}")
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.12 / nrows))
    return png_data_uri(plt, fig)


def plot_step_times(plt, ticker, run, strag):
    """Busy time per rank over the steps (what sets the pace): a line per rank
    when few, a heat map when many."""
    causes = straggler_causes(strag)
    if len(run.ranks) <= FEW_RANKS:
        fig, ax = plt.subplots(figsize=(11, 4))
        for i, s in enumerate(run.ranks):
            k = stride_for(len(s))
            label = f"rank {s.rank}" + (f" (straggler, {causes[s.rank]})" if s.rank in causes else "")
            ax.plot(s.step[::k], 1e3 * rolling_mean(s.busy, STALL_WINDOW)[::k], lw=1.2,
                    color=rank_color(plt, i), label=label)
        s0 = run.ranks[0]
        k = stride_for(len(s0))
        ax.plot(s0.step[::k], 1e3 * rolling_mean(s0.step_s, STALL_WINDOW)[::k], color="black",
                lw=1, ls="--", label="wall step time")
        ax.set_ylim(bottom=0)
        ax.set_xlabel("step")
        ax.set_ylabel(f"time per step (ms, mean of {STALL_WINDOW})")
        ax.set_title("Busy time per rank over the steps (step time minus time blocked on peers)")
        ax.legend(frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
        return png_data_uri(plt, fig)
    return plot_step_heatmap(plt, run)


def plot_step_heatmap(plt, run):
    last = max(s.step.max() for s in run.ranks)
    nbins = int(min(400, last + 1))
    edges = np.linspace(0, last + 1, nbins + 1)
    grid = np.full((len(run.ranks), nbins), np.nan)
    for i, s in enumerate(run.ranks):
        total, _ = np.histogram(s.step, edges, weights=s.busy)
        count, _ = np.histogram(s.step, edges)
        with np.errstate(invalid="ignore", divide="ignore"):
            grid[i] = 1e3 * total / count
    fig, ax = plt.subplots(figsize=(12, min(10, max(3.5, 0.12 * len(run.ranks) + 1.5))))
    # Colour scale over the bulk of the values, so that the warm-up's first
    # steps do not wash out a straggler.
    vmin, vmax = np.nanpercentile(grid, [1, 99.5])
    im = ax.imshow(grid, aspect="auto", interpolation="nearest", cmap="viridis", vmin=vmin, vmax=vmax,
                   extent=(0, last + 1, len(run.ranks) - 0.5, -0.5))
    ticks = np.arange(0, len(run.ranks), stride_for(len(run.ranks), 32))
    ax.set_yticks(ticks)
    ax.set_yticklabels([str(run.ranks[t].rank) for t in ticks])
    ax.grid(False)
    ax.set_xlabel("step")
    ax.set_ylabel("rank")
    fig.colorbar(im, ax=ax, label="busy time per step (ms)")
    ax.set_title("Busy time per rank over the steps (bright rows: ranks that set the pace)")
    return png_data_uri(plt, fig)


# ---- HTML ----------------------------------------------------------------------------

CSS = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 24px auto;
       max-width: 1320px; padding: 0 16px; color: #222; background: #fff; }
h1 { font-size: 22px; margin-bottom: 4px; } h2 { font-size: 17px; margin-top: 28px;
     border-bottom: 1px solid #ddd; padding-bottom: 4px; }
.sub { color: #666; margin-top: 0; }
.cards { display: flex; flex-wrap: wrap; gap: 10px; margin: 14px 0; }
.card { border: 1px solid #ddd; border-radius: 6px; padding: 8px 14px; min-width: 120px; }
.card .k { font-size: 11px; color: #666; text-transform: uppercase; letter-spacing: .04em; }
.card .v { font-size: 17px; font-weight: 600; }
.good { color: #1b7a1b; } .bad { color: #b00020; } .warn { color: #9a6700; }
table { border-collapse: collapse; font-size: 13px; }
th, td { padding: 3px 9px; text-align: right; border-bottom: 1px solid #eee; }
th { background: #f5f5f5; position: sticky; top: 0; }
td.l, th.l { text-align: left; }
tr.straggler td { background: #fde2e2; font-weight: 600; }
.note { background: #f6f8fa; border-left: 4px solid #bbb; padding: 8px 12px; }
.warnings { background: #fff8e1; border-left: 4px solid #e0a800; padding: 8px 12px; }
.caption { color: #555; font-size: 13px; max-width: 1100px; }
img { max-width: 100%; }
pre { background: #f6f8fa; padding: 10px; font-size: 12px; overflow: auto; max-height: 420px; }
div.scroll { max-height: 520px; overflow-y: auto; display: inline-block; border: 1px solid #eee; }
.swatch { display: inline-block; width: 11px; height: 11px; border-radius: 2px; margin: 0 3px 0 10px; }
"""


def esc(x):
    return html.escape(str(x))


def fmt_ms(x):
    return "–" if not is_number(x) else f"{1e3 * x:.1f} ms"


def fmt_pct(x):
    return "–" if not is_number(x) else f"{100 * x:.1f}%"


def fmt_s(x):
    return "–" if not is_number(x) else (f"{x:.2f} s" if x < 600 else f"{x / 60:.1f} min")


def header_facts(run):
    """(label, value, css class) of the header cards."""
    r = run.result or {}
    status = r.get("status") or "running (no result.json yet)"
    status_cls = "good" if status == "completed" else ("warn" if run.result is None else "bad")
    strategy = r.get("strategy") or ((run.config or {}).get("parallel") or {}).get("strategy") or "–"
    final = (r.get("final") or {}).get("test_accuracy")
    final_label = "final accuracy"
    if final is None and run.metrics and is_number(run.metrics[-1].get("test_accuracy")):
        final, final_label = run.metrics[-1]["test_accuracy"], "latest accuracy"
    target = target_of(run) or {}
    tv = target.get("value")
    if r.get("reached_target") and is_number(r.get("time_to_target_s")):
        ttt, ttt_cls = fmt_s(r["time_to_target_s"]), "good"
    elif run.result is None:
        ttt, ttt_cls = "not yet", "warn"
    elif is_number(tv):
        ttt, ttt_cls = f"not reached ({target.get('metric', 'target')} ≥ {tv:g})", "bad"
    else:
        ttt, ttt_cls = "no target", ""
    facts = [("config", config_name(run), ""), ("world size", world_size(run) or "–", ""),
             ("strategy", strategy, ""), ("status", status, status_cls),
             (final_label, fmt_pct(final), ""), ("time to target", ttt, ttt_cls)]
    if run.result:
        facts += [("train time", fmt_s(r.get("train_time_s")), ""),
                  ("steps", r.get("steps", "–"), ""),
                  ("samples/s", f"{r['samples_per_s']:,.0f}" if is_number(r.get("samples_per_s")) else "–", "")]
    return facts


def config_name(run):
    cfg = (run.result or {}).get("config")
    if isinstance(cfg, str) and cfg:
        return os.path.splitext(os.path.basename(cfg))[0]
    return os.path.basename(os.path.normpath(run.dir))


def html_header(run):
    cards = "".join(f'<div class="card"><div class="k">{esc(k)}</div><div class="v {c}">{esc(v)}</div></div>'
                    for k, v, c in header_facts(run))
    legend = "".join(f'<span class="swatch" style="background:{COLORS[c]}"></span>{esc(LABELS[c])}'
                     for c in COLORS)
    return (f"<h1>shardtrain run report: {esc(config_name(run))}</h1>"
            f'<p class="sub">{esc(os.path.abspath(run.dir))}</p><div class="cards">{cards}</div>'
            f'<p class="caption">Colours used in every plot:{legend}</p>')


def html_table(rows, strag, source):
    if not rows:
        return '<p class="note">No per-rank figures: no telemetry, summary or result yet.</p>'
    causes = straggler_causes(strag)
    cols = [("rank", "rank", str), ("steps", "steps", str),
            ("step median", "step_time_median_s", fmt_ms), ("step p95", "step_time_p95_s", fmt_ms),
            ("busy median", "busy_time_median_s", fmt_ms), ("AU", "au", fmt_pct),
            ("data stall", "data_wait_frac", fmt_pct), ("comm stall", "comm_exposed_frac", fmt_pct),
            ("peer wait", "blocked_on_peers_frac", fmt_pct)]
    cols.insert(2, ("step mean", "step_time_mean_s", fmt_ms))
    cols = [c for c in cols if any(c[1] in r for r in rows)]  # no column of dashes only
    head = "".join(f"<th>{esc(c)}</th>" for c, _, _ in cols) + '<th class="l">straggler</th>'
    body = []
    for r in rows:
        cells = "".join(f"<td>{esc(f(r[k]) if k in r else '–')}</td>" for _, k, f in cols)
        cause = causes.get(r.get("rank"))
        cls = ' class="straggler"' if cause else ""
        body.append(f"<tr{cls}>{cells}<td class=\"l\">{esc(cause or '')}</td></tr>")
    return (f'<p class="caption">From {esc(source)}. AU: accelerator utilization, compute / step '
            "time. Stalls: share of the step time spent waiting for data, on this rank's own "
            "collectives, and on other ranks. Busy: step time minus time blocked on peers.</p>"
            f'<div class="{"scroll" if len(rows) > 16 else ""}"><table><tr>{head}</tr>{"".join(body)}</table></div>')


def html_stragglers(strag, source):
    if not strag:
        if source is None:
            return '<p class="note">Not enough data to look for stragglers.</p>'
        return f'<p class="note">No straggler: every rank\'s median busy time is within the threshold ({esc(source)}).</p>'
    items = []
    for s in strag:
        excess = s.get("excess_s") or {}
        # Only the components that stand out (over 0.05 ms), largest first.
        big = sorted(((v, k) for k, v in excess.items() if is_number(v) and v > 5e-5), reverse=True)
        parts = ", ".join(f"{k} +{1e3 * v:.1f} ms" for v, k in big)
        frac = f"+{100 * s['excess_frac']:.0f}% over the median rank" if is_number(s.get("excess_frac")) else ""
        items.append(f"<li><b>rank {esc(s['rank'])}</b>: cause <b>{esc(s['cause'])}</b>; busy "
                     f"{esc(fmt_ms(s.get('busy_time_median_s')))} per step (median), {esc(frac)}"
                     f"{esc('; excess per step: ' + parts) if parts else ''}</li>")
    return (f'<p class="caption">Ranks whose median busy time exceeds the median over ranks by '
            f"more than the threshold; the cause is the component that exceeds its median the most "
            f"({esc(source)}). The other ranks wait for them inside the collectives.</p>"
            f"<ul>{''.join(items)}</ul>")


def html_section(title, caption, image, empty_note):
    body = (f'<img alt="{esc(title)}" src="{image}">' if image
            else f'<p class="note">{esc(empty_note)}</p>')
    return f'<h2>{esc(title)}</h2><p class="caption">{esc(caption)}</p>{body}'


def build_sections(run, rows, strag):
    """The plot sections, in the order a reader asks the questions."""
    plt, ticker = import_matplotlib()
    has_tel = bool(run.ranks)
    no_tel = "No telemetry/rank-*.jsonl in this run (telemetry off, or no step finished yet)."
    reads = has_tel and any(s.io_bytes.any() for s in run.ranks)
    return [
        html_section("Step time breakdown per rank",
                     "Where each rank's step goes, on average. In a synchronous job every rank's "
                     "step lasts as long as the slowest: a straggler shows as the rank with the least "
                     "'blocked on peers' and the most of its own cause.",
                     plot_breakdown(plt, ticker, run, strag), "No step timing in this run."),
        html_section("Where a step goes, by op",
                     "Each class of op's time per step (on a GPU: its kernels' device time, by CUDA "
                     "events), the first step left out; grey is the rest of the step: data wait, "
                     "exposed communication, host work between ops and the device's idle gaps.",
                     plot_ops(plt, ticker, run),
                     "No op times: run with telemetry.op_timing = true to see them."),
        html_section("Loss and accuracy",
                     "From metrics.jsonl, one point per evaluation.",
                     plot_curves(plt, ticker, run),
                     "No evaluation yet (metrics.jsonl is missing or empty): the run may still be going."),
        html_section("Collective bus bandwidth by message size",
                     "Every collective in the step records: bus bandwidth (nccl-tests' definition, "
                     "comparable across world sizes) against its size, per algorithm. Small messages "
                     "are bound by latency; the plateau is the fabric's bandwidth.",
                     plot_busbw(plt, ticker, run) if has_tel else None,
                     "No collectives recorded (one rank, or strategy none)." if has_tel else no_tel),
        html_section("Storage throughput over time",
                     "Bytes read from the data set for the steps in each time bin, over those steps' "
                     "time, per rank. Dips that line up with data stalls below mean the storage could "
                     "not keep up.",
                     plot_storage(plt, ticker, run) if reads else None,
                     "No reads during training (data held in memory)." if has_tel else no_tel),
        html_section("Stall fractions over time",
                     f"Share of the step time spent waiting for data, on the rank's own collectives "
                     f"and on other ranks, rolling over {STALL_WINDOW} steps.",
                     plot_stalls(plt, ticker, run, rows, strag) if has_tel else None, no_tel),
        html_section("Step time per rank over the steps",
                     "Busy time (the rank's own work, without waiting for peers) per rank; "
                     "a rank above the others sets the pace of the whole job.",
                     plot_step_times(plt, ticker, run, strag) if has_tel else None, no_tel),
    ]


def render_html(run):
    rows, source = table_rows(run)
    strag, strag_source = stragglers(run, rows)
    warnings = ("<div class=\"warnings\"><b>Note</b><ul>"
                + "".join(f"<li>{esc(w)}</li>" for w in run.warnings) + "</ul></div>") if run.warnings else ""
    summary = (f"<pre>{esc(run.summary_text)}</pre>" if run.summary_text
               else '<p class="note">No summary.txt: the run has not finished, or telemetry was off.</p>')
    files = ('<p class="caption">trace.json holds every rank\'s spans: open it in ui.perfetto.dev '
             "or chrome://tracing.</p>") if os.path.exists(path_in(run, "trace.json")) else ""
    parts = [html_header(run), warnings,
             "<h2>Stragglers</h2>", html_stragglers(strag, strag_source),
             "<h2>Per-rank summary</h2>", html_table(rows, strag, source),
             *build_sections(run, rows, strag),
             "<h2>summary.txt</h2>", summary, files]
    return ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>shardtrain report: {esc(config_name(run))}</title><style>{CSS}</style></head>"
            f"<body>{''.join(parts)}</body></html>\n")


def write_atomically(path, text):
    """Write next to the target and rename, so that a reader never sees half a report."""
    directory = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".report-", suffix=".html")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        # mkstemp makes the file private; a report is as readable as any output.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except OSError as e:
        raise ReportError(f"{path}: cannot write the report: {one_line(e)}")


# ---- command line ------------------------------------------------------------------------

def main(argv=None):
    p = argparse.ArgumentParser(prog=PROG, description="Summary and HTML report of a run directory.")
    p.add_argument("run_dir", metavar="RUN_DIR")
    p.add_argument("--out", metavar="FILE", help="the HTML report (default: RUN_DIR/report.html)")
    p.add_argument("--quiet", action="store_true", help="print nothing but errors")
    a = p.parse_args(argv)
    out = a.out or os.path.join(a.run_dir, "report.html")
    try:
        run = load_run(a.run_dir)
        if not os.path.isdir(os.path.dirname(os.path.abspath(out))):
            raise ReportError(f"{out}: cannot write the report: its directory does not exist")
        if not a.quiet:
            if run.summary_text:
                sys.stdout.write(run.summary_text if run.summary_text.endswith("\n")
                                 else run.summary_text + "\n")
            else:
                print(f"no summary.txt in {a.run_dir}: the run has not finished, or telemetry was off")
            for w in run.warnings:
                print(f"note: {w}")
        write_atomically(out, render_html(run))
    except ReportError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 1
    if not a.quiet:
        print(f"report: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
