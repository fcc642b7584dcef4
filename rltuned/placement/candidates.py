"""Candidate placements of one job on the current free capacity, for the MILP to choose among.

Within a pool, nodes with the same free GPUs, CPUs and memory are interchangeable, so a single-node job
gets one candidate node per distinct free level, up to `per_level` nodes of each (that many jobs may want
the same level at once). A job larger than a node gets node combinations: the greedy pack and spread
placements, and a pack placement that avoids the first one's nodes. Every candidate respects the pool's
GPU model and each node's GPUs, CPUs and memory.
"""

from __future__ import annotations

from collections.abc import Sequence

from rltuned.domain import Allocation, Slice
from rltuned.placement.greedy import FreeCapacity, place
from rltuned.placement.pools import Demand, Pool


def candidates(demand: Demand, pools: Sequence[Pool], free: FreeCapacity, per_level: int) -> list[Allocation]:
    """Distinct feasible allocations, pack-like ones first."""
    found: list[Allocation] = []
    for k, p in enumerate(demand.pools):
        pool = pools[p]
        if demand.gpus <= pool.gpus:
            found.extend(_single_node(demand, k, pool, free, per_level))
    multi = [p for p in demand.pools if demand.gpus > pools[p].gpus]
    if multi:
        found.extend(_multi_node(demand, pools, free))
    unique = list(dict.fromkeys(found))
    unique.sort(key=lambda a: (len(a), sum(free.gpus[s.node] - s.gpus for s in a)))
    return unique


def _single_node(demand: Demand, k: int, pool: Pool, free: FreeCapacity, per_level: int) -> list[Allocation]:
    g = demand.gpus
    need_c, need_m = demand.one_node[k]
    taken: dict[tuple[int, int, int], int] = {}
    out: list[Allocation] = []
    for n in pool.nodes:
        level = (free.gpus[n], free.cpus[n], free.mem[n])
        if level[0] < g or level[1] < need_c or level[2] < need_m:
            continue
        if taken.get(level, 0) >= per_level:
            continue
        taken[level] = taken.get(level, 0) + 1
        out.append((Slice(n, g, need_c, need_m),))
    return out


def _multi_node(demand: Demand, pools: Sequence[Pool], free: FreeCapacity) -> list[Allocation]:
    only_multi = Demand(
        demand.gpus,
        tuple(p for p in demand.pools if demand.gpus > pools[p].gpus),
        tuple(
            c for p, c in zip(demand.pools, demand.cpu_per_gpu, strict=True) if demand.gpus > pools[p].gpus
        ),
        tuple(
            m for p, m in zip(demand.pools, demand.mem_per_gpu, strict=True) if demand.gpus > pools[p].gpus
        ),
    )
    out: list[Allocation] = []
    packed = place(only_multi, pools, free, "pack")
    if packed is None:
        return out
    out.append(packed)
    spread = place(only_multi, pools, free, "spread")
    if spread is not None:
        out.append(spread)
    avoid = {s.node: (0, 0, 0) for s in packed}
    other = place(only_multi, pools, free, "pack", caps=avoid)
    if other is not None:
        out.append(other)
    return out
