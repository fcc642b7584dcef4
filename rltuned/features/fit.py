"""Where each pending job could start now: the greedy placer's verdict, for many jobs and nodes at once.

`greedy.place` answers for one job with Python loops; the features need the answer for up to 256 jobs at
every decision. Jobs of one *shape* (GPUs, GPU model, partition, requested CPUs, memory and nodes) have the
same demand, so the demand (`pools.demand_for`) is computed once per shape and cached per cluster, and the fit
is a (shape x node) matrix. The arithmetic, including the 1e-9 slack, mirrors `greedy.place` so the
verdicts agree exactly (tests/features checks this on random snapshots):

- a job no larger than a pool's nodes fits if one eligible node has its GPUs, CPUs and memory free;
- a larger job fits if, in one eligible pool, the GPUs usable on each node (free GPUs, cut by the CPUs and
  memory the job needs per GPU) add up to its request.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from rltuned.domain import ClusterSpec, Job
from rltuned.placement.pools import Pool, build_pools, demand_for, node_pool_index

SLACK = 1e-9
"""The rounding slack `Demand.slice_cpus` and `greedy._usable_nodes` use; kept identical on purpose."""

MAX_SHAPES = 65536
"""The shape cache is cleared past this size, so a long-running daemon's memory stays bounded."""

Floats = npt.NDArray[np.float64]
Bools = npt.NDArray[np.bool_]
ShapeKey = tuple[int, str | None, str, int, int, int]

# Rows of `Shape.node_rows`.
ELIGIBLE, _SINGLE, _NEED_CPUS, _NEED_MEM, CPU_PER_GPU, MEM_PER_GPU = range(6)


@dataclass(frozen=True, slots=True, eq=False)
class Shape:
    """A demand laid out per node: which nodes may host the job, and what one node must have free."""

    gpus: int
    node_rows: Floats
    """[6, nodes]: eligible, single-node, CPUs and memory a single-node slice needs, CPUs and memory per GPU
    (0 = not limited). All zero for a job no pool could ever hold."""
    pool_eligible: Bools
    pool_multi: Bools
    """[pools]: the job spans several nodes of this pool (it is larger than one node)."""


@dataclass(frozen=True, slots=True, eq=False)
class ClusterArrays:
    """A cluster's fixed shape as arrays, with its cache of job shapes."""

    cluster: ClusterSpec
    pools: tuple[Pool, ...]
    node_pool: npt.NDArray[np.intp]
    gpus: Floats
    cpus: Floats
    mem: Floats
    pool_onehot: Floats
    """[nodes, pools]: 1 where the node belongs to the pool, so (x @ pool_onehot) sums x per pool."""
    shapes: dict[ShapeKey, Shape] = field(default_factory=dict)

    @property
    def total_gpus(self) -> float:
        return float(self.gpus.sum())

    def shape(self, job: Job) -> Shape:
        key = (job.gpus, job.gpu_type, job.partition, job.cpus, job.mem_mb, job.nodes)
        found = self.shapes.get(key)
        if found is None:
            if len(self.shapes) >= MAX_SHAPES:
                self.shapes.clear()
            found = self.shapes[key] = self._build_shape(job)
        return found

    def _build_shape(self, job: Job) -> Shape:
        n_nodes, n_pools = len(self.node_pool), len(self.pools)
        rows = np.zeros((6, n_nodes))
        eligible = np.zeros(n_pools, dtype=np.bool_)
        multi = np.zeros(n_pools, dtype=np.bool_)
        # demand_for returns None for a job of no GPUs, but divides by its GPUs first when it asked for
        # CPUs or memory, so such jobs are answered here.
        demand = demand_for(job, self.pools) if job.gpus >= 1 else None
        if demand is None:
            return Shape(job.gpus, rows, eligible, multi)
        for k, p in enumerate(demand.pools):
            pool = self.pools[p]
            nodes = list(pool.nodes)
            single = demand.gpus <= pool.gpus
            eligible[p], multi[p] = True, not single
            rows[ELIGIBLE, nodes] = 1.0
            rows[_SINGLE, nodes] = float(single)
            # Exactly Demand.slice_cpus / slice_mem for the whole request on one node.
            rows[_NEED_CPUS, nodes] = math.ceil(demand.gpus * demand.cpu_per_gpu[k] - SLACK)
            rows[_NEED_MEM, nodes] = math.ceil(demand.gpus * demand.mem_per_gpu[k] - SLACK)
            rows[CPU_PER_GPU, nodes] = demand.cpu_per_gpu[k]
            rows[MEM_PER_GPU, nodes] = demand.mem_per_gpu[k]
        return Shape(job.gpus, rows, eligible, multi)


_last: tuple[ClusterSpec, ClusterArrays] | None = None
_by_value: dict[ClusterSpec, ClusterArrays] = {}


def cluster_arrays(cluster: ClusterSpec) -> ClusterArrays:
    """The arrays for `cluster`, cached: by identity first (cheap), then by value (the Slurm adapter may
    build an equal spec on every tick), keeping the few most recent clusters. The identity remembered
    is the one last asked for, not the one the arrays were built from: a simulated run often holds an
    equal copy of the spec that first built them, and hashing a spec walks all its nodes (30 us a
    tick on `philly-slice`)."""
    global _last  # noqa: PLW0603 - a one-entry identity cache in front of the value cache
    if _last is not None and _last[0] is cluster:
        return _last[1]
    found = _by_value.get(cluster)
    if found is None:
        if len(_by_value) >= 8:
            _by_value.pop(next(iter(_by_value)))
        found = _by_value[cluster] = _build_arrays(cluster)
    _last = (cluster, found)
    return found


def _build_arrays(cluster: ClusterSpec) -> ClusterArrays:
    pools = build_pools(cluster)
    node_pool = np.asarray(node_pool_index(cluster, pools), dtype=np.intp)
    onehot = np.zeros((len(cluster.nodes), len(pools)))
    onehot[np.arange(len(cluster.nodes)), node_pool] = 1.0
    return ClusterArrays(
        cluster,
        pools,
        node_pool,
        np.array([n.gpus for n in cluster.nodes], dtype=np.float64),
        np.array([n.cpus for n in cluster.nodes], dtype=np.float64),
        np.array([n.mem_mb for n in cluster.nodes], dtype=np.float64),
        onehot,
    )


@dataclass(frozen=True, slots=True, eq=False)
class Fit:
    """The fit of each shape (row) on the current free capacity."""

    rows: Floats
    """[shapes, 6, nodes]: the shapes' `node_rows`, stacked."""
    eligible: Bools
    """[shapes, nodes]: the node belongs to a pool the job may use."""
    can_start: Bools
    """[shapes]: `greedy.place(...) is not None`."""
    ways: npt.NDArray[np.int64]
    """[shapes]: nodes the job could use now: for a single-node pool, nodes that hold it whole; for a
    multi-node pool where it fits, nodes with usable room. 0 when it cannot start."""


def fit_now(
    arrays: ClusterArrays, shapes: Sequence[Shape], free_gpus: Floats, free_cpus: Floats, free_mem: Floats
) -> Fit:
    """The greedy placer's verdict for every shape at once (see the module docstring)."""
    if not shapes:
        rows = np.zeros((0, 6, len(arrays.node_pool)))
        return Fit(rows, rows[:, 0] > 0, np.zeros(0, np.bool_), np.zeros(0, np.int64))
    rows = np.stack([s.node_rows for s in shapes])
    gpus = np.array([float(s.gpus) for s in shapes])[:, None]
    eligible = rows[:, ELIGIBLE] > 0
    single = eligible & (rows[:, _SINGLE] > 0)
    whole = (
        single & (free_gpus >= gpus) & (free_cpus >= rows[:, _NEED_CPUS]) & (free_mem >= rows[:, _NEED_MEM])
    )
    spanning = eligible & ~single
    if spanning.any():
        usable = _usable_gpus(rows, free_gpus, free_cpus, free_mem)
        usable = np.where(spanning, usable, 0.0)
        pool_multi = np.stack([s.pool_multi for s in shapes])
        pool_fits = pool_multi & (usable @ arrays.pool_onehot >= gpus)
        spans = (usable > 0) & pool_fits[:, arrays.node_pool]
        can_start = np.any(whole, axis=1) | np.any(pool_fits, axis=1)
        ways = np.sum(whole | spans, axis=1)
    else:
        can_start = np.any(whole, axis=1)
        ways = np.sum(whole, axis=1)
    return Fit(rows, eligible, np.asarray(can_start, dtype=np.bool_), ways.astype(np.int64))


def _usable_gpus(rows: Floats, free_gpus: Floats, free_cpus: Floats, free_mem: Floats) -> Floats:
    """GPUs a multi-node job could take on each node: free GPUs, cut by the CPUs and memory it needs per
    GPU, as `greedy._usable_nodes` computes them (int() truncation = floor for the non-negative case; a
    negative quotient leaves no usable GPU either way)."""
    usable = np.broadcast_to(free_gpus, rows[:, 0].shape)
    for per_gpu, free in ((rows[:, CPU_PER_GPU], free_cpus), (rows[:, MEM_PER_GPU], free_mem)):
        limited = per_gpu > 0
        with np.errstate(divide="ignore", invalid="ignore"):
            cap = np.floor((free + SLACK) / np.where(limited, per_gpu, 1.0))
        usable = np.minimum(usable, np.where(limited, cap, np.inf))
    out: Floats = np.where((free_gpus > 0) & (usable > 0), usable, 0.0)
    return out
