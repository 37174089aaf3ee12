"""NCCL's own cost model of a collective, for the tier fabrics of `study predict`.

Before NCCL runs a collective it estimates, for every algorithm and protocol,
time = latency + bytes / bandwidth, and runs the fastest. This module replays
that estimate and that choice:

 1. The topology search (src/graph/search.cc, ncclTopoCompute): per
    communicator a ring graph, a tree graph and an NVLS graph, each a number of
    channels and a per-channel bandwidth inside the node (bwIntra) and to the
    network (bwInter). NCCL searches the node's real PCI/NVLink/NIC tree. Here a
    node is described by what that search looks at (GPUs, NVLink bandwidth per
    GPU, NICs, their speed and PCIe width, how many GPUs share a NIC's PCIe
    switch) and the search is replayed for that regular topology: the same
    speed arrays, the same bandwidth spent per channel on each link, the same
    order of tries and the same rules for keeping a solution.
 2. The tuning (src/graph/tuning.cc, ncclTopoTuneModel): per collective,
    algorithm and protocol, a latency (base + per-hop latencies, the network
    latency only on the hops that cross nodes) and a bandwidth (channels x
    per-channel bandwidth, with the LL/LL128/tree/PAT/NVLS factors).
 3. The choice (src/enqueue.cc topoGetAlgoInfo, tuning.cc ncclTopoGetAlgoTime):
    the algorithm and protocol of least time.

The prediction is NCCL's own estimate of the time of the algorithm it picks.
Every constant below is NCCL's, from github.com/NVIDIA/nccl at commit
5067397c2676d5aed50042fc39e5c8ee96eb0027 (NCCL 2.30.7, makefiles/version.mk),
file and function named where it is used. Not modelled: CollNet (IB SHARP; off
unless NCCL_COLLNET_ENABLE=1), tuner plugins, NCCL_ALGO/NCCL_PROTO beyond one
forced algorithm or protocol, and user-registered buffers.

Bytes follow nccl-tests: the all-reduce buffer, the reduce-scatter input and
the all-gather output (what NCCL's ncclFuncMaxSendRecvCount gives, enqueue.cc).

    python3 study_nccl.py --validate published/nccl_tests.toml
    python3 study_nccl.py --fabric rocev2-400g-gdr --op allreduce --nodes 64 --sizes 1M,64M,1G
"""
import argparse
import math
import os
import statistics
import sys
import tomllib

HERE = os.path.dirname(os.path.abspath(__file__))

TREE, RING, COLLNET_DIRECT, COLLNET_CHAIN, NVLS, NVLS_TREE, PAT = range(7)  # plugin/nccl_tuner.h
ALGO_NAMES = ["Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT"]
LL, LL128, SIMPLE = range(3)
PROTO_NAMES = ["LL", "LL128", "Simple"]
HW_NVLINK, HW_PCI, HW_NET = range(3)
OPS = ("broadcast", "reduce_scatter", "allgather", "allreduce")

# tuning.cc, ncclTunerConstantsDefaults: latencies in us, [algo][proto].
BASE_LAT = [[6.8, 14.0, 8.4], [6.6, 14.0, 8.4], [0, 0, 0], [0, 0, 0], [0, 0, 0], [0, 0, 0], [8.0, 8.0, 8.0]]
HW_LAT = [
    # NVLINK
    [[0.6, 1.25, 4.0], [0.6, 1.9, 3.4], [0, 0, 3.7], [0, 0, 2.8], [0, 0, 25], [0, 0, 25], [0, 0, 4.0]],
    # PCI
    [[1.0, 1.9, 4.0], [1.0, 2.5, 5.7], [0, 0, 3.7], [0, 0, 2.8], [0, 0, 0], [0, 0, 0], [0, 0, 4.0]],
    # NET
    [[5.0, 8.5, 14], [2.7, 4.0, 14.0], [0, 0, 31], [0, 0, 30], [0, 0, 18], [0, 0, 20.9], [0, 0, 14]],
]
# GB/s; rows Volta, Ampere, Hopper, Blackwell; columns 1 node, 2 nodes, more.
LL_MAX_BW = [[39.0, 39.0, 20.4], [87.7, 22.5, 19.0], [141.0, 45.0, 35.0], [2 * 141.0, 2 * 45.0, 2 * 35.0]]
PER_CH_MAX_RING_LL128_BW = [[20.0] * 3, [20.0] * 3, [36.7] * 3, [40.0] * 3]
PER_CH_MAX_TREE_LL128_BW = [[20.0] * 3, [20.0] * 3, [36.7, 36.7, 29.0], [55.6, 31.67, 20.0]]
PER_CH_MAX_TREE_BW = [[26.5, 18.5, 10.0], [24.0, 23.6, 17.8], [38.7, 41.4, 36.0], [70.0, 42.8, 24.0]]
PER_CH_MAX_NVLS_TREE_BW = [[26.5, 18.5, 10.0], [24.0, 23.6, 17.8], [0.0, 57.7, 45.5], [0.0, 96.0, 80.0]]
NVLS_EFFICIENCY = [0.0, 0.0, 0.85, 0.74]  # tuning.cc nvlsEfficiency
# tuning.cc treeCorrectionFactor: [proto][log2(bytes / 64)], 64 B to 256 MB.
TREE_CORRECTION = [
    [1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0, 1.0],
    [1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0, 1.0],
    [.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9, .9],
]

# search.cc: the per-channel bandwidths (GB/s) the search tries, best first.
SPEED_INTRA = [40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0]
SPEED_INTER = [48.0, 30.0, 28.0, 24.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.4, 1.2,
               0.24, 0.12]
SM90_SPEED_INTRA = [60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0]
SM90_SPEED_INTER = [48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4, 1.2,
                    0.24, 0.12]
SM100_SPEED_INTRA = [90.0, 80.0, 70.0, 60.0, 50.0, 45.0, 40.0, 30.0, 24.0, 20.0, 19.0, 18.0]
SM100_SPEED_INTER = [96.0, 86.0, 80.0, 48.0, 45.1, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0,
                     3.0, 2.4, 1.2, 0.24, 0.12]

# src/graph/topo.h: NVLink bandwidth per link (GB/s) as NCCL counts it, by GPU.
NVLINK_BW = {70: 20.0, 80: 20.0, 86: 12.0, 90: 20.6, 100: 40.1}
# src/include/device.h MAXCHANNELS 64; init.cc: ring graphs search up to MAXCHANNELS/2.
MAX_CHANNELS = 64
# src/include/device.h NCCL_MAX_NVLS_ARITY: NVLS graphs have at most this many heads.
MAX_NVLS_ARITY = 32
# src/graph/topo.h LOC_BW: a GPU alone on its node (no intra-node link to search).
LOC_BW = 5000.0


class ModelError(Exception):
    pass


class Node:
    """One node of a communicator, as NCCL's topology search sees it.

    gpus: the communicator's GPUs on the node; cc: compute capability x 10;
    nvlink_bw: GB/s from one GPU to the NVSwitch (links x NCCL's per-link
    figure), 0 without NVLink; nvls: NVLink SHARP multicast (Hopper+ NVSwitch
    with the fabric manager's multicast); nics and nic_bw: the NICs the
    communicator may use and each one's speed as NCCL reads it (Mb/s / 8000,
    topo.cc); pci_bw: the GPU-NIC PCIe path as topo.cc counts it (width x
    per-lane rate in 100 Mb/s / 80: Gen4 x16 24 GB/s, Gen5 x16 48); gpus_per_switch:
    GPUs that share a NIC's PCIe switch (1 on HGX H100/H200, 2 on DGX A100);
    cpu: "intel" or "amd" (LL bandwidth and the network post overhead);
    gdr: GPUDirect RDMA (without it the NIC path goes through the CPU, which
    turns LL128 off); net_latency_us: the NIC's latency property (the IB plugin
    reports 0); nic_cap: GB/s a NIC delivers where that is less than NCCL
    assumes (staged through host memory, sockets), None with GPUDirect RDMA."""

    def __init__(self, gpus, cc, nvlink_bw, nvls, nics, nic_bw, pci_bw, gpus_per_switch=1, cpu="intel",
                 gdr=True, net_latency_us=0.0, nic_cap=None):
        self.gpus, self.cc, self.nvlink_bw, self.nvls = gpus, cc, nvlink_bw, nvls
        self.nics, self.nic_bw, self.pci_bw, self.gpus_per_switch = nics, nic_bw, pci_bw, gpus_per_switch
        self.cpu, self.gdr, self.net_latency_us, self.nic_cap = cpu, gdr, net_latency_us, nic_cap

    def with_gpus(self, gpus, nic_share=1.0):
        """The same node for a communicator with `gpus` of its GPUs, getting
        `nic_share` of each NIC (groups that run at once share the NICs)."""
        nics = max(1, int(self.nics * nic_share + 1e-9)) if nic_share < 1 else self.nics
        scale = min(1.0, self.nics * nic_share / nics)
        cap = None if self.nic_cap is None else self.nic_cap * scale
        return Node(gpus, self.cc, self.nvlink_bw, self.nvls, nics, self.nic_bw * scale, self.pci_bw,
                    self.gpus_per_switch, self.cpu, self.gdr, self.net_latency_us, cap)


class Graph:
    """A search result (search.cc struct ncclTopoGraph, the fields the tuner reads)."""

    def __init__(self, pattern, channels, bw_intra, bw_inter, same_channels=False):
        self.pattern, self.channels = pattern, channels
        self.bw_intra, self.bw_inter, self.same_channels = bw_intra, bw_inter, same_channels

    def __repr__(self):
        return f"{self.pattern} {self.channels}x {self.bw_intra:g}/{self.bw_inter:g} GB/s"


def _deliverable(graph, node):
    """Not NCCL: NCCL searches and tunes with the NIC's line rate. Where the
    transport delivers less (no GPUDirect RDMA: host staging, sockets), the
    graph's network bandwidth is scaled down to what the NICs deliver, after
    the search (so the channels are NCCL's). A ring's bwIntra is its speed
    across the nodes too; a tree on two nodes keeps NCCL's bound of twice the
    network bandwidth (search.cc pass 2)."""
    if graph is None:
        return None
    f = min(1.0, node.nics * node.nic_cap / (graph.channels * graph.bw_inter))
    bw_inter = graph.bw_inter * f
    if graph.pattern == "ring":
        bw_intra = graph.bw_intra * f
    elif graph.pattern == "nvls":
        bw_intra = graph.bw_intra
    else:
        bw_intra = min(graph.bw_intra, 2 * bw_inter)
    return Graph(graph.pattern, graph.channels, bw_intra, bw_inter, graph.same_channels)


def _cc_index(cc):
    """tuning.cc compCapIndex: Volta, Ampere, Hopper, Blackwell."""
    return 3 if cc >= 100 else 2 if cc >= 90 else 1 if cc >= 80 else 0


def _speeds(cc, inter):
    if cc >= 100:
        return SM100_SPEED_INTER if inter else SM100_SPEED_INTRA
    if cc >= 90:
        return SM90_SPEED_INTER if inter else SM90_SPEED_INTRA
    return SPEED_INTER if inter else SPEED_INTRA


def _times(capacity, s):
    """How many channels of bandwidth s a link of `capacity` carries
    (search.cc followPath: subtract until not enough, rounded to 1e-3)."""
    return int(capacity / s + 1e-6)


def _local_gpus(node):
    """GPUs a channel can enter or leave the node through at PCIe distance."""
    return min(node.gpus, node.nics * node.gpus_per_switch)


def _net_channels(node, s):
    """Channels at bandwidth s that the NICs and the GPUs' PCIe links carry:
    each channel enters through one NIC (net.bw -= bw, search.cc
    ncclTopoSearchRecNet) and its PCIe link, and leaves through one."""
    per_nic = _times(min(node.nic_bw, node.pci_bw), s)
    per_gpu = _times(node.pci_bw, s)
    return min(node.nics * per_nic, _local_gpus(node) * per_gpu)


def _nvlink_fits(node, channels, s, sends):
    """Whether each GPU's NVLink carries `sends(channels)` channel sends of s."""
    return node.gpus == 1 or sends(channels) * s <= node.nvlink_bw + 1e-6


def _max_fitting(limit, ok):
    c = limit
    while c > 0 and not ok(c):
        c -= 1
    return c


def _ring_sends(node, inter):
    """NVLink sends per GPU for c ring channels: every GPU sends once per
    channel inside the node; with a network, the GPU that leaves to the NIC
    sends over PCIe instead, and the exits rotate over the NIC-local GPUs."""
    if not inter:
        return lambda c: c
    rotate = _local_gpus(node) == node.gpus
    return lambda c: c - (c // node.gpus if rotate else 0)


def _chain_sends(node):
    """Trees are chains inside the node: the last GPU sends nothing, and the
    chains start on rotating GPUs."""
    return lambda c: c - c // node.gpus


def _ring_fit(node, inter):
    sends = _ring_sends(node, inter)

    def fit(s):
        limit = _net_channels(node, s) if inter else MAX_CHANNELS // 2
        return _max_fitting(min(limit, MAX_CHANNELS // 2), lambda c: _nvlink_fits(node, c, s, sends))
    return fit


def _tree_fit(node, inter, limit):
    sends = _chain_sends(node)

    def fit(s):
        cap = min(limit, _net_channels(node, s)) if inter else limit
        return _max_fitting(cap, lambda c: _nvlink_fits(node, c, s, sends))
    return fit


def _nvls_fit(node, inter, limit):
    """NVLS (search.cc ncclTopoSearchTryNvls): each channel has a head GPU
    that takes 2x bwIntra on its NVLink both ways, every other GPU 1x; with a
    network, one channel per NIC, headed by that NIC's GPU."""
    def fit(s):
        cap = min(limit, node.nics, _local_gpus(node)) if inter else limit
        return _max_fitting(cap, lambda c: (c + 1) * s <= node.nvlink_bw + 1e-6)
    return fit


def _search(node, inter, fit, min_ch, max_ch, ring, nvls=False):
    """Pass 1 of ncclTopoCompute: start at the fastest speed no path exceeds
    (and that minChannels of it fit the GPU's total bandwidth), keep the best
    solution (more channels x bandwidth; NVLS: more channels first), go down
    the speeds while the next one is more than 0.49 of the best found, stop at
    an optimal solution (maxChannels) or one that fills totalBw."""
    speeds = _speeds(node.cc, inter)
    max_bw = min(node.pci_bw, node.nic_bw) if inter else (node.nvlink_bw if node.gpus > 1 else LOC_BW)
    total_bw = max(node.pci_bw, node.nvlink_bw) if (inter or node.gpus > 1) else LOC_BW
    start_total = total_bw * (node.gpus / (node.gpus - 1) if node.gpus > 1 and not ring else 1.0)
    i = 0
    while (speeds[i] > max_bw or speeds[i] * min_ch > start_total) and i < len(speeds) - 1:
        i += 1
    best = None
    while True:
        c = min(fit(speeds[i]), max_ch)
        if c >= max(min_ch, 1) and _better(c, speeds[i], best, nvls, node.gpus):
            best = (c, speeds[i])
        if best and (best[0] == max_ch or best[0] * best[1] >= total_bw):
            break
        if i < len(speeds) - 1 and (best is None or speeds[i + 1] / best[1] > 0.49):
            i += 1
        else:
            break
    if best is None:
        raise ModelError(f"NCCL's search finds no {'NVLS' if nvls else 'ring/tree'} channel on this node")
    return best, speeds


def _better(c, s, best, nvls, gpus):
    """search.cc ncclTopoCompareGraphs."""
    if best is None:
        return True
    if nvls:
        return (best[0] < c <= gpus) or c * s > best[0] * best[1]
    return c * s > best[0] * best[1]


def _dup(node, channels, bw, max_ch):
    """search.cc ncclTopoDupChannels: twice the channels at half the bandwidth
    where a channel is fast enough to share."""
    if bw < 25.0 or (node.cc > 80 and bw < 50.0 and channels > 4):
        return channels, bw
    dup = min(channels * 2, max_ch)
    return dup, bw / math.ceil(dup / channels)


def _speed_index(speeds, bw):
    i = 0
    while speeds[i] > bw and i < len(speeds) - 1:
        i += 1
    return i


def ring_graph(node, inter):
    """The ring graph: pass 1, then duplication, then pass 2, which tries
    every faster speed with at least as many channels (search.cc)."""
    fit = _ring_fit(node, inter)
    max_ch = MAX_CHANNELS // 2
    (c, s), speeds = _search(node, inter, fit, 1, max_ch, ring=True)
    c, s = _dup(node, c, s, max_ch)
    for j in range(_speed_index(speeds, s) - 1, -1, -1):
        if min(fit(speeds[j]), max_ch) >= c:
            c, s = min(fit(speeds[j]), max_ch), speeds[j]
    # The first try replays the previous channel's GPU order (sameChannels);
    # with a NIC per channel the next channel starts at another NIC's GPU, so
    # only a single NIC (or no network) keeps the same channels.
    return Graph("ring", c, s, s, same_channels=(not inter or node.nics == 1))


def tree_pattern(node, inter):
    """The tree graph's pattern: BALANCED_TREE splits the network traffic over
    two GPUs near the NIC; where only one GPU is near each NIC, Hopper and
    later fall back to TREE, all NIC traffic through one GPU (search.cc "Try a
    simpler tree", tried before a longer PCIe path), which the tuner charges
    0.85 (tuning.cc maxTreePattern)."""
    if node.gpus == 1:
        return "tree"  # search.cc: a single GPU uses PATTERN_TREE
    if inter and node.cc >= 90 and node.gpus_per_switch < 2:
        return "tree"
    return "balanced_tree"


def tree_graph(node, inter, ring):
    """The tree graph has as many channels as the ring (init.cc min/maxChannels);
    pass 2 raises only bwIntra, while it stays under twice bwInter."""
    n = ring.channels
    fit = _tree_fit(node, inter, n)
    (c, s), speeds = _search(node, inter, fit, n, n, ring=False)
    c, s = _dup(node, c, s, n)
    bw_intra, sends = s, _chain_sends(node)
    i = _speed_index(speeds, s)
    while i > 0 and bw_intra < 2 * s:
        i -= 1
        if not _nvlink_fits(node, c, speeds[i], sends):
            break
        bw_intra = speeds[i]
    return Graph(tree_pattern(node, inter), c, bw_intra, s)


def nvls_graph(node, inter):
    """The NVLS graph (NVLink SHARP; Hopper and later with NVSwitch): inside a
    node every GPU heads a channel; across nodes one channel per NIC. Pass 2
    raises only bwInter, while under twice bwIntra. None where NCCL has no NVLS
    (init.cc: nvlsSupport off, or a graph of no channel)."""
    if not (node.nvls and node.cc >= 90 and node.nvlink_bw > 0 and node.gpus >= 2):
        return None
    max_ch = min(MAX_NVLS_ARITY, node.gpus)
    min_ch = max_ch if not inter else 1  # search.cc: intra-node NVLS pulls evenly from all GPUs
    fit = _nvls_fit(node, inter, max_ch)
    try:
        (c, s), speeds = _search(node, inter, fit, min_ch, max_ch, ring=False, nvls=True)
    except ModelError:
        return None
    bw_inter = s
    i = _speed_index(speeds, s)
    inter_cap = min(node.nic_bw, node.pci_bw) if inter else float("inf")
    while i > 0 and bw_inter < 2 * s:
        i -= 1
        if speeds[i] > inter_cap + 1e-6:
            break
        bw_inter = speeds[i]
    return Graph("nvls", c, s, bw_inter)


class Comm:
    """A communicator of `nodes` x node.gpus ranks: its graphs, and the tuner's
    latency (us) and bandwidth (GB/s, algorithm bandwidth) per op, algorithm
    and protocol (tuning.cc ncclTopoTuneModel)."""

    def __init__(self, node, nodes):
        if nodes < 1 or node.gpus < 1:
            raise ModelError("a communicator needs at least one node and one GPU per node")
        if node.gpus > 1 and node.nvlink_bw <= 0:
            # NCCL searches PCIe-only nodes too; this replay covers NVSwitch nodes.
            raise ModelError("the NCCL model covers nodes whose GPUs share an NVSwitch ([nccl] nvlinks_per_gpu)"
                             " or one GPU per node")
        self.node, self.nodes, self.ranks = node, nodes, nodes * node.gpus
        inter = nodes > 1
        ring = ring_graph(node, inter)
        tree = tree_graph(node, inter, ring)
        nvls = nvls_graph(node, inter)
        if inter and node.nic_cap is not None:
            ring, tree, nvls = (_deliverable(g, node) for g in (ring, tree, nvls))
        # init.cc: graphs[] = {tree, ring, collnetDirect, collnetChain, nvls, nvls, tree}.
        self.graphs = [tree, ring, None, None, nvls, nvls, tree]
        self.channels = self._runtime_channels(ring)
        self.lat = {op: [[None] * 3 for _ in range(7)] for op in OPS}
        self.bw = {op: [[0.0] * 3 for _ in range(7)] for op in OPS}
        for op in OPS:
            for a in range(7):
                for p in range(3):
                    if self._enabled(op, a, p):
                        self.bw[op][a][p], self.lat[op][a][p] = self._tune(op, a, p)

    def _runtime_channels(self, ring):
        """comm->nChannels (connect.cc ncclTopoPostset): the graphs' channels
        doubled, doubled again on Hopper+ across nodes with fast rings; only
        ncclTopoGetAlgoTime's ring plateau test reads it."""
        n = min(MAX_CHANNELS, 2 * ring.channels)
        if self.node.cc >= 90 and self.nodes > 1 and ring.bw_intra > 45.0 and n < 16:
            n = min(MAX_CHANNELS, 2 * n)
        return n

    def _enabled(self, op, a, p):
        """Which (algorithm, protocol) pairs NCCL considers (tuning.cc loops and
        enable rules, enqueue.cc updateCollCostTable)."""
        g = self.graphs[a]
        if g is None:
            return False  # no NVLS graph; CollNet off (config.collnetEnable = 0 by default)
        if op == "broadcast" and a != RING:
            return False
        if op in ("reduce_scatter", "allgather") and a not in (PAT, RING, NVLS):
            return False
        if op == "allreduce" and a == PAT:
            return False
        if a in (NVLS, NVLS_TREE) and (p != SIMPLE or g.channels < 2):
            return False
        if a == NVLS_TREE and self.nodes == 1:
            return False  # "Disable NVLS Tree on a single node"
        if a == NVLS and self.nodes > 1:
            return False  # multi-node NVLS needs CollNet
        if a == PAT and (p != SIMPLE or not self._pat_enabled()):
            return False
        if p == LL128 and not self._ll128_enabled():
            return False
        return True

    def _pat_enabled(self):
        """tuning.cc ncclPatEnable: one GPU per node, SM60+, no NIC offload."""
        return self.node.cc >= 60 and self.node.gpus == 1

    def _ll128_enabled(self):
        """tuning.cc: LL128 on by default on Hopper+ for NIC paths up to PXN
        (GPUDirect), before Hopper up to PXB, and only over NVLink inside a
        node (typeIntra <= NVB)."""
        if self.nodes > 1 and not self.node.gdr:
            return False
        return self.node.gpus == 1 or self.node.nvlink_bw > 0

    def _tune(self, op, a, p):
        node, g, nodes, ranks = self.node, self.graphs[a], self.nodes, self.ranks
        cci = _cc_index(node.cc)
        index2 = min(nodes, 3) - 1
        # tuning.cc: "LL: for single node, we look at GPU type; for multi-node, we look at CPU type".
        index1 = cci if nodes == 1 else (1 if node.cpu == "amd" else 0)
        ll_max = LL_MAX_BW[index1][index2]
        ppn = ranks / nodes
        nsteps = 2 * (ranks - 1) if op == "allreduce" else ranks - 1 if op in ("reduce_scatter", "allgather") \
            else ranks

        bw = g.bw_intra if nodes <= 2 else g.bw_inter
        if a in (NVLS, NVLS_TREE):
            intra = g.bw_intra * NVLS_EFFICIENCY[cci] * (g.channels - 1) / g.channels
            intra *= 2.0 if op == "allreduce" else (ppn - 1) / ppn  # all-reduce pipelines two operations
            inter_bw = g.bw_inter * (2 if nodes <= 2 and a == NVLS_TREE else 1)
            bw = min(intra, inter_bw, PER_CH_MAX_NVLS_TREE_BW[cci][index2] if a == NVLS_TREE else float("inf"))
        bus = g.channels * bw
        if a == RING and p == LL:
            bus = min(ll_max, bus * .5)
        if a == RING and p == LL128:
            bus = min(bus * 0.92, g.channels * PER_CH_MAX_RING_LL128_BW[cci][index2])
        if a == TREE and op == "allreduce":
            bus = min(bus * .92, g.channels * PER_CH_MAX_TREE_BW[cci][index2])
        if a == TREE and p == LL:
            bus = min(bus / 3.8, ll_max)
        if a == TREE and p == LL128:
            bus = min(bus * (7.0 / 9.0 if nodes == 1 else 120.0 / 128.0),
                      g.channels * PER_CH_MAX_TREE_LL128_BW[cci][index2])
        if a == TREE and g.pattern == "tree":
            bus *= .85
        if a == PAT:
            bus *= .75
        if a == NVLS and op in ("reduce_scatter", "allgather") and nodes > 1:
            bus = 0.0  # needs CollNet
        # Bus bandwidth to algorithm bandwidth.
        if not (a != RING and op in ("reduce_scatter", "allgather")):
            bus *= ranks / nsteps if a in (RING, NVLS, NVLS_TREE) else .5

        intra_hw = HW_NVLINK if (node.gpus > 1 and node.nvlink_bw > 0) else HW_PCI
        lat = BASE_LAT[a][p]
        intra_lat = HW_LAT[intra_hw][a][p]
        # "With ppn=1 latencies are fully exposed, use the Tree network latency"
        inter_lat = HW_LAT[HW_NET][TREE if ppn == 1 else a][p] + node.net_latency_us
        if p == SIMPLE:
            inter_lat += node.net_latency_us  # "the flush extra latency"
        if a == RING:
            if op == "broadcast":
                hw = HW_NET if nodes > 1 else intra_hw
                step = HW_LAT[hw][a][p]
                if g.same_channels:
                    lat += step
                else:
                    if p == SIMPLE:
                        step = HW_LAT[hw][TREE][p]  # "Add some chunk latency"
                    lat += nsteps * step
            else:
                # Network hops pay the network latency; every other hop pays the
                # intra-node latency, or the post overhead of the network proxy.
                overhead = 0.0
                if nodes > 1:
                    overhead = (2.0 if node.cpu == "amd" else 1.0) * (3 if p == SIMPLE else 1)  # getNetOverhead
                intra_lat = max(intra_lat, overhead)
                inter_steps = 0 if nodes == 1 else 2 * (nodes - 1) if op == "allreduce" else nodes - 1
                lat += (nsteps - inter_steps) * intra_lat + inter_steps * inter_lat
        elif a == TREE:
            if op == "allreduce":
                lat += 2 * ((ranks // nodes - 1) * intra_lat + _log2i(nodes) * inter_lat)
        elif a == NVLS:
            lat = intra_lat + (inter_lat if nodes > 1 else 0.0)
        elif a == NVLS_TREE:
            lat += intra_lat + 2 * _log2i(nodes) * inter_lat
        elif a == PAT:
            lat += _log2i(nodes) * (inter_lat / 3.5) + ranks * 2.8
        return bus, lat

    def algo_time(self, op, a, p, nbytes):
        """tuning.cc ncclTopoGetAlgoTime, for one operation: us, or None."""
        bw, lat = self.bw[op][a][p], self.lat[op][a][p]
        if not bw:
            return None
        log_size = _log2i(int(nbytes) >> 6)
        if a == TREE and op == "allreduce" and 0 <= log_size < 23:
            bw *= TREE_CORRECTION[p][log_size]
        if (a == RING and p == SIMPLE and self.nodes > 1 and op == "allreduce"
                and nbytes / (self.channels * self.ranks) >= 64):
            lat *= 1.9 if self.node.cc < 80 else 1.4  # "Plateau effect of ring"
        return lat + nbytes / (1000 * bw)

    def choose(self, op, nbytes, algo=None, proto=None):
        """(algorithm, protocol, us): NCCL's pick, the least time
        (enqueue.cc topoGetAlgoInfo); `algo`/`proto` restrict it as NCCL_ALGO
        and NCCL_PROTO would."""
        if self.ranks == 1:
            return RING, SIMPLE, 0.0
        best = None
        for a in range(7):
            if algo is not None and a != algo:
                continue
            for p in range(3):
                if proto is not None and p != proto:
                    continue
                t = self.algo_time(op, a, p, nbytes)
                if t is not None and t >= 0 and (best is None or t < best[2]):
                    best = (a, p, t)
        if best is None:
            raise ModelError(f"NCCL has no algorithm for {op} here"
                             + (f" with {ALGO_NAMES[algo]}" if algo is not None else ""))
        return best


def _log2i(n):
    """src/include/utils.h log2i (log2Down): floor(log2(n)), -1 for 0."""
    return n.bit_length() - 1 if n > 0 else -1


def bus_factor(op, ranks):
    """nccl-tests' bus bandwidth factor (doc/PERFORMANCE.md)."""
    return {"allreduce": 2 * (ranks - 1) / ranks, "reduce_scatter": (ranks - 1) / ranks,
            "allgather": (ranks - 1) / ranks, "broadcast": 1.0}[op]


def predict(node, op, nbytes, nodes, algo=None, proto=None):
    """NCCL's choice and time for one collective of `nbytes` on `nodes` x
    node.gpus ranks: {"seconds", "algo", "proto", "busbw_GBps"}."""
    comm = Comm(node, nodes)
    a, p, us = comm.choose(op, nbytes, algo, proto)
    seconds = us * 1e-6
    busbw = nbytes / seconds * bus_factor(op, comm.ranks) / 1e9 if seconds > 0 else float("inf")
    return {"seconds": seconds, "algo": ALGO_NAMES[a], "proto": PROTO_NAMES[p], "busbw_GBps": busbw}


# ---- fabric files -------------------------------------------------------

def fabric_path(name):
    """A fabric file by path, or a shipped one (tools/study/fabrics/<name>.toml) by name."""
    if os.path.exists(name):
        return name
    return os.path.join(HERE, "fabrics", name + ("" if name.endswith(".toml") else ".toml"))


def load_fabric(name):
    path = fabric_path(name)
    try:
        with open(path, "rb") as f:
            return tomllib.load(f), path
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise ModelError(f"{path}: {e}") from e


def node_from_fabric(doc, nic_gbps=None):
    """The Node a tier fabric file describes ([nccl] and the tiers'
    keys, docs/nccl-model.md). Without GPUDirect RDMA, NCCL's tuner
    still assumes the NIC's speed, but the bytes go through host memory (and
    a socket transport through the kernel): there a NIC delivers what the
    file's staging path and measured efficiency let through (nic_cap)."""
    try:
        f, inter, nccl = doc["fabric"], doc["inter_node"], doc["nccl"]
        gbps = float(inter["nic_gbps"] if nic_gbps is None else nic_gbps)
        gdr = bool(inter.get("gpudirect_rdma", True))
        nic_bw = gbps * 1000 / 8000  # topo.cc: net.bw = speed (Mb/s) / 8000
        nic_cap = None
        if not gdr:
            nic_cap = min(nic_bw * float(inter["efficiency"]), float(doc["staging"]["GBps_per_nic"]))
        cc = int(nccl["compute_capability"])
        links = int(nccl.get("nvlinks_per_gpu", 0))
        nvlink_bw = links * NVLINK_BW[cc] if links else 0.0
        width, gen = int(nccl.get("pcie_width", 16)), int(nccl["pcie_gen"])
        pci_bw = width * {3: 60, 4: 120, 5: 240, 6: 480}[gen] / 80.0  # topo.cc kvDictPciGen, width*speed/80
        return Node(gpus=int(f["gpus_per_node"]), cc=cc, nvlink_bw=nvlink_bw, nvls=bool(nccl.get("nvls", False)),
                    nics=int(inter["nics_per_node"]), nic_bw=nic_bw, pci_bw=pci_bw,
                    gpus_per_switch=int(nccl.get("gpus_per_nic_switch", 1)), cpu=str(nccl.get("cpu", "intel")),
                    gdr=gdr, net_latency_us=float(nccl.get("net_latency_us", 0.0)), nic_cap=nic_cap)
    except (KeyError, ValueError, TypeError) as e:
        raise ModelError(f"missing or bad key {e} (the NCCL model needs [nccl] and the tier keys)") from e


# ---- validation against published nccl-tests ------------------------------

TEST_OPS = {"all_reduce_perf": "allreduce", "all_gather_perf": "allgather",
            "reduce_scatter_perf": "reduce_scatter", "broadcast_perf": "broadcast"}


def validate(path):
    """Rows (figure, prediction, error) for every [[figure]] of a published
    nccl-tests file, and the error summary."""
    with open(path, "rb") as f:
        doc = tomllib.load(f)
    rows = []
    for fig in doc.get("figure", []):
        fabric, _ = load_fabric(fig["fabric"])
        node = node_from_fabric(fabric)
        node = node.with_gpus(int(fig["gpus_per_node"]))
        algo = ALGO_NAMES.index(fig["algo"]) if fig.get("algo") else None
        proto = PROTO_NAMES.index(fig["proto"]) if fig.get("proto") else None
        pred = predict(node, TEST_OPS[fig["test"]], int(fig["bytes"]), int(fig["nodes"]), algo, proto)
        published = float(fig["busbw_GBps"])
        rows.append({"figure": fig, "pred": pred, "error": (pred["busbw_GBps"] - published) / published})
    errors = [abs(r["error"]) for r in rows]
    return rows, {"median": statistics.median(errors), "worst": max(errors), "n": len(errors)}


def _size(b):
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= div and b % div == 0:
            return f"{b // div} {unit}"
    return f"{b} B"


def validation_table(path):
    rows, summary = validate(path)
    lines = ["| figure | test | nodes x GPUs | size | cluster | published busbw | predicted busbw "
             "(NCCL's pick) | error | citation |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        f, p = r["figure"], r["pred"]
        forced = f" (NCCL_ALGO={f['algo']})" if f.get("algo") else ""
        lines.append(f"| {f['id']} | {f['test']}{forced} | {f['nodes']} x {f['gpus_per_node']} | "
                     f"{_size(int(f['bytes']))} | {f['cluster']} | {float(f['busbw_GBps']):.1f} GB/s | "
                     f"{p['busbw_GBps']:.1f} GB/s ({p['algo']}/{p['proto']}) | {r['error']:+.1%} | "
                     f"{f['citation']} |")
    lines += ["", f"{summary['n']} figures: median |error| {summary['median']:.1%}, worst {summary['worst']:.1%}"]
    return "\n".join(lines) + "\n", summary


def _parse_size(text):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper().rstrip("B")
    return int(float(text[:-1]) * mult[text[-1]]) if text and text[-1] in mult else int(text)


def main(argv=None):
    parser = argparse.ArgumentParser(description="NCCL's collective cost model (study_nccl.py).")
    parser.add_argument("--validate", metavar="FILE", help="published nccl-tests figures (TOML): print the table")
    parser.add_argument("--fabric", help="a tier fabric file or shipped name: print NCCL's choice per size")
    parser.add_argument("--op", default="allreduce", choices=OPS)
    parser.add_argument("--nodes", default="1,2,4,16,64")
    parser.add_argument("--gpus-per-node", type=int)
    parser.add_argument("--sizes", default="64K,1M,16M,256M,1G")
    args = parser.parse_args(argv)
    try:
        if args.validate:
            table, _ = validation_table(args.validate)
            print(table, end="")
        if args.fabric:
            doc, path = load_fabric(args.fabric)
            node = node_from_fabric(doc)
            if args.gpus_per_node:
                node = node.with_gpus(args.gpus_per_node)
            print(f"{path}: {args.op}, {node.gpus} GPUs per node")
            print("| nodes | size | algorithm/protocol | time us | busbw GB/s |\n| --- | --- | --- | --- | --- |")
            for n in (int(x) for x in args.nodes.split(",")):
                for b in (_parse_size(x) for x in args.sizes.split(",")):
                    p = predict(node, args.op, b, n)
                    print(f"| {n} | {_size(b)} | {p['algo']}/{p['proto']} | {p['seconds'] * 1e6:.1f} | "
                          f"{p['busbw_GBps']:.1f} |")
    except (ModelError, OSError, KeyError, ValueError) as e:
        print(f"study_nccl: {e}", file=sys.stderr)
        return 1
    if not (args.validate or args.fabric):
        parser.print_help()
    return 0


if __name__ == "__main__":
    sys.exit(main())
