"""Quiet ticks: when nothing a decision reads has changed, the tick decides nothing until `refresh_s`."""

from __future__ import annotations

import math
from dataclasses import replace

from rltuned.core import CoreSettings, Lever, Written, decide, decide_ranked
from rltuned.core.guard import GuardSettings
from rltuned.core.quiet import EARLY_S, LastDecision, due, remember, signature
from rltuned.domain import ClusterSnapshot, Job, RunningJob, Slice
from rltuned.policies import make_policy
from tests.builders import cluster

SPEC = cluster(("P100", 4, 2))
JOBS = (Job(1, 0.0, 2, time_limit=600.0), Job(2, 10.0, 1, time_limit=60.0))
SHOWN = {1: 900, 2: 800}
"""The priorities squeue shows for JOBS."""
RUNNING = (RunningJob(Job(9, 0.0, 2, time_limit=3600.0), 500.0, (Slice(0, 2, 8, 16384),)),)


def snapshot(
    now: float,
    pending: tuple[Job, ...],
    running: tuple[RunningJob, ...] = RUNNING,
    shown: dict[int, int] | None = None,
) -> ClusterSnapshot:
    free = 4 - sum(piece.gpus for r in running for piece in r.allocation if piece.node == 0)
    priorities = SHOWN if shown is None else shown
    return ClusterSnapshot(
        now, SPEC, (free, 4), (32, 32), (100_000, 100_000), pending, running, priorities=priorities
    )


def ledger(last: LastDecision | None, owned: dict[int, int]) -> Written:
    """A ledger that wrote `owned` priorities and remembers `last`."""
    written = Written()
    for job_id, value in owned.items():
        written.record(job_id, priority=value)
    written.last_decision = last
    return written


def settled_at(before: ClusterSnapshot, due_at: float = 1600.0) -> LastDecision:
    return LastDecision(signature(before), due_at, settled=True)


def test_a_tick_is_quiet_only_when_nothing_changed_before_its_time() -> None:
    last = settled_at(snapshot(1000.0, JOBS))
    assert not due(snapshot(1060.0, JOBS), 600.0, ledger(last, {}))  # only the clock moved
    assert due(snapshot(1600.0, JOBS), 600.0, ledger(last, {}))  # refresh_s passed: aging and the guard act
    assert due(snapshot(1600.0 - EARLY_S, JOBS), 600.0, ledger(last, {}))  # reads land either side
    assert due(snapshot(1060.0, JOBS[:1]), 600.0, ledger(last, {}))  # a job left the queue
    assert due(snapshot(1060.0, (*JOBS, Job(3, 1050.0, 1, time_limit=60.0))), 600.0, ledger(last, {}))
    assert due(snapshot(1060.0, JOBS, running=()), 600.0, ledger(last, {}))  # a job finished: GPUs freed
    longer = (replace(JOBS[0], time_limit=1200.0), JOBS[1])  # a user's `scontrol update TimeLimit=`
    assert due(snapshot(1060.0, longer), 600.0, ledger(last, {}))
    drained = replace(snapshot(1060.0, JOBS), free_gpus=(2, 0), free_cpus=(24, 0), free_mem_mb=(50_000, 0))
    assert due(drained, 600.0, ledger(last, {}))  # a node drained: nothing else changed


def test_priorities_slurm_ages_are_no_change_but_one_someone_else_changed_is() -> None:
    last = settled_at(snapshot(1000.0, JOBS))
    aged = {job_id: value + 7 for job_id, value in SHOWN.items()}
    # multifactor's age moves priorities we do not own
    assert not due(snapshot(1060.0, JOBS, shown=aged), 600.0, ledger(last, {}))
    ours = {1: 900, 2: 800}
    assert not due(snapshot(1060.0, JOBS), 600.0, ledger(last, ours))
    topped = {1: 900, 2: 950}  # an admin's `scontrol top 2`
    assert due(snapshot(1060.0, JOBS, shown=topped), 600.0, ledger(last, ours))


def test_the_same_pending_jobs_are_checked_again_once_the_ledger_or_the_queue_changes() -> None:
    """The simulator hands over one pending tuple and one mapping of priorities while they hold, and
    `due` skips a second look at them: a ledger that changed since, or new priorities for the same
    jobs, are looked at again."""
    last = settled_at(snapshot(1000.0, JOBS))
    written = ledger(last, {1: 900, 2: 800})
    quiet = snapshot(1060.0, JOBS)
    assert not due(quiet, 600.0, written)
    assert not due(replace(quiet, now=1120.0), 600.0, written)  # the same tuple, the same ledger
    written.record(2, priority=950)  # the ledger moved (a write the plan made), Slurm's job did not
    assert due(replace(quiet, now=1180.0), 600.0, written)
    written.record(2, priority=800)
    assert not due(replace(quiet, now=1240.0), 600.0, written)
    # someone else's write: the same jobs (one tuple), a new mapping of what Slurm shows
    assert due(replace(quiet, now=1300.0, priorities={1: 900, 2: 950}), 600.0, written)
    assert signature(replace(quiet, now=1360.0)) == last.signature
    assert signature(replace(quiet, now=1360.0))[0] is signature(quiet)[0]  # one object: cheap to compare


def test_left_work_no_decision_yet_or_refresh_zero_always_decide() -> None:
    now = snapshot(1060.0, JOBS)
    assert due(now, 600.0, ledger(None, {}))
    assert due(now, 600.0, ledger(replace(settled_at(now), settled=False), {}))
    assert due(now, 0.0, ledger(settled_at(now), {}))  # every tick, as before


def test_a_decision_is_settled_only_when_its_whole_plan_went_out_from_the_ranking_it_meant() -> None:
    now = snapshot(1000.0, JOBS)
    settings = CoreSettings(lever=Lever(oversubscribe=False, steer_untyped=False), refresh_s=600.0)
    made = decide(now, make_policy("sjf"), None, settings, Written(), {})
    assert remember(made, now, True, 600.0) == LastDecision(signature(now), 1600.0, True)
    assert not remember(made, now, False, 600.0).settled  # a write failed or was deferred
    capped = replace(made, plan=replace(made.plan, capped=1))
    assert not remember(capped, now, True, 600.0).settled
    fallback = replace(made, ranking=replace(made.ranking, fallback="model_slow"))
    assert not remember(fallback, now, True, 600.0).settled


def test_the_starvation_guard_does_not_wait_for_refresh_s() -> None:
    # Job 2 is SJF's first; a ranking that pushes it down makes the guard's max-wait clock run for it.
    now = snapshot(1000.0, JOBS)
    guard = GuardSettings(max_wait_s=1200.0, max_displacement=None)
    settings = CoreSettings(
        lever=Lever(oversubscribe=False, steer_untyped=False), guard=guard, refresh_s=600.0
    )
    base = decide(now, make_policy("sjf"), None, settings, Written(), {})
    assert base.guard_deadline == math.inf  # nothing pushed down: nothing to wait for
    pushed_ranking = replace(base.ranking, order=base.ranking.order[::-1])
    pushed = decide_ranked(now, pushed_ranking, settings, Written(), {})
    assert pushed.guard_deadline == 10.0 + 1200.0  # job 2's submit + max_wait_s
    assert remember(pushed, now, True, 600.0).due_at == 1210.0
