"""The starvation guard: no ranking may push a job back without bound.

Fixed priorities stop multifactor's age and fair-share for the jobs rltuned manages, so nothing in Slurm
ages a job the ranking keeps last. The guard does, in the decision core, so the simulator trains and
evaluates with exactly the bound the daemon enforces:

- a job the ranking puts below its base rank, pending longer than `max_wait_s` (or its user's own cap),
  goes ahead of every ranked job;
- a job the ranking puts more than `max_displacement` places below its base rank, tick after tick for
  `grace_s`, goes ahead too.

Only what the ranking did is bounded: a job the base policy itself keeps waiting (a base ranking, or a
model that ranks the job no lower than the base does) is left where the admin's base policy puts it.
Promoting every old job regardless, on an overloaded window of ITP's validation split, put 61 of them
(warm-up jobs among them) at the head and took SJF's bounded slowdown from 4.1 to 24.1 and its longest
wait from 7.1 to 10.8 days. Promoted jobs keep their base order among themselves.

The displacement clock is per job and lives in the planner's memory (`Written.displaced_since`),
committed by whoever applies the decision, so a dry-run `plan` does not move it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from rltuned.core.ranking import Ranking
from rltuned.domain import ClusterSnapshot

MAX_WAIT = "max_wait"
DISPLACED = "displaced"
HEAD = "head"
BASE_RANK = "base_rank"
PROMOTE_TO = (HEAD, BASE_RANK)


@dataclass(frozen=True)
class GuardSettings:
    max_wait_s: float | None = 7 * 86400.0
    """A job the ranking pushed below its base rank goes first once pending this long (None: no bound)."""
    max_displacement: int | None = 128
    """Places below its base rank a job may be pushed for longer than `grace_s` (None: unbounded)."""
    grace_s: float = 12 * 3600.0
    user_max_wait_s: Mapping[str, float] = field(default_factory=dict)
    """Per-user caps on waiting, tighter or looser than `max_wait_s`."""
    promote_to: str = HEAD
    """Where a job the guard acts on goes: `head` (ahead of every ranked job, in base order) or
    `base_rank` (back at the place the admin's base policy gives it, undoing what the ranking did)."""

    def __post_init__(self) -> None:
        if self.promote_to not in PROMOTE_TO:
            raise ValueError(f"promote_to must be one of {PROMOTE_TO}, got {self.promote_to!r}")

    @property
    def off(self) -> bool:
        return self.max_wait_s is None and self.max_displacement is None and not self.user_max_wait_s


@dataclass(frozen=True)
class Guarded:
    ranking: Ranking
    """The ranking with promoted jobs first (`ranking.guarded` names them and why)."""
    displaced_since: Mapping[int, float]
    """The displacement clock after this tick, for the applier to commit."""
    deadline: float = math.inf
    """The earliest later time at which the guard would promote a job this ranking pushes down: a quiet
    tick (`quiet.py`) must not let it pass."""


def guard(
    ranking: Ranking,
    snapshot: ClusterSnapshot,
    settings: GuardSettings,
    displaced_since: Mapping[int, float],
) -> Guarded:
    if settings.off or not ranking.order:
        return Guarded(ranking, {})
    now = snapshot.now
    base_rank = {job.id: i for i, job in enumerate(ranking.base_order)}
    clock: dict[int, float] = {}
    reasons: dict[int, str] = {}
    deadline = math.inf
    for place, job in enumerate(ranking.order):
        pushed = place - base_rank[job.id]
        if pushed <= 0:
            continue  # where the base policy puts it, or higher: nothing the ranking did
        cap = settings.user_max_wait_s.get(job.user, settings.max_wait_s)
        if cap is not None:
            if now - job.submit >= cap:
                reasons[job.id] = MAX_WAIT
            else:
                deadline = min(deadline, job.submit + cap)
        if settings.max_displacement is not None and pushed > settings.max_displacement:
            since = displaced_since.get(job.id, now)
            clock[job.id] = since
            if now - since >= settings.grace_s:
                reasons.setdefault(job.id, DISPLACED)
            else:
                deadline = min(deadline, since + settings.grace_s)
    if not reasons:
        return Guarded(ranking, clock, deadline)
    ahead = reasons if settings.promote_to == HEAD else {}
    order = [job for job in ranking.base_order if job.id in ahead]
    order += [job for job in ranking.order if job.id not in reasons]
    # Back to base rank: in base order, each at its base rank or just after the one before it, so a
    # later insertion never moves an earlier one down.
    place = len(ahead) - 1
    for job in ranking.base_order:
        if job.id in reasons and job.id not in ahead:
            place = min(max(base_rank[job.id], place + 1), len(order))
            order.insert(place, job)
    return Guarded(replace(ranking, order=tuple(order), guarded=reasons), clock, deadline)
