"""`shardtrain study published`: the cluster model's prediction beside each
published multi-node training figure (tools/study/published/runs.toml,
docs/published-runs.md), held out (issue 37, part 5).

Method (printed with the table, and in docs/published-runs.md):

- Compute per GPU: the GEMM FLOPs of each Block at an achieved rate R
  (TFLOP/s), as study_cluster.py does for the GPT family, generalized:
    MPT (GPT-like: GELU MLP of ffn = 4 d, biases, LayerNorm, learned
    positions, head tied to the embedding):
      Block forward 2t(3d^2 + d^2 + 2 d ffn) + 4 t T d
    Llama (GQA, SwiGLU): QKV 2 t d (d + 2 d_kv), output 2 t d^2,
      SwiGLU 3 x 2 t d ffn, attention QK^T and PV 4 t T d
    head 2 t d V; backward twice forward; t = micro batch x T tokens per GPU.
  Activation checkpointing adds, to each Block's backward, the forward
  FLOPs it recomputes: full (llm-foundry `activation_checkpointing: true`,
  torchtitan "full") one whole forward; where a row says "selective" and
  prints HFU and MFU, the source's own ratio: 3 (HFU/MFU - 1) forwards;
  torchtitan's op-level selective AC (no HFU printed) recomputes every
  second matmul of the Block (wk, wo, w3; torchtitan's
  _apply_ac_to_transformer_block: "Saves output of all compute ops,
  except every second mm"). The optimizer (AdamW, 28 bytes per parameter
  it updates) and the loss (4 passes over the t x V fp32 logits) run at
  0.7 of the GPU's HBM bandwidth (study_cluster.py's assumption).
- The rate R is never fitted to the figure it predicts. Held out: R is
  solved from the same source's smallest-GPU-count row of the same model
  and config (`[[run.fewer_gpus]]` with same_config = true): the model's
  whole step at that scale (its own communication on the same fabric,
  overlap simulated) is made equal to that row's published step, then the
  larger figure is predicted with that R. Other sources: where the source
  has no such row, R is the median fraction of the GPU's dense bf16 peak
  that the other sources' runs on the same GPU die reached (each solved
  from that run's own published figure, as above; bf16 runs only, not
  Float8), times this GPU's peak: what others' training on this chip
  achieves, with nothing from the row's own source. Roofline: where no
  other source ran on the die, R = ROOFLINE_EFFICIENCY (0.45) x the peak.
- Communication: each strategy's collectives from `shardtrain plan --json`
  (model.kind gpt for MPT, llama for Llama; bf16 parameter gathers; the
  gradient reduction in the dtype the row states), with two adjustments
  the runtime's models lack: MPT's tied head moves no V x d matrix of its
  own (the plan's untied head Block is reduced to its LayerNorm), and
  Float8 all-gathers (Trainy) move the Blocks' linear weights in 1 byte.
  Costs from the row's fabric file (NCCL's cost model where it has an
  [nccl] table); where a source states no interconnect, the shipped
  fabric of that GPU generation's reference node (ASSUMED_FABRIC), marked.
- Overlap: study_model.predict replays the strategy's step (prefetch,
  pools, HYBRID's cross-node all-reduce) against the compute.
- Gradient accumulation k > 1: one micro-batch is simulated with its own
  gathers and reduce-scatters (FSDP without no_sync), the optimizer
  charged 1/k; tokens/s = micro batch x T / that time.
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tomllib

import study_fabric
import study_model

HERE = os.path.dirname(os.path.abspath(__file__))

# The stated default efficiency where neither the source nor any other
# source gives a run to learn the rate from: the achieved rate is this
# fraction of the GPU's dense bf16 peak (counted on the FLOPs the step runs,
# recompute included). Not fitted: the round figure named in the issue's
# brief, the same for every GPU.
ROOFLINE_EFFICIENCY = 0.45
# The GPU die of each part: parts of one die have the same tensor cores and
# clocks, so what one run reaches of the peak says something of another's.
DIE = {"a100-40gb": "GA100", "a100-80gb": "GA100", "h100-sxm": "GH100", "h200": "GH100",
       "h100-96gb-hbm2e-500w": "GH100"}
TARGET_MEDIAN, TARGET_WORST = 0.15, 0.30  # issue 37, part 5
BASES = ("held-out", "other sources", "roofline")
HBM_EFFICIENCY = 0.7  # study_cluster.py: a streaming kernel reaches ~70% of the datasheet bandwidth
ADAMW_BYTES_PER_PARAM = 28  # study_cluster.py
PLAN_NAME = {"ddp": "ddp", "zero1": "zero1", "fsdp_full": "fsdp full", "fsdp_grad_op": "fsdp grad_op",
             "hybrid": "fsdp hybrid"}

# Parts that have no tools/study/gpus profile: what runs.toml and
# docs/published-runs.md say of them. None: not known.
PARTS = {
    "a100-40gb": {"name": "A100 SXM 40GB", "peak_bf16_dense_tflops": 312.0, "hbm_TBps": 1.555,
                  "note": "no profile; A100 SXM 40GB: 312 dense bf16 TFLOP/s like the 80GB part, 1,555 GB/s "
                          "(docs/published-runs.md)"},
    "h100-96gb-hbm2e-500w": {"name": "H100 96GB HBM2e, 500 W", "peak_bf16_dense_tflops": None, "hbm_TBps": 2.4,
                             "note": "no profile; the source: 2.4 TB/s, peak 'between SXM and NVL' (unknown)"},
}

# Where a source states no interconnect: the shipped fabric of that GPU
# generation's reference node (one 400G NDR NIC per H100, one 200G HDR NIC
# per A100: DGX H100 / DGX A100 rails). An assumption, marked in the table.
ASSUMED_FABRIC = {"h100-sxm": "ib-ndr-400g-h100", "a100-80gb": "ib-hdr-200g-a100",
                  "a100-40gb": "ib-hdr-200g-a100"}

SHORT_SOURCE = [("llmfoundry-", "llm-foundry"), ("torchtitan-", "torchtitan"), ("ibm-", "IBM/PyTorch blog"),
                ("trainy-", "Trainy (torchtitan)")]


class PublishedError(Exception):
    pass


# ---- data ---------------------------------------------------------------

def study_dir(source_dir=None):
    """The folder holding published/, gpus/ and fabrics/: this one when run
    from the source tree, else the source tree's tools/study."""
    if os.path.isdir(os.path.join(HERE, "gpus")):
        return HERE
    if source_dir:
        return os.path.join(source_dir, "tools", "study")
    raise PublishedError(f"no tools/study data next to {HERE}; pass the source tree")


def load_runs(path):
    with open(path, "rb") as f:
        return tomllib.load(f)["run"]


def gpu_profile(kind, data_dir):
    path = os.path.join(data_dir, "gpus", f"{kind}.toml")
    if os.path.exists(path):
        with open(path, "rb") as f:
            g = tomllib.load(f)
        g = g["gpu"]
        return {"name": g["name"], "peak_bf16_dense_tflops": float(g["peak_bf16_dense_tflops"]),
                "hbm_TBps": float(g["hbm_TBps"]), "note": f"tools/study/gpus/{kind}.toml"}
    if kind in PARTS:
        return PARTS[kind]
    raise PublishedError(f"GPU {kind!r}: no tools/study/gpus profile and no stated figures")


def fabric_of(run, data_dir):
    """(fabric object, file name, assumed?)."""
    name = run["hardware"].get("fabric", "")
    assumed = not name
    if assumed:
        name = ASSUMED_FABRIC.get(run["hardware"]["gpu"])
        if not name:
            raise PublishedError(f"{run['id']}: no fabric stated and none assumed for {run['hardware']['gpu']}")
    return study_fabric.load(os.path.join(data_dir, "fabrics", name + ".toml")), name, assumed


def short_source(run):
    for prefix, short in SHORT_SOURCE:
        if run["id"].startswith(prefix):
            return short
    return run["source"]


# ---- the architecture ---------------------------------------------------

def architecture(run):
    m = run["model"]
    if m["name"].startswith("MPT"):
        if m["ffn_hidden"] != 4 * m["d_model"] or m["n_kv_heads"] != m["n_heads"]:
            raise PublishedError(f"{run['id']}: an MPT with ffn != 4 d or GQA is not the GPT Block")
        return "mpt"
    if "Llama" in m["name"]:
        return "llama"
    raise PublishedError(f"{run['id']}: architecture {m['name']!r} is neither MPT nor Llama")


def matmuls(run):
    """The Block's matmuls in forward order: (name, FLOPs per token)."""
    m = run["model"]
    d, ffn = m["d_model"], m["ffn_hidden"]
    d_kv = d // m["n_heads"] * m["n_kv_heads"]
    if architecture(run) == "mpt":
        return [("Wqkv", 2 * d * 3 * d), ("out_proj", 2 * d * d), ("up", 2 * d * ffn), ("down", 2 * d * ffn)]
    return [("wq", 2 * d * d), ("wk", 2 * d * d_kv), ("wv", 2 * d * d_kv), ("wo", 2 * d * d),
            ("w1", 2 * d * ffn), ("w3", 2 * d * ffn), ("w2", 2 * d * ffn)]


def block_forward_flops(run, tokens):
    """GEMM FLOPs of one Block's forward over `tokens` tokens: its matmuls,
    and attention's QK^T and PV (4 t T d, unmasked, as the sources' MFU
    counts it)."""
    m = run["model"]
    return tokens * sum(f for _, f in matmuls(run)) + 4 * tokens * m["seq_len"] * m["d_model"]


def recompute_forwards(run):
    """Forwards of each Block that activation checkpointing recomputes in
    the backward, and how that was read."""
    ac = run["parallel"].get("activation_checkpointing", False)
    text = str(ac).lower()
    if ac is False or text in ("none", "no", "false"):
        return 0.0, "no AC"
    if ac is True or text == "full":
        return 1.0, "full AC: +1 forward"
    if text.startswith("selective"):
        fig = run["figure"]
        if fig.get("hfu") and fig.get("mfu"):
            r = 3 * (fig["hfu"] / fig["mfu"] - 1)
            return r, (f"selective AC: +{r:.2f} forward (3 (HFU/MFU - 1), the source's HFU {fig['hfu']} / "
                       f"MFU {fig['mfu']})")
        if run["id"].startswith(("torchtitan-", "trainy-")):
            # torchtitan's op-level SAC: the 2nd, 4th, ... matmul of the Block.
            second = [(n, f) for i, (n, f) in enumerate(matmuls(run)) if i % 2 == 1]
            r = sum(f for _, f in second) / block_forward_flops(run, 1)
            return r, (f"torchtitan op SAC: every second matmul ({', '.join(n for n, _ in second)}) recomputed, "
                       f"+{r:.2f} forward")
    raise PublishedError(f"{run['id']}: activation_checkpointing {ac!r}: no rule")


def parameters(run):
    """Parameters from the architecture (checks runs.toml's `params`)."""
    m = run["model"]
    d, L, V, T, ffn = m["d_model"], m["n_layers"], m["vocab"], m["seq_len"], m["ffn_hidden"]
    if architecture(run) == "mpt":
        return 12 * L * d * d + V * d + T * d + 13 * d * L + 2 * d
    d_kv = d // m["n_heads"] * m["n_kv_heads"]
    return L * (2 * d * d + 2 * d * d_kv + 3 * d * ffn + 2 * d) + 2 * V * d + d


def reduce_dtype(run):
    """The gradient reduction's dtype, as the row states it."""
    p = run["parallel"]
    text = " ".join(str(p.get(k, "")) for k in ("mixed_precision", "precision"))
    if "PURE" in text or "bfSixteen" in text or "reduce, buffer bf16" in text:
        return "bf16"
    if "reduce fp32" in text or "DEFAULT" in text or "Float8" in text:
        return "f32"
    raise PublishedError(f"{run['id']}: the gradient reduction's dtype is not stated ({text!r})")


def fp8_all_gather(run):
    return "enable_fsdp_float8_all_gather" in str(run["parallel"].get("precision", ""))


def float8(run):
    """The row trains its linear layers in Float8, not bf16."""
    return "float8" in str(run["parallel"].get("precision", "")).lower()


# ---- compute ------------------------------------------------------------

def compute(run, tflops, hbm_TBps, n_entries):
    """study_model.Compute of one GPU for one micro-batch at `tflops`."""
    m, p = run["model"], run["parallel"]
    t = p["micro_batch"] * m["seq_len"]
    rate = tflops * 1e12
    block = block_forward_flops(run, t) / rate
    head = 2 * t * m["d_model"] * m["vocab"] / rate
    r, _ = recompute_forwards(run)
    n_blocks = n_entries - 2
    if n_blocks != m["n_layers"]:
        raise PublishedError(f"{run['id']}: plan has {n_blocks} transformer Blocks, the model {m['n_layers']}")
    forward = [0.0] + [block] * n_blocks + [head]
    backward = [0.0] + [(2 + r) * block] * n_blocks + [2 * head]
    bandwidth = hbm_TBps * 1e12 * HBM_EFFICIENCY
    optimizer = ADAMW_BYTES_PER_PARAM * parameters(run) / bandwidth / max(1, p.get("grad_accum", 1))
    loss = 4 * t * m["vocab"] * 4 / bandwidth
    return study_model.Compute(forward, backward, optimizer, loss, 0.0, f"{run['id']} at {tflops:.1f} TFLOP/s")


# ---- the plan -----------------------------------------------------------

def plan_args(run, source_dir, world, g):
    m, p = run["model"], run["parallel"]
    sets = {"model.n_layer": m["n_layers"], "model.n_head": m["n_heads"], "model.n_embd": m["d_model"],
            "model.block_size": m["seq_len"], "parallel.strategy": "fsdp", "parallel.fsdp.param_dtype": "bf16",
            "parallel.fsdp.reduce_dtype": reduce_dtype(run), "runtime.device": "cuda", "runtime.precision": "bf16",
            "train.global_batch_size": p["micro_batch"] * world, "train.eval_batch_size": p["micro_batch"]}
    if architecture(run) == "mpt":
        config = os.path.join(source_dir, "examples", "gpt_kjv.toml")
    else:
        config = os.path.join(source_dir, "examples", "llama2_7b.toml")
        sets.update({"model.n_kv_head": m["n_kv_heads"], "model.ffn_hidden": m["ffn_hidden"],
                     "model.vocab_size": m["vocab"], "parallel.fsdp.sharding": "full"})
    args = [config, "--sample-shape", str(m["seq_len"]), "--classes", str(m["vocab"]), "--ranks", str(world),
            "--ranks-per-node", str(g), "--json"]
    for k, v in sets.items():
        args += ["--set", f"{k}={v}"]
    return args


class Planner:
    """`shardtrain plan --json` per (run, world), cached."""

    def __init__(self, shardtrain, source_dir):
        self.shardtrain, self.source_dir, self.cache = shardtrain, source_dir, {}

    def __call__(self, run, world, g):
        key = (run["id"], world, g)
        if key not in self.cache:
            cmd = [self.shardtrain, "plan"] + plan_args(run, self.source_dir, world, g)
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                raise PublishedError(f"{' '.join(cmd)}: {r.stderr.strip()}")
            self.cache[key] = json.loads(r.stdout)
        return self.cache[key]


def strategy_plan(run, plans):
    """The row's strategy's plan, adjusted where the runtime's Blocks differ
    from the source's (tied head, Float8 all-gathers)."""
    name = PLAN_NAME[run["parallel"]["strategy"]]
    plan = next((p for p in plans if p["strategy"] == name), None)
    if plan is None:
        raise PublishedError(f"{run['id']}: plan has no {name!r}")
    plan = json.loads(json.dumps(plan))
    comm, numel = plan["comm"], plan["block_numel"]
    notes = []
    m = run["model"]
    if architecture(run) == "mpt":
        # MPT ties its head to the embedding (one V x d matrix, in FSDP's root
        # unit with the embedding); the runtime's GPT head Block holds its own.
        tied = m["vocab"] * m["d_model"]
        scale = (numel[-1] - tied) / numel[-1]
        numel[-1] -= tied
        for k in ("gather_bytes", "reduce_bytes", "replica_bytes"):
            if comm[k]:
                comm[k][-1] = int(comm[k][-1] * scale)
        notes.append("tied head: the plan's head Block less its V x d matrix")
    if fp8_all_gather(run):
        d, ffn = m["d_model"], m["ffn_hidden"]
        d_kv = d // m["n_heads"] * m["n_kv_heads"]
        linear = 2 * d * d + 2 * d * d_kv + 3 * d * ffn
        for b in range(1, len(numel) - 1):
            # bf16 -> 1 byte for the linear weights, the norms stay bf16.
            comm["gather_bytes"][b] = int(comm["gather_bytes"][b] * (linear + 2 * (numel[b] - linear)) /
                                          (2 * numel[b]))
        notes.append("Float8 all-gather: Blocks' linear weights in 1 byte")
    plan["parameters"] = sum(numel)
    return plan, notes


# ---- prediction ---------------------------------------------------------

def memo_cost(cost):
    seen = {}

    def f(c):
        key = (c["op"], c["group"], c["bytes"])
        if key not in seen:
            seen[key] = cost(c)
        return seen[key]
    return f


def tokens_per_s(run, plan, fabric, gpus, tflops, hbm_TBps):
    """Tokens/s/GPU the model predicts at `gpus` GPUs, and its parts."""
    g = run["hardware"]["gpus_per_node"]
    nodes = max(1, gpus // g)
    ranks_per_node = min(g, gpus)
    comp = compute(run, tflops, hbm_TBps, len(plan["block_numel"]))
    pred = study_model.predict(plan, comp, memo_cost(fabric.cost_fn(nodes, ranks_per_node)),
                               fabric.slowdown(nodes, ranks_per_node))
    tokens = run["parallel"]["micro_batch"] * run["model"]["seq_len"]
    return tokens / pred["step_s"], pred


def solve_tflops(run, plan, fabric, gpus, published, hbm_TBps):
    """The achieved rate at which the model's step at `gpus` GPUs gives the
    `published` tokens/s/GPU; None where no rate does (communication alone
    is slower than the published step)."""
    def rate(tf):
        return tokens_per_s(run, plan, fabric, gpus, tf, hbm_TBps)[0]
    lo, hi = 1.0, 1e5
    if rate(hi) < published:
        return None
    for _ in range(100):
        mid = math.sqrt(lo * hi)
        lo, hi = (mid, hi) if rate(mid) < published else (lo, mid)
        if hi / lo < 1 + 1e-9:
            break
    return math.sqrt(lo * hi)


def implied_fraction(run, planner, data_dir):
    """The fraction of its GPU's peak at which the model reproduces this
    row's own published figure (its own plan, fabric and GPU count); None
    where the peak is unknown or no rate does."""
    hw = run["hardware"]
    gpu = gpu_profile(hw["gpu"], data_dir)
    if not gpu["peak_bf16_dense_tflops"]:
        return None
    fabric, _, _ = fabric_of(run, data_dir)
    plan, _ = strategy_plan(run, planner(run, hw["gpus"], hw["gpus_per_node"]))
    tf = solve_tflops(run, plan, fabric, hw["gpus"], run["figure"]["tokens_per_s_per_gpu"], gpu["hbm_TBps"])
    return None if tf is None else tf / gpu["peak_bf16_dense_tflops"]


def source_pool(runs, planner, data_dir):
    """What each bf16 run reached of its GPU's peak, with its source and die:
    where the other-sources rate is drawn from."""
    pool = []
    for run in runs:
        if float8(run) or run["hardware"]["gpu"] not in DIE:
            continue
        try:
            fraction = implied_fraction(run, planner, data_dir)
        except (PublishedError, study_fabric.FabricError):
            fraction = None
        if fraction is not None:
            pool.append({"id": run["id"], "source": short_source(run), "die": DIE[run["hardware"]["gpu"]],
                         "fraction": fraction})
    return pool


def other_sources(run, pool):
    """The pool's runs on this run's die from any source but its own."""
    die = DIE.get(run["hardware"]["gpu"])
    return [p for p in pool if p["die"] == die and p["source"] != short_source(run)]


def calibration_row(run):
    """The same source's smallest-GPU-count row of the same model and config
    (never the row predicted), or None."""
    same = [f for f in run.get("fewer_gpus", []) if f.get("same_config") and f["gpus"] < run["hardware"]["gpus"]]
    return min(same, key=lambda f: f["gpus"]) if same else None


def predict_run(run, planner, data_dir, pool=()):
    """One row: the prediction beside the figure, or the reason there is none.
    `pool`: source_pool's runs, for a row whose source has no smaller run."""
    hw, fig = run["hardware"], run["figure"]
    row = {"id": run["id"], "source": short_source(run), "url": run["url"], "model": run["model"]["name"],
           "gpu": hw["gpu"], "gpus": hw["gpus"], "strategy": run["parallel"]["strategy"],
           "published": fig["tokens_per_s_per_gpu"], "notes": []}
    try:
        arch_params = parameters(run)
        if abs(arch_params - run["model"]["params"]) > 1e-6 * run["model"]["params"]:
            raise PublishedError(f"{run['id']}: parameters from the architecture {arch_params} != runs.toml's "
                                 f"{run['model']['params']}")
        gpu = gpu_profile(hw["gpu"], data_dir)
        fabric, fabric_name, assumed = fabric_of(run, data_dir)
        row["fabric"] = fabric_name + (" (assumed: not stated)" if assumed else "")
        row["fabric_assumed"] = assumed
        g = hw["gpus_per_node"]
        _, ac_note = recompute_forwards(run)
        row["notes"].append(ac_note)
        if run["parallel"].get("grad_accum", 1) > 1:
            row["notes"].append(f"grad accum {run['parallel']['grad_accum']}: one micro-batch simulated")
        plan, notes = strategy_plan(run, planner(run, hw["gpus"], g))
        row["notes"] += notes
        if plan["parameters"] != run["model"]["params"]:
            row["notes"].append(f"plan's Blocks hold {plan['parameters']:,} parameters "
                                f"(runs.toml {run['model']['params']:,})")
        cal = calibration_row(run)
        peak = gpu["peak_bf16_dense_tflops"]
        if cal:
            small_plan, _ = strategy_plan(run, planner(run, cal["gpus"], min(g, cal["gpus"])))
            tf = solve_tflops(run, small_plan, fabric, cal["gpus"], cal["tokens_per_s_per_gpu"], gpu["hbm_TBps"])
            if tf is None:
                raise PublishedError(f"{run['id']}: no compute rate reproduces the {cal['gpus']}-GPU row "
                                     "(its communication alone is slower)")
            row.update({"basis": "held-out", "calibrated_from_gpus": cal["gpus"],
                        "calibrated_from": cal["where"], "calibration_published": cal["tokens_per_s_per_gpu"]})
        else:
            if not peak:
                raise PublishedError(f"{run['id']}: no smaller row and no known peak for {hw['gpu']}")
            others = other_sources(run, pool)
            if others:
                fraction = statistics.median(p["fraction"] for p in others)
                tf = fraction * peak
                row.update({"basis": "other sources", "calibrated_from_gpus": None, "die": DIE[hw["gpu"]],
                            "other_runs": [p["id"] for p in others],
                            "other_sources": sorted({p["source"] for p in others})})
            else:
                tf = ROOFLINE_EFFICIENCY * peak
                row.update({"basis": "roofline", "calibrated_from_gpus": None})
        row["tflops"] = tf
        row["fraction_of_peak"] = tf / peak if peak else None
        pred, parts = tokens_per_s(run, plan, fabric, hw["gpus"], tf, gpu["hbm_TBps"])
        row.update({"predicted": pred, "error": (pred - row["published"]) / row["published"],
                    "step_s": parts["step_s"], "comm_exposed_s": parts["parts"]["comm_exposed_s"],
                    "comm_s": parts["comm_s"]})
        if cal:
            # Weak-scaling efficiency from the calibration row's size: the
            # model reproduces that row, so this is its prediction of the loss.
            row["published_efficiency"] = row["published"] / cal["tokens_per_s_per_gpu"]
            row["predicted_efficiency"] = pred / cal["tokens_per_s_per_gpu"]
    except (PublishedError, study_fabric.FabricError) as e:
        row.update({"predicted": None, "error": None, "reason": str(e)})
        row.setdefault("basis", "none")
    return row


def predict_all(runs, planner, data_dir):
    pool = source_pool(runs, planner, data_dir)
    return [predict_run(r, planner, data_dir, pool) for r in runs]


def summary(rows):
    """Median and worst |error| over the predicted rows, per basis and all."""
    out = {}
    for name, keep in [(b, lambda r, b=b: r["basis"] == b) for b in BASES] + [("all", lambda r: True)]:
        sel = [r for r in rows if keep(r) and r["error"] is not None]
        if not sel:
            out[name] = {"n": 0, "median": None, "worst": None, "worst_id": None}
            continue
        worst = max(sel, key=lambda r: abs(r["error"]))
        out[name] = {"n": len(sel), "median": statistics.median(abs(r["error"]) for r in sel),
                     "worst": abs(worst["error"]), "worst_id": worst["id"],
                     "within_15": sum(abs(r["error"]) <= 0.15 for r in sel),
                     "within_30": sum(abs(r["error"]) <= 0.30 for r in sel)}
    out["not_predicted"] = [{"id": r["id"], "reason": r["reason"]} for r in rows if r["error"] is None]
    return out


METHOD = "\n".join([
    "Method (docs/published-runs.md): compute per GPU = the GEMM FLOPs of each Block (MPT: QKV, projection, "
    "GELU MLP; Llama: QKV with n_kv_head, output, SwiGLU's 3 matrices; attention QK^T and PV; the head), "
    "backward 2x forward, activation checkpointing's recompute added to the backward (full: 1 forward; "
    "selective: 3 (HFU/MFU - 1) where the source prints both, else torchtitan's every-second-matmul policy), "
    f"at an achieved rate R; AdamW and the loss at {HBM_EFFICIENCY:.0%} of HBM bandwidth.",
    "held-out: R solved so that the model's whole step (communication on the same fabric, overlap simulated) "
    "equals the same source's smallest-GPU-count row of the same model and config; never the row predicted.",
    "other sources: no such row in the source: R = the median fraction of the dense bf16 peak that the other "
    "sources' bf16 runs on the same GPU die reached (each solved from that run's own figure), x this GPU's peak; "
    "nothing from the row's own source.",
    f"roofline: no other source on the die either: R = {ROOFLINE_EFFICIENCY} x the GPU's dense bf16 peak "
    "(a stated default, not fitted).",
    "Communication: the strategy's collectives from `shardtrain plan --json` (bf16 gathers, the row's reduction "
    "dtype; MPT's tied head, Float8 gathers adjusted), costed by the row's fabric file (NCCL's cost model); "
    "overlap by study_model.predict."])


def table(rows, summ, command="shardtrain study published"):
    lines = [f"Produced by: `{command}`", "", METHOD, "",
             "| figure | source | model | GPUs | strategy | published tok/s/GPU | predicted | error | compute "
             "| fabric |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        src = f"[{r['source']}]({r['url']})"
        if r["error"] is None:
            lines.append(f"| {r['id']} | {src} | {r['model']} | {r['gpus']} x {r['gpu']} | {r['strategy']} | "
                         f"{r['published']:,} | not predicted: {r['reason']} | | | {r.get('fabric', '')} |")
            continue
        frac = f", {r['fraction_of_peak']:.0%} of peak" if r["fraction_of_peak"] else ""
        if r["basis"] == "held-out":
            basis = f"held-out: {r['calibrated_from_gpus']} GPUs -> {r['tflops']:.0f} TFLOP/s{frac}"
        elif r["basis"] == "other sources":
            basis = (f"other sources: median of {len(r['other_runs'])} {r['die']} runs "
                     f"({', '.join(r['other_sources'])}) -> {r['tflops']:.0f} TFLOP/s{frac}")
        else:
            basis = f"roofline: {ROOFLINE_EFFICIENCY} x peak = {r['tflops']:.0f} TFLOP/s"
        lines.append(f"| {r['id']} | {src} | {r['model']} | {r['gpus']} x {r['gpu']} | {r['strategy']} | "
                     f"{r['published']:,} | {r['predicted']:,.0f} | {r['error']:+.1%} | {basis} | {r['fabric']} |")
    held = [r for r in rows if r.get("predicted_efficiency")]
    if held:
        lines += ["", "Scaling of the held-out figures from their calibration row (tokens/s/GPU at the larger size "
                  "/ at the smaller; the model reproduces the smaller row by construction):", "",
                  "| figure | GPUs | published efficiency | predicted efficiency | predicted exposed communication |",
                  "| --- | --- | --- | --- | --- |"]
        for r in held:
            lines.append(f"| {r['id']} | {r['calibrated_from_gpus']} -> {r['gpus']} | "
                         f"{r['published_efficiency']:.3f} | {r['predicted_efficiency']:.3f} | "
                         f"{r['comm_exposed_s'] * 1e3:.0f} ms of {r['step_s'] * 1e3:.0f} ms |")
    lines.append("")
    for name in BASES + ("all",):
        s = summ[name]
        if s["n"]:
            lines.append(f"{name}: {s['n']} figures, median |error| {s['median']:.1%}, worst {s['worst']:.1%} "
                         f"({s['worst_id']}); within 15%: {s['within_15']}, within 30%: {s['within_30']}")
            met = s["median"] <= TARGET_MEDIAN and s["worst"] <= TARGET_WORST
            lines[-1] += f"; issue 37's target (median <= 15%, worst <= 30%): {'met' if met else 'not met'}"
        else:
            lines.append(f"{name}: no figures")
    for n in summ["not_predicted"]:
        lines.append(f"not predicted: {n['id']}: {n['reason']}")
    return "\n".join(lines) + "\n"


def default_shardtrain(source_dir):
    for p in (os.path.join(HERE, "..", "shardtrain"), os.path.join(source_dir, "build", "bin", "shardtrain")):
        if os.path.exists(p):
            return os.path.abspath(p)
    raise PublishedError("no shardtrain binary found (build it, or pass --shardtrain)")


def run_command(runs_path, json_out, shardtrain, source_dir, command):
    data_dir = study_dir(source_dir)
    runs_path = runs_path or os.path.join(data_dir, "published", "runs.toml")
    rows = predict_all(load_runs(runs_path), Planner(shardtrain, source_dir), data_dir)
    summ = summary(rows)
    print(table(rows, summ, command), end="")
    if json_out:
        with open(json_out, "w") as f:
            json.dump({"method": METHOD, "roofline_efficiency": ROOFLINE_EFFICIENCY, "rows": rows,
                       "summary": summ}, f, indent=1)
    return 0


def main(argv=None):
    """python3 tools/study/study_published.py: the same as `shardtrain study
    published`, from the source tree."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", help="published figures (default tools/study/published/runs.toml)")
    parser.add_argument("--json", help="also write the rows and the summary to this file")
    parser.add_argument("--shardtrain", help="the shardtrain binary (default: build/bin/shardtrain)")
    args = parser.parse_args(argv)
    source_dir = os.path.abspath(os.path.join(HERE, "..", ".."))
    try:
        shardtrain = args.shardtrain or default_shardtrain(source_dir)
        cmd = "python3 tools/study/study_published.py" + (f" --runs {args.runs}" if args.runs else "")
        return run_command(args.runs, args.json, shardtrain, source_dir, cmd)
    except (PublishedError, OSError) as e:
        print(f"study_published: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
