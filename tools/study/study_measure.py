"""What one point of a study measured, from its run directory: the step time
and its parts after the warm-up steps, bytes on the wire against theory,
peak memory against the plan (the files docs/telemetry.md describes).

A step's time is the slowest rank's (the job waits for it); its parts are
the mean over ranks. Each figure is the median over the measured steps.
"""
import glob
import json
import os
import statistics

PARTS = {  # record field -> step-record field
    "compute_s": "compute_s",
    "comm_exposed_s": "comm_exposed_s",
    "blocked_on_peers_s": "blocked_on_peers_s",
    "data_s": "data_wait_s",
}


class MeasureError(Exception):
    pass


def _step_records(run_dir):
    """{step: [record of each rank]} from telemetry/rank-*.jsonl."""
    files = sorted(glob.glob(os.path.join(run_dir, "telemetry", "rank-*.jsonl")))
    if not files:
        raise MeasureError(f"{run_dir}/telemetry: no step records (telemetry off?)")
    steps = {}
    for path in files:
        with open(path) as f:
            for line in f:
                try:
                    r = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a record cut short by the end of the job
                steps.setdefault(r["step"], []).append(r)
    return {s: rs for s, rs in steps.items() if len(rs) == len(files)}


def measure(run_dir, warmup):
    """The point's figures; raises MeasureError when the run left too little."""
    path = os.path.join(run_dir, "result.json")
    try:
        with open(path) as f:
            result = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise MeasureError(f"{path}: {e}") from e
    steps = _step_records(run_dir)
    measured = [rs for s, rs in sorted(steps.items()) if s >= warmup]
    if not measured:
        raise MeasureError(f"{run_dir}: no step after the {warmup} warm-up step(s) was recorded by every rank")
    step_s = statistics.median(max(r["step_s"] for r in rs) for rs in measured)
    parts = {name: statistics.median(statistics.fmean(r[field] for r in rs) for rs in measured)
             for name, field in PARTS.items()}
    timing = result.get("timing", {})
    memory = result.get("memory", {})
    return {
        "steps_measured": len(measured),
        "step_s": step_s,
        "parts": parts,
        "samples_per_s": result["global_batch_size"] / step_s,
        "wire_bytes": timing.get("comm_wire_bytes", 0.0),
        "wire_bytes_theory": timing.get("comm_wire_bytes_theory"),
        "peak_bytes": memory.get("peak_bytes"),
        "planned_peak_bytes": memory.get("plan", {}).get("peak_bytes"),
        "parameters": result.get("parameters"),
        "global_batch_size": result["global_batch_size"],
    }
