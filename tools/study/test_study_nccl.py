"""Tests of NCCL's cost model (study_nccl.py) and its use by tier fabrics.

    cd tools/study && /usr/bin/python3 -m unittest test_study_nccl -v

Each test checks a property NCCL's source states (src/graph/tuning.cc,
search.cc, NVIDIA/nccl 2.30.7) or a published observation of what NCCL did,
cited where it is used.
"""
import os
import statistics
import unittest

import study_fabric
import study_nccl as nccl

HERE = os.path.dirname(os.path.abspath(__file__))
PUBLISHED = os.path.join(HERE, "published", "nccl_tests.toml")
KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30


def node(name="rocev2-400g-gdr", gpus=None):
    doc, _ = nccl.load_fabric(name)
    n = nccl.node_from_fabric(doc)
    return n.with_gpus(gpus) if gpus else n


def pick(name, op, nbytes, nodes, gpus=None):
    a, p, _ = nccl.Comm(node(name, gpus), nodes).choose(op, nbytes)
    return nccl.ALGO_NAMES[a], nccl.PROTO_NAMES[p]


class RingLatency(unittest.TestCase):
    """tuning.cc: a ring pays the network latency only on its inter-node
    hops, the NVLink latency (or the network post overhead) on the others."""

    def test_only_inter_node_hops_pay_the_network(self):
        comm = nccl.Comm(node(), 64)
        lat = comm.lat["allreduce"][nccl.RING][nccl.SIMPLE]
        steps, inter = 2 * (512 - 1), 2 * (64 - 1)
        intra_lat = max(nccl.HW_LAT[nccl.HW_NVLINK][nccl.RING][nccl.SIMPLE], 3 * 1.0)  # Intel post overhead x3
        net_lat = nccl.HW_LAT[nccl.HW_NET][nccl.RING][nccl.SIMPLE]
        expected = nccl.BASE_LAT[nccl.RING][nccl.SIMPLE] + (steps - inter) * intra_lat + inter * net_lat
        self.assertAlmostEqual(lat, expected, places=6)
        # The old tier model charged every one of the 1022 steps the network's 14 us.
        self.assertLess(lat, 0.35 * steps * net_lat)

    def test_more_gpus_per_node_add_only_intra_node_hops(self):
        wide = nccl.Comm(node(gpus=8), 16).lat["allreduce"][nccl.RING][nccl.SIMPLE]
        narrow = nccl.Comm(node(gpus=4), 16).lat["allreduce"][nccl.RING][nccl.SIMPLE]
        extra_steps = 2 * (16 * 8 - 1) - 2 * (16 * 4 - 1)
        self.assertAlmostEqual(wide - narrow, extra_steps * 3.4, places=6)

    def test_one_node_pays_no_network(self):
        comm = nccl.Comm(node(), 1)
        expected = nccl.BASE_LAT[nccl.RING][nccl.SIMPLE] + 2 * 7 * 3.4
        self.assertAlmostEqual(comm.lat["allreduce"][nccl.RING][nccl.SIMPLE], expected, places=6)


class Choice(unittest.TestCase):
    def test_protocol_follows_size(self):
        for nodes in (1, 2, 16):
            self.assertEqual(pick("rocev2-400g-gdr", "allgather", 4 * KIB, nodes)[1], "LL")
            self.assertEqual(pick("rocev2-400g-gdr", "allgather", 4 * GIB, nodes)[1], "Simple")
            self.assertEqual(pick("rocev2-400g-gdr", "reduce_scatter", 4 * KIB, nodes)[1], "LL")
            self.assertEqual(pick("rocev2-400g-gdr", "reduce_scatter", 4 * GIB, nodes)[1], "Simple")

    def test_one_node_all_reduce_ll_then_nvls(self):
        # Published, 8x H100 in one node: "8B~1MB: uses Algo RING proto LL", "2MB~16GB
        # uses Algo NVLS proto SIMPLE", https://github.com/NVIDIA/nccl-tests/issues/309.
        self.assertEqual(pick("ib-ndr-400g-h100", "allreduce", 8, 1), ("Ring", "LL"))
        self.assertEqual(pick("ib-ndr-400g-h100", "allreduce", 1 * MIB, 1), ("Ring", "LL"))
        self.assertEqual(pick("ib-ndr-400g-h100", "allreduce", 2 * MIB, 1), ("NVLS", "Simple"))
        self.assertEqual(pick("ib-ndr-400g-h100", "allreduce", 16 * GIB, 1), ("NVLS", "Simple"))

    def test_tree_at_scale_for_mid_sizes(self):
        # Published, 64 hosts of 8x H200: "AllReduce: 16777216 Bytes -> Algo TREE proto
        # LL128", "33554432 Bytes -> Algo NVLS_TREE proto SIMPLE",
        # https://github.com/NVIDIA/nccl/issues/1752.
        self.assertEqual(pick("rocev2-400g-gdr", "allreduce", 16 * MIB, 64), ("Tree", "LL128"))
        self.assertEqual(pick("rocev2-400g-gdr", "allreduce", 32 * MIB, 64), ("NVLSTree", "Simple"))
        # Without NVLink SHARP (A100) the tree keeps the mid sizes; rings take the largest.
        self.assertEqual(pick("ib-hdr-200g-a100", "allreduce", 16 * MIB, 64)[0], "Tree")
        self.assertEqual(pick("ib-hdr-200g-a100", "allreduce", 8 * GIB, 64)[0], "Ring")

    def test_two_nodes_nvls_tree_more_nodes_ring(self):
        # sjeaugey: "On two nodes, NCCL uses the tree (or nvlstree) algorithm",
        # https://github.com/NVIDIA/nccl-tests/issues/196.
        self.assertEqual(pick("rocev2-400g-gdr", "allreduce", 8 * GIB, 2)[0], "NVLSTree")
        self.assertEqual(pick("rocev2-400g-gdr", "allreduce", 8 * GIB, 4)[0], "Ring")

    def test_pat_only_with_one_gpu_per_node(self):
        # tuning.cc ncclPatEnable: "PAT only supports 1 GPU per node".
        self.assertEqual(pick("rocev2-400g-gdr", "allgather", 1 * MIB, 64, gpus=1)[0], "PAT")
        self.assertEqual(pick("rocev2-400g-gdr", "reduce_scatter", 1 * MIB, 64, gpus=1)[0], "PAT")
        comm = nccl.Comm(node(gpus=8), 64)
        self.assertEqual(comm.bw["allgather"][nccl.PAT][nccl.SIMPLE], 0.0)

    def test_forced_algorithm(self):
        comm = nccl.Comm(node(), 16)
        a, _, _ = comm.choose("allreduce", 16 * MIB, algo=nccl.RING)
        self.assertEqual(a, nccl.RING)
        with self.assertRaises(nccl.ModelError):
            comm.choose("allgather", 16 * MIB, algo=nccl.TREE)  # NCCL has no tree all-gather


class Graphs(unittest.TestCase):
    """The replayed topology search (search.cc) on the shipped nodes."""

    def test_channels_spread_over_the_nics(self):
        comm = nccl.Comm(node("rocev2-400g-gdr"), 4)
        ring = comm.graphs[nccl.RING]
        # One 48 GB/s channel per 400G NIC (net.bw 50, PCIe Gen5 48): 384 GB/s, the
        # order of the published 365.84-368.76 GB/s on 4 nodes of 8 GPU-NIC pairs
        # (https://github.com/NVIDIA/nccl-tests/issues/309).
        self.assertEqual((ring.channels, ring.bw_inter), (8, 48.0))
        four = nccl.Comm(node("rocev2-400g-gdr-4nic"), 4).graphs[nccl.RING]
        self.assertEqual(four.channels * four.bw_inter, 192.0)

    def test_nvls_heads(self):
        one = nccl.Comm(node(), 1).graphs[nccl.NVLS]
        self.assertEqual((one.channels, one.bw_intra), (8, 40.0))
        self.assertIsNone(nccl.Comm(node("ib-hdr-200g-a100"), 1).graphs[nccl.NVLS])

    def test_large_buffers_reach_the_graph_bandwidth(self):
        # Ring busbw at large sizes tends to channels x bwInter (tuner: busBw = nChannels x bw).
        p = nccl.predict(node(), "allgather", 64 * GIB, 8)
        self.assertAlmostEqual(p["busbw_GBps"], 384.0, delta=6.0)


class Validation(unittest.TestCase):
    def test_error_limits_on_published_figures(self):
        rows, summary = nccl.validate(PUBLISHED)
        multi = [abs(r["error"]) for r in rows if int(r["figure"]["nodes"]) > 1]
        self.assertGreaterEqual(len(multi), 6)
        self.assertLessEqual(summary["median"], 0.15)
        self.assertLessEqual(summary["worst"], 0.30)
        self.assertLessEqual(statistics.median(multi), 0.15)

    def test_every_figure_cites_its_source(self):
        rows, _ = nccl.validate(PUBLISHED)
        for r in rows:
            f = r["figure"]
            self.assertTrue(f["citation"].startswith("https://github.com/NVIDIA/"), f["id"])
            self.assertTrue(f.get("quote") and f.get("cluster"), f["id"])


class TierFabricModels(unittest.TestCase):
    def fabric(self, name, model=None):
        f = study_fabric.load(nccl.fabric_path(name))
        if model:
            doc = dict(f.doc)
            doc["fabric"] = dict(doc["fabric"], collective_model=model)
            f = study_fabric.TierFabric(doc, f.path)
        return f

    def test_nccl_is_the_default_with_an_nccl_table(self):
        self.assertEqual(self.fabric("rocev2-400g-gdr").collective_model, "nccl")
        doc = dict(self.fabric("rocev2-400g-gdr").doc)
        doc.pop("nccl")
        doc["fabric"] = {k: v for k, v in doc["fabric"].items() if k != "collective_model"}
        self.assertEqual(study_fabric.TierFabric(doc, "x").collective_model, "ring")

    def test_ring_model_is_the_old_formula(self):
        f = self.fabric("rocev2-400g-gdr", "ring")
        c = {"op": "allreduce", "group": "world", "bytes": 1 * MIB}
        n = 64 * 8
        expected = 2 * (n - 1) * 14e-6 + 2 * (n - 1) / n * (1 * MIB) / (8 * 400 / 8 * 1e9 * 0.92)
        self.assertAlmostEqual(f.cost_fn(64, 8)(c), expected, places=12)

    def test_nccl_model_is_cheaper_at_scale_for_small_buffers(self):
        c = {"op": "allreduce", "group": "world", "bytes": 4 * MIB}
        ring = self.fabric("rocev2-400g-gdr", "ring").cost_fn(64, 8)(c)
        model = self.fabric("rocev2-400g-gdr").cost_fn(64, 8)(c)
        self.assertLess(model, ring / 10)

    def test_groups(self):
        f = self.fabric("rocev2-400g-gdr")
        cost = f.cost_fn(16, 8)
        c = {"op": "reduce_scatter", "bytes": 64 * MIB}
        self.assertEqual(f.cost_fn(1, 1)(dict(c, group="world")), 0.0)
        # HYBRID's node group stays on NVLink; its cross-node group crosses the network.
        self.assertLess(cost(dict(c, group="node")), cost(dict(c, group="world")))
        self.assertGreater(cost(dict(c, group="cross_node", op="allreduce")), 0.0)

    def test_line_rate_changes_the_nccl_cost(self):
        f = self.fabric("rocev2-400g-gdr")
        c = {"op": "allreduce", "group": "world", "bytes": 1 * GIB}
        slow = f.with_nic_gbps(100.0).cost_fn(16, 8)(c)
        self.assertGreater(slow, 2.5 * f.cost_fn(16, 8)(c))


if __name__ == "__main__":
    unittest.main()
