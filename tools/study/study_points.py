"""The points of a scaling study: which (model, strategy, nodes, ranks per
node, link rate) combinations a sweep runs, and the command line of each.
A study's compute is real, or emulated (every point's Blocks, optimizer and
loss wait a per-Block profile's times: runtime.emulate.compute, docs/
scaling.md); emulated points have keys of their own.

A point's key names it in points.jsonl, so that a study that was
interrupted resumes where it stopped.
"""
import dataclasses
import json
import os

# The reference models (examples/) and the data each reads.
MODELS = {
    "mlp": ("examples/fmnist_mlp.toml", "fashion-mnist"),
    "cnn": ("examples/fmnist_cnn.toml", "fashion-mnist"),
    "gpt": ("examples/gpt_kjv.toml", "kjv"),
    "llama": ("examples/llama_kjv.toml", "kjv"),
}

# Strategy name in a study -> the config keys that select it.
STRATEGIES = {
    "none": {"parallel.strategy": "none"},
    "ddp": {"parallel.strategy": "ddp"},
    "zero1": {"parallel.strategy": "zero1"},
    "fsdp_full": {"parallel.strategy": "fsdp", "parallel.fsdp.sharding": "full"},
    "fsdp_grad_op": {"parallel.strategy": "fsdp", "parallel.fsdp.sharding": "grad_op"},
    "hybrid": {"parallel.strategy": "fsdp", "parallel.fsdp.sharding": "hybrid"},
}
# And "hybrid:K": HYBRID over shard groups of K consecutive ranks
# (parallel.fsdp.shard_group_size) instead of the nodes.


def split_strategy(strategy):
    """(a name of STRATEGIES, K) for "hybrid:K", else (strategy, 0); ValueError
    for anything else."""
    base, colon, k = strategy.partition(":")
    if base not in STRATEGIES or (colon and (base != "hybrid" or not k.isdigit() or int(k) < 1)):
        raise ValueError(f"'{strategy}' is not a strategy ({', '.join(STRATEGIES)} or hybrid:K)")
    return base, int(k) if colon else 0


def strategy_settings(strategy):
    """The config keys that select a study's strategy."""
    base, k = split_strategy(strategy)
    sets = dict(STRATEGIES[base])
    if k:
        sets["parallel.fsdp.shard_group_size"] = str(k)
    return sets


def why_not_hybrid_groups(k, nodes, ranks_per_node):
    """None if HYBRID over groups of k ranks fits `nodes` nodes of G ranks as
    the model knows groups (whole nodes, or a part of one that divides it),
    else why not."""
    world, g = nodes * ranks_per_node, ranks_per_node
    if not 2 <= k < world:
        return f"hybrid:{k} on {world} rank(s) needs 2 <= {k} < {world} (else it is DDP or FULL_SHARD)"
    if world % k or (k % g if k > g else g % k):
        return f"hybrid:{k}: groups of {k} neither fill whole nodes of {g} nor divide one"
    return None

UNSHAPED = "unshaped"


def rate_bits(rate):
    """A tc rate in bit/s ("100mbit"); unshaped, or a real fabric's name: infinite."""
    units = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "bit": 1}
    for unit, scale in units.items():
        number = rate[: -len(unit)]
        if rate.endswith(unit) and number.replace(".", "", 1).isdigit():
            return float(number) * scale
    return float("inf")


@dataclasses.dataclass(frozen=True)
class Point:
    model: str
    strategy: str
    nodes: int
    ranks_per_node: int
    rate: str  # a tc rate ("100mbit") or UNSHAPED; one node has no link to shape
    compute: str = "real"  # or "emulated"

    @property
    def world(self):
        return self.nodes * self.ranks_per_node

    @property
    def key(self):
        key = f"{self.model}/{self.strategy}/{self.nodes}x{self.ranks_per_node}/{self.rate}"
        return key if self.compute == "real" else f"{key}/{self.compute}"

    @property
    def dirname(self):
        return self.key.replace("/", "-").replace(":", "")

    def describe(self):
        link = "" if self.nodes == 1 else f", links {self.rate}"
        emulated = ", emulated compute" if self.compute == "emulated" else ""
        return f"{self.model} {self.strategy} on {self.nodes} node(s) x {self.ranks_per_node} rank(s){link}{emulated}"


def why_not(point):
    """None if the point makes sense, else why it is left out of the grid."""
    if point.strategy == "none":
        return None if point.world == 1 else "strategy none runs on one rank"
    if point.world == 1:
        return "one rank: the study's baseline is strategy none"
    if point.strategy == "hybrid" and (point.nodes < 2 or point.ranks_per_node < 2):
        return "hybrid needs 2 or more nodes of 2 or more ranks (else it is DDP or FULL_SHARD)"
    _, k = split_strategy(point.strategy)
    return why_not_hybrid_groups(k, point.nodes, point.ranks_per_node) if k else None


def grid(models, strategies, nodes, ranks_per_node, rates, compute="real"):
    """Every sensible point, one-node points once (no link to shape); the
    one-rank baseline (strategy none) of each model first."""
    points = []
    for model in models:
        candidates = [Point(model, "none", 1, 1, UNSHAPED, compute)]
        for n in nodes:
            for g in ranks_per_node:
                for s in strategies:
                    for r in ([UNSHAPED] if n == 1 else rates):
                        candidates.append(Point(model, s, n, g, r, compute))
        for p in candidates:
            if why_not(p) is None and p not in points:
                points.append(p)
    return points


def train_args(point, source_dir, data_dir, steps, timeout_s, profile=None):
    """shardtrain train's arguments for one point (after the program); an
    emulated point's compute waits the per-Block profile `profile`."""
    config, data = MODELS[point.model]
    sets = {
        "data.train": os.path.join(data_dir, data, "train"),
        "data.test": os.path.join(data_dir, data, "test"),
        # The sweep measures steps: no target, one small evaluation at the end.
        "target.value": "0",
        "data.test_limit": "512",
        "train.max_steps": str(steps),
        "comm.timeout_s": str(timeout_s),
    }
    sets.update(strategy_settings(point.strategy))
    if point.compute == "emulated":
        sets.update({"runtime.emulate.compute": "profile", "runtime.emulate.profile": profile})
    args = [os.path.join(source_dir, config)]
    for k, v in sets.items():
        args += ["--set", f"{k}={v}"]
    # The examples tune DDP's buckets in [parallel.ddp], which the other
    # strategies refuse (scripts/strategy-flags.sh does the same).
    if point.strategy not in ("ddp", "zero1"):
        with open(args[0]) as f:
            if any(line.strip() == "[parallel.ddp]" for line in f):
                args += ["--set", "~parallel.ddp"]
    return args


def read_points(path, on_bad_line=None):
    """The records of points.jsonl, in file order (none if it is missing).
    A line that is not JSON (a write cut short by an interruption) is left
    out, and on_bad_line(number) told: `study run` runs that point again."""
    records = []
    if not os.path.exists(path):
        return records
    with open(path) as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                if on_bad_line:
                    on_bad_line(number)
    return records
