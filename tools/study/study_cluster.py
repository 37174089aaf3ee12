"""`study predict --fabric`: the model on a cluster described by a fabric
file, for the reference models (compute from a study's calibration) or
the GPT family (compute scaled by FLOPs from a measured GPU step).

GPT family compute (assumptions, docs/scaling.md states them with the
table): the GEMM FLOPs of each Block at the achieved rate `tflops`
(default: shardtrain's measured H200 rate); forward of a transformer Block
24 t C^2 + 4 t T C (QKV, projection, MLP; QK^T and PV), of the head
2 t C V, backward twice forward (t tokens per rank); the embedding's
gather and the other kernels are not counted. The optimizer (AdamW: 28
bytes moved per parameter it updates) and the loss (four passes over the
t x V logits) run at the HBM bandwidth `hbm_gbs` times 0.7. Each GPU holds
`batch` sequences (weak scaling: the global batch grows with the GPUs).
"""
import json
import os

import study_fabric
import study_model
import study_points
import study_predict

# n_layer, n_head, n_embd, sequence length T, sequences per GPU.
GPT_FAMILY = {
    "124m": {"n_layer": 12, "n_head": 12, "n_embd": 768, "T": 1024, "batch": 16},
    "1.3b": {"n_layer": 24, "n_head": 16, "n_embd": 2048, "T": 2048, "batch": 4},
    "7b": {"n_layer": 32, "n_head": 32, "n_embd": 4096, "T": 2048, "batch": 2},
}
VOCAB = 50257  # GPT-2's tokenizer
# The landed H200 measurement (docs/BENCHMARKS.md, "GPU backend on an NVIDIA
# H200"): GPT 6x512, T 256, batch 32, tf32 GEMMs: 95 ms per step, 10.7 TFLOP/s.
MEASURED_TFLOPS = 10.7
HBM_GBS = 4800.0  # H200 HBM3e, NVIDIA H200 datasheet: 4.8 TB/s
HBM_EFFICIENCY = 0.7  # assumption: a streaming kernel reaches ~70% of the datasheet bandwidth


def gpt_compute(member, tflops, hbm_gbs=HBM_GBS):
    """study_model.Compute of one GPU for a GPT family member."""
    m = GPT_FAMILY[member]
    t, C, T, L = m["batch"] * m["T"], m["n_embd"], m["T"], m["n_layer"]
    rate = tflops * 1e12
    block_fwd = (24 * t * C * C + 4 * t * T * C) / rate
    head_fwd = 2 * t * C * VOCAB / rate
    forward = [0.0] + [block_fwd] * L + [head_fwd]
    backward = [2 * f for f in forward]
    bandwidth = hbm_gbs * 1e9 * HBM_EFFICIENCY
    params = gpt_parameters(member)
    optimizer = 28 * params / bandwidth
    loss = 4 * t * VOCAB * 4 / bandwidth
    return study_model.Compute(forward, backward, optimizer, loss, 0.0,
                               f"GPT {member}: GEMM FLOPs at {tflops:g} TFLOP/s, AdamW and loss at "
                               f"{HBM_EFFICIENCY:.0%} of {hbm_gbs:g} GB/s")


def gpt_parameters(member):
    m = GPT_FAMILY[member]
    C, L = m["n_embd"], m["n_layer"]
    embed = VOCAB * C + m["T"] * C
    block = 12 * C * C + 13 * C  # QKV and projection, MLP up and down, with biases and two LayerNorms
    head = 2 * C + C * VOCAB
    return embed + L * block + head


def gpt_plan_args(source_dir, member, world, ranks_per_node, strategy=None):
    m = GPT_FAMILY[member]
    config = os.path.join(source_dir, "examples", "gpt_kjv.toml")
    sets = {"model.n_layer": m["n_layer"], "model.n_head": m["n_head"], "model.n_embd": m["n_embd"],
            "model.block_size": m["T"], "train.global_batch_size": m["batch"] * world,
            "train.eval_batch_size": m["batch"], "runtime.device": "cuda",
            "comm.ranks_per_node": ranks_per_node}
    if strategy:
        sets.update(study_points.strategy_settings(strategy))
    args = [config, "--sample-shape", str(m["T"]), "--classes", str(VOCAB)]
    for k, v in sets.items():
        args += ["--set", f"{k}={v}"]
    return args


def predict_cluster(args, fabric):
    """Rows: one per model x strategy x node count."""
    g = args.gpus_per_node or getattr(fabric, "gpus_per_node", None)
    if not g:
        raise SystemExit("shardtrain study predict: --gpus-per-node is needed with this fabric")
    shardtrain = os.path.join(args.bin_dir, "shardtrain")
    jobs = []
    for member in args.gpt or []:
        jobs.append((f"gpt-{member}", gpt_compute(member, args.tflops),
                     lambda w, s, member=member: gpt_plan_args(args.source_dir, member, w, g, s),
                     GPT_FAMILY[member]["batch"]))
    for model in args.models or []:
        if not args.compute:
            raise SystemExit("shardtrain study predict: --models needs --compute (a study's "
                             "calibration/compute-MODEL-wW.json)")
        with open(args.compute) as f:
            compute = study_model.Compute.from_json(json.load(f))
        jobs.append((model, compute, lambda w, s, model=model: model_plan_args(args, model, w, g, s), None))
    rows = []
    memory_limit = args.device_memory_gb * 1e9
    for name, compute, plan_args, per_gpu in jobs:
        for nodes in args.nodes:
            world = nodes * g
            plans = {}  # by HYBRID's shard group size (0: the nodes, and every other strategy)
            for strategy in args.strategies:
                _, k = study_points.split_strategy(strategy)
                if strategy == "hybrid" and (nodes < 2 or g < 2):
                    continue
                if k and study_points.why_not_hybrid_groups(k, nodes, g):
                    continue
                if world == 1 and strategy != "none":
                    continue
                if k not in plans:
                    plans[k] = study_predict.run_plan(shardtrain, plan_args(world, strategy if k else None), world)
                plan = study_predict.plan_of(plans[k], strategy)
                row = {"model": name, "strategy": strategy, "nodes": nodes, "gpus_per_node": g,
                       "planned_peak_bytes": plan["peak_bytes"], "fits": plan["peak_bytes"] <= memory_limit}
                if row["fits"]:
                    pred = study_model.predict(plan, compute, fabric.cost_fn(nodes, g), fabric.slowdown(nodes, g))
                    row.update({"step_s": pred["step_s"], "comm_exposed_s": pred["parts"]["comm_exposed_s"],
                                "comm_s": pred["comm_s"]})
                    if per_gpu:
                        row["samples_per_s"] = per_gpu * world / pred["step_s"]
                rows.append(row)
    add_efficiency(rows)
    return rows


def model_plan_args(args, model, world, g, strategy=None):
    point = study_points.Point(model, strategy or "ddp", 1, 1, study_points.UNSHAPED)
    tail = study_points.train_args(point, args.source_dir, args.data_dir, 1, 60)
    return tail + ["--set", f"comm.ranks_per_node={g}"]


def add_efficiency(rows):
    """Per-GPU throughput against the same strategy on one node (HYBRID:
    FULL_SHARD on one node); None without a one-node row."""
    base = {(r["model"], r["strategy"]): r for r in rows if r["nodes"] == 1 and "step_s" in r}
    for r in rows:
        b = base.get((r["model"], "fsdp_full" if r["strategy"].startswith("hybrid") else r["strategy"]))
        r["efficiency"] = b["step_s"] / r["step_s"] if b and "step_s" in r else None


def table(rows, fabric):
    lines = [f"fabric: {fabric.name}", "",
             "| model | strategy | nodes | step ms | comm exposed ms | efficiency | peak GB/GPU (plan) |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        mem = f"{r['planned_peak_bytes'] / 1e9:.1f}"
        if not r["fits"]:
            lines.append(f"| {r['model']} | {r['strategy']} | {r['nodes']} | does not fit (needs {mem} GB) | | | "
                         f"{mem} |")
            continue
        eff = "-" if r["efficiency"] is None else f"{r['efficiency']:.2f}"
        lines.append(f"| {r['model']} | {r['strategy']} | {r['nodes']} | {r['step_s'] * 1e3:.1f} | "
                     f"{r['comm_exposed_s'] * 1e3:.1f} | {eff} | {mem} |")
    return "\n".join(lines) + "\n"



def crossovers(args, fabric, rows):
    """Lines: per model and node count, the NIC line rate below which
    FULL_SHARD loses to DDP (both fitting), found by bisection over the
    fabric's nic_gbps with everything else kept; per model, the fewest
    nodes at which HYBRID beats FULL_SHARD."""
    if not isinstance(fabric, study_fabric.TierFabric):
        return ["crossovers: only for tier fabrics (a line rate to vary)"]
    g = args.gpus_per_node or fabric.gpus_per_node
    shardtrain = os.path.join(args.bin_dir, "shardtrain")
    lines = []
    for member in args.gpt or []:
        compute = gpt_compute(member, args.tflops)
        name = f"gpt-{member}"
        for nodes in [n for n in args.nodes if n > 1]:
            fits = {r["strategy"]: r["fits"] for r in rows if r["model"] == name and r["nodes"] == nodes}
            if not (fits.get("ddp") and fits.get("fsdp_full")):
                lines.append(f"{name}, {nodes} nodes: FULL_SHARD against DDP: not both fit")
                continue
            world = nodes * g
            plans = study_predict.run_plan(shardtrain, gpt_plan_args(args.source_dir, member, world, g), world)
            ddp, full = study_predict.plan_of(plans, "ddp"), study_predict.plan_of(plans, "fsdp_full")

            def gap(gbps):  # > 0: FULL_SHARD slower than DDP at this line rate
                f = fabric.with_nic_gbps(gbps)
                return (study_model.predict(full, compute, f.cost_fn(nodes, g), f.slowdown(nodes, g))["step_s"]
                        - study_model.predict(ddp, compute, f.cost_fn(nodes, g), f.slowdown(nodes, g))["step_s"])
            lo, hi = 1.0, 3200.0
            if gap(hi) > 0:
                lines.append(f"{name}, {nodes} nodes: FULL_SHARD slower than DDP at every rate up to {hi:g} Gb/s")
            elif gap(lo) < 0:
                lines.append(f"{name}, {nodes} nodes: FULL_SHARD faster than DDP down to {lo:g} Gb/s")
            else:
                for _ in range(40):
                    mid = (lo * hi) ** 0.5
                    lo, hi = (mid, hi) if gap(mid) > 0 else (lo, mid)
                lines.append(f"{name}, {nodes} nodes: FULL_SHARD loses to DDP below {hi:.1f} Gb/s per NIC")
        steps = {(r["strategy"], r["nodes"]): r.get("step_s") for r in rows if r["model"] == name}
        wins = [n for n in args.nodes if steps.get(("hybrid", n)) and steps.get(("fsdp_full", n))
                and steps[("hybrid", n)] < steps[("fsdp_full", n)]]
        lines.append(f"{name}: HYBRID beats FULL_SHARD from {wins[0]} nodes" if wins
                     else f"{name}: HYBRID never beats FULL_SHARD on {', '.join(map(str, args.nodes))} nodes")
    return lines
