"""A study's table (Markdown) and report (self-contained HTML with plots)
from its points.jsonl.

Scaling efficiency of a point: its samples/s over (nodes x the samples/s of
the same strategy on one node with the same ranks per node); with one rank
per node the one-node baseline is the one-rank run (strategy none), and
HYBRID's is FULL_SHARD on one node.
"""
import base64
import html
import io
import os

import study_points
import study_predict

PART_LABELS = {
    "compute_s": ("compute", "#4C72B0"),
    "comm_exposed_s": ("communication exposed", "#55A868"),
    "blocked_on_peers_s": ("blocked on peers", "#C44E52"),
    "data_s": ("data wait", "#DD8452"),
}
STRATEGY_ORDER = list(study_points.STRATEGIES)


def load(study_dir):
    path = os.path.join(study_dir, "points.jsonl")
    if not os.path.exists(path):
        raise SystemExit(f"shardtrain study: {path} not found (run `shardtrain study run --out {study_dir}` first)")
    points = study_points.read_points(path)
    study_predict.load_predictions(study_dir, points)
    add_efficiency(points)
    return sorted(points, key=sort_key)


def sort_key(p):
    base, k = study_points.split_strategy(p["strategy"])
    return (p["model"], STRATEGY_ORDER.index(base), k, p["ranks_per_node"], p["nodes"],
            study_points.rate_bits(p["rate"]))


def add_efficiency(points):
    ok = {p["key"]: p for p in points if p["status"] == "ok"}
    for p in points:
        p["efficiency"] = None
        if p["status"] != "ok":
            continue
        g = p["ranks_per_node"]
        base = "none" if g == 1 else ("fsdp_full" if p["strategy"].startswith("hybrid") else p["strategy"])
        b = ok.get(study_points.Point(p["model"], base, 1, g, study_points.UNSHAPED, p.get("compute", "real")).key)
        if b:
            p["efficiency"] = p["samples_per_s"] / (p["nodes"] * b["samples_per_s"])


def _fmt(v, scale=1.0, digits=1):
    return "-" if v is None else f"{v * scale:.{digits}f}"


def table(points):
    head = ("| model | strategy | nodes x ranks | links | step ms (spread) | compute | comm exposed | blocked on peers | "
            "data | samples/s | efficiency | wire MB/step/rank: measured / theory | peak MiB/rank: measured / plan | "
            "model ms (error) |")
    columns = head.count("|") - 1
    lines = [head, "|" + " --- |" * columns]
    for p in points:
        where = f"{p['nodes']} x {p['ranks_per_node']}"
        links = "-" if p["nodes"] == 1 else p["rate"]
        if p["status"] != "ok":
            error = p.get("error", "?").replace("|", "/")
            lines.append(f"| {p['model']} | {p['strategy']} | {where} | {links} | failed: {error} |"
                         + " |" * (columns - 5))
            continue
        parts = p["parts"]
        theory = p.get("wire_bytes_theory")
        wire = f"{p['wire_bytes'] / 1e6:.3f} / {_fmt(theory, 1e-6, 3)}"
        mem = f"{_fmt(p.get('peak_bytes'), 2**-20)} / {_fmt(p.get('planned_peak_bytes'), 2**-20)}"
        spread = f" ({p['spread']:.2f}x)" if p.get("spread") else ""
        lines.append(
            f"| {p['model']} | {p['strategy']} | {where} | {links} | {p['step_s'] * 1e3:.1f}{spread} | "
            f"{parts['compute_s'] * 1e3:.1f} | {parts['comm_exposed_s'] * 1e3:.1f} | "
            f"{parts['blocked_on_peers_s'] * 1e3:.1f} | {parts['data_s'] * 1e3:.1f} | {p['samples_per_s']:.0f} | "
            f"{_fmt(p['efficiency'], 1, 2)} | {wire} | {mem} | {_model_cell(p)} |")
    return "\n".join(lines) + "\n"


def _model_cell(p):
    pred = p.get("prediction")
    if not pred:
        return "-"
    if "step_error" not in pred:
        return "none: " + pred.get("error", "?").replace("|", "/")[:60]
    return f"{pred['step_s'] * 1e3:.1f} ({pred['step_error']:+.0%})"


def model_summary(summary):
    """One line on the model's error over a study's points."""
    if not summary:
        return "No model predictions (no calibration in this study)."
    line = (f"Model against measurement over {summary['points']} points: median |error| "
            f"{summary['median_abs_step_error']:.1%}, worst {summary['max_abs_step_error']:.1%} "
            f"({summary['worst_point']}) on step time")
    if summary.get("max_abs_bytes_error") is not None:
        line += f"; worst |error| on wire bytes {summary['max_abs_bytes_error']:.2%}"
    if summary.get("max_abs_memory_error") is not None:
        line += f"; peak memory within {summary['max_abs_memory_error']:.1%} of the plan"
    return line + "."


def plot_model(model, pts):
    """Predicted against measured step time, one marker per point."""
    import matplotlib.pyplot as plt

    pts = [p for p in pts if "step_error" in (p.get("prediction") or {})]
    if not pts:
        return None
    fig, ax = plt.subplots(figsize=(5, 4.2))
    for strategy in STRATEGY_ORDER:
        ps = [p for p in pts if p["strategy"] == strategy]
        if ps:
            ax.scatter([p["step_s"] * 1e3 for p in ps], [p["prediction"]["step_s"] * 1e3 for p in ps], s=14,
                       label=strategy)
    lo = min(min(p["step_s"], p["prediction"]["step_s"]) for p in pts) * 1e3 * 0.8
    hi = max(max(p["step_s"], p["prediction"]["step_s"]) for p in pts) * 1e3 * 1.25
    for scale, style in ((1.0, "-"), (1.1, ":"), (0.9, ":"), (1.25, "--"), (0.8, "--")):
        ax.plot([lo, hi], [lo * scale, hi * scale], color="#888888", lw=0.8, ls=style)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("measured ms per step")
    ax.set_ylabel("model ms per step")
    ax.legend(fontsize=7)
    ax.set_title(f"{model}: model against measurement (dotted 10%, dashed 25%)", fontsize=9)
    return _png(fig)


def _png(fig):
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def _label(p):
    links = "" if p["nodes"] == 1 else f" @{p['rate']}"
    return f"{p['strategy']} {p['nodes']}x{p['ranks_per_node']}{links}"


def plot_breakdown(model, pts):
    """Stacked parts per point, a panel per link rate (one-node points with
    the unshaped links), each with its own scale."""
    import matplotlib.pyplot as plt

    rates = sorted({p["rate"] for p in pts}, key=study_points.rate_bits, reverse=True)
    panels = [(r, [p for p in pts if p["rate"] == r]) for r in rates]
    rows = max(len(ps) for _, ps in panels)
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 0.27 * rows + 1.6), squeeze=False)
    for ax, (rate, ps) in zip(axes[0], panels):
        left = [0.0] * len(ps)
        for part, (label, color) in PART_LABELS.items():
            vals = [p["parts"][part] * 1e3 for p in ps]
            ax.barh(range(len(ps)), vals, left=left, color=color, label=label)
            left = [a + b for a, b in zip(left, vals)]
        ax.scatter([p["step_s"] * 1e3 for p in ps], range(len(ps)), marker="|", color="black", s=100,
                   label="step time (slowest rank)", zorder=3)
        ax.set_yticks(range(len(ps)))
        ax.set_yticklabels([f"{p['strategy']} {p['nodes']}x{p['ranks_per_node']}" for p in ps], fontsize=7)
        ax.set_ylim(rows - 0.5, -0.5)
        ax.set_title("one node, or links unshaped" if rate == study_points.UNSHAPED else f"links {rate}",
                     fontsize=9)
        ax.set_xlabel("ms per step", fontsize=8)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=8, loc="lower center", ncol=5, bbox_to_anchor=(0.5, 1.0))
    fig.suptitle(f"{model}: where the step time goes (median after warm-up; nodes x ranks per node)", y=1.06)
    fig.tight_layout()
    return _png(fig)


def plot_efficiency(model, pts):
    import matplotlib.pyplot as plt

    rates = sorted({p["rate"] for p in pts if p["nodes"] > 1}, key=study_points.rate_bits)
    if not rates:
        return None
    fig, axes = plt.subplots(1, len(rates), figsize=(3.4 * len(rates), 3), sharey=True, squeeze=False)
    for ax, rate in zip(axes[0], rates):
        series = {}
        for p in pts:
            if p["efficiency"] is not None and p["nodes"] > 1 and p["rate"] == rate:
                series.setdefault((p["strategy"], p["ranks_per_node"]), []).append((p["nodes"], p["efficiency"]))
        for (strategy, g), xy in sorted(series.items(), key=lambda kv: (STRATEGY_ORDER.index(kv[0][0]), kv[0][1])):
            xy = [(1, 1.0)] + sorted(xy)  # one node is the baseline, by definition
            ax.plot([x for x, _ in xy], [y for _, y in xy], marker="o", label=f"{strategy}, {g} rank(s)/node")
        ax.set_title(f"links {rate}", fontsize=9)
        ax.set_xlabel("nodes")
        ax.set_xticks(sorted({p["nodes"] for p in pts} | {1}))
        ax.set_yscale("log")  # shaped links put efficiencies at 0.01 and below
        ax.axhline(1.0, color="#999999", lw=0.8, ls="--")
    axes[0][0].set_ylabel("scaling efficiency (log)")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
    fig.suptitle(f"{model}: scaling efficiency against one node (samples/s over nodes x one node's)", y=1.04)
    return _png(fig)


def plot_bytes_memory(model, pts):
    import matplotlib.pyplot as plt

    seen, rows = set(), []
    for p in pts:  # bytes and memory depend on strategy and world size, not on the link
        k = (p["strategy"], p["nodes"], p["ranks_per_node"])
        if k not in seen and p["world"] > 1:
            seen.add(k)
            rows.append(p)
    if not rows:
        return None
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 0.3 * len(rows) + 1.5))
    y = range(len(rows))
    a.barh([i - 0.2 for i in y], [p["wire_bytes"] / 1e6 for p in rows], height=0.4, label="measured")
    a.barh([i + 0.2 for i in y], [(p.get("wire_bytes_theory") or 0) / 1e6 for p in rows], height=0.4,
           label="theory")
    a.set_xlabel("MB on the wire per step and rank")
    b.barh([i - 0.2 for i in y], [(p.get("peak_bytes") or 0) / 2**20 for p in rows], height=0.4, label="measured")
    b.barh([i + 0.2 for i in y], [(p.get("planned_peak_bytes") or 0) / 2**20 for p in rows], height=0.4,
           label="plan")
    b.set_xlabel("peak MiB of tensors per rank")
    for ax in (a, b):
        ax.set_yticks(list(y))
        ax.set_yticklabels([f"{p['strategy']} {p['nodes']}x{p['ranks_per_node']}" for p in rows], fontsize=8)
        ax.invert_yaxis()
        ax.legend(fontsize=8)
    b.set_yticklabels([])
    fig.suptitle(f"{model}: bytes per step and memory per rank")
    return _png(fig)


def report(study_dir, points, out_path, png_dir=None):
    """Writes the HTML report; with png_dir, also each plot as
    <model>-<breakdown|efficiency|bytes-memory>.png there."""
    import matplotlib

    matplotlib.use("Agg")
    body = [f"<h1>Scaling study: {html.escape(os.path.abspath(study_dir))}</h1>"]
    failed = [p for p in points if p["status"] != "ok"]
    body.append(f"<p>{len(points) - len(failed)} points measured, {len(failed)} failed.</p>")
    summary = study_predict.load_predictions(study_dir, points)
    body.append(f"<p>{html.escape(model_summary(summary))}</p>")
    for model in sorted({p["model"] for p in points}):
        pts = [p for p in points if p["model"] == model and p["status"] == "ok"]
        if not pts:
            continue
        body.append(f"<h2>{html.escape(model)}</h2>")
        plots = {"breakdown": plot_breakdown(model, pts), "efficiency": plot_efficiency(model, pts),
                 "bytes-memory": plot_bytes_memory(model, pts), "model": plot_model(model, pts)}
        for name, png in plots.items():
            if png:
                body.append(f'<img src="data:image/png;base64,{png}">')
                if png_dir:
                    with open(os.path.join(png_dir, f"{model}-{name}.png"), "wb") as f:
                        f.write(base64.b64decode(png))
    body.append("<h2>All points</h2><pre>" + html.escape(table(points)) + "</pre>")
    page = ("<!DOCTYPE html><html><head><meta charset='utf-8'><title>shardtrain study</title>"
            "<style>body{font-family:sans-serif;margin:2em} img{display:block;margin:1em 0;max-width:100%}"
            "pre{font-size:11px}</style></head><body>" + "\n".join(body) + "</body></html>\n")
    tmp = out_path + ".tmp"
    with open(tmp, "w") as f:
        f.write(page)
    os.replace(tmp, out_path)
