"""Top-K placement: where the solver would start the best-ranked jobs that fit now.

The MILP places the top K jobs that could ever fit jointly, with the next K as lookahead, on what is
free now; a job it cannot place gets none (Slurm starts it later, or never on this cluster and says
so). A solver failure or timeout falls back to greedy pack. One rule, used by the daemon's tick and by
the simulator's.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rltuned.domain import Allocation, ClusterSnapshot, ClusterSpec, Job
from rltuned.errors import SolverError
from rltuned.placement.greedy import FreeCapacity, place
from rltuned.placement.milp import MilpConfig, milp_place
from rltuned.placement.pools import Demand, Pool, build_pools, demands_for


@dataclass(frozen=True)
class Placement:
    """Where the solver would start a job now, by node name, and whether it shares nodes (pack)."""

    nodes: tuple[str, ...]
    gpu_type: str
    pack: bool


@dataclass(frozen=True)
class Placements:
    by_job: Mapping[int, Placement]
    outcome: str
    """"optimal", "fallback" (solver failed: greedy pack), "idle" (nothing to place) or "off" (no
    placement lever is on, so nothing would be written: the solver is not asked)."""
    detail: str = ""
    seconds: float = 0.0


def place_top(snapshot: ClusterSnapshot, order: Sequence[Job], config: MilpConfig) -> Placements:
    started = time.perf_counter()
    pools = pools_of(snapshot.cluster)
    top = order[: 2 * config.k]
    demands = list(zip(top, demands_for(top, pools), strict=True))  # one demand per request shape
    usable = [(job, d) for job, d in demands if d is not None]  # None: can never fit, Slurm will say so
    ranked, lookahead = usable[: config.k], usable[config.k :]
    if not ranked or not any(snapshot.free_gpus):
        return Placements({}, "idle", seconds=time.perf_counter() - started)
    free = FreeCapacity(list(snapshot.free_gpus), list(snapshot.free_cpus), list(snapshot.free_mem_mb))
    try:
        allocs = milp_place([d for _, d in ranked], [d for _, d in lookahead], pools, free.copy(), config)
        outcome, detail = "optimal", ""
    except SolverError as exc:
        allocs = _greedy([d for _, d in ranked], pools, free.copy())
        outcome, detail = "fallback", str(exc)
    placed = {
        job.id: _describe(snapshot, alloc, free)
        for (job, _), alloc in zip(ranked, allocs, strict=True)
        if alloc is not None
    }
    return Placements(placed, outcome, detail, time.perf_counter() - started)


@functools.lru_cache(maxsize=8)
def pools_of(cluster: ClusterSpec) -> tuple[Pool, ...]:
    """A cluster's pools, built once: the simulator asks every tick for the same cluster."""
    return build_pools(cluster)


def _greedy(demands: Sequence[Demand], pools: Sequence[Pool], free: FreeCapacity) -> list[Allocation | None]:
    out: list[Allocation | None] = []
    for demand in demands:
        alloc = place(demand, pools, free, "pack")
        if alloc is not None:
            free.take(alloc)
        out.append(alloc)
    return out


def _describe(snapshot: ClusterSnapshot, alloc: Allocation, free: FreeCapacity) -> Placement:
    """Pack when the job would share a node with other jobs' GPUs; spread when it owns whole nodes."""
    nodes = snapshot.cluster.nodes
    shares = any(s.gpus < nodes[s.node].gpus or free.gpus[s.node] < nodes[s.node].gpus for s in alloc)
    return Placement(tuple(nodes[s.node].name for s in alloc), nodes[alloc[0].node].gpu_type, shares)
