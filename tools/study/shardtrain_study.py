#!/usr/bin/python3
"""shardtrain study: compare training strategies across nodes and link rates.

usage:
  shardtrain study run --out DIR [--models mlp,cnn,gpt] [--strategies ddp,zero1,...]
                       [--nodes 1,2,4] [--ranks-per-node 1,2] [--rates unshaped,100mbit,...]
                       [--steps N] [--warmup N] [--point-timeout S] [--comm-timeout S] [--data DIR]
  shardtrain study table DIR                 the Markdown table of a study (also DIR/table.md)
  shardtrain study report DIR [--out FILE] [--png-dir DIR]
                                             the HTML report (default DIR/report.html),
                                             and its plots as PNG files

`run` trains every point of the grid (docs/scaling.md) for WARMUP + STEPS
steps, on emulated nodes (launch/emunodes, needs root; links shaped with tc)
or, for one node, on this host; with --slurm or --hostfile, on the real
nodes of a Slurm allocation or of an Open MPI hostfile (one --rates value
then names the fabric; nothing is shaped). It appends each point's figures
to DIR/points.jsonl as it finishes, then writes DIR/table.md and
DIR/report.html. Run again with the same DIR to resume an interrupted
study, or with more models, strategies, nodes or rates to extend one.

Needs Debian's python3 (/usr/bin/python3) with python3-matplotlib
(scripts/install-deps.sh), the shardtrain build next to this script, and the
data of the models (prepared into --data when missing).
"""
import argparse
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "study"))

import study_paths  # noqa: E402
import study_points  # noqa: E402
import study_report  # noqa: E402
import study_sweep  # noqa: E402

PROG = "shardtrain study"
RATE = re.compile(r"^([1-9][0-9]*(\.[0-9]+)?(kbit|mbit|gbit)|unshaped)$")


def csv(choices=None, convert=str, check=None):
    def parse(text):
        items = [convert(x) for x in text.split(",") if x]
        if not items:
            raise argparse.ArgumentTypeError("an empty list")
        for x in items:
            if choices and x not in choices:
                raise argparse.ArgumentTypeError(f"'{x}' is not one of {', '.join(choices)}")
            if check and not check(x):
                raise argparse.ArgumentTypeError(f"'{x}' is not allowed here")
        return items
    return parse


def positive(text):
    v = int(text)
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {v}")
    return v


def prepare_data(args, models):
    """Prepares the data the models read into --data, when missing."""
    st = os.path.join(args.bin_dir, "shardtrain")
    for data in sorted({study_points.MODELS[m][1] for m in models}):
        out = os.path.join(args.data_dir, data)
        if os.path.exists(os.path.join(out, "test", "manifest.json")):
            continue
        cmd = [st, "prep", "fashion-mnist", "--out", out] if data == "fashion-mnist" else \
            [st, "prep", "text", "--out", out, "--block-size", "64"]
        study_sweep.log(f"preparing {out}: {' '.join(cmd)}")
        if subprocess.run(cmd, stdout=subprocess.DEVNULL).returncode != 0:
            sys.exit(f"{PROG}: preparing {out} failed")


def write_outputs(out_dir):
    points = study_report.load(out_dir)
    with open(os.path.join(out_dir, "table.md"), "w") as f:
        f.write(study_report.table(points))
    study_report.report(out_dir, points, os.path.join(out_dir, "report.html"))
    study_sweep.log(f"wrote {out_dir}/table.md and {out_dir}/report.html")


def main():
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run a study's points")
    run.add_argument("--out", required=True, help="the study directory (created; reused to resume)")
    run.add_argument("--models", type=csv(list(study_points.MODELS)), default=["mlp"])
    run.add_argument("--strategies", type=csv(list(study_points.STRATEGIES)),
                     default=["ddp", "zero1", "fsdp_full", "fsdp_grad_op", "hybrid"])
    run.add_argument("--nodes", type=csv(convert=int, check=lambda n: 1 <= n <= 64), default=[1, 2])
    run.add_argument("--ranks-per-node", type=csv(convert=int, check=lambda n: 1 <= n <= 64), default=[1])
    run.add_argument("--rates", type=csv(check=RATE.match), default=[study_points.UNSHAPED],
                     help="link rates as tc writes them (100mbit, 2gbit) or unshaped")
    run.add_argument("--steps", type=positive, default=10, help="measured steps per point")
    run.add_argument("--warmup", type=int, default=3, help="steps run first and not measured")
    run.add_argument("--point-timeout", type=positive, default=900, help="seconds a point may take")
    run.add_argument("--comm-timeout", type=positive, default=300, help="comm.timeout_s of each run")
    run.add_argument("--data", dest="data_dir", default="data", help="where the models' data is (or goes)")
    real = run.add_mutually_exclusive_group()
    real.add_argument("--hostfile", help="run on these real nodes (an Open MPI hostfile) instead of emulated ones")
    real.add_argument("--slurm", action="store_true",
                      help="run on the nodes of this Slurm allocation (srun) instead of emulated ones")
    table = sub.add_parser("table", help="print a study's table")
    table.add_argument("dir")
    rep = sub.add_parser("report", help="write a study's HTML report")
    rep.add_argument("dir")
    rep.add_argument("--out")
    rep.add_argument("--png-dir", help="also write each plot as a PNG file into this directory")
    args = parser.parse_args()
    args.bin_dir = HERE
    args.source_dir = study_paths.SOURCE_DIR
    if args.command == "table":
        print(study_report.table(study_report.load(args.dir)), end="")
        return 0
    if args.command == "report":
        out = args.out or os.path.join(args.dir, "report.html")
        if args.png_dir:
            os.makedirs(args.png_dir, exist_ok=True)
        study_report.report(args.dir, study_report.load(args.dir), out, args.png_dir)
        print(out)
        return 0
    if args.warmup < 0:
        parser.error("--warmup must be 0 or more")
    if args.slurm and not os.environ.get("SLURM_JOB_ID"):
        parser.error("--slurm: not inside a Slurm allocation (run it from salloc or sbatch)")
    if args.hostfile and not os.path.isfile(args.hostfile):
        parser.error(f"--hostfile: {args.hostfile} is not a file")
    if (args.hostfile or args.slurm) and len(args.rates) != 1:
        # Real links are not shaped: the one "rate" names the fabric.
        parser.error("on real nodes --rates takes one name for the fabric (e.g. --rates 100gbit); nothing is shaped")
    points = study_points.grid(args.models, args.strategies, args.nodes, args.ranks_per_node, args.rates)
    prepare_data(args, args.models)
    try:
        failed = study_sweep.sweep(args, points)
    except KeyboardInterrupt:
        study_sweep.log(f"interrupted; the points measured are in {args.out}/points.jsonl: run the same "
                        "command to resume")
        return 130
    write_outputs(args.out)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
