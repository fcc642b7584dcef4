"""Driving the simulator decision by decision (the RL environment's view)."""

from __future__ import annotations

from dataclasses import replace
from itertools import pairwise

import pytest

from rltuned.features import encode
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


@pytest.mark.parametrize("policy", ["fcfs", "sjf", "wfp3", "qssf", "multifactor"])
@pytest.mark.parametrize("depth", [1, 3, 500])
def test_choosing_the_encoders_first_row_reproduces_a_full_pass_run(policy: str, depth: int) -> None:
    """What the RL side relies on: row 0 of the state matrix is the base policy's choice, so an agent that
    always picks it schedules exactly like the base run (full passes, any backfill depth)."""
    jobs = [replace(j, user=f"u{j.id % 3}", account=f"a{j.id % 2}") for j in JOBS]
    sim = Simulator(SPEC, make_policy(policy), SimConfig(backfill_depth=depth, incremental=False))
    episode = sim.episode(jobs)
    while not episode.done:
        episode.choose(int(encode(episode.snapshot(), sim.policy).job_ids[0]))
    assert episode.result is not None
    assert episode.result.records == sim.run(jobs).records


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


def test_the_waiting_cost_so_far_grows_to_the_finished_runs_total() -> None:
    """What dense rewards are paid from: at every decision the cost accrued so far, never decreasing,
    ending at the finished run's sum of waits (warm-up jobs excluded)."""
    sim = Simulator(SPEC, make_policy("fcfs"), SimConfig())
    episode = sim.episode(JOBS, warmup=20)
    seen = [episode.waited(lambda j: 1.0)]
    while not episode.done:
        episode.choose(episode.snapshot().pending[-1].id)
        seen.append(episode.waited(lambda j: 1.0))
    assert episode.result is not None
    assert all(b >= a - 1e-9 for a, b in pairwise(seen))
    assert seen[-1] == pytest.approx(sum(r.wait for r in episode.result.records))
    assert any(0 < s < seen[-1] for s in seen), "accrues along the way"
