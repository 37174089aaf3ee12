"""The performance model of `shardtrain study predict`: the step time of a
strategy at N nodes x G ranks per node on a fabric, from

  - per-Block forward and backward compute times, the optimizer's time for
    the whole model and the rest of the step (loss, batch assembly, data),
    measured on one rank (study_calibrate.py) or scaled by FLOPs;
  - the strategy's step (study_schedule.py, over `plan --json`'s sizes);
  - the cost of each collective on its group (study_fabric.py).

The simulation: one compute stream runs the script's compute in order;
each communicator (the world, HYBRID's shard groups and the groups across
them) has one engine that runs its collectives one at a time in issue
order (the progress engine of runtime/comm), starting each when it is
issued and the engine is free; a wait blocks the compute stream until the collective has completed.
While a collective is in flight, compute runs `slowdown` times slower: on
a CPU whose cores the ranks share, the progress engine polls a core that
compute would otherwise use (study_fabric.py says how much, per fabric).
Every rank runs the same script, so the slowest rank is any rank: skew
between ranks (stragglers, noise) is not modelled.

    step = before + sum over the script (compute, optimizer, exposed waits)
    exposed communication = the time the stream spent blocked in waits
"""
import study_schedule


class Compute:
    """One rank's compute at one per-rank batch: seconds per Block forward
    and backward, the optimizer over the whole model, and the step's time
    before the first Block (the batch, data wait) and after the update
    (loss and the rest the telemetry counts as compute)."""

    def __init__(self, forward, backward, optimizer_s, other_s, data_s=0.0, source="", batch=0):
        self.forward = list(forward)
        self.backward = list(backward)
        self.optimizer_s = optimizer_s
        self.other_s = other_s
        self.data_s = data_s
        self.source = source
        self.batch = batch  # samples per rank it was measured at (0: not known)

    def to_json(self):
        return {"forward": self.forward, "backward": self.backward, "optimizer_s": self.optimizer_s,
                "other_s": self.other_s, "data_s": self.data_s, "source": self.source, "batch": self.batch}

    @staticmethod
    def from_json(j):
        return Compute(j["forward"], j["backward"], j["optimizer_s"], j["other_s"], j.get("data_s", 0.0),
                       j.get("source", ""), j.get("batch", 0))

    def scaled(self, factor):
        """This compute for `factor` times the batch (emulated compute's
        waits are in proportion to the rank's batch)."""
        return Compute([t * factor for t in self.forward], [t * factor for t in self.backward],
                       self.optimizer_s, self.other_s * factor, self.data_s * factor,
                       f"{self.source} x {factor:g}", round(self.batch * factor))


def advance(t, work, spans, slowdown):
    """When `work` seconds of compute that start at t end, if compute runs
    `slowdown` times slower while any of `spans` (start, end) is in flight."""
    if slowdown == 1.0:
        return t + work
    while work > 1e-12:
        busy_until = max((e for s, e in spans if s <= t < e), default=None)
        if busy_until is not None:
            dt = min(busy_until - t, work * slowdown)
            work -= dt / slowdown
        else:
            next_start = min((s for s, _ in spans if s > t), default=None)
            dt = work if next_start is None else min(work, next_start - t)
            work -= dt
        t += dt
    return t


class TokenBucket:
    """An emulated node's shaped link (tc tbf, launch/emunodes): bytes leave
    at the unshaped links' speed while the bucket holds tokens, at the
    shaped rate once it is empty; it refills at the rate, up to `burst`
    bytes. The calibration timed collectives back to back, so its shaped
    costs are those of an empty bucket; a step that lets the bucket refill
    between its collectives sends its first `burst` bytes faster."""

    def __init__(self, rate_bytes_per_s, burst_bytes):
        self.rate, self.burst = rate_bytes_per_s, burst_bytes
        self.tokens, self.t = burst_bytes, 0.0

    def cost(self, start, wire_bytes, shaped_s, unshaped_s):
        """Seconds of a collective that starts at `start` and sends
        `wire_bytes` over each node's link, from its empty-bucket and its
        unshaped cost."""
        self.tokens = min(self.burst, self.tokens + self.rate * max(0.0, start - self.t))
        covered = min(self.tokens, wire_bytes)
        share = covered / wire_bytes if wire_bytes > 0 else 1.0
        seconds = share * unshaped_s + (1 - share) * shaped_s
        self.tokens = self.tokens - covered + (self.rate * seconds if share == 1.0 else 0.0)
        self.tokens = min(self.burst, self.tokens)
        self.t = start + seconds
        return seconds


class ShapedLinks:
    """Emulated nodes' links shaped with tc (every node's alike, so one
    bucket stands for each): a collective that crosses nodes sends
    wire_bytes(c) over each node's link through the bucket, at
    unshaped_cost(c) while it holds tokens and at cost(c) (measured with an
    empty bucket) once it is empty."""

    def __init__(self, rate_bytes_per_s, burst_bytes, cost, unshaped_cost, wire_bytes):
        self.rate, self.burst = rate_bytes_per_s, burst_bytes
        self.shaped_cost, self.unshaped_cost, self.wire_bytes = cost, unshaped_cost, wire_bytes
        self.reset()

    def reset(self):
        self.bucket = TokenBucket(self.rate, self.burst)

    def shift(self, seconds):
        """The next step's clock starts again at 0."""
        self.bucket.t -= seconds

    def cost(self, start, c):
        w = self.wire_bytes(c)
        if w <= 0:
            return self.shaped_cost(c)
        return self.bucket.cost(start, w, self.shaped_cost(c), self.unshaped_cost(c))


def simulate(script, compute, cost, slowdown=1.0, link=None):
    """(step seconds, exposed communication seconds, {collective: (start, end)})
    for one step. cost(collective) -> seconds on its group; with `link`
    (emulated nodes' shaped links: link.cost(start, collective) -> seconds)
    the collectives that cross nodes cost what the link's state gives."""
    t = compute.data_s + compute.other_s
    engine_free = {}
    last = {}  # per group: the collective issued last
    taken = {}  # per group: when its engine took the batch that collective is in
    span = {}
    exposed = 0.0
    for kind, arg in script.events:
        if kind == "forward":
            t = advance(t, compute.forward[arg], span.values(), slowdown)
        elif kind == "backward":
            t = advance(t, compute.backward[arg], span.values(), slowdown)
        elif kind == "optimizer":
            t = advance(t, arg * compute.optimizer_s, span.values(), slowdown)
        elif kind == "issue":
            c = script.collectives[arg]
            g = c["group"]
            start = max(t, engine_free.get(g, 0.0))
            if g in taken and t <= taken[g]:
                # Queued when the engine took the batch of the group's last
                # collective: the engine prepares it while that one runs.
                c = dict(c, behind=last[g])
            else:
                taken[g] = start  # the head of the engine's next batch
            end = start + (link.cost(start, c) if link is not None else cost(c))
            engine_free[g] = end
            last[g] = script.collectives[arg]
            span[arg] = (start, end)
        elif kind == "wait":
            end = span[arg][1]
            if end > t:
                exposed += end - t
                t = end
    return t, exposed, span


def predict(plan, compute, cost, slowdown=1.0, link=None):
    """The prediction for one strategy's plan: step seconds, its parts, the
    script simulated and the collectives' summed cost. With a shaped `link`
    the step is simulated twice, its state carried from one to the next,
    and the second is the prediction (a step in steady state)."""
    script = study_schedule.step_script(plan)
    if link is not None:
        link.reset()
        first, _, _ = simulate(script, compute, cost, slowdown, link)
        link.shift(first)
    step, exposed, _ = simulate(script, compute, cost, slowdown, link)
    return {
        "step_s": step,
        "parts": {"compute_s": step - exposed - compute.data_s, "comm_exposed_s": exposed,
                  "data_s": compute.data_s},
        "script": script,
        "comm_s": sum(cost(c) for c in script.collectives),
    }

