"""Metrics by hand: the tails and fairness the results report next to the means."""

from __future__ import annotations

import pytest

from rltuned.policies import make_policy
from rltuned.sim.metrics import compute_metrics
from rltuned.sim.simulator import SimConfig, Simulator
from tests.builders import cluster, job


def test_tails_and_fairness_on_a_hand_worked_fcfs_run() -> None:
    """One 1-GPU node, FCFS, no backfilling: a waits 0, b waits 100 - 10 = 90, c waits 150 - 20 = 130."""
    jobs = [
        job(1, 0, 1, 100, user="u1"),
        job(2, 10, 1, 50, user="u1"),
        job(3, 20, 1, 10, user="u2"),
    ]
    sim = Simulator(cluster(("T4", 1, 1)), make_policy("fcfs"), SimConfig(backfill=False))
    m = compute_metrics(sim.run(jobs))
    assert m.avg_wait_s == pytest.approx((0 + 90 + 130) / 3)
    assert m.max_wait_s == 130
    assert m.p99_wait_s == pytest.approx(90 + 0.98 * 40)  # numpy's linear interpolation
    bsld = [1.0, (90 + 50) / 50, (130 + 10) / 10]
    mean = sum(bsld) / 3
    assert m.avg_bsld == pytest.approx(mean)
    assert m.fairness == pytest.approx(bsld[2] / mean)  # u2's one job is the worst user's mean
