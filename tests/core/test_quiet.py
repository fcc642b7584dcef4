"""Quiet ticks: when nothing a decision reads has changed, the tick decides nothing until `refresh_s`."""

from __future__ import annotations

from dataclasses import replace

from rltuned.core.quiet import LastDecision, due, signature
from rltuned.domain import ClusterSnapshot, Job, RunningJob, Slice
from tests.builders import cluster

SPEC = cluster(("P100", 4, 2))


def snapshot(now: float, pending: tuple[Job, ...], running: tuple[RunningJob, ...] = ()) -> ClusterSnapshot:
    free = 4 - sum(piece.gpus for r in running for piece in r.allocation if piece.node == 0)
    return ClusterSnapshot(now, SPEC, (free, 4), (32, 32), (100_000, 100_000), pending, running)


JOBS = (Job(1, 0.0, 2, time_limit=600.0, priority=900), Job(2, 10.0, 1, time_limit=60.0, priority=800))


def test_a_tick_is_quiet_only_when_nothing_changed_within_refresh_s() -> None:
    before = snapshot(1000.0, JOBS)
    last = LastDecision(signature(before), 1000.0, settled=True)
    assert not due(last, snapshot(1060.0, JOBS), 600.0)  # only the clock moved
    assert due(last, snapshot(1600.0, JOBS), 600.0)  # refresh_s passed: aging and the guard act
    assert due(last, snapshot(1060.0, JOBS[:1]), 600.0)  # a job left the queue
    arrived = (*JOBS, Job(3, 1050.0, 1, time_limit=60.0))
    assert due(last, snapshot(1060.0, arrived), 600.0)
    started = (RunningJob(JOBS[0], 1050.0, (Slice(0, 2, 8, 16384),)),)
    assert due(last, snapshot(1060.0, JOBS[1:], started), 600.0)
    longer = (replace(JOBS[0], time_limit=1200.0), JOBS[1])  # a user's `scontrol update TimeLimit=`
    assert due(last, snapshot(1060.0, longer), 600.0)


def test_priorities_are_not_a_change_the_daemon_writes_them_and_multifactor_ages_them() -> None:
    last = LastDecision(signature(snapshot(1000.0, JOBS)), 1000.0, settled=True)
    aged = tuple(replace(j, priority=(j.priority or 0) + 7) for j in JOBS)
    assert not due(last, snapshot(1060.0, aged), 600.0)


def test_left_work_no_decision_yet_or_refresh_zero_always_decide() -> None:
    now = snapshot(1060.0, JOBS)
    assert due(None, now, 600.0)
    assert due(LastDecision(signature(now), 1000.0, settled=False), now, 600.0)  # capped or failed writes
    assert due(LastDecision(signature(now), 1000.0, settled=True), now, 0.0)  # every tick, as before
