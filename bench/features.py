"""Feature encoding latency: how long `rltuned.features.encode` takes on a busy cluster.

Usage: python bench/features.py [--encodes 200] [--pending 300] [--seed 0]

The snapshot: 64 nodes (24 x 8-GPU A100, 24 x 4-GPU V100, 16 x 2-GPU T4 = 320 GPUs), loaded to ~85% of
their GPUs by jobs placed with the greedy pack placer (so the allocations are ones the simulator could
make), and `--pending` queued jobs: mostly 1-8 GPUs with some multi-node ones, a third pinned to a GPU
model, a quarter with explicit CPUs and memory, estimates log-uniform from 1 minute to 3 days, submitted
over the last day. Target: p50 and p95 <= 2 ms per encode (256 visible jobs) on a 2-core machine.
Every encode is timed whole (ranking included), wall clock, after warm-up encodes (one for the
same-snapshot runs, 20 for the 50 snapshots and the next ticks): first the same snapshot over and over
under three base policies, each encode afresh (the last tick's kept order and table dropped first,
untimed), then 50 different snapshots in turn (new queues, new free capacity), then the next ticks of
one queue (the same jobs and free capacity 60 s later each time: the kept order and table serve, and
only the age columns are computed), plus the very first encode (cold caches: pools and job shapes
built).
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import time
from dataclasses import replace

from rltuned.domain import ClusterSnapshot, ClusterSpec, Job, Node, RunningJob
from rltuned.features import encode
from rltuned.features.encode import forget
from rltuned.placement.greedy import FreeCapacity, place
from rltuned.placement.pools import build_pools, demand_for
from rltuned.policies import make_policy

SHAPES = (("A100", 8, 24), ("V100", 4, 24), ("T4", 2, 16))
GPU_CHOICES = (1, 1, 1, 1, 2, 2, 2, 4, 4, 8, 8, 16, 32)


def busy_cluster() -> ClusterSpec:
    nodes: list[Node] = []
    for gpu_type, gpus, count in SHAPES:
        for _ in range(count):
            nodes.append(Node(f"{gpu_type.lower()}-{len(nodes)}", gpu_type, gpus, gpus * 8, gpus * 65536))
    return ClusterSpec("bench", tuple(nodes))


def random_job(rng: random.Random, jid: int, now: float) -> Job:
    gpus = rng.choice(GPU_CHOICES)
    explicit = rng.random() < 0.25
    return Job(
        jid,
        submit=now - rng.uniform(0, 86400),
        gpus=gpus,
        time_limit=60 * 10 ** rng.uniform(0, 3.64),
        user=f"u{rng.randrange(40)}",
        account=f"vc{rng.randrange(8)}",
        gpu_type=rng.choice(("A100", "V100", "T4")) if rng.random() < 0.33 else None,
        cpus=gpus * rng.choice((2, 4, 6)) if explicit else 0,
        mem_mb=gpus * rng.choice((16384, 32768)) if explicit else 0,
    )


def busy_snapshot(pending: int, seed: int) -> ClusterSnapshot:
    rng = random.Random(seed)
    cluster = busy_cluster()
    pools = build_pools(cluster)
    nodes = cluster.nodes
    free = FreeCapacity([n.gpus for n in nodes], [n.cpus for n in nodes], [n.mem_mb for n in nodes])
    now = 10 * 86400.0
    running: list[RunningJob] = []
    target = 0.15 * cluster.total_gpus
    jid = 0
    while sum(free.gpus) > target and jid < 10_000:
        jid += 1
        job = random_job(rng, jid, now)
        demand = demand_for(job, pools)
        alloc = place(demand, pools, free, rng.choice(("pack", "spread"))) if demand else None
        if alloc is not None:
            free.take(alloc)
            running.append(RunningJob(job, now - rng.uniform(0, 3600), alloc))
    queue = tuple(random_job(rng, 100_000 + i, now) for i in range(pending))
    return ClusterSnapshot(
        now,
        cluster,
        tuple(free.gpus),
        tuple(free.cpus),
        tuple(free.mem),
        queue,
        tuple(running),
    )


def measure(
    snapshots: list[ClusterSnapshot], policy_name: str, encodes: int, *, afresh: bool = True
) -> dict[str, float]:
    """Encodes cycling over `snapshots` (queues differ, so the shape cache sees new jobs); `afresh`
    drops what the last encode kept before each."""
    policy = make_policy(policy_name)
    for snapshot in snapshots[:20]:
        encode(snapshot, policy)
    times = []
    for i in range(encodes):
        snapshot = snapshots[i % len(snapshots)]
        if afresh:
            forget()
        t0 = time.perf_counter()
        encode(snapshot, policy)
        times.append((time.perf_counter() - t0) * 1e3)
    times.sort()
    return {
        "p50_ms": statistics.median(times),
        "p95_ms": times[int(0.95 * (len(times) - 1))],
        "max_ms": times[-1],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--encodes", type=int, default=200)
    parser.add_argument("--pending", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    snapshot = busy_snapshot(args.pending, args.seed)
    t0 = time.perf_counter()
    obs = encode(snapshot, make_policy("fcfs"))
    cold_ms = (time.perf_counter() - t0) * 1e3
    varied = [busy_snapshot(args.pending, args.seed + 1 + i) for i in range(50)]
    report: dict[str, object] = {
        "machine": platform.processor() or platform.machine(),
        "python": platform.python_version(),
        "cluster": snapshot.cluster.describe(),
        "free_gpus": sum(snapshot.free_gpus),
        "running": len(snapshot.running),
        "pending": len(snapshot.pending),
        "visible": int(obs.mask.sum()),
        "cluster_cff": round(obs.cff, 3),
        "sampled": obs.sampled,
    }
    report["cold_first_encode_ms"] = round(cold_ms, 3)
    for name in ("fcfs", "wfp3", "multifactor"):
        report[name] = {k: round(v, 3) for k, v in measure([snapshot], name, args.encodes).items()}
    report["fcfs_50_snapshots"] = {k: round(v, 3) for k, v in measure(varied, "fcfs", args.encodes).items()}
    ticks = [replace(snapshot, now=snapshot.now + 60.0 * i) for i in range(args.encodes)]
    next_tick = measure(ticks, "fcfs", args.encodes, afresh=False)
    report["fcfs_next_ticks"] = {k: round(v, 3) for k, v in next_tick.items()}
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
