"""`shardtrain ttt CONFIG --seeds N`: a config's time to train as MLPerf
training scores it. N runs, with train.seed = 1..N, each to the config's
target ([target]: a run stops at the evaluation that reaches it); the score
drops the fastest and the slowest run and averages the others (MLPerf's
rule for a benchmark's result set). A run that does not reach its target
counts as slower than every run that does: it is dropped as the slowest when
it is the only one, and when more than one does not converge there is no
score. Runs go to OUT/seed-K (a run already complete there is kept: the
same command resumes), the table to OUT/ttt.md and OUT/ttt.json, and every
run's evaluations against time to OUT/convergence.png.

Runs Debian's /usr/bin/python3 (matplotlib for the plot), from the
directory that holds shardtrain and shardrun.
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def log(msg):
    print(f"[ttt] {msg}", flush=True)


def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def run_seed(args, seed):
    """The seed's run (kept when a complete one is there), and its result.json."""
    run_dir = os.path.join(args.out, f"seed-{seed}")
    result = read_json(os.path.join(run_dir, "result.json"))
    if result and result.get("status") == "completed" and result.get("seed") == seed:
        log(f"seed {seed}: kept from {run_dir}")
        return run_dir, result
    cmd = [os.path.join(HERE, "shardrun"), "-n", str(args.ranks), "--", os.path.join(HERE, "shardtrain"), "train",
           args.config, "--set", f"train.seed={seed}", "--run-dir", run_dir, "--overwrite"]
    for s in args.set:
        cmd += ["--set", s]
    log(f"seed {seed}: training on {args.ranks} rank(s) into {run_dir} ...")
    with open(os.path.join(args.out, f"seed-{seed}.txt"), "w") as out:
        try:
            rc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, timeout=args.timeout).returncode
        except subprocess.TimeoutExpired:
            rc = None
    result = read_json(os.path.join(run_dir, "result.json"))
    if rc != 0 or not result or result.get("status") != "completed":
        why = "timed out" if rc is None else f"exit {rc}"
        raise SystemExit(f"shardtrain ttt: seed {seed} failed ({why}): see {args.out}/seed-{seed}.txt")
    return run_dir, result


def score(times):
    """MLPerf's: drop the fastest and the slowest, average the rest; None
    when a run left in did not converge (inf)."""
    kept = sorted(times)[1:-1]
    return None if any(math.isinf(t) for t in kept) else statistics.mean(kept)


def plot(out, runs, metric, target):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for seed, run_dir, _ in runs:
        evals = []
        with open(os.path.join(run_dir, "metrics.jsonl")) as f:
            evals = [json.loads(line) for line in f if line.strip()]
        ax.plot([e["elapsed_s"] for e in evals], [e[metric] for e in evals], marker="o", label=f"seed {seed}")
    ax.axhline(target, color="grey", linestyle="--", linewidth=1, label="target")
    ax.set_xlabel("seconds since the run started")
    ax.set_ylabel(metric)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "convergence.png"), dpi=110)
    plt.close(fig)


def main():
    p = argparse.ArgumentParser(prog="shardtrain ttt", description=__doc__.split("\n\n")[0])
    p.add_argument("config")
    p.add_argument("--seeds", type=int, default=5, help="runs, with seeds 1..N (at least 3)")
    p.add_argument("--ranks", type=int, default=1, help="ranks per run (through shardrun)")
    p.add_argument("--out", help="where the runs go (default runs/ttt-<config name>)")
    p.add_argument("--set", action="append", default=[], help="a config override for every run, as train's")
    p.add_argument("--timeout", type=float, default=3600, help="seconds one run may take")
    args = p.parse_args()
    if args.seeds < 3:
        p.error("--seeds must be at least 3 (the score drops the fastest and the slowest)")
    if args.ranks < 1:
        p.error("--ranks must be at least 1")
    if not os.path.isfile(args.config):
        p.error(f"{args.config}: no such config file")
    args.config_given, args.config = args.config, os.path.abspath(args.config)
    name = os.path.splitext(os.path.basename(args.config))[0]
    args.out = os.path.abspath(args.out or os.path.join("runs", f"ttt-{name}"))
    os.makedirs(args.out, exist_ok=True)

    runs = []
    for seed in range(1, args.seeds + 1):
        run_dir, result = run_seed(args, seed)
        runs.append((seed, run_dir, result))
        t = result.get("time_to_target_s")
        log(f"seed {seed}: " + (f"target reached in {t:.1f} s" if result.get("reached_target") else
                                "target not reached"))
    target = runs[0][2].get("target")
    if not target:
        raise SystemExit("shardtrain ttt: the config sets no [target]: nothing to time")
    metric = target["metric"]
    times = [r["time_to_target_s"] if r.get("reached_target") else math.inf for _, _, r in runs]
    s = score(times)
    lines = [f"Time to train: `{args.config_given}`, {args.seeds} seeds, {args.ranks} rank(s), target "
             f"{metric} {'<=' if metric.endswith('loss') else '>='} {target['value']}"
             + (f", with {' '.join('--set ' + x for x in args.set)}" if args.set else ""), "",
             f"| seed | time to target s | steps | final {metric} | counted |", "| --- | --- | --- | --- | --- |"]
    order = sorted(range(len(times)), key=lambda i: times[i])
    dropped = {order[0], order[-1]}
    for i, (seed, _, r) in enumerate(runs):
        final = (r.get("final") or {}).get(metric)
        lines.append(f"| {seed} | {'not reached' if math.isinf(times[i]) else f'{times[i]:.1f}'} | {r['steps']} | "
                     f"{'' if final is None else f'{final:.4f}'} | "
                     f"{'dropped (' + ('fastest' if i == order[0] else 'slowest') + ')' if i in dropped else 'yes'} |")
    lines += ["", f"Score (the mean of the {args.seeds - 2} runs left): " +
              (f"**{s:.1f} s**" if s is not None else "none: more than one run did not reach the target")]
    spread = [t for t in times if not math.isinf(t)]
    if len(spread) > 1:
        lines.append(f"Spread of the runs that reached it: {min(spread):.1f} to {max(spread):.1f} s "
                     f"(the slowest {max(spread) / min(spread):.2f}x the fastest).")
    text = "\n".join(lines) + "\n"
    with open(os.path.join(args.out, "ttt.md"), "w") as f:
        f.write(text)
    with open(os.path.join(args.out, "ttt.json"), "w") as f:
        json.dump({"config": args.config, "seeds": args.seeds, "ranks": args.ranks, "sets": args.set,
                   "target": target, "score_s": s,
                   "runs": [{"seed": seed, "run_dir": d, "reached_target": r.get("reached_target"),
                             "time_to_target_s": r.get("time_to_target_s"), "steps": r["steps"],
                             "final": r.get("final")} for seed, d, r in runs]}, f, indent=2)
    plot(args.out, runs, metric, target["value"])
    print(text, end="")
    log(f"wrote {args.out}/ttt.md, ttt.json, convergence.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
