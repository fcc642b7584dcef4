"""MILP placement latency: K = 8 ranked jobs (+ 8 lookahead) on a 64-node heterogeneous cluster.

Usage: python bench/placement.py [--instances 300] [--cvxpy-instances 30]

Instances: 64 nodes (24 x 8-GPU P40, 24 x 4-GPU V100, 16 x 2-GPU P100), each node busy at a random level,
and 16 jobs whose GPU counts are drawn from the bundled Philly trace's distribution (seed 0). Timed per
instance (perf_counter): `milp_place` end to end (candidates + matrix + GLPK through swiglpk), its two
halves (building the problem; solving it through swiglpk), and, as same-run references, the same built
problem solved through cvxpy + GLPK_MI (cvxpy compiles it on every call) and greedy pack placement of
the same 8 jobs one by one.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

from rltuned.domain import ClusterSpec, Job, Node
from rltuned.placement.greedy import FreeCapacity, place
from rltuned.placement.milp import MilpConfig, build_problem, milp_place, solve_cvxpy, solve_glpk
from rltuned.placement.pools import build_pools, demand_for
from rltuned.traces import load_trace
from rltuned.traces.bundled import resolve_trace


def make_cluster() -> ClusterSpec:
    nodes = [Node(f"p40-{i}", "P40", 8, 64, 524288) for i in range(24)]
    nodes += [Node(f"v100-{i}", "V100", 4, 32, 262144) for i in range(24)]
    nodes += [Node(f"p100-{i}", "P100", 2, 16, 131072) for i in range(16)]
    return ClusterSpec("bench-64", tuple(nodes))


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, default=300)
    parser.add_argument("--cvxpy-instances", type=int, default=30)
    args = parser.parse_args()
    spec = make_cluster()
    pools = build_pools(spec)
    sizes = np.array([j.gpus for j in load_trace(resolve_trace("philly")).jobs if j.gpus <= 16])
    rng = np.random.default_rng(0)
    config = MilpConfig(k=8, time_limit_ms=1000.0)
    milp_ms, build_ms, solve_ms, greedy_ms, cvx_ms = [], [], [], [], []
    for i in range(args.instances):
        busy = [int(rng.integers(0, n.gpus + 1)) for n in spec.nodes]
        gpus = [n.gpus - b for n, b in zip(spec.nodes, busy, strict=True)]
        free = FreeCapacity(gpus, [g * 8 for g in gpus], [g * 65536 for g in gpus])
        jobs = [Job(k, 0.0, int(g), runtime=1.0) for k, g in enumerate(rng.choice(sizes, 16))]
        demands = [d for d in (demand_for(j, pools) for j in jobs) if d is not None]
        ranked, ahead = demands[:8], demands[8:]
        t0 = time.perf_counter()
        milp_place(ranked, ahead, pools, free, config)
        milp_ms.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        problem = build_problem(ranked, ahead, pools, free, config)
        t1 = time.perf_counter()
        solve_glpk(problem, config.time_limit_ms)
        build_ms.append((t1 - t0) * 1000)
        solve_ms.append((time.perf_counter() - t1) * 1000)
        scratch = free.copy()
        t0 = time.perf_counter()
        for d in ranked:
            alloc = place(d, pools, scratch, "pack")
            if alloc is not None:
                scratch.take(alloc)
        greedy_ms.append((time.perf_counter() - t0) * 1000)
        if i < args.cvxpy_instances:
            t0 = time.perf_counter()
            solve_cvxpy(problem)
            cvx_ms.append((time.perf_counter() - t0) * 1000)
    report = {
        "instances": args.instances,
        "milp_swiglpk_ms": {
            "p50": statistics.median(milp_ms),
            "p95": percentile(milp_ms, 95),
            "max": max(milp_ms),
        },
        "build_problem_ms": {"p50": statistics.median(build_ms), "p95": percentile(build_ms, 95)},
        "solve_swiglpk_ms": {"p50": statistics.median(solve_ms), "p95": percentile(solve_ms, 95)},
        "solve_cvxpy_ms": {"p50": statistics.median(cvx_ms), "p95": percentile(cvx_ms, 95), "n": len(cvx_ms)},
        "greedy_pack_ms": {"p50": statistics.median(greedy_ms), "p95": percentile(greedy_ms, 95)},
    }
    report["cvxpy_over_swiglpk_solve_p50"] = (
        report["solve_cvxpy_ms"]["p50"] / report["solve_swiglpk_ms"]["p50"]
    )
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
