"""Driving the simulator decision by decision (the RL environment's view)."""

from __future__ import annotations

import pytest

from rltuned.policies import make_policy
from rltuned.sim.simulator import SimConfig, Simulator
from tests.builders import cluster, job

SPEC = cluster(("P100", 4, 2), ("K80", 2, 2))
JOBS = [
    job(i, i * 5.0, 1 + (i * 7) % 5, 40 + (i * 53) % 300, estimate=30 + (i * 71) % 500) for i in range(80)
]


@pytest.mark.parametrize("policy", ["fcfs", "sjf"])
def test_choosing_the_base_order_reproduces_the_base_run(policy: str) -> None:
    sim = Simulator(SPEC, make_policy(policy), SimConfig())
    episode = sim.episode(JOBS)
    decisions = 0
    while not episode.done:
        episode.choose(episode.snapshot().pending[0].id)
        decisions += 1
    assert decisions > 10
    assert episode.result is not None
    assert episode.result.records == sim.run(JOBS).records


def test_choices_change_the_schedule_and_only_pending_jobs_can_be_chosen() -> None:
    sim = Simulator(SPEC, make_policy("fcfs"), SimConfig())
    episode = sim.episode(JOBS)
    with pytest.raises(ValueError, match="not pending"):
        episode.choose(10_000)
    while not episode.done:
        episode.choose(episode.snapshot().pending[-1].id)  # always the last in base order
    assert episode.result is not None
    assert episode.result.records != sim.run(JOBS).records
    assert len(episode.result.records) == len(JOBS)
