"""Quiet ticks: when nothing a decision reads has changed, the daemon decides again only every `refresh_s`.

On ITP's busy training windows 95% of the ticks (Philly's: 50-64%) see the same pending jobs, the same
running jobs and the same free resources as the tick before. Deciding again there rewrites the order it
has just written: a time-invariant base (FCFS, SJF, SAF) ranks exactly as before, and a model's scores
move only through its age columns. Skipping those ticks writes less to slurmctld, and it is what makes
the daemon's loop cheap enough to train in: one action per change instead of thousands of near-identical
ones per episode, whose credit PPO cannot tell apart. Time still counts: every `refresh_s` a decision is
made anyway, so aging, the starvation guard (`guard.py`) and fair-share history act at most that late.

The daemon's engine and the simulator's tick loop both ask `due`, on snapshots built the same way, so
what is trained is what serves. `refresh_s = 0` decides every tick (what every model before this rule
was trained with).
"""

from __future__ import annotations

from dataclasses import dataclass
from operator import attrgetter

from rltuned.domain import ClusterSnapshot

_REQUEST = attrgetter(
    "id", "time_limit", "gpus", "gpu_type", "cpus", "mem_mb", "nodes", "partition", "qos", "user", "account"
)


@dataclass(frozen=True)
class LastDecision:
    signature: int
    at: float
    """The snapshot time of the decision."""
    settled: bool
    """Its whole plan was written (none capped, deferred or failed): otherwise work is left and the next
    tick decides again."""


def signature(snapshot: ClusterSnapshot) -> int:
    """What a decision reads, but the clock: the pending jobs' requests (not their priorities, which
    Slurm's multifactor ages and which the daemon itself writes), the running jobs, the free resources
    per node (a drained or downed node shows none) and the nodes themselves."""
    pending = tuple(map(_REQUEST, snapshot.pending))
    running = tuple(r.job.id for r in snapshot.running)
    return hash(
        (
            pending,
            running,
            snapshot.free_gpus,
            snapshot.free_cpus,
            snapshot.free_mem_mb,
            snapshot.cluster.nodes,
        )
    )


def due(last: LastDecision | None, snapshot: ClusterSnapshot, refresh_s: float) -> bool:
    """Whether this tick decides: always with `refresh_s = 0`, else when something changed, when the last
    plan left work, or when `refresh_s` has passed since the last decision."""
    if refresh_s <= 0 or last is None or not last.settled:
        return True
    if snapshot.now - last.at >= refresh_s:
        return True
    return signature(snapshot) != last.signature
