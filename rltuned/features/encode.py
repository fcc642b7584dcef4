"""The RLTune state: the visible queue as fixed-size actor and critic matrices.

Rows follow the base policy's order (`policies.rank`), so row 0 is the job the base policy would start:
the actor learns to re-rank the queue it would otherwise follow. At most `MAX_JOBS` jobs are visible
(the paper's MAX_QUEUE_SIZE = 256); the rest keep their base order behind them (`overflow`). Missing rows
are zero and masked out.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from rltuned.domain import ClusterSnapshot, Job
from rltuned.features import table as _table
from rltuned.features.sampler import ACTOR_FEATURES, CRITIC, sample
from rltuned.features.scales import HORIZON_S, log_share
from rltuned.features.table import COLUMN, FEATURE_NAMES, Kept, build
from rltuned.policies.base import Policy, rank
from rltuned.policies.predicted import predicted_runtime

MAX_JOBS = 256
LIMIT = "limit"
PREDICTED = "predicted"
RUNTIME_INPUTS = (LIMIT, PREDICTED)
"""What the `requested_time` column holds: the time limit (the paper's), or the limit as the accounting's
finished peers correct it (`policies/predicted.py`, what `psjf` ranks by; a job with no finished peers
keeps its limit). `job_size` stays on the limit either way, so a model given the prediction also sees
what the user asked for. A model's manifest records which (`runtime_input`)."""

_CRITIC_COLUMNS = np.array([COLUMN[name] for name in CRITIC], dtype=np.intp)
_ACTOR_COLUMNS: dict[tuple[str, ...], npt.NDArray[np.intp]] = {}


def _columns(sampled: tuple[str, ...]) -> npt.NDArray[np.intp]:
    """The table's columns of the sampled features, kept per sampling (there are four)."""
    found = _ACTOR_COLUMNS.get(sampled)
    if found is None:
        found = _ACTOR_COLUMNS[sampled] = np.array([COLUMN[name] for name in sampled], dtype=np.intp)
    return found


@dataclass(frozen=True, slots=True, eq=False)
class Observation:
    """One decision's state. Arrays are read-only; padding rows are zero, with `mask` False."""

    actor: npt.NDArray[np.float32]
    """[256, 8]: the sampled features, columns in `sampled` order."""
    mask: npt.NDArray[np.bool_]
    """[256]: True for a real job."""
    critic: npt.NDArray[np.float32]
    """[256, 5]: submit (age), requested time, GPUs, can_schedule_now, the job's CFF."""
    job_ids: npt.NDArray[np.int64]
    """[256]: the job in each row, -1 for padding."""
    table: npt.NDArray[np.float32]
    """[256, 17]: every feature, columns in `FEATURE_NAMES` order."""
    sampled: tuple[str, ...]
    cff: float
    """Fragmentation of the whole cluster, which drove the sampler."""
    overflow: tuple[int, ...]
    """Ids of the pending jobs beyond the visible 256, in base order."""
    jobs: tuple[Job, ...]
    """Every pending job in base order: the rows' jobs, then the overflow's."""


def encode(snapshot: ClusterSnapshot, policy: Policy, runtime: str = LIMIT) -> Observation:
    """The state for `snapshot` with rows in `policy`'s order, its `requested_time` column holding
    `runtime` (`RUNTIME_INPUTS`); a pure function of its arguments."""
    ordered = _ranked(policy, snapshot)
    visible = ordered[:MAX_JOBS]
    features = build(snapshot, visible)
    n = len(visible)
    table = np.zeros((MAX_JOBS, len(FEATURE_NAMES)), dtype=np.float32)
    table[:n] = features.table
    if runtime == PREDICTED:
        history = snapshot.history
        predicted = np.fromiter((predicted_runtime(job, history) for job in visible), np.float64, n)
        table[:n, COLUMN["requested_time"]] = log_share(predicted, HORIZON_S)
    elif runtime != LIMIT:
        raise ValueError(f"runtime input must be one of {RUNTIME_INPUTS}, got {runtime!r}")
    sampled = sample(features.table, features.ways, features.cff)
    assert len(sampled) == ACTOR_FEATURES, f"expected {ACTOR_FEATURES} sampled features, got {sampled}"
    actor = table.take(_columns(sampled), axis=1)
    critic = table.take(_CRITIC_COLUMNS, axis=1)
    mask = np.zeros(MAX_JOBS, dtype=np.bool_)
    mask[:n] = True
    job_ids = np.full(MAX_JOBS, -1, dtype=np.int64)
    job_ids[:n] = [job.id for job in visible]
    for array in (actor, mask, critic, job_ids, table):
        array.flags.writeable = False
    overflow = tuple(job.id for job in ordered[MAX_JOBS:])
    return Observation(actor, mask, critic, job_ids, table, sampled, features.cff, overflow, tuple(ordered))


@dataclass(frozen=True, slots=True, eq=False)
class _LastRank:
    policy: Policy
    pending: Kept
    fixed: tuple[float, int, int]
    """The context a static key may read: origin, GPUs, nodes."""
    order: list[int]
    """The pending jobs' indices in base order."""


_last_rank: _LastRank | None = None


def _ranked(policy: Policy, snapshot: ClusterSnapshot) -> list[Job]:
    """`rank(policy, snapshot)`, kept for the next call. A static policy's key is fixed once a job is
    queued (the `Policy` contract: it reads neither the clock nor the history), so the same policy on
    the same pending jobs (`Kept.same`: the same objects, or equal, in the same order) and the same
    fixed context (origin, GPUs, nodes) gives the same order of them, and the sort is skipped."""
    global _last_rank  # noqa: PLW0603 - a one-entry memo of the last order
    if policy.dynamic:
        return rank(policy, snapshot)
    pending = snapshot.pending
    ctx = snapshot.context
    fixed = (ctx.origin, ctx.total_gpus, ctx.nodes)
    last = _last_rank
    if (
        last is not None
        and (last.policy is policy or last.policy == policy)
        and last.fixed == fixed
        and last.pending.same(pending)
    ):
        return list(map(pending.__getitem__, last.order))
    ordered = rank(policy, snapshot)
    at = {id(job): i for i, job in enumerate(pending)}
    _last_rank = _LastRank(policy, Kept(pending), fixed, [at[id(job)] for job in ordered])
    return ordered


def forget() -> None:
    """Drop the kept order and table, so the next `encode` computes everything (tests compare the two)."""
    global _last_rank  # noqa: PLW0603
    _last_rank = None
    _table.forget()
