"""Pools group identical nodes (partition, GPU model, shape); a job's demand is stated per pool.

A job's request has Slurm's shape: `--gres=gpu:G` is per node and a batch job gets one node unless it
asks for more, so a job that some eligible node can hold runs on one node, never split over smaller
nodes (a 4-GPU job on 2 x 4-GPU + 2 x 2-GPU nodes can only use the 4-GPU ones). Only a job larger than
every eligible node, or one that asked for several nodes, spans several nodes of one pool (DL workers
are homogeneous, and a placement never mixes GPU models). CPUs and memory a job did not request are its
GPU share of the node it lands on, so they never bind on their own.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from rltuned.domain import ClusterSpec, Job


@dataclass(frozen=True, slots=True)
class Pool:
    nodes: tuple[int, ...]
    partition: str
    gpu_type: str
    gpus: int
    cpus: int
    mem_mb: int
    array: npt.NDArray[np.int64] = field(init=False, compare=False, repr=False)
    """`nodes` as compiled placement reads them."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "array", np.array(self.nodes, dtype=np.int64))


@dataclass(frozen=True, slots=True)
class Demand:
    """What a job needs, per eligible pool: `pools[i]` with `cpu_per_gpu[i]`, `mem_per_gpu[i]`."""

    gpus: int
    pools: tuple[int, ...]
    cpu_per_gpu: tuple[float, ...]
    mem_per_gpu: tuple[float, ...]
    shape: tuple[object, ...] = ()
    """Jobs of equal shape differ only in GPU count, and within a shape more GPUs never fit where fewer
    did not: same pools, per-GPU CPU and memory, and single- or multi-node in each pool."""
    one_node: tuple[tuple[int, int], ...] = field(init=False, compare=False, repr=False)
    """Per eligible pool, the CPUs and memory of the whole job on one node (`slice_cpus`, `slice_mem`
    of all its GPUs): what a one-node placement tests at every node, computed once."""

    def __post_init__(self) -> None:
        g = self.gpus
        whole = tuple((self.slice_cpus(k, g), self.slice_mem(k, g)) for k in range(len(self.pools)))
        object.__setattr__(self, "one_node", whole)

    def slice_cpus(self, k: int, gpus: int) -> int:
        return math.ceil(gpus * self.cpu_per_gpu[k] - 1e-9)

    def slice_mem(self, k: int, gpus: int) -> int:
        return math.ceil(gpus * self.mem_per_gpu[k] - 1e-9)


def build_pools(cluster: ClusterSpec) -> tuple[Pool, ...]:
    groups: dict[tuple[str, str, int, int, int], list[int]] = {}
    for index, n in enumerate(cluster.nodes):
        groups.setdefault((n.partition, n.gpu_type, n.gpus, n.cpus, n.mem_mb), []).append(index)
    return tuple(Pool(tuple(nodes), *shape) for shape, nodes in groups.items())


def node_pool_index(cluster: ClusterSpec, pools: tuple[Pool, ...]) -> tuple[int, ...]:
    owner = [0] * len(cluster.nodes)
    for p, pool in enumerate(pools):
        for n in pool.nodes:
            owner[n] = p
    return tuple(owner)


def demand_for(job: Job, pools: tuple[Pool, ...]) -> Demand | None:
    """The job's demand, or None when no pool could ever hold it (the caller drops and counts it).

    A job restricted to a partition the cluster does not have may use any node (traces name virtual
    clusters the presets do not model).
    """
    if job.gpus < 1:
        return None
    restrict = job.partition if any(p.partition == job.partition for p in pools) else None
    chosen: list[int] = []
    cpg: list[float] = []
    mpg: list[float] = []
    for index, pool in enumerate(pools):
        if job.gpu_type is not None and job.gpu_type != pool.gpu_type:
            continue
        if restrict is not None and pool.partition != restrict:
            continue
        cpu = job.cpus / job.gpus if job.cpus else pool.cpus / pool.gpus
        mem = job.mem_mb / job.gpus if job.mem_mb else pool.mem_mb / pool.gpus
        if _ever_fits(job.gpus, cpu, mem, pool):
            chosen.append(index)
            cpg.append(cpu)
            mpg.append(mem)
    if not chosen:
        return None
    chosen, cpg, mpg = _slurm_shape(job, pools, chosen, cpg, mpg)
    if not chosen:
        return None
    multi = tuple(job.gpus > pools[p].gpus for p in chosen)
    shape = (tuple(chosen), tuple(cpg), tuple(mpg), multi)
    return Demand(job.gpus, tuple(chosen), tuple(cpg), tuple(mpg), shape)


def demands_for(jobs: Sequence[Job], pools: tuple[Pool, ...]) -> list[Demand | None]:
    """`demand_for` of every job; jobs that ask for the same resources share one answer (a trace repeats
    a few request shapes, and a run builds every job's demand before it starts)."""
    memo: dict[tuple[object, ...], Demand | None] = {}
    out: list[Demand | None] = []
    for job in jobs:
        key = (job.gpus, job.gpu_type, job.partition, job.cpus, job.mem_mb, job.nodes)
        if key not in memo:
            memo[key] = demand_for(job, pools)
        out.append(memo[key])
    return out


def _slurm_shape(
    job: Job, pools: tuple[Pool, ...], chosen: list[int], cpg: list[float], mpg: list[float]
) -> tuple[list[int], list[float], list[float]]:
    """The pools left once the request keeps Slurm's shape: one node when the job asked for one, or
    said nothing and some pool's nodes can hold it; several nodes only where it asked for several."""
    one = [k for k, p in enumerate(chosen) if job.gpus <= pools[p].gpus]
    if job.nodes > 1:
        keep = [k for k, p in enumerate(chosen) if job.gpus > pools[p].gpus] or list(range(len(chosen)))
    elif job.nodes == 1 or one:
        keep = one
    else:
        keep = list(range(len(chosen)))
    return [chosen[k] for k in keep], [cpg[k] for k in keep], [mpg[k] for k in keep]


def _ever_fits(gpus: int, cpu_per_gpu: float, mem_per_gpu: float, pool: Pool) -> bool:
    per_node = min(pool.gpus, gpus)
    if math.ceil(per_node * cpu_per_gpu - 1e-9) > pool.cpus:
        return False
    if math.ceil(per_node * mem_per_gpu - 1e-9) > pool.mem_mb:
        return False
    return gpus <= pool.gpus * len(pool.nodes)
