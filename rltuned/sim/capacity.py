"""A run's cluster capacity: free resources per node, free GPUs per pool, and the running jobs' releases.

One object owns every count a start or a completion changes, so the scheduling code reads capacity and
never keeps a copy of its own: the per-pool totals reject a job in O(pools) before any per-node work
(`may_fit`), and `running` lists the running jobs by the time their estimates say they end, which is
what EASY's reservation walks (`sim/easy.py`).
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from rltuned.domain import Allocation, ClusterSpec
from rltuned.placement.greedy import FreeCapacity
from rltuned.placement.pools import Demand, Pool


class Capacity:
    __slots__ = ("free", "node_pool", "pool_free", "pools", "running")

    def __init__(self, cluster: ClusterSpec, pools: tuple[Pool, ...], node_pool: Sequence[int]) -> None:
        nodes = cluster.nodes
        self.pools = pools
        self.node_pool = node_pool
        self.free = FreeCapacity([n.gpus for n in nodes], [n.cpus for n in nodes], [n.mem_mb for n in nodes])
        self.pool_free = [sum(nodes[i].gpus for i in p.nodes) for p in pools]
        self.running: list[tuple[float, int, Allocation]] = []
        """(expected end, job index, allocation) of every running job, sorted."""

    def may_fit(self, demand: Demand) -> bool:
        """Some eligible pool has as many free GPUs as the job asks for (placement fails otherwise).
        `most_free` answers it for every set of pools at once, and `easy.reserve` on released capacity."""
        pool_free, gpus = self.pool_free, demand.gpus
        for p in demand.pools:  # noqa: SIM110 (before every placement: any() over a generator costs more)
            if pool_free[p] >= gpus:
                return True
        return False

    def most_free(self, groups: Sequence[tuple[int, ...]]) -> list[int]:
        """For each set of pools, the most free GPUs any one of them has."""
        pool_free = self.pool_free
        most = []
        for g in groups:  # read after every backfilled start: a plain loop, no max() over a list
            m = pool_free[g[0]]
            for p in g[1:]:
                if pool_free[p] > m:  # noqa: PLR1730 (a call to max() costs more)
                    m = pool_free[p]
            most.append(m)
        return most

    def take(self, alloc: Allocation, expected_end: float, idx: int) -> None:
        """`FreeCapacity.take` and the pools' totals in one pass over the slices (an SWF job has a
        slice per node, tens of them)."""
        free, node_pool, pool_free = self.free, self.node_pool, self.pool_free
        g, c, m = free.gpus, free.cpus, free.mem
        for node, gpus, cpus, mem in alloc:
            g[node] -= gpus
            c[node] -= cpus
            m[node] -= mem
            pool_free[node_pool[node]] -= gpus
        bisect.insort(self.running, (expected_end, idx, alloc))

    def give(self, alloc: Allocation, expected_end: float, idx: int) -> None:
        """`FreeCapacity.give` and the pools' totals in one pass, as `take`."""
        free, node_pool, pool_free = self.free, self.node_pool, self.pool_free
        g, c, m = free.gpus, free.cpus, free.mem
        for node, gpus, cpus, mem in alloc:
            g[node] += gpus
            c[node] += cpus
            m[node] += mem
            pool_free[node_pool[node]] += gpus
        at = bisect.bisect_left(self.running, (expected_end, idx))
        del self.running[at]

    def running_indices(self) -> list[int]:
        return [idx for _, idx, _ in self.running]
