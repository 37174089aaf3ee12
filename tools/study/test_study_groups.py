"""Tests of HYBRID's shard groups in the study: the strategy names
("hybrid:K"), the shapes of the groups the model costs, and how many of
them share a node's link.

    cd tools/study && /usr/bin/python3 -m unittest test_study_groups -v
"""
import unittest

import study_fabric
import study_nccl
import study_points
import study_schedule

MIB = 1 << 20


class StrategyNames(unittest.TestCase):
    def test_hybrid_k_sets_the_group_size(self):
        self.assertEqual(study_points.split_strategy("hybrid:4"), ("hybrid", 4))
        self.assertEqual(study_points.split_strategy("ddp"), ("ddp", 0))
        self.assertEqual(study_points.strategy_settings("hybrid:4"),
                         {"parallel.strategy": "fsdp", "parallel.fsdp.sharding": "hybrid",
                          "parallel.fsdp.shard_group_size": "4"})
        for bad in ["ddp:2", "hybrid:", "hybrid:x", "hybrid:0", "zero3"]:
            with self.assertRaises(ValueError, msg=bad):
                study_points.split_strategy(bad)

    def test_points_keep_groups_the_model_knows(self):
        def why(k, nodes, g):
            return study_points.why_not(study_points.Point("cnn", f"hybrid:{k}", nodes, g, "1gbit"))
        self.assertIsNone(why(4, 4, 2))   # two whole nodes per group
        self.assertIsNone(why(2, 2, 4))   # half a node
        self.assertIsNone(why(2, 4, 1))   # nodes of one rank
        self.assertIn("neither fill whole nodes", why(3, 3, 2))
        self.assertIn("needs 2 <=", why(8, 4, 2))  # the whole job: FULL_SHARD
        self.assertIn("needs 2 <=", why(1, 4, 2))  # pure replication: DDP
        self.assertEqual(study_points.Point("cnn", "hybrid:4", 4, 2, "1gbit").dirname, "cnn-hybrid4-4x2-1gbit")


class GroupShapes(unittest.TestCase):
    def test_groups_of_a_node_are_the_node_and_cross_node_groups(self):
        for nodes, g in [(2, 2), (8, 4), (16, 8)]:
            self.assertEqual(study_fabric.group_shape(f"group:{g}", nodes, g),
                             study_fabric.group_shape("node", nodes, g))
            self.assertEqual(study_fabric.group_shape(f"across:{g}", nodes, g),
                             study_fabric.group_shape("cross_node", nodes, g))
            self.assertEqual(study_fabric.link_sharers(f"across:{g}", nodes, g), g)

    def test_groups_beyond_and_within_a_node(self):
        # 8 nodes of 2: groups of 4 span 2 nodes; the 2 ranks across them sit
        # on 4 nodes, one each, and both of a node's ranks cross its link.
        self.assertEqual(study_fabric.group_shape("group:4", 8, 2), (2, 2))
        self.assertEqual(study_fabric.group_shape("across:4", 8, 2), (4, 1))
        self.assertEqual(study_fabric.link_sharers("group:4", 8, 2), 1)
        self.assertEqual(study_fabric.link_sharers("across:4", 8, 2), 2)
        # 4 nodes of 8: groups of 2 stay in a node; across them, 4 ranks of
        # each node in each group, 2 such groups per node.
        self.assertEqual(study_fabric.group_shape("group:2", 4, 8), (1, 2))
        self.assertEqual(study_fabric.group_shape("across:2", 4, 8), (4, 4))
        self.assertEqual(study_fabric.link_sharers("across:2", 4, 8), 2)
        self.assertEqual(study_fabric.link_sharers("group:2", 4, 8), 1)  # no link crossed
        with self.assertRaises(ValueError):
            study_fabric.group_shape("group:3", 3, 2)

    def fabric(self, model):
        f = study_fabric.load(study_nccl.fabric_path("rocev2-400g-gdr"))
        doc = dict(f.doc)
        doc["fabric"] = dict(doc["fabric"], collective_model=model)
        return study_fabric.TierFabric(doc, f.path)

    def test_ring_groups_at_once_share_the_nics(self):
        # 8 groups at once, each of B bytes over the node's NICs, cost what
        # one group of 8 x B bytes costs alone.
        f = self.fabric("ring")
        c = {"op": "allreduce", "bytes": 64 * MIB}
        shared = f.cost_fn(16, 8)(dict(c, group="across:8"))
        self.assertAlmostEqual(shared, f.cost_fn(16, 1)(dict(c, group="world", bytes=8 * 64 * MIB)), places=12)
        self.assertAlmostEqual(shared, f.cost_fn(16, 8)(dict(c, group="cross_node")), places=12)

    def test_nccl_groups_across_a_node_are_its_cross_node_groups(self):
        f = self.fabric("nccl")
        for op in ["allreduce", "allgather"]:
            c = {"op": op, "bytes": 64 * MIB}
            self.assertEqual(f.cost_fn(16, 8)(dict(c, group="across:8")), f.cost_fn(16, 8)(dict(c, group="cross_node")))
            self.assertEqual(f.cost_fn(16, 8)(dict(c, group="group:8")), f.cost_fn(16, 8)(dict(c, group="node")))

    def test_measured_fabric_sends_the_sharers_bytes(self):
        doc = {"fabric": {"kind": "measured"},
               "table": [{"op": "allreduce", "nodes": 4, "ranks_per_node": 1,
                          "bytes": [MIB, 8 * MIB], "seconds": [0.01, 0.08]}]}
        f = study_fabric.MeasuredFabric(doc, "test")
        self.assertAlmostEqual(f.cost_fn(8, 2)({"op": "allreduce", "group": "across:4", "bytes": MIB}), 0.02)

    def test_groups_of_whole_nodes_read_their_own_concurrent_tables(self):
        # HYBRID's groups of a node's 2 ranks on 4 nodes: measured on the 4 x 2
        # shape with every group at once (bench comm --group), no sharers'
        # bytes added; other groups, and fabrics without such tables, as before.
        self.assertEqual(study_fabric.concurrent_table({"op": "allgather", "group": "group:2"}, 4, 2),
                         ("allgather@node", 4, 2))
        self.assertEqual(study_fabric.concurrent_table({"op": "allreduce", "group": "across:2"}, 4, 2),
                         ("allreduce@cross", 4, 2))
        self.assertIsNone(study_fabric.concurrent_table({"op": "allreduce", "group": "across:4"}, 8, 2))
        self.assertIsNone(study_fabric.concurrent_table({"op": "allreduce", "group": "world"}, 4, 2))
        self.assertIsNone(study_fabric.concurrent_table({"op": "allgather", "group": "group:2"}, 1, 2))
        doc = {"fabric": {"kind": "measured"},
               "table": [{"op": "allreduce", "nodes": 4, "ranks_per_node": 1,
                          "bytes": [MIB, 8 * MIB], "seconds": [0.01, 0.08]},
                         {"op": "allreduce@cross", "nodes": 4, "ranks_per_node": 2,
                          "bytes": [MIB, 8 * MIB], "seconds": [0.03, 0.10]}]}
        f = study_fabric.MeasuredFabric(doc, "test")
        self.assertAlmostEqual(f.cost_fn(4, 2)({"op": "allreduce", "group": "across:2", "bytes": MIB}), 0.03)
        self.assertAlmostEqual(f.cost_fn(8, 2)({"op": "allreduce", "group": "across:4", "bytes": MIB}), 0.02)


class Schedule(unittest.TestCase):
    def test_hybrid_issues_on_its_groups(self):
        plan = {"strategy": "fsdp hybrid", "block_numel": [100, 100],
                "comm": {"shard_group": 4, "replica_group": 2, "prefetch": 1, "gather_buffers": 2,
                         "grad_buffers": 2, "regather_in_backward": True, "gather_bytes": [400, 400],
                         "reduce_bytes": [400, 400], "replica_bytes": [100, 100], "buckets": []}}
        groups = {(c["op"], c["group"]) for c in study_schedule.step_script(plan).collectives}
        self.assertEqual(groups, {("allgather", "group:4"), ("reduce_scatter", "group:4"),
                                  ("allreduce", "across:4")})


if __name__ == "__main__":
    unittest.main()
