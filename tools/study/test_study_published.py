"""Tests of `shardtrain study published` (study_published.py): the model
beside the published multi-node training figures of published/runs.toml.

    cd tools/study && /usr/bin/python3 -m unittest test_study_published -v

The end-to-end tests run `shardtrain plan` (build/bin/shardtrain, or
$SHARDTRAIN); without a build they are skipped, the others still run.
"""
import copy
import os
import re
import statistics
import unittest

import study_published as pub

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.abspath(os.path.join(HERE, "..", ".."))
RUNS = os.path.join(HERE, "published", "runs.toml")


def shardtrain():
    path = os.environ.get("SHARDTRAIN") or os.path.join(SOURCE, "build", "bin", "shardtrain")
    return path if os.access(path, os.X_OK) else None


class Data(unittest.TestCase):
    """What the method reads from runs.toml, checked without a build."""

    def setUp(self):
        self.runs = pub.load_runs(RUNS)

    def test_architecture_gives_the_parameters_runs_toml_states(self):
        for run in self.runs:
            with self.subTest(run["id"]):
                self.assertEqual(pub.parameters(run), run["model"]["params"])

    def test_calibration_row_is_smaller_same_config_and_never_the_row(self):
        for run in self.runs:
            cal = pub.calibration_row(run)
            if cal is None:
                self.assertFalse([f for f in run.get("fewer_gpus", []) if f.get("same_config")], run["id"])
                continue
            with self.subTest(run["id"]):
                self.assertLess(cal["gpus"], run["hardware"]["gpus"])
                self.assertTrue(cal["same_config"])
                self.assertIn(cal, run["fewer_gpus"])
                smallest = min(f["gpus"] for f in run["fewer_gpus"] if f.get("same_config"))
                self.assertEqual(cal["gpus"], smallest)

    def test_every_row_has_a_reduction_dtype_and_a_recompute_rule(self):
        for run in self.runs:
            with self.subTest(run["id"]):
                self.assertIn(pub.reduce_dtype(run), ("bf16", "f32"))
                r, _ = pub.recompute_forwards(run)
                self.assertGreaterEqual(r, 0.0)
                self.assertLessEqual(r, 1.0)

    def test_recompute_rules(self):
        by_id = {r["id"]: r for r in self.runs}
        self.assertEqual(pub.recompute_forwards(by_id["llmfoundry-a100-40gb-mpt7b-128"])[0], 1.0)
        self.assertEqual(pub.recompute_forwards(by_id["llmfoundry-h100-mpt7b-512"])[0], 0.0)
        self.assertAlmostEqual(pub.recompute_forwards(by_id["ibm-a100-llama2-13b-128-fsdp"])[0], 3 * (0.59 / 0.51 - 1))
        # torchtitan op SAC: wk, wo, w3 of wq, wk, wv, wo, w1, w3, w2.
        run = by_id["torchtitan-a100-llama3-8b-64"]
        d, dkv, f, T = 4096, 1024, 14336, 8192
        expect = (2 * d * dkv + 2 * d * d + 2 * d * f) / (2 * d * (d + 2 * dkv) + 2 * d * d + 6 * d * f + 4 * T * d)
        self.assertAlmostEqual(pub.recompute_forwards(run)[0], expect)

    def test_block_flops_match_the_gpt_family_formula(self):
        run = next(r for r in self.runs if r["id"] == "llmfoundry-h100-mpt7b-512")
        t, C, T = 6 * 2048, 4096, 2048
        self.assertEqual(pub.block_forward_flops(run, t), 24 * t * C * C + 4 * t * T * C)


class Summary(unittest.TestCase):
    """The summary is the median and the worst of |error| over the rows
    that have a prediction, per subset."""

    def test_on_made_up_rows(self):
        rows = [{"id": "a", "basis": "held-out", "error": 0.05}, {"id": "b", "basis": "held-out", "error": -0.20},
                {"id": "c", "basis": "held-out", "error": 0.10}, {"id": "d", "basis": "roofline", "error": -0.40},
                {"id": "f", "basis": "other sources", "error": 0.12},
                {"id": "e", "basis": "none", "error": None, "reason": "no fabric"}]
        s = pub.summary(rows)
        self.assertEqual(s["held-out"]["n"], 3)
        self.assertAlmostEqual(s["held-out"]["median"], 0.10)
        self.assertAlmostEqual(s["held-out"]["worst"], 0.20)
        self.assertEqual(s["held-out"]["worst_id"], "b")
        self.assertEqual(s["roofline"]["n"], 1)
        self.assertEqual(s["other sources"]["n"], 1)
        self.assertAlmostEqual(s["all"]["median"], 0.12)
        self.assertAlmostEqual(s["all"]["worst"], 0.40)
        self.assertEqual(s["not_predicted"], [{"id": "e", "reason": "no fabric"}])


@unittest.skipUnless(shardtrain(), "needs build/bin/shardtrain (or $SHARDTRAIN) for `shardtrain plan`")
class EndToEnd(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.data = pub.study_dir(SOURCE)
        cls.runs = pub.load_runs(RUNS)
        cls.planner = pub.Planner(shardtrain(), SOURCE)
        cls.pool = pub.source_pool(cls.runs, cls.planner, cls.data)
        cls.rows = pub.predict_all(cls.runs, cls.planner, cls.data)
        cls.summary = pub.summary(cls.rows)
        cls.text = pub.table(cls.rows, cls.summary)

    def test_every_figure_is_predicted_or_has_a_reason(self):
        self.assertEqual([r["id"] for r in self.rows], [r["id"] for r in self.runs])
        for r in self.rows:
            with self.subTest(r["id"]):
                if r["predicted"] is None:
                    self.assertTrue(r.get("reason"))
                    self.assertIn(f"not predicted: {r['id']}", self.text)
                else:
                    self.assertGreater(r["predicted"], 0)
                    self.assertIn(r["basis"], pub.BASES)
                    self.assertIn(f"| {r['id']} |", self.text)

    def test_held_out_rows_are_calibrated_from_another_row(self):
        for run, r in zip(self.runs, self.rows):
            if r["basis"] != "held-out":
                continue
            with self.subTest(r["id"]):
                self.assertLess(r["calibrated_from_gpus"], r["gpus"])
                self.assertEqual(r["calibration_published"], pub.calibration_row(run)["tokens_per_s_per_gpu"])

    def test_prediction_does_not_read_the_figure_it_predicts(self):
        """Change the published figure of a held-out and of an other-sources
        row: the prediction stays the same (only the error moves)."""
        for rid in ("llmfoundry-h100-mpt13b-64", "torchtitan-a100-llama2-13b-64"):
            run = copy.deepcopy(next(r for r in self.runs if r["id"] == rid))
            before = next(r for r in self.rows if r["id"] == rid)
            run["figure"]["tokens_per_s_per_gpu"] *= 3
            run["figure"].pop("mfu", None)
            after = pub.predict_run(run, self.planner, self.data, self.pool)
            self.assertAlmostEqual(after["predicted"], before["predicted"], delta=1e-6 * before["predicted"])
            self.assertAlmostEqual(after["tflops"], before["tflops"], delta=1e-9 * before["tflops"])

    def test_other_sources_rows_read_nothing_of_their_own_source(self):
        """Every figure of the row's own source tripled: the pool changes,
        the row's rate and prediction do not."""
        for r in self.rows:
            if r["basis"] != "other sources":
                continue
            with self.subTest(r["id"]):
                runs = copy.deepcopy(self.runs)
                source = pub.short_source(next(x for x in runs if x["id"] == r["id"]))
                for x in runs:
                    if pub.short_source(x) == source:
                        x["figure"]["tokens_per_s_per_gpu"] *= 3
                pool = pub.source_pool(runs, self.planner, self.data)
                self.assertNotEqual(pool, self.pool)
                after = pub.predict_run(next(x for x in runs if x["id"] == r["id"]), self.planner, self.data, pool)
                self.assertAlmostEqual(after["tflops"], r["tflops"], delta=1e-9 * r["tflops"])
                self.assertAlmostEqual(after["predicted"], r["predicted"], delta=1e-6 * r["predicted"])

    def test_other_sources_rate_is_the_median_of_runs_on_the_same_die(self):
        pool = {p["id"]: p for p in self.pool}
        for run, r in zip(self.runs, self.rows):
            if r["basis"] != "other sources":
                continue
            with self.subTest(r["id"]):
                others = [pool[i] for i in r["other_runs"]]
                self.assertTrue(others)
                for p in others:
                    self.assertEqual(p["die"], pub.DIE[run["hardware"]["gpu"]])
                    self.assertNotEqual(p["source"], pub.short_source(run))
                self.assertAlmostEqual(r["fraction_of_peak"], statistics.median(p["fraction"] for p in others))
        # No Float8 run teaches a bf16 rate.
        self.assertFalse([p for p in self.pool if pub.float8(next(x for x in self.runs if x["id"] == p["id"]))])

    def test_each_pool_fraction_reproduces_its_own_figure(self):
        for p in self.pool:
            run = next(x for x in self.runs if x["id"] == p["id"])
            hw = run["hardware"]
            with self.subTest(p["id"]):
                gpu = pub.gpu_profile(hw["gpu"], self.data)
                fabric, _, _ = pub.fabric_of(run, self.data)
                plan, _ = pub.strategy_plan(run, self.planner(run, hw["gpus"], hw["gpus_per_node"]))
                tps, _ = pub.tokens_per_s(run, plan, fabric, hw["gpus"], p["fraction"] * gpu["peak_bf16_dense_tflops"],
                                          gpu["hbm_TBps"])
                self.assertAlmostEqual(tps / run["figure"]["tokens_per_s_per_gpu"], 1.0, places=6)

    def test_calibration_reproduces_the_smaller_row(self):
        """The rate solved at the smaller size gives back that row's figure."""
        for run, r in zip(self.runs, self.rows):
            if r["basis"] != "held-out":
                continue
            cal = pub.calibration_row(run)
            g = run["hardware"]["gpus_per_node"]
            plan, _ = pub.strategy_plan(run, self.planner(run, cal["gpus"], min(g, cal["gpus"])))
            fabric, _, _ = pub.fabric_of(run, self.data)
            gpu = pub.gpu_profile(run["hardware"]["gpu"], self.data)
            tps, _ = pub.tokens_per_s(run, plan, fabric, cal["gpus"], r["tflops"], gpu["hbm_TBps"])
            self.assertAlmostEqual(tps / cal["tokens_per_s_per_gpu"], 1.0, places=6, msg=r["id"])

    def test_summary_is_computed_as_reported(self):
        errors = {r["id"]: r["error"] for r in self.rows if r["error"] is not None}
        for r in self.rows:
            if r["error"] is not None:
                self.assertAlmostEqual(r["error"], (r["predicted"] - r["published"]) / r["published"])
        for name, keep in [(b, {b}) for b in pub.BASES] + [("all", set(pub.BASES))]:
            sel = [abs(errors[r["id"]]) for r in self.rows if r["basis"] in keep and r["id"] in errors]
            s = self.summary[name]
            if not sel:
                self.assertEqual(s["n"], 0)
                self.assertIn(f"{name}: no figures", self.text)
                continue
            self.assertEqual(s["n"], len(sel))
            self.assertAlmostEqual(s["median"], statistics.median(sel))
            self.assertAlmostEqual(s["worst"], max(sel))
            line = re.search(rf"^{name}: (\d+) figures, median \|error\| ([0-9.]+)%, worst ([0-9.]+)%",
                             self.text, re.M)
            self.assertIsNotNone(line, name)
            self.assertEqual(int(line.group(1)), len(sel))
            self.assertEqual(line.group(2), f"{statistics.median(sel) * 100:.1f}")
            self.assertEqual(line.group(3), f"{max(sel) * 100:.1f}")
        # Each row's printed error is the one summarized.
        for r in self.rows:
            if r["error"] is not None:
                self.assertIn(f"| {r['error']:+.1%} |", self.text)

    def test_method_is_stated_in_the_output(self):
        self.assertIn("held-out: R solved", self.text)
        self.assertIn("other sources: no such row in the source", self.text)
        self.assertIn(f"R = {pub.ROOFLINE_EFFICIENCY} x the GPU's dense bf16 peak", self.text)


if __name__ == "__main__":
    unittest.main()
