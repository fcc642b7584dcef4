"""Driving the simulator decision by decision (the RL environment's view)."""

from __future__ import annotations

from dataclasses import replace
from itertools import pairwise

import pytest

from rltuned.clusters import load_cluster
from rltuned.estimates import apply_estimates
from rltuned.features import encode
from rltuned.policies import make_policy
from rltuned.sim.runner import choose_windows
from rltuned.sim.simulator import SimConfig, SimResult, Simulator
from rltuned.traces import load_trace
from rltuned.traces.bundled import resolve_trace
from tests.builders import cluster, job

SPEC = cluster(("P100", 4, 2), ("K80", 2, 2))
JOBS = [
    job(i, i * 5.0, 1 + (i * 7) % 5, 40 + (i * 53) % 300, estimate=30 + (i * 71) % 500) for i in range(80)
]


@pytest.mark.parametrize("backfill", [True, False])
@pytest.mark.parametrize("policy", ["fcfs", "sjf"])
def test_choosing_the_base_order_reproduces_the_base_run(policy: str, backfill: bool) -> None:
    sim = Simulator(SPEC, make_policy(policy), SimConfig(backfill=backfill))
    episode = sim.episode(JOBS)
    decisions = 0
    while not episode.done:
        episode.choose(episode.snapshot().pending[0].id)
        decisions += 1
    assert decisions > 10
    assert episode.result is not None
    assert episode.result.records == sim.run(JOBS).records


@pytest.mark.parametrize("policy", ["fcfs", "sjf", "wfp3", "qssf", "multifactor"])
@pytest.mark.parametrize(("backfill", "depth"), [(True, 1), (True, 3), (True, 500), (False, 500)])
def test_choosing_the_encoders_first_row_reproduces_a_full_pass_run(
    policy: str, backfill: bool, depth: int
) -> None:
    """What the RL side relies on: row 0 of the state matrix is the base policy's choice, so an agent that
    always picks it schedules exactly like the base run (full passes, any backfill depth, or none)."""
    jobs = [replace(j, user=f"u{j.id % 3}", account=f"a{j.id % 2}") for j in JOBS]
    config = SimConfig(backfill=backfill, backfill_depth=depth, incremental=False)
    sim = Simulator(SPEC, make_policy(policy), config)
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


ONE_NODE = cluster(("P100", 4, 1))
# A (2 GPUs) runs until 100; B (4 GPUs) and C (1 GPU) arrive together at 1, D (1 GPU) at 2.
BIG_THEN_SMALL = [job(0, 0, 2, 100), job(1, 1, 4, 10), job(2, 1, 1, 50), job(3, 2, 1, 30)]


def play_big_then_small(backfill: bool) -> tuple[dict[int, float], list[float], SimResult]:
    """Choose the biggest job at the first decision, then always the smallest (the one that fits)."""
    sim = Simulator(ONE_NODE, make_policy("fcfs"), SimConfig(backfill=backfill))
    episode = sim.episode(BIG_THEN_SMALL)
    asked: list[float] = []
    while not episode.done:
        snap = episode.snapshot()
        asked.append(snap.now)
        pick = max if len(asked) == 1 else min
        episode.choose(pick(snap.pending, key=lambda j: (j.gpus, -j.id)).id)
    assert episode.result is not None
    return {r.job.id: r.start for r in episode.result.records}, asked, episode.result


def test_without_backfilling_a_chosen_job_that_does_not_fit_blocks_until_it_starts() -> None:
    """B is chosen at 1 and does not fit. No decision is asked while it blocks, so C and D, which fit at
    1 and 2, cannot start before it (asked again at 2, the chooser would have started them). B starts at
    100 and the next decision follows at once (C, which then blocks in turn): strict FCFS's schedule."""
    starts, asked, _ = play_big_then_small(backfill=False)
    assert starts == {0: 0, 1: 100, 2: 110, 3: 110}
    assert asked == [1, 100]


def test_with_backfilling_a_chosen_job_that_does_not_fit_is_reserved_and_others_backfill() -> None:
    """B is chosen at 1 and reserved for 100; C ends (51) before that and backfills at once; at 2 the
    chooser is asked again and D, which fits and ends at 32, starts: B still starts at 100."""
    starts, asked, result = play_big_then_small(backfill=True)
    assert starts == {0: 0, 1: 100, 2: 1, 3: 2}
    assert asked == [1, 2]
    assert result.promised[1] == 100


@pytest.mark.parametrize("policy", ["fcfs", "sjf", "wfp3"])
def test_without_backfilling_the_base_order_reproduces_the_base_run_on_philly_windows(policy: str) -> None:
    """The paper's setting on real contention: random 1,024-job philly windows on philly-slice with
    exact runtimes, where committed heads block arrivals that SJF or WFP3 would rank ahead of them."""
    jobs = apply_estimates(load_trace(resolve_trace("philly")).jobs, "exact", 0)[0]
    sim = Simulator(load_cluster("philly-slice"), make_policy(policy), SimConfig(backfill=False))
    waited = 0.0
    for window in choose_windows(len(jobs), 1024, None, 3, seed=1):
        window_jobs = jobs[window.start : window.stop]
        episode = sim.episode(window_jobs)
        while not episode.done:
            episode.choose(episode.snapshot().pending[0].id)
        assert episode.result is not None
        base = sim.run(window_jobs)
        assert episode.result.records == base.records
        waited += sum(r.wait for r in base.records)
    assert waited > 0
