"""Fabric files: what a collective costs on a cluster, for `study predict`.

Two kinds (TOML; docs/scaling.md has the schema; fabrics/ ships examples):

  kind = "measured"  tables of seconds against bytes per operation and
                     group shape (nodes x ranks per node), written by
                     `shardtrain study fit` from `bench comm` runs;
                     a collective's time is interpolated linearly between
                     the measured sizes (and extrapolated from the last two).
  kind = "tiers"     latency and bus bandwidth of the tier inside a node
                     (shared memory, NVLink/NVSwitch) and of the network
                     between nodes (NICs per node, line rate, the fraction
                     of it collectives reach, GPUDirect RDMA or staging
                     through host memory). A ring over n ranks takes
                     steps x latency + factor x bytes / busbw, with
                     nccl-tests' factors (all-reduce 2(n-1)/n,
                     reduce-scatter and all-gather (n-1)/n) and the busbw of
                     the slowest tier the ring crosses ([fabric]
                     collective_model = "ring"). With an [nccl] table (what
                     NCCL's topology search reads about a node) the default
                     is collective_model = "nccl": NCCL's own cost model,
                     replayed by study_nccl.py: per collective the algorithm
                     (ring, tree, NVLS, NVLS tree, PAT) and protocol (LL,
                     LL128, Simple) NCCL's tuner picks, and its time, with
                     the network latency only on the hops that cross nodes
                     (docs/nccl-model.md).

A collective's group: "world" (nodes x G), "node" (1 x G), "cross_node"
(nodes x 1; G such groups share each node's NICs at once), or HYBRID's
shard groups of k consecutive ranks, "group:k" (1 x k within a node, k/G
nodes x G beyond), and the ranks across them, "across:k" (nodes x G/k, or
one rank on each of N G/k nodes): link_sharers says how many such groups
cross a node's link at once. Where HYBRID's groups are the nodes' ranks
("group:G") and the ranks across them ("across:G") on several nodes, all of
a step's groups run at once, sharing the links and the host's cores: their
costs are read from tables measured so on the point's own shape
(`bench comm --group node|cross`), "<op>@node" and "<op>@cross"
(concurrent_table), where the fabric has them.

Compute slowed by communication: a measured fabric may name the host the
ranks run on ([host] cores, and whether all the study's ranks share it,
as emulated nodes do, or each node's ranks have their own). While a
collective is in flight each rank's progress engine polls a core, so the
busy threads go from R (the ranks on the host) to 2R: compute runs
max(1, 2R/C) / max(1, R/C) times slower. A GPU's collectives run on the
GPU (NCCL): tier fabrics name their own factor (default 1).
"""
import bisect
import copy
import tomllib

import study_nccl

FACTOR = {"allreduce": lambda n: 2 * (n - 1) / n, "reduce_scatter": lambda n: (n - 1) / n,
          "allgather": lambda n: (n - 1) / n, "broadcast": lambda n: 1.0}
STEPS = {"allreduce": lambda n: 2 * (n - 1), "reduce_scatter": lambda n: n - 1,
         "allgather": lambda n: n - 1, "broadcast": lambda n: n - 1}


class FabricError(Exception):
    pass


def load(path):
    try:
        with open(path, "rb") as f:
            doc = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise FabricError(f"{path}: {e}") from e
    kind = doc.get("fabric", {}).get("kind")
    if kind == "measured":
        return MeasuredFabric(doc, path)
    if kind == "tiers":
        return TierFabric(doc, path)
    raise FabricError(f"{path}: [fabric] kind must be \"measured\" or \"tiers\", got {kind!r}")


def group_shape(group, nodes, ranks_per_node):
    """(nodes, ranks on each) of a collective's group (the module's comment);
    ValueError for groups of k that neither fill whole nodes nor divide one
    (no such shape is measured or modelled)."""
    g = ranks_per_node
    if group.startswith(("group:", "across:")):
        side, k = group.split(":")
        k = int(k)
        if k < 1 or (k % g if k > g else g % k):
            raise ValueError(f"HYBRID groups of {k} ranks on nodes of {g}: neither whole nodes nor a part of one")
        if side == "group":
            return (1, k) if k <= g else (k // g, g)
        return (nodes, g // k) if k <= g else (nodes * g // k, 1)
    return {"world": (nodes, g), "node": (1, g), "cross_node": (nodes, 1)}[group]


def concurrent_table(c, nodes, ranks_per_node):
    """(op@side, nodes, ranks per node): the table of a HYBRID group that is
    a node's ranks, or the ranks across the nodes, with all groups running
    at once on the whole shape; None for other groups."""
    g = ranks_per_node
    if nodes < 2 or g < 2 or c["group"] not in (f"group:{g}", f"across:{g}"):
        return None
    return (c["op"] + ("@node" if c["group"].startswith("group:") else "@cross"), nodes, g)


def link_sharers(group, nodes, ranks_per_node):
    """How many groups like this one cross each node's link at once: the
    node's ranks over the group's ranks on it (the cross-node groups: G)."""
    n, g = group_shape(group, nodes, ranks_per_node)
    return ranks_per_node // g if n > 1 else 1


# The tables of collectives timed without the arrival check
# (`bench comm --no-arrival-check`): what a world collective costs when the
# runtime posted its check ahead, while the one before it on the same
# communicator ran (MpiCommunicator::prepare). It does that only behind a
# collective of at most LOOKAHEAD_BYTES (the runtime's kLookaheadBytes, of
# its own record: an all-gather's bytes per rank).
AHEAD = ":ahead"
LOOKAHEAD_BYTES = 256 << 10


def record_bytes(c, ranks):
    """The bytes the runtime records for collective c on `ranks` ranks (an
    all-gather's input, c's being its output as bench comm counts it)."""
    return c["bytes"] // ranks if c["op"] == "allgather" else c["bytes"]


def checked_ahead(c, ranks):
    """Whether c's arrival check ran while the collective before it did:
    c was issued behind one (study_model.simulate sets "behind") small
    enough for the runtime to look ahead."""
    behind = c.get("behind")
    return behind is not None and record_bytes(behind, ranks) <= LOOKAHEAD_BYTES


def polling_slowdown(ranks_on_host, cores):
    busy = lambda threads: max(1.0, threads / cores)  # noqa: E731
    return busy(2 * ranks_on_host) / busy(ranks_on_host)


class MeasuredFabric:
    def __init__(self, doc, path):
        self.name = doc["fabric"].get("name", path)
        self.path = path
        host = doc.get("host", {})
        self.cores = host.get("cores")
        self.shared_host = host.get("shared_by", "node") == "all"
        self.tables = {}
        for t in doc.get("table", []):
            sizes, seconds = t["bytes"], t["seconds"]
            if len(sizes) != len(seconds) or len(sizes) < 2 or sizes != sorted(sizes):
                raise FabricError(f"{path}: table {t.get('op')} {t.get('nodes')}x{t.get('ranks_per_node')}: "
                                  "bytes must be increasing and as many as seconds (at least 2)")
            self.tables[(t["op"], t["nodes"], t["ranks_per_node"])] = (sizes, seconds)

    def slowdown(self, nodes, ranks_per_node):
        if not self.cores:
            return 1.0
        return polling_slowdown(nodes * ranks_per_node if self.shared_host else ranks_per_node, self.cores)

    def cost_fn(self, nodes, ranks_per_node):
        def cost(c):
            n, g = group_shape(c["group"], nodes, ranks_per_node)
            if n * g <= 1:
                return 0.0
            concurrent = concurrent_table(c, nodes, ranks_per_node)
            if concurrent in self.tables:
                return interpolate(*self.tables[concurrent], c["bytes"])
            key = (c["op"], n, g)
            if key not in self.tables:
                raise FabricError(f"{self.path}: no measurement of {c['op']} on {n} node(s) x {g} rank(s) "
                                  f"(run `shardtrain study fit` with that shape)")
            # Groups that run at once over the node's link (the cross-node
            # ones), measured alone: as if one group sent all their bytes.
            nbytes = c["bytes"] * link_sharers(c["group"], nodes, ranks_per_node)
            # A collective whose arrival check ran ahead costs what it costs
            # without one, where that was measured (older files lack it).
            ahead = self.tables.get((c["op"] + AHEAD, n, g))
            if ahead and checked_ahead(c, n * g) and nbytes <= ahead[0][-1]:
                return interpolate(*ahead, nbytes)
            return interpolate(*self.tables[key], nbytes)
        return cost


def interpolate(sizes, seconds, x):
    if x <= sizes[0]:
        return seconds[0]
    i = min(bisect.bisect_left(sizes, x), len(sizes) - 1)
    x0, x1, y0, y1 = sizes[i - 1], sizes[i], seconds[i - 1], seconds[i]
    return max(seconds[0], y0 + (y1 - y0) * (x - x0) / (x1 - x0))


class TierFabric:
    def __init__(self, doc, path):
        self.path = path
        f = doc["fabric"]
        self.name = f.get("name", path)
        try:
            intra, inter = doc["intra_node"], doc["inter_node"]
            self.gpus_per_node = int(f["gpus_per_node"])
            self.intra_busbw = float(intra["busbw_GBps"]) * 1e9
            # Reduce-scatter and all-gather (rings) may reach less than an
            # all-reduce that the switch helps reduce (NVLink SHARP).
            self.intra_ring_busbw = float(intra.get("ring_busbw_GBps", intra["busbw_GBps"])) * 1e9
            self.intra_latency = float(intra["latency_us"]) * 1e-6
            self.efficiency = float(inter["efficiency"])
            nic = float(inter["nic_gbps"]) / 8 * 1e9 * self.efficiency
            self.nics = int(inter["nics_per_node"])
            self.gpudirect = bool(inter.get("gpudirect_rdma", True))
            self.inter_latency = float(inter["latency_us"]) * 1e-6
            self.compute_slowdown = float(f.get("compute_slowdown_during_comm", 1.0))
            if self.gpudirect:
                self.per_nic = nic
            else:
                # Staged through host memory: each NIC's bytes pass through
                # the host's PCIe root port (device to host, then host to
                # NIC), so a NIC moves at most what its share of the staging
                # path carries, and each hop adds the copies' latency.
                staging = doc["staging"]
                self.staging_per_nic = float(staging["GBps_per_nic"]) * 1e9
                self.per_nic = min(nic, self.staging_per_nic)
                self.inter_latency += float(staging["latency_us"]) * 1e-6
        except (KeyError, ValueError, TypeError) as e:
            raise FabricError(f"{path}: missing or bad key {e}") from e
        self.collective_model = f.get("collective_model", "nccl" if "nccl" in doc else "ring")
        if self.collective_model not in ("nccl", "ring"):
            raise FabricError(f"{path}: [fabric] collective_model must be \"nccl\" or \"ring\", "
                              f"got {self.collective_model!r}")
        self.doc = doc
        self.nccl_node = self._nccl_node(None) if self.collective_model == "nccl" else None

    def _nccl_node(self, nic_gbps):
        """The node as NCCL's topology search sees it (study_nccl.Node)."""
        try:
            return study_nccl.node_from_fabric(self.doc, nic_gbps)
        except study_nccl.ModelError as e:
            raise FabricError(f"{self.path}: {e}") from e

    def slowdown(self, nodes, ranks_per_node):
        return self.compute_slowdown

    def with_nic_gbps(self, gbps):
        """This fabric with NICs of another line rate (crossover searches)."""
        other = copy.copy(self)
        nic = gbps / 8 * 1e9 * self.efficiency
        other.per_nic = nic if self.gpudirect else min(nic, self.staging_per_nic)
        if self.collective_model == "nccl":
            other.nccl_node = self._nccl_node(gbps)
        return other

    def cost_fn(self, nodes, ranks_per_node):
        if self.collective_model == "nccl":
            return self._nccl_cost_fn(nodes, ranks_per_node)
        return self._ring_cost_fn(nodes, ranks_per_node)

    def _nccl_cost_fn(self, nodes, ranks_per_node):
        """NCCL's time for each collective (study_nccl.Comm.choose): the
        algorithm and protocol its tuner picks for that size and group."""
        nccl = study_nccl
        comms = {}

        def cost(c):
            n, g = group_shape(c["group"], nodes, ranks_per_node)
            if n * g <= 1:
                return 0.0
            if c["group"] not in comms:
                # Groups that run at once over the node's NICs (HYBRID's
                # cross-node groups) share them.
                share = 1.0 / link_sharers(c["group"], nodes, ranks_per_node)
                try:
                    comms[c["group"]] = nccl.Comm(self.nccl_node.with_gpus(g, share), n)
                except nccl.ModelError as e:
                    raise FabricError(f"{self.path}: {e}") from e
            return comms[c["group"]].choose(c["op"], c["bytes"])[2] * 1e-6
        return cost

    def _ring_cost_fn(self, nodes, ranks_per_node):
        def cost(c):
            n, g = group_shape(c["group"], nodes, ranks_per_node)
            ranks = n * g
            if ranks <= 1:
                return 0.0
            op = c["op"]
            intra = self.intra_busbw if op == "allreduce" else self.intra_ring_busbw
            if n == 1:
                busbw, latency = intra, self.intra_latency
            else:
                # The node's NICs carry its rings; groups that cross them at
                # once (HYBRID's across the shard groups) share them.
                share = self.nics / link_sharers(c["group"], nodes, ranks_per_node)
                busbw = min(intra if g > 1 else float("inf"), share * self.per_nic)
                latency = self.inter_latency
            return STEPS[op](ranks) * latency + FACTOR[op](ranks) * c["bytes"] / busbw
        return cost


def write_measured(path, name, source, rows, host_cores=None, shared_by="node"):
    """rows: {(op, nodes, ranks_per_node): [(bytes, seconds), ...]}; with
    host_cores, the [host] section (see the module's comment)."""
    lines = ["# Written by `shardtrain study fit`: the time of one collective (median of",
             "# bench comm's latency-mode rounds: issue, wait, repeat) against its bytes",
             "# (nccl-tests' count), per operation and group shape.",
             f"# From: {source}", "", "[fabric]", f"name = {_q(name)}", 'kind = "measured"', ""]
    if host_cores:
        lines += ["# The CPU the ranks compute on; shared_by = \"all\": every rank of the",
                  "# study runs on this one host (emulated nodes), \"node\": each node's own.",
                  "[host]", f"cores = {int(host_cores)}", f"shared_by = {_q(shared_by)}", ""]
    for (op, nodes, g), pts in sorted(rows.items()):
        pts = sorted(pts)
        lines += ["[[table]]", f"op = {_q(op)}", f"nodes = {nodes}", f"ranks_per_node = {g}",
                  "bytes = [" + ", ".join(str(int(b)) for b, _ in pts) + "]",
                  "seconds = [" + ", ".join(f"{s:.6g}" for _, s in pts) + "]", ""]
    with open(path, "w") as f:
        f.write("\n".join(lines))


def _q(s):
    return '"' + str(s).replace("\\", "\\\\").replace('"', '\\"') + '"'
