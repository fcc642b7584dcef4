"""Simulator throughput: how many jobs per second the EASY-backfilling simulator schedules.

Usage: python bench/simulate.py [--repeat 3]

Measures, on this machine, with FCFS + EASY backfilling and pack placement:
1. the whole bundled Philly trace (74,022 jobs) on the `philly` preset (target >= 10,000 jobs/s);
2. 10 random 1,024-job Philly windows (target: each under 0.1 s);
3. 10 random 1,024-job windows of the NASA iPSC SWF log on `swf-128` (the processor-only setting in which
   RLScheduler's simulator schedules ~26,000 jobs/s), for scale.
Trace loading and estimate sampling are excluded; only `Simulator.run` is timed (wall clock, perf_counter),
each run after `settle()` (collect, then freeze what is alive).
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import statistics
import time

from rltuned.clusters import load_cluster
from rltuned.domain import ClusterSpec, Job
from rltuned.estimates import apply_estimates
from rltuned.policies import make_policy
from rltuned.sim.metrics import compute_metrics
from rltuned.sim.runner import choose_windows
from rltuned.sim.simulator import SimConfig, Simulator
from rltuned.traces import load_trace
from rltuned.traces.bundled import resolve_trace


def settle() -> None:
    """Collect, then freeze every object alive (the trace, earlier results) out of the collector's reach, so
    that a timed run pays only for its own garbage: otherwise whether a full collection over the whole
    trace falls inside a run of a few tenths of a second moves its figure by up to 30%."""
    gc.collect()
    gc.freeze()


def timed_run(cluster: ClusterSpec, jobs: list[Job]) -> tuple[float, float]:
    simulator = Simulator(cluster, make_policy("fcfs"), SimConfig(placement="pack", backfill=True))
    settle()
    t0 = time.perf_counter()
    result = simulator.run(jobs)
    wall = time.perf_counter() - t0
    return wall, compute_metrics(result).avg_wait_s


def whole_trace(repeat: int) -> dict[str, float]:
    jobs, _ = apply_estimates(load_trace(resolve_trace("philly")).jobs, "qssf-noise", 0)
    cluster = load_cluster("philly")
    walls, wait = [], 0.0
    for _ in range(repeat):
        wall, wait = timed_run(cluster, jobs)
        walls.append(wall)
    best, median = min(walls), statistics.median(walls)
    return {
        "jobs": len(jobs),
        "median_s": median,
        "median_jobs_per_s": len(jobs) / median,
        "best_jobs_per_s": len(jobs) / best,
        "fcfs_avg_wait_s": wait,
    }


def windows(trace: str, preset: str, estimates: str) -> dict[str, float]:
    jobs, _ = apply_estimates(load_trace(resolve_trace(trace)).jobs, estimates, 0)
    cluster = load_cluster(preset)
    walls = []
    for w in choose_windows(len(jobs), 1024, None, 10, seed=0):
        wall, _ = timed_run(cluster, jobs[w.start : w.stop])
        walls.append(wall)
    return {
        "windows": len(walls),
        "median_s": statistics.median(walls),
        "max_s": max(walls),
        "jobs_per_s": 1024 * len(walls) / sum(walls),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    report = {
        "machine": f"{platform.processor() or platform.machine()}, Python {platform.python_version()}",
        "philly_whole_trace": whole_trace(args.repeat),
        "philly_1024_windows": windows("philly", "philly", "qssf-noise"),
        "nasa_swf_1024_windows": windows("nasa", "swf-128", "exact"),
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
