"""The 17 features of the paper's Table 3, each normalized to [0, 1], for a queue of pending jobs.

Columns, in `FEATURE_NAMES` order (scales in `scales.py`; docs/features.md gives the formulas):

- visible job features: `job_id`, `user`, `gpus`, `account` (the virtual cluster), `gpu_type`,
  `requested_time` (the estimate, never the true runtime), `submit` (the age now - submit), `cpus`, `mem`
  (inferred from the GPU share of the eligible nodes when not requested, as `pools.demand_for` does);
  identity features (`job_id`, `user`, `account`, `gpu_type`) are stable hashes, metadata only;
- cluster features seen by the job: `free_nodes`, `can_schedule_now`, `num_ways_to_schedule`;
- engineered features: `demand_supply_ratio` (eq. 1), `job_size`, `urgency`, `future_availability`
  (eq. 2), `cff` (eq. 3).

A job's eligible nodes are the nodes of the pools `pools.demand_for` gives it (GPU model, partition, and
room for its per-GPU CPUs and memory); a job no pool could ever hold has none.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass, fields
from itertools import compress

import numpy as np
import numpy.typing as npt

from rltuned.domain import ClusterSnapshot, Job
from rltuned.features.fit import (
    CPU_PER_GPU,
    ELIGIBLE,
    MEM_PER_GPU,
    ClusterArrays,
    Fit,
    Shape,
    ShapeKey,
    cluster_arrays,
    fit_now,
)
from rltuned.features.scales import HORIZON_S, MAX_AGE_S, id_unit, log_share, squash, string_unit

FEATURE_NAMES: tuple[str, ...] = (
    "job_id",
    "user",
    "gpus",
    "account",
    "gpu_type",
    "requested_time",
    "submit",
    "cpus",
    "mem",
    "free_nodes",
    "can_schedule_now",
    "num_ways_to_schedule",
    "demand_supply_ratio",
    "job_size",
    "urgency",
    "future_availability",
    "cff",
)
COLUMN = {name: i for i, name in enumerate(FEATURE_NAMES)}
IDENTITY: tuple[str, ...] = ("job_id", "user", "account", "gpu_type")
"""Metadata: kept in the table for tracking, never sampled for the actor (a hash has no order)."""

Floats = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True, eq=False)
class Features:
    """The table plus what the sampler needs that the normalized table has lost."""

    table: npt.NDArray[np.float32]
    """[jobs, 17]."""
    ways: npt.NDArray[np.int64]
    """[jobs]: nodes each job could use now (`num_ways_to_schedule` before normalization)."""
    cff: float
    """Fragmentation of the whole cluster (eq. 3 over every node)."""


def feature_table(snapshot: ClusterSnapshot, ordered_jobs: Sequence[Job]) -> npt.NDArray[np.float32]:
    """float32 [len(ordered_jobs), 17], every value in [0, 1].

    `ordered_jobs` must be in priority order: `future_availability` charges each job with the GPUs of the
    jobs ahead of it.
    """
    return build(snapshot, ordered_jobs).table


def build(snapshot: ClusterSnapshot, ordered_jobs: Sequence[Job]) -> Features:
    """The table and the sampler's inputs.

    Most ticks see the queue of the tick before on the same free capacity (67% of the ticks of Philly's
    deterministic loop, 73% of ITP's, 81% of a Philly training episode's), and then only the two age
    columns differ. So the last call's table is kept and, when the cluster, the free capacity and the
    jobs (`Kept.same`: the same objects, or equal in every field) are those of this call, only the age
    columns are computed again, by the code and on the inputs a full build uses, so the table is the
    same to the last bit (tests/features/test_features_properties.py).

    Of the other ticks, most change only one of the two: jobs arrive on the same free capacity (60% of
    the rest on Philly's deterministic loop), or a job ends and none starts (30%). A full build is two
    parts, each a pure function of its own inputs, and each is kept too: what the jobs alone give
    (`_JobPart`: their shapes and inputs, and the columns that read nothing else) while the jobs
    hold, and what the free capacity gives each shape (`_ClusterPart`) while the free capacity and the
    shapes hold. Only their combination is computed at every build."""
    global _last  # noqa: PLW0603 - a one-entry memo of the last table
    arrays = cluster_arrays(snapshot.cluster)
    free = (snapshot.free_gpus, snapshot.free_cpus, snapshot.free_mem_mb)
    jobs = tuple(ordered_jobs)
    last = _last if _last is not None and _last.arrays is arrays else None
    same_jobs = last is not None and last.kept.same(jobs)
    if last is not None and same_jobs and last.free == free:
        table = last.features.table.copy()
        _write_age(table.T, last.job_part.submit, snapshot.now)
        return Features(table, last.features.ways, last.features.cff)
    if last is not None and same_jobs:
        kept_jobs, job_part = last.kept, last.job_part
    else:
        kept_jobs, job_part = Kept(jobs), _job_part(arrays, jobs)
    if last is not None and last.free == free and _same_objects(last.cluster_part.shapes, job_part.shapes):
        cluster_part = last.cluster_part
    else:
        cluster_part = _cluster_part(arrays, job_part.shapes, free)
    features = _combine(job_part, cluster_part, snapshot.now)
    kept = features.table.copy()
    kept.flags.writeable = False
    features.ways.flags.writeable = False
    kept_features = Features(kept, features.ways, features.cff)
    _last = _Last(arrays, free, kept_jobs, job_part, cluster_part, kept_features)
    return features


def _same_objects(a: Sequence[object], b: Sequence[object]) -> bool:
    return len(a) == len(b) and all(map(operator.is_, a, b))


def forget() -> None:
    """Drop the kept table, so the next `build` computes everything (tests compare the two paths)."""
    global _last  # noqa: PLW0603
    _last = None


_AS_READ = operator.attrgetter(*(f.name for f in fields(Job)))
"""A job's fields as one tuple, so that two jobs compare in C."""


class Kept:
    """The jobs a kept result was computed from, and whether others are the same to it: the same
    objects (the simulator's, for as long as a job pends), else equal in every field (`_AS_READ`; the
    daemon reads new objects from squeue every tick). Only the pairs that are not the same objects are
    read."""

    __slots__ = ("jobs",)

    def __init__(self, jobs: tuple[Job, ...]) -> None:
        self.jobs = jobs

    def same(self, jobs: tuple[Job, ...]) -> bool:
        kept = self.jobs
        if len(jobs) != len(kept):
            return False
        renewed = list(map(operator.is_not, kept, jobs))
        if not any(renewed):
            return True
        read = _AS_READ  # compared in C, pair by pair
        if any(map(operator.ne, map(read, compress(kept, renewed)), map(read, compress(jobs, renewed)))):
            return False
        self.jobs = jobs  # the next call most likely sees these very objects
        return True


@dataclass(frozen=True, slots=True, eq=False)
class _JobPart:
    """What the table reads from the jobs alone."""

    shapes: list[Shape]
    inverse: npt.NDArray[np.intp]
    """[jobs]: each job's index into `shapes`."""
    gpus: Floats
    submit: Floats
    ahead: Floats
    """[jobs]: GPUs of the jobs ranked ahead that compete for one of the job's pools (eq. 2)."""
    table: npt.NDArray[np.float32]
    """[jobs, 17], read-only: the columns that read only the jobs and the cluster's shape (job id, user,
    GPUs, account, GPU type, requested time, CPUs, memory, job size); the others zero."""


@dataclass(frozen=True, slots=True, eq=False)
class _ClusterPart:
    """What the free capacity gives each shape, and the whole cluster's fragmentation."""

    shapes: list[Shape]
    fit: Fit
    free_elig: Floats
    total_elig: Floats
    per_shape: Floats
    """[shapes, 4]: free_nodes, can_schedule_now, num_ways, cff."""
    cff: float


@dataclass(frozen=True, slots=True, eq=False)
class _Last:
    arrays: ClusterArrays
    free: tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]
    kept: Kept
    job_part: _JobPart
    cluster_part: _ClusterPart
    features: Features


_last: _Last | None = None


def _job_part(arrays: ClusterArrays, jobs: Sequence[Job]) -> _JobPart:
    shapes, inverse, columns = _jobs_by_shape(arrays, jobs)
    ids, gpus, estimate, submit, asked_cpus, asked_mem, user, account, gpu_type = columns
    total = arrays.total_gpus
    table = np.zeros((len(jobs), len(FEATURE_NAMES)), dtype=np.float32)
    ahead = np.zeros(0)
    if jobs:
        rows = np.stack([s.node_rows for s in shapes])  # [S, 6, N]: fixed per shape, as `fit_now` reads them
        cpus, mem = _cpus_mem(asked_cpus, asked_mem, shapes, inverse, rows)
        col = table.T  # a view: writing a column writes the table
        col[COLUMN["job_id"]] = id_unit(ids.astype(np.int64))
        col[COLUMN["user"]] = user
        col[COLUMN["gpus"]] = log_share(gpus, total)
        col[COLUMN["account"]] = account
        col[COLUMN["gpu_type"]] = gpu_type
        col[COLUMN["requested_time"]] = log_share(estimate, HORIZON_S)
        col[COLUMN["cpus"]] = log_share(cpus, float(arrays.cpus.sum()))
        col[COLUMN["mem"]] = log_share(mem, float(arrays.mem.sum()))
        col[COLUMN["job_size"]] = log_share(gpus * estimate, total * HORIZON_S)
        ahead = _competing_ahead(shapes, inverse, gpus)
    table.flags.writeable = False
    return _JobPart(shapes, inverse, gpus, submit, ahead, table)


def _cluster_part(
    arrays: ClusterArrays, shapes: list[Shape], free_capacity: tuple[tuple[int, ...], ...]
) -> _ClusterPart:
    free_gpus, free_cpus, free_mem = (np.array(f, dtype=np.float64) for f in free_capacity)
    free = np.maximum(free_gpus, 0.0)
    cluster_cff = float(_cff(np.ones((1, len(free))), free, arrays.gpus)[0])
    fit = fit_now(arrays, shapes, free_gpus, free_cpus, free_mem)
    elig = fit.eligible.astype(np.float64)  # [S, N]
    n_elig = elig.sum(axis=1)
    idle = (free_gpus >= arrays.gpus) & (free_cpus >= arrays.cpus) & (free_mem >= arrays.mem)
    free_elig = elig @ free
    total_elig = elig @ arrays.gpus
    per_shape = np.zeros((len(shapes), 4))  # free_nodes, can_schedule_now, num_ways, cff
    per_shape[:, 0] = _ratio(elig @ idle.astype(np.float64), n_elig)
    per_shape[:, 1] = fit.can_start
    per_shape[:, 2] = _ratio(fit.ways.astype(np.float64), n_elig)
    per_shape[:, 3] = _cff(elig, free, arrays.gpus)
    return _ClusterPart(shapes, fit, free_elig, total_elig, per_shape, cluster_cff)


def _combine(jobs: _JobPart, cluster: _ClusterPart, now: float) -> Features:
    """The whole table from its two parts: the per-shape cluster features gathered per job, and the
    columns that read both the jobs and the free capacity."""
    if not len(jobs.inverse):
        return Features(jobs.table.copy(), np.zeros(0, np.int64), cluster.cff)
    inverse, gpus = jobs.inverse, jobs.gpus
    table = jobs.table.copy()
    col = table.T  # a view: writing a column writes the table
    job_shape = cluster.per_shape[inverse]
    col[COLUMN["free_nodes"]] = job_shape[:, 0]
    col[COLUMN["can_schedule_now"]] = job_shape[:, 1]
    col[COLUMN["num_ways_to_schedule"]] = job_shape[:, 2]
    free_elig = cluster.free_elig[inverse]
    col[COLUMN["demand_supply_ratio"]] = _demand_supply(gpus, free_elig)
    col[COLUMN["future_availability"]] = _future_availability(
        gpus, jobs.ahead, free_elig, cluster.total_elig[inverse]
    )
    col[COLUMN["cff"]] = job_shape[:, 3]
    _write_age(col, jobs.submit, now)
    return Features(table, cluster.fit.ways[inverse], cluster.cff)


def _write_age(col: npt.NDArray[np.float32], submit: Floats, now: float) -> None:
    """The only columns that read the clock: `submit` (the age, linear) and `urgency` (the age, log)."""
    age = np.maximum(now - submit, 0.0)
    col[COLUMN["submit"]] = np.minimum(age / MAX_AGE_S, 1.0)
    col[COLUMN["urgency"]] = log_share(age, MAX_AGE_S)


def _jobs_by_shape(
    arrays: ClusterArrays, jobs: Sequence[Job]
) -> tuple[list[Shape], npt.NDArray[np.intp], tuple[Floats, ...]]:
    """One pass over the jobs: the distinct shapes among them, each job's index into those, and the
    per-job inputs (ids are exact in float64 below 2**53): id, GPUs, estimate, submit, asked CPUs, asked
    memory, and the user, account and GPU-type codes. One loop, since it runs for every visible job at
    every tick."""
    unit = string_unit
    local: dict[ShapeKey, int] = {}
    shapes: list[Shape] = []
    inverse: list[int] = []
    rows = []
    for j in jobs:
        key = (j.gpus, j.gpu_type, j.partition, j.cpus, j.mem_mb, j.nodes)
        at = local.get(key)
        if at is None:
            at = local[key] = len(shapes)
            shapes.append(arrays.shape(j))
        inverse.append(at)
        limit = j.time_limit
        rows.append(
            (
                j.id,
                j.gpus,
                limit if limit is not None else j.estimate,
                j.submit,
                j.cpus,
                j.mem_mb,
                unit(j.user),
                unit(j.account),
                unit(j.gpu_type or ""),
            )
        )
    columns = tuple(np.array(rows, dtype=np.float64).reshape(len(jobs), 9).T)
    return shapes, np.array(inverse, dtype=np.intp), columns


def _ratio(num: Floats, den: Floats) -> Floats:
    out: Floats = np.divide(num, den, out=np.zeros_like(num), where=den > 0)
    return out


def _cff(elig: Floats, free: Floats, node_gpus: Floats) -> Floats:
    """Eq. 3 over each row's nodes: 1 - sum(f * f / G) / sum(f), 0 when nothing is free.

    The paper normalizes sum(f^2) / sum(f) by a node size; we divide each node's f^2 by its own size G, so
    whole idle nodes read as unfragmented on clusters mixing 2- and 8-GPU nodes. On nodes of one size this
    is exactly 1 - (sum(f^2) / sum(f)) / G. It equals the mean, over free GPUs, of the busy fraction of the
    node each free GPU sits on.
    """
    whole = np.divide(free * free, node_gpus, out=np.zeros_like(free), where=node_gpus > 0)
    free_sum = elig @ free
    out: Floats = np.where(free_sum > 0, 1.0 - _ratio(elig @ whole, free_sum), 0.0)
    return out


def _cpus_mem(
    asked_cpus: Floats,
    asked_mem: Floats,
    shapes: Sequence[Shape],
    inverse: npt.NDArray[np.intp],
    rows: Floats,
) -> tuple[Floats, Floats]:
    """Requested CPUs and memory; where not requested, the job's GPU share of its eligible nodes (averaged
    over them, as nodes of different pools give different shares). `rows` are the shapes' `node_rows`."""
    gpus = np.array([float(s.gpus) for s in shapes])
    n_elig = (rows[:, ELIGIBLE] > 0).astype(np.float64).sum(axis=1)
    share_cpus = _ratio(rows[:, CPU_PER_GPU].sum(axis=1), n_elig) * gpus
    share_mem = _ratio(rows[:, MEM_PER_GPU].sum(axis=1), n_elig) * gpus
    cpus = np.where(asked_cpus > 0, asked_cpus, share_cpus[inverse])
    mem = np.where(asked_mem > 0, asked_mem, share_mem[inverse])
    return cpus, mem


def _demand_supply(gpus: Floats, free_elig: Floats) -> Floats:
    """Eq. 1: requested GPUs over the free GPUs of the eligible nodes, squashed; 1 when none is free."""
    ratio = np.divide(gpus, free_elig, out=np.zeros_like(gpus), where=free_elig > 0)
    return np.where(free_elig > 0, squash(ratio), 1.0)


def _competing_ahead(shapes: Sequence[Shape], inverse: npt.NDArray[np.intp], gpus: Floats) -> Floats:
    """For each job, the GPUs of the higher-ranked jobs that compete for one of its pools."""
    pools = np.stack([s.pool_eligible for s in shapes]).astype(np.float64)  # [S, P]
    competes = (pools @ pools.T > 0).astype(np.float64)  # [S, S]: the shapes share a pool
    by_shape = np.zeros((len(gpus), len(shapes)))
    by_shape[np.arange(len(gpus)), inverse] = gpus
    before = np.cumsum(by_shape, axis=0) - by_shape  # [j, s]: GPUs of shape s ranked ahead of j
    ahead: Floats = np.einsum("js,js->j", before, competes[inverse])
    return ahead


def _future_availability(gpus: Floats, ahead: Floats, free_elig: Floats, total_elig: Floats) -> Floats:
    """Eq. 2: free eligible GPUs left after this job and every higher-ranked job that competes for one of
    its pools (`_competing_ahead`), over its eligible GPUs, mapped from [-1, 1] to [0, 1] (0 for a job
    with no eligible node)."""
    left = _ratio(free_elig - gpus - ahead, total_elig)
    left = np.where(total_elig > 0, np.clip(left, -1.0, 1.0), -1.0)
    return (left + 1.0) / 2.0
