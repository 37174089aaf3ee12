"""Tests of the step simulation's collective costs on a measured fabric:
a world collective issued behind another on the same communicator costs
what it costs without the arrival check (the runtime checked it while the
one before ran), where that was measured.

    cd tools/study && /usr/bin/python3 -m unittest test_study_model -v
"""
import types
import unittest

import study_fabric
import study_model

KIB = 1 << 10


def fabric(with_ahead=True):
    """A measured fabric of 8 nodes x 2 ranks: all-gathers cost 10 ms with
    the arrival check and 4 ms without it, up to 1 MiB."""
    tables = [{"op": "allgather", "nodes": 8, "ranks_per_node": 2, "bytes": [16 * KIB, 4096 * KIB],
               "seconds": [0.010, 0.010]}]
    if with_ahead:
        tables.append({"op": "allgather" + study_fabric.AHEAD, "nodes": 8, "ranks_per_node": 2,
                       "bytes": [16 * KIB, 1024 * KIB], "seconds": [0.004, 0.004]})
    return study_fabric.MeasuredFabric({"fabric": {"name": "t"}, "table": tables}, "t.toml")


def script(*sizes):
    """Every all-gather issued at once at the start of the step, then each waited for."""
    collectives = [{"op": "allgather", "group": "world", "bytes": b} for b in sizes]
    events = [("issue", i) for i in range(len(sizes))] + [("wait", i) for i in range(len(sizes))]
    return types.SimpleNamespace(collectives=collectives, events=events)


NO_COMPUTE = study_model.Compute(forward={}, backward={}, optimizer_s=0.0, other_s=0.0)


class ArrivalCheckAhead(unittest.TestCase):
    def test_queued_collectives_cost_the_table_without_the_check(self):
        cost = fabric().cost_fn(8, 2)
        step, exposed, span = study_model.simulate(script(64 * KIB, 64 * KIB, 64 * KIB), NO_COMPUTE, cost)
        # The first on an idle communicator pays the check; the two behind it do not.
        self.assertAlmostEqual(span[0][1] - span[0][0], 0.010)
        self.assertAlmostEqual(span[1][1] - span[1][0], 0.004)
        self.assertAlmostEqual(span[2][1] - span[2][0], 0.004)
        self.assertAlmostEqual(step, 0.018)
        self.assertAlmostEqual(exposed, 0.018)

    def test_one_issued_while_the_engine_runs_heads_its_next_batch(self):
        # The engine takes everything queued at once; what is issued while
        # it runs waits for the next batch, whose first pays the check.
        cost = fabric().cost_fn(8, 2)
        collectives = [{"op": "allgather", "group": "world", "bytes": 64 * KIB} for _ in range(3)]
        events = [("issue", 0), ("forward", 0), ("issue", 1), ("issue", 2)] + [("wait", i) for i in range(3)]
        compute = study_model.Compute(forward=[0.002], backward=[], optimizer_s=0.0, other_s=0.0)
        _, _, span = study_model.simulate(types.SimpleNamespace(collectives=collectives, events=events), compute,
                                          cost)
        self.assertAlmostEqual(span[1][0], 0.010)  # after the first, issued 2 ms in
        self.assertAlmostEqual(span[1][1] - span[1][0], 0.010)
        self.assertAlmostEqual(span[2][1] - span[2][0], 0.004)

    def test_behind_a_large_collective_the_check_is_not_ahead(self):
        # 16 ranks: an all-gather of 8 MiB records 512 KiB per rank, more
        # than the runtime looks ahead behind.
        cost = fabric().cost_fn(8, 2)
        _, _, span = study_model.simulate(script(8192 * KIB, 64 * KIB), NO_COMPUTE, cost)
        self.assertAlmostEqual(span[1][1] - span[1][0], 0.010)
        # Behind 4 MiB (256 KiB per rank) it is.
        _, _, span = study_model.simulate(script(4096 * KIB, 64 * KIB), NO_COMPUTE, cost)
        self.assertAlmostEqual(span[1][1] - span[1][0], 0.004)

    def test_sizes_beyond_the_table_and_older_files_keep_the_checked_cost(self):
        _, _, span = study_model.simulate(script(64 * KIB, 2048 * KIB), NO_COMPUTE, fabric().cost_fn(8, 2))
        self.assertAlmostEqual(span[1][1] - span[1][0], 0.010)
        _, _, span = study_model.simulate(script(64 * KIB, 64 * KIB), NO_COMPUTE, fabric(False).cost_fn(8, 2))
        self.assertAlmostEqual(span[1][1] - span[1][0], 0.010)


if __name__ == "__main__":
    unittest.main()
