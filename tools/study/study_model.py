"""The performance model of `shardtrain study predict`: the step time of a
strategy at N nodes x G ranks per node on a fabric, from

  - per-Block forward and backward compute times, the optimizer's time for
    the whole model and the rest of the step (loss, batch assembly, data),
    measured on one rank (study_calibrate.py) or scaled by FLOPs;
  - the strategy's step (study_schedule.py, over `plan --json`'s sizes);
  - the cost of each collective on its group (study_fabric.py).

The simulation: one compute stream runs the script's compute in order;
each communicator (the world, HYBRID's node and cross-node groups) has one
engine that runs its collectives one at a time in issue order (the progress
engine of runtime/comm), starting each when it is issued and the engine is
free; a wait blocks the compute stream until the collective has completed.
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


def simulate(script, compute, cost, slowdown=1.0):
    """(step seconds, exposed communication seconds, {collective: (start, end)})
    for one step. cost(collective) -> seconds on its group."""
    t = compute.data_s + compute.other_s
    engine_free = {}
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
            start = max(t, engine_free.get(c["group"], 0.0))
            end = start + cost(c)
            engine_free[c["group"]] = end
            span[arg] = (start, end)
        elif kind == "wait":
            end = span[arg][1]
            if end > t:
                exposed += end - t
                t = end
    return t, exposed, span


def predict(plan, compute, cost, slowdown=1.0):
    """The prediction for one strategy's plan: step seconds, its parts, the
    script simulated and the collectives' summed cost."""
    script = study_schedule.step_script(plan)
    step, exposed, _ = simulate(script, compute, cost, slowdown)
    return {
        "step_s": step,
        "parts": {"compute_s": step - exposed - compute.data_s, "comm_exposed_s": exposed,
                  "data_s": compute.data_s},
        "script": script,
        "comm_s": sum(cost(c) for c in script.collectives),
    }

