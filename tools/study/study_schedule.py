"""One training step of a strategy as the training thread lives it: compute
of each Block, collectives issued and waited for, the optimizer, in order.

The script follows the strategy's hooks (runtime/parallel/ddp.cpp,
zero1.cpp, fsdp.cpp) over the sizes `shardtrain plan --json` gives
(`comm`: DDP's buckets, FSDP's per-Block gathers and reduce-scatters, the
pools' limits); the simulator (study_model.py) plays it against per-Block
compute times and collective costs. One micro-batch per step, no gradient
clipping: what the study's points run (tests/integration/study_test.sh
checks the collectives against the measured step records).

Events:
  ("forward", b) / ("backward", b)   Block b's compute
  ("issue", c)                       collective c handed to its group's engine
  ("wait", c)                        the thread blocks until c has completed
  ("optimizer", fraction)            that fraction of a full-model update
Collectives: c = {"op", "group" ("world", HYBRID's "group:k" and "across:k"), "bytes",
"what"}.
"""


class Script:
    def __init__(self):
        self.events = []
        self.collectives = []

    def issue(self, op, group, nbytes, what):
        self.collectives.append({"op": op, "group": group, "bytes": nbytes, "what": what})
        c = len(self.collectives) - 1
        self.events.append(("issue", c))
        return c

    def wait(self, c):
        self.events.append(("wait", c))

    def compute(self, phase, b):
        self.events.append((phase, b))

    def optimizer(self, fraction):
        self.events.append(("optimizer", fraction))


def step_script(plan):
    """The Script of one step for one strategy's `plan --json` object."""
    n = len(plan["block_numel"])
    comm = plan["comm"]
    if comm["shard_group"] > 0 and comm["gather_bytes"]:
        return _fsdp(plan, n)
    return _ddp_like(plan, n)


def _ddp_like(plan, n):
    """none, ddp and zero1: each bucket's collective issued when backward
    has produced its last Block (the one with the lowest index): DDP's
    all-reduce, ZeRO-1's reduce-scatter; the update takes the buckets in
    order as they complete (ZeRO-1 updates its chunk of each), then ZeRO-1
    all-gathers each bucket, from the start of the flat buffer to its end,
    and waits for them all, exposed."""
    comm = plan["comm"]
    s = Script()
    for b in range(n):
        s.compute("forward", b)
    buckets = comm["buckets"]
    sharded = comm.get("bucket_op", "allreduce") == "reduce_scatter"
    issued = {}
    for b in reversed(range(n)):
        s.compute("backward", b)
        for i, bucket in enumerate(buckets):
            if bucket["first_block"] == b:
                op = "reduce_scatter" if sharded else "allreduce"
                issued[i] = s.issue(op, "world", bucket["bytes"], f"bucket {i}")
    total = sum(plan["block_numel"])
    world = plan["ranks"]
    if not buckets:
        s.optimizer(1.0)
    for i, bucket in enumerate(buckets):
        s.wait(issued[i])
        numel = sum(plan["block_numel"][bucket["first_block"]:bucket["last_block"] + 1])
        s.optimizer(numel / total / (world if sharded else 1))
    if sharded:
        gathers = [s.issue("allgather", "world", bucket["gather_bytes"], f"gather {i}")
                   for i, bucket in reversed(list(enumerate(buckets)))]
        for g in gathers:
            s.wait(g)
    return s


def _fsdp(plan, n):
    """FSDP's hooks (fsdp.cpp), replayed: gathers with `prefetch` in flight
    within the pool's limit, FULL_SHARD's free after forward and regather in
    backward, a reduce-scatter after each Block's backward whose buffer is
    reclaimed (the oldest first) when the pool is full, HYBRID's cross-node
    all-reduce issued when its reduce-scatter is reclaimed, and the update
    Block by Block, last first, as each Block's gradients arrive."""
    comm = plan["comm"]
    k, gather_limit, grad_limit = comm["prefetch"], comm["gather_buffers"], comm["grad_buffers"]
    hybrid = comm["replica_group"] > 1
    shard_group = f"group:{comm['shard_group']}" if hybrid else "world"
    s = Script()
    state = ["freed"] * n
    gather_of = [None] * n
    held = {"gathers": 0, "grads": 0}
    reduces = []  # [block, collective, "rs" | "replica"]

    def issue_gather(b):
        gather_of[b] = s.issue("allgather", shard_group, comm["gather_bytes"][b], f"gather {b}")
        state[b] = "in_flight"
        held["gathers"] += 1

    def ensure_gathered(b):
        if state[b] == "freed":
            issue_gather(b)
        if state[b] == "in_flight":
            s.wait(gather_of[b])
            state[b] = "gathered"

    def free(b):
        state[b] = "freed"
        held["gathers"] -= 1

    def advance_oldest():
        p = reduces[0]
        s.wait(p[1])
        if p[2] == "rs":
            held["grads"] -= 1
            if hybrid:
                p[1] = s.issue("allreduce", f"across:{comm['shard_group']}", comm["replica_bytes"][p[0]],
                               f"replica {p[0]}")
                p[2] = "replica"
                return
        reduces.pop(0)

    for b in range(n):
        if b == 0:
            for i in range(n):
                if state[i] == "gathered":
                    free(i)
        if state[b] == "freed":
            issue_gather(b)
        for j in range(b + 1, min(n - 1, b + k) + 1):
            if held["gathers"] >= gather_limit:
                break
            if state[j] == "freed":
                issue_gather(j)
        ensure_gathered(b)
        s.compute("forward", b)
        if comm["regather_in_backward"] and b != n - 1:
            free(b)
    for b in reversed(range(n)):
        if state[b] == "freed":
            issue_gather(b)
        for j in range(b - 1, max(0, b - k) - 1, -1):
            if held["gathers"] >= gather_limit:
                break
            if state[j] == "freed":
                issue_gather(j)
        ensure_gathered(b)
        while held["grads"] >= grad_limit:
            advance_oldest()
        held["grads"] += 1
        s.compute("backward", b)
        reduces.append([b, s.issue("reduce_scatter", shard_group, comm["reduce_bytes"][b], f"reduce {b}"), "rs"])
        free(b)
    total = sum(plan["block_numel"])
    for b in reversed(range(n)):
        while any(p[0] == b for p in reduces):
            advance_oldest()
        s.optimizer(plan["block_numel"][b] / total / comm["shard_group"])
    return s
