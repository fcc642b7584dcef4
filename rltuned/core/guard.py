"""The starvation guard: no ranking may push a job back without bound.

Fixed priorities stop multifactor's age and fair-share for the jobs rltuned manages, so nothing in Slurm
ages a job the ranking keeps last. The guard does, in the decision core, so the simulator trains and
evaluates with exactly the bound the daemon enforces:

- a job the ranking puts below its base rank, pending longer than `max_wait_s` (or its user's own cap),
  goes ahead of every ranked job;
- a job the ranking puts more than `max_displacement` places below its base rank, tick after tick for
  `grace_s`, goes ahead too.

With `promote_to = "base_rank"` such a job goes back to its base rank instead: what the ranking did to
it is undone, without jumping the queue. On ITP's validation four jobs put at the head by the waiting
cap took one window from 4.5 to 15.4 (a large job at the head stops Slurm's main scheduler); back at
their base rank, 4.5 (docs/training.md).

Only what the ranking did is bounded: a job the base policy itself keeps waiting (a base ranking, or a
model that ranks the job no lower than the base does) is left where the admin's base policy puts it.
Promoting every old job regardless, on an overloaded window of ITP's validation split, put 61 of them
(warm-up jobs among them) at the head and took SJF's bounded slowdown from 4.1 to 24.1 and its longest
wait from 7.1 to 10.8 days. Jobs the guard acts on keep their base order among themselves.

The displacement clock is per job and lives in the planner's memory (`Written.displaced_since`),
committed by whoever applies the decision, so a dry-run `plan` does not move it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Literal, get_args

from rltuned.core.ranking import Ranking
from rltuned.domain import ClusterSnapshot, Job

MAX_WAIT = "max_wait"
DISPLACED = "displaced"
PromoteTo = Literal["head", "base_rank"]
"""Where a job the guard acts on goes (the config's type for `guard.promote_to`)."""
HEAD: PromoteTo = "head"
BASE_RANK: PromoteTo = "base_rank"
PROMOTE_TO: tuple[str, ...] = get_args(PromoteTo)


@dataclass(frozen=True)
class GuardSettings:
    max_wait_s: float | None = 7 * 86400.0
    """A job the ranking pushed below its base rank is promoted once pending this long (None: no bound)."""
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
    """The ranking with the jobs the guard acted on first, or at their base ranks (`ranking.guarded`
    names them and why)."""
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
    if settings.off or not ranking.order or ranking.order is ranking.base_order:
        return Guarded(ranking, {})  # the base order pushes no job below its base rank
    now = snapshot.now
    base_rank = {job.id: i for i, job in enumerate(ranking.base_order)}
    clock: dict[int, float] = {}
    reasons: dict[int, str] = {}
    deadline = math.inf
    # Read once: a training tick runs this loop over a queue of a hundred, half of it pushed down.
    user_caps, default_cap = settings.user_max_wait_s, settings.max_wait_s
    max_displacement, grace = settings.max_displacement, settings.grace_s
    for place, job in enumerate(ranking.order):
        pushed = place - base_rank[job.id]
        if pushed <= 0:
            continue  # where the base policy puts it, or higher: nothing the ranking did
        cap = user_caps.get(job.user, default_cap) if user_caps else default_cap
        if cap is not None:
            if now - job.submit >= cap:
                reasons[job.id] = MAX_WAIT
            elif job.submit + cap < deadline:
                deadline = job.submit + cap
        if max_displacement is not None and pushed > max_displacement:
            since = displaced_since.get(job.id, now)
            clock[job.id] = since
            if now - since >= grace:
                reasons.setdefault(job.id, DISPLACED)
            elif since + grace < deadline:
                deadline = since + grace
    if not reasons:
        return Guarded(ranking, clock, deadline)
    order = _reordered(ranking, reasons, base_rank, settings.promote_to)
    return Guarded(replace(ranking, order=tuple(order), guarded=reasons), clock, deadline)


def _reordered(
    ranking: Ranking, reasons: Mapping[int, str], base_rank: Mapping[int, int], promote_to: str
) -> list[Job]:
    """The ranking with the jobs the guard acts on first (in base order), or each at its base rank."""
    acted = [job for job in ranking.base_order if job.id in reasons]
    rest = [job for job in ranking.order if job.id not in reasons]
    if promote_to == HEAD:
        return acted + rest
    # In base order, so each lands at its base rank: the ranks rise, and the list is always long enough
    # to hold the next one there (every job above it is already in).
    for job in acted:
        rest.insert(base_rank[job.id], job)
    return rest
