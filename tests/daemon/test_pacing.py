"""Kind to slurmctld: paced writes, and no endless retries of writes Slurm refuses."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from rltuned.daemon.pacing import Pacer
from rltuned.slurm.adapter import Outcome, UpdateResult
from tests.daemon.test_service import service


class Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def time(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_a_burst_then_the_rate_and_nothing_past_the_deadline() -> None:
    clock = Clock()
    pacer = Pacer(2.0, 3, clock.time, clock.sleep)
    assert all(pacer.take(deadline=10.0) for _ in range(3))  # the burst: no wait
    assert clock.slept == []
    assert pacer.take(deadline=10.0) and clock.slept == [0.5]  # then one per 1 / rate
    clock.now += 2.0  # idle: the bucket refills (up to the burst)
    assert all(pacer.take(deadline=10.0) for _ in range(3)) and clock.slept == [0.5]
    assert not pacer.take(deadline=clock.now + 0.4)  # the token would come too late: not sent
    assert clock.slept == [0.5]
    assert Pacer(0.0, 1, clock.time, clock.sleep).take(deadline=0.0)  # 0: unpaced


def test_a_plan_larger_than_the_budget_is_sent_in_rank_order_and_the_rest_deferred(tmp_path: Path) -> None:
    svc = service(
        tmp_path,
        apply={"mode": "enforce", "writes_per_s": 0.5, "write_burst": 2},
        daemon={"state_dir": str(tmp_path / "state"), "interval_s": 2.0},
    )
    report = svc.engine.tick("enforce")
    planned = len(report.decision.plan.actions)  # type: ignore[union-attr]
    assert planned > 2
    # A burst of 2, then one write per 2 s: the next would come after the 1 s the interval leaves.
    assert report.applied["deferred:paced"] == planned - 2
    written = [job for job, _ in svc.engine.adapter.writes]  # type: ignore[attr-defined]
    assert written == [a.job_id for a in report.decision.plan.actions[:2]]  # type: ignore[union-attr]


def test_enforce_pauses_itself_after_ticks_of_refused_writes(tmp_path: Path) -> None:
    svc = service(
        tmp_path,
        apply={"mode": "enforce", "writes_per_s": 0, "pause_after_denied_ticks": 2},
        daemon={"state_dir": str(tmp_path / "state"), "interval_s": 0.05},
    )
    svc.engine.adapter.answer = lambda job, fields: UpdateResult(Outcome.DENIED, "Access/permission denied")  # type: ignore[attr-defined]
    ticks = 0
    real = svc.engine.tick

    def tick(mode: str, stop: object = None) -> object:
        nonlocal ticks
        ticks += 1
        return real(mode, stop)

    svc.engine.tick = tick  # type: ignore[method-assign]
    runner = threading.Thread(target=svc.run)
    runner.start()
    deadline = time.monotonic() + 30
    while not svc.paused and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.3)  # a few intervals: a paused daemon must not tick again
    svc.stop_event.set()
    svc.wake.set()
    runner.join(timeout=30)
    assert svc.paused and svc.status()["paused"] is True
    assert ticks == 2  # paused after the second refused tick, and no tick since
    assert (tmp_path / "state" / "paused").exists()  # and stays paused across a restart
