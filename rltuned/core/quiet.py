"""Quiet ticks: when nothing a decision reads has changed, the daemon decides again only every `refresh_s`.

On ITP's busy training windows 95% of the ticks (Philly's: 50-64%) see the same pending jobs, the same
running jobs and the same free resources as the tick before. Deciding again there rewrites the order it
has just written: a time-invariant base (FCFS, SJF, SAF) ranks exactly as before, and a model's scores
move only through its age columns. Skipping those ticks writes less to slurmctld, and it is what makes
the daemon's loop cheap enough to train in: one action per change instead of thousands of near-identical
ones per episode, whose credit PPO cannot tell apart. Time still counts: a decision is made anyway
`refresh_s` after the last one (aging acts at most that late), and before the starvation guard
(`guard.py`) would promote a job the last ranking pushed down.

The daemon's engine and the simulator's tick loop both ask `due` and `remember` here, on snapshots built
the same way, so what is trained is what serves. `refresh_s = 0` decides every tick (what every model
before this rule was trained with).
"""

from __future__ import annotations

from dataclasses import dataclass
from operator import attrgetter
from typing import TYPE_CHECKING, Protocol

from rltuned.domain import ClusterSnapshot

if TYPE_CHECKING:  # plan.py keeps the last decision: type-only imports, no cycle
    from rltuned.core.placement import Placements
    from rltuned.core.plan import Plan, Written
    from rltuned.core.ranking import Ranking


class Decided(Protocol):
    """What `remember` reads of a decision: the core's, or the daemon engine's that wraps it."""

    @property
    def ranking(self) -> Ranking: ...
    @property
    def placements(self) -> Placements: ...
    @property
    def plan(self) -> Plan: ...
    @property
    def guard_deadline(self) -> float: ...


EARLY_S = 1.0
"""A refresh is due from this long before `refresh_s`: the simulator ticks exactly `interval_s` apart,
the daemon's reads land some milliseconds either side, and both must refresh at the same tick."""

_REQUEST = attrgetter(
    "id", "time_limit", "gpus", "gpu_type", "cpus", "mem_mb", "nodes", "partition", "qos", "user", "account"
)

Signature = tuple[object, ...]


@dataclass(frozen=True)
class LastDecision:
    signature: Signature
    due_at: float
    """When a decision is due even if nothing changes: `refresh_s` after it, or the guard's deadline."""
    settled: bool
    """Its whole plan was written (none capped, deferred or failed) from the ranking it meant to make
    (no fallback): otherwise work is left and the next tick decides again."""


def signature(snapshot: ClusterSnapshot) -> Signature:
    """What a decision reads, but the clock: the pending jobs' requests (not their priorities, which
    Slurm's multifactor ages and which the daemon itself writes), the running jobs, the free resources
    per node (a drained or downed node shows none) and the nodes themselves. Kept whole, not hashed, so
    that no two states compare equal by accident. The last snapshot's is kept: a tick that `due` found
    changed is `remember`ed next, on the same snapshot."""
    last, before = _SIGNED[0]
    if last is snapshot:
        return before
    # The simulator passes the same pending and running tuples while nothing moves; an equal part is
    # kept as the one object, so comparing with the last decision's stops at identity.
    if last is not None and last.pending is snapshot.pending:
        pending = before[0]
    else:
        pending = tuple(map(_REQUEST, snapshot.pending))
        if before and pending == before[0]:
            pending = before[0]
    if last is not None and last.running is snapshot.running:
        running = before[1]
    else:
        running = tuple(r.job.id for r in snapshot.running)
    signed = (
        pending,
        running,
        snapshot.free_gpus,
        snapshot.free_cpus,
        snapshot.free_mem_mb,
        snapshot.cluster.nodes,
    )
    _SIGNED[0] = (snapshot, signed)
    return signed


_SIGNED: list[tuple[ClusterSnapshot | None, Signature]] = [(None, ())]
"""The last snapshot signed and its signature, as one tuple (read and replaced whole; the snapshot is
held, so its identity cannot be reused)."""


def remember(
    decision: Decided, snapshot: ClusterSnapshot, written_whole: bool, refresh_s: float
) -> LastDecision:
    """What the next ticks compare with, once the decision's writes are done (`written_whole`: every
    planned write landed)."""
    settled = (
        written_whole
        and decision.plan.capped == 0
        and decision.ranking.fallback is None
        and decision.placements.outcome != "fallback"
    )
    due_at = min(snapshot.now + refresh_s, decision.guard_deadline)
    return LastDecision(signature(snapshot), due_at, settled)


def due(snapshot: ClusterSnapshot, refresh_s: float, written: Written) -> bool:
    """Whether this tick decides: always with `refresh_s = 0`; else when the last plan left work, when
    its time is up, when a priority rltuned wrote was changed by someone else (an admin's `scontrol
    update` or `top`), or when anything else a decision reads changed. The ledger's priorities are read
    only past the cheap checks: with `refresh_s = 0` this costs nothing per tick."""
    last = written.last_decision
    if refresh_s <= 0 or last is None or not last.settled:
        return True
    if snapshot.now >= last.due_at - EARLY_S:
        return True
    seen_pending, seen_shown, seen_written, seen_version = _CHECKED[0]
    pending, shown = snapshot.pending, snapshot.priorities
    if not (
        seen_pending is pending
        and seen_shown is shown
        and seen_written is written
        and seen_version == written.version
    ):
        get, now = written.owned_priorities().get, shown.get
        if any((mine := get(j.id)) is not None and mine != now(j.id) for j in pending):
            return True
        _CHECKED[0] = (pending, shown, written, written.version)
    return signature(snapshot) != last.signature


_CHECKED: list[tuple[object, object, object, int]] = [((), {}, None, -1)]
"""The last pending jobs and the priorities Slurm showed for them, found to carry every priority the
ledger holds, with the ledger and its version: the same objects at the same version need no second look
(held, so their identities cannot be reused)."""
