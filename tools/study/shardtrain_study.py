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
  shardtrain study predict --validate DIR    the model's prediction of every point of a
                                             study, and its error (DIR/model.json)
  shardtrain study predict --fabric F.toml (--models M | --gpt 124m,1.3b,7b) [--nodes 1,2,...]
                       [--gpus-per-node G] [--compute FILE] [--tflops X] [--device-memory-gb GB]
                                             step time, scaling and fit per strategy on
                                             a described cluster (docs/scaling.md)
  shardtrain study published [--runs FILE] [--json OUT]
                                             the model beside published multi-node training
                                             figures, held out (docs/published-runs.md)
  shardtrain study storage --out DIR --data SPLIT --test SPLIT --accelerator NAME=Xms|NAME=RUN_DIR[*S]|W:GPU ...
                       [--modes page-cache,memory-limit,cold] [--memory-limit 4G] [--batch 32]
                       [--au 0.9] [--max-accelerators 16] [--seconds 10]
                                             how many emulated accelerators this storage keeps
                                             at AU >= 90%, per storage mode (docs/io.md)
  shardtrain study ingest --out DIR --config TOML --data SPLIT --source SPLIT --ingest-dir DIR [-n RANKS]
                       [--memory-limit 4G] [--blocks 128K,1M,4M] [--rates 0,200] [--writer-nice N]
                       [--writer-direct] [--writer-io-max MB/s] [--set KEY=VALUE ...]
                                             the running job's slowdown while a second data set
                                             is staged next to its data (docs/io.md)
  shardtrain study fit --out F.toml [--name NAME] NODESxRANKS=BENCH.json ...
                                             a measured fabric file from `bench comm
                                             --mode latency --json` runs on your nodes

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
import json
import os
import re
import signal
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "study"))

import study_calibrate  # noqa: E402
import study_cluster  # noqa: E402
import study_fabric  # noqa: E402
import study_paths  # noqa: E402
import study_points  # noqa: E402
import study_predict  # noqa: E402
import study_published  # noqa: E402
import study_report  # noqa: E402
import study_ingest  # noqa: E402
import study_storage  # noqa: E402
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


STRATEGIES_HELP = (", ".join(study_points.STRATEGIES) + ", or hybrid:K (HYBRID over shard groups of K "
                   "consecutive ranks: parallel.fsdp.shard_group_size)")


def valid_strategy(text):
    try:
        study_points.split_strategy(text)
    except ValueError:
        return False
    return True


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


def write_outputs(args):
    out_dir = args.out
    records = study_predict.validate_study(out_dir, args.bin_dir, args.source_dir, args.data_dir)
    summary = study_predict.summary(records)
    study_sweep.log(study_report.model_summary(summary))
    points = study_report.load(out_dir)
    with open(os.path.join(out_dir, "table.md"), "w") as f:
        f.write(study_report.table(points))
    study_report.report(out_dir, points, os.path.join(out_dir, "report.html"))
    study_sweep.log(f"wrote {out_dir}/table.md and {out_dir}/report.html")


def shipped_fabrics():
    folder = os.path.join(HERE, "study", "fabrics")
    return sorted(f[:-5] for f in os.listdir(folder) if f.endswith(".toml")) if os.path.isdir(folder) else []


def fit_command(parser, args):
    rows = {}
    for run in args.runs:
        shape, _, path = run.partition("=")
        try:
            nodes, g = (int(x) for x in shape.lower().split("x"))
        except ValueError:
            parser.error(f"{run}: expected NODESxRANKS=FILE, e.g. 2x8=bench.json")
        if not os.path.isfile(path):
            parser.error(f"{path}: no such file")
        study_calibrate.add_bench_rows(rows, path, nodes, g)
    if not rows:
        sys.exit(f"{PROG}: no latency-mode shardtrain rows in {', '.join(args.runs)} "
                 "(run bench comm with --mode latency --json FILE)")
    study_fabric.write_measured(args.out, args.name, ", ".join(args.runs), rows, args.host_cores, args.shared_by)
    print(args.out)
    return 0


def predict_command(parser, args):
    if args.validate:
        records = study_predict.validate_study(args.validate, args.bin_dir, args.source_dir, args.data_dir)
        print(study_predict.validation_table(records), end="")
        print(study_report.model_summary(study_predict.summary(records)))
        return 0
    if not args.fabric:
        parser.error("predict needs --validate DIR, or --fabric FILE with --models or --gpt")
    if not (args.models or args.gpt):
        parser.error("predict --fabric needs --models or --gpt")
    shipped = os.path.join(HERE, "study", "fabrics", args.fabric + ("" if args.fabric.endswith(".toml") else ".toml"))
    if not os.path.exists(args.fabric) and os.path.exists(shipped):
        args.fabric = shipped
    try:
        fabric = study_fabric.load(args.fabric)
    except study_fabric.FabricError as e:
        sys.exit(f"{PROG}: {e}")
    rows = study_cluster.predict_cluster(args, fabric)
    print(study_cluster.table(rows, fabric), end="")
    if args.gpt:
        print("\n" + "\n".join(study_cluster.crossovers(args, fabric, rows)))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


def published_command(args):
    try:
        return study_published.run_command(args.runs, args.json, os.path.join(args.bin_dir, "shardtrain"),
                                           args.source_dir, "shardtrain study published"
                                           + (f" --runs {args.runs}" if args.runs else ""))
    except (study_published.PublishedError, OSError) as e:
        sys.exit(f"{PROG}: {e}")


def main():
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run a study's points")
    run.add_argument("--out", required=True, help="the study directory (created; reused to resume)")
    run.add_argument("--models", type=csv(list(study_points.MODELS)), default=["mlp"])
    run.add_argument("--strategies", type=csv(check=valid_strategy), metavar="STRATEGY,...",
                     default=["ddp", "zero1", "fsdp_full", "fsdp_grad_op", "hybrid"],
                     help=STRATEGIES_HELP)
    run.add_argument("--nodes", type=csv(convert=int, check=lambda n: 1 <= n <= 64), default=[1, 2])
    run.add_argument("--ranks-per-node", type=csv(convert=int, check=lambda n: 1 <= n <= 64), default=[1])
    run.add_argument("--rates", type=csv(check=RATE.match), default=[study_points.UNSHAPED],
                     help="link rates as tc writes them (100mbit, 2gbit) or unshaped")
    run.add_argument("--steps", type=positive, default=10, help="measured steps per point")
    run.add_argument("--warmup", type=int, default=3, help="steps run first and not measured")
    run.add_argument("--repeats", type=positive, default=1,
                     help="runs per point: the point is the run of median step time, with the spread")
    run.add_argument("--point-timeout", type=positive, default=900, help="seconds a point may take")
    run.add_argument("--comm-timeout", type=positive, default=300, help="comm.timeout_s of each run")
    run.add_argument("--data", dest="data_dir", default="data", help="where the models' data is (or goes)")
    run.add_argument("--compute", default="real", metavar="real|emulated[:PROFILE]",
                     help="emulated: every point's Blocks, optimizer and loss wait a per-Block profile's times "
                     "(one rank alone, measured first; or the PROFILE file) while the collectives are real, so "
                     "that 8-16 ranks on a few cores communicate as with an accelerator each (docs/scaling.md)")
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
    pred = sub.add_parser("predict", help="the performance model's step times")
    pred.add_argument("--validate", metavar="DIR", help="predict every point of this study, with the error")
    pred.add_argument("--fabric", help="a fabric file (`study fit`'s), or a shipped one by name: "
                      + ", ".join(shipped_fabrics()))
    pred.add_argument("--models", type=csv(list(study_points.MODELS)), help="the reference models (examples/)")
    pred.add_argument("--gpt", type=csv(list(study_cluster.GPT_FAMILY)), help="GPT family members, FLOP-scaled")
    pred.add_argument("--strategies", type=csv(check=valid_strategy), metavar="STRATEGY,...",
                      default=["ddp", "zero1", "fsdp_full", "fsdp_grad_op", "hybrid"], help=STRATEGIES_HELP)
    pred.add_argument("--nodes", type=csv(convert=int, check=lambda n: 1 <= n <= 100000), default=[1, 2, 4, 8, 16, 32,
                                                                                                     64, 128])
    pred.add_argument("--gpus-per-node", type=positive, help="ranks per node (default: the fabric's gpus_per_node)")
    pred.add_argument("--compute", help="a compute file (a study's calibration/compute-*.json) for --models")
    pred.add_argument("--tflops", type=float, default=study_cluster.MEASURED_TFLOPS,
                      help="achieved GEMM TFLOP/s per GPU for --gpt (default: the H200 measurement, docs/scaling.md)")
    pred.add_argument("--device-memory-gb", type=float, default=141.0, help="memory per GPU (H200: 141 GB)")
    pred.add_argument("--json", help="also write the rows to this JSON file")
    pred.add_argument("--data", dest="data_dir", default="data", help="--validate: the models' data")
    pub = sub.add_parser("published", help="the model beside published multi-node training figures (held out)")
    pub.add_argument("--runs", help="the published figures (default: the source tree's "
                     "tools/study/published/runs.toml)")
    pub.add_argument("--json", help="also write the rows and the error summary to this JSON file")
    fit = sub.add_parser("fit", help="write a fabric file from bench comm runs")
    fit.add_argument("--out", required=True)
    fit.add_argument("--name", default="fitted from bench comm")
    fit.add_argument("--host-cores", type=positive,
                     help="CPU training: cores per host, so that the model slows compute while collectives poll")
    fit.add_argument("--shared-by", choices=["node", "all"], default="node",
                     help="with --host-cores: each node's ranks share their host (node), or all ranks one (all: "
                          "emulated nodes)")
    fit.add_argument("runs", nargs="+", metavar="NODESxRANKS=BENCH.json")
    sto = sub.add_parser("storage", help="how many emulated accelerators this storage keeps busy")
    sto.add_argument("--out", required=True, help="the study directory (created; reused to resume)")
    sto.add_argument("--data", required=True, help="the training split the accelerators read")
    sto.add_argument("--test", required=True, help="a (small) test split of the same shape (loaded, not evaluated)")
    sto.add_argument("--accelerator", action="append", required=True,
                     help="NAME=Xms (compute per sample), NAME=RUN_DIR[*SCALE] (a run's measured compute) or "
                     "WORKLOAD:GPU (MLPerf Storage's: unet3d, resnet50 or cosmoflow on a100 or h100, with its "
                     "batch and AU); repeat for several")
    sto.add_argument("--modes", type=csv(list(study_storage.ALL_MODES)), default=None,
                     help="default: the four file modes, and object-store when --store is given")
    sto.add_argument("--store", help="the same split in an S3 store (s3://bucket/prefix, keys from the environment "
                     "or the AWS files), for the object-store mode")
    sto.add_argument("--memory-limit", default="4G", help="the memory-limit mode's cgroup limit (the whole job)")
    sto.add_argument("--input", choices=["floats", "bytes"], default="floats",
                     help="what the loader hands the accelerators (runtime.emulate.input): floats converted on "
                     "the host, as training does, or the stored bytes, as a pipeline converting on the "
                     "accelerator would (and as DLIO reads)")
    sto.add_argument("--batch", type=positive, default=32, help="samples per accelerator per step")
    sto.add_argument("--au", type=float, default=0.90, help="the AU every accelerator must reach")
    sto.add_argument("--max-accelerators", type=positive, default=16)
    sto.add_argument("--seconds", type=float, default=10.0, help="emulated compute per point (sets its steps)")
    sto.add_argument("--min-steps", type=positive, default=40, help="measured steps per point at least")
    sto.add_argument("--max-steps", type=positive, default=600, help="measured steps per point at most")
    sto.add_argument("--point-timeout", type=positive, default=600, help="seconds a point may take")
    ing = sub.add_parser("ingest", help="a job's slowdown while a second data set is staged")
    ing.add_argument("--out", required=True, help="the study directory (created; reused to resume)")
    ing.add_argument("--config", required=True, help="the job's config (a real model, or runtime.device = emulated)")
    ing.add_argument("--set", action="append", help="a config override for the job (repeat)")
    ing.add_argument("--data", required=True, help="the job's training split (streamed)")
    ing.add_argument("--source", required=True, help="the split the writer stages, again and again")
    ing.add_argument("--ingest-dir", required=True, help="where the writer writes (next to the data: the same disk)")
    ing.add_argument("-n", "--ranks", type=positive, default=1)
    ing.add_argument("--memory-limit", help="run the job in a memory cgroup of this limit (launch/memlimit)")
    ing.add_argument("--blocks", type=csv(), default=["128K", "1M", "4M"], help="the writer's block sizes")
    ing.add_argument("--rates", type=csv(convert=float, check=lambda r: r >= 0), default=[0.0, 200.0],
                     help="the writer's rates in MB/s (0: unlimited)")
    ing.add_argument("--writer-nice", type=int, default=0, choices=range(0, 20), metavar="0..19",
                     help="run the writer at this CPU priority (nice), beside a job it shares cores with")
    ing.add_argument("--writer-direct", action="store_true",
                     help="the writer copies with O_DIRECT, past the page cache (shardtrain stage --direct-io)")
    ing.add_argument("--writer-io-max", type=float, default=0, metavar="MB/s",
                     help="the writer in a cgroup the kernel throttles to this write rate on the data's disk "
                     "(io.max, or cgroup v1's blkio; root)")
    ing.add_argument("--writer-inside-limit", action="store_true",
                     help="run the writer inside the job's memory cgroup (--memory-limit, root): its page cache "
                     "is charged with the job's and evicts it")
    ing.add_argument("--point-timeout", type=positive, default=900, help="seconds a job may take")
    args = parser.parse_args()
    args.bin_dir = HERE
    if args.command == "ingest":
        return study_ingest.main(args)
    if args.command == "storage":
        if args.modes is None:
            args.modes = list(study_storage.MODES) + ([study_storage.OBJECT_STORE] if args.store else [])
        return study_storage.main(args)
    args.source_dir = study_paths.SOURCE_DIR
    if args.command == "fit":
        return fit_command(parser, args)
    if args.command == "predict":
        return predict_command(parser, args)
    if args.command == "published":
        return published_command(args)
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
    mode, _, args.compute_profile = args.compute.partition(":")
    if mode not in ("real", "emulated") or (mode == "real" and args.compute_profile):
        parser.error(f"--compute: real, emulated or emulated:PROFILE, got {args.compute!r}")
    if args.compute_profile and not os.path.isfile(args.compute_profile):
        parser.error(f"--compute: {args.compute_profile} is not a file")
    if args.compute_profile and len(args.models) != 1:
        parser.error("--compute emulated:PROFILE: a profile is one model's; give one --models")
    points = study_points.grid(args.models, args.strategies, args.nodes, args.ranks_per_node, args.rates, mode)
    prepare_data(args, args.models)
    # kill, scancel and timeout end the study as Ctrl-C does: the job running
    # then (in a session of its own, study_job.py) is ended with it rather
    # than left running.
    signal.signal(signal.SIGTERM, interrupt)
    try:
        failed = study_sweep.sweep(args, points)
    except KeyboardInterrupt:
        study_sweep.log(f"interrupted; the points measured are in {args.out}/points.jsonl: run the same "
                        "command to resume")
        return 130
    write_outputs(args)
    return 1 if failed else 0


def interrupt(signum, frame):
    raise KeyboardInterrupt


if __name__ == "__main__":
    sys.exit(main())
