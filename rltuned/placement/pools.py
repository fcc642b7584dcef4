"""Pools group identical nodes (partition, GPU model, shape); a job's demand is stated per pool.

A single-node job fits on one node; a job larger than a node spans several nodes of one pool (DL workers
are homogeneous, and a placement never mixes GPU models). CPUs and memory a job did not request are its
GPU share of the node it lands on, so they never bind on their own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rltuned.domain import ClusterSpec, Job


@dataclass(frozen=True, slots=True)
class Pool:
    nodes: tuple[int, ...]
    partition: str
    gpu_type: str
    gpus: int
    cpus: int
    mem_mb: int


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
    multi = tuple(job.gpus > pools[p].gpus for p in chosen)
    shape = (tuple(chosen), tuple(cpg), tuple(mpg), multi)
    return Demand(job.gpus, tuple(chosen), tuple(cpg), tuple(mpg), shape)


def _ever_fits(gpus: int, cpu_per_gpu: float, mem_per_gpu: float, pool: Pool) -> bool:
    per_node = min(pool.gpus, gpus)
    if math.ceil(per_node * cpu_per_gpu - 1e-9) > pool.cpus:
        return False
    if math.ceil(per_node * mem_per_gpu - 1e-9) > pool.mem_mb:
        return False
    return gpus <= pool.gpus * len(pool.nodes)
