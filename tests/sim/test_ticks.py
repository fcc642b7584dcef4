"""The simulated daemon's loop on its base alone: unchanged ticks of a time-invariant base pass as quiet,
and the schedule is the one deciding at every tick gives."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import pytest

from rltuned.clusters import load_cluster
from rltuned.core import CoreSettings, Decision, Lever
from rltuned.estimates import apply_estimates
from rltuned.placement.milp import MilpConfig
from rltuned.policies import make_policy
from rltuned.policies.loglinear import parse_loglinear
from rltuned.sim import ticks
from rltuned.sim.runner import Window
from rltuned.sim.simulator import SimResult
from rltuned.sim.ticks import TickEpisode, TickSettings, run_order, run_ticks
from rltuned.traces import load_trace
from rltuned.traces.bundled import resolve_trace

CLUSTER = load_cluster("philly-slice")
TRAINING = CoreSettings(lever=Lever(oversubscribe=False, steer_untyped=False))
NO_TIMEOUT = MilpConfig(time_limit_ms=60_000.0)  # a timed-out solve falls back: the one timing effect
NARROW = Lever(priority_min=1, priority_max=3_000, priority_step=1, oversubscribe=False, steer_untyped=False)
"""Targets among multifactor's own values: some jobs' priorities equal their targets and go unwritten."""
CONFIGS = {
    "training": TickSettings(core=TRAINING),
    "default (MILP placement)": TickSettings(core=CoreSettings(milp=NO_TIMEOUT)),
    "narrow priority band": TickSettings(core=replace(TRAINING, lever=NARROW)),
    "SiteFactor": TickSettings(core=replace(TRAINING, lever=Lever(kind="site_factor", steer_untyped=False))),
    "paced writes": TickSettings(core=TRAINING, writes_per_s=0.02, write_burst=1),
}


def window() -> tuple[list, int]:  # type: ignore[type-arg]
    """A Philly stretch where a queue forms (tens of jobs pending), after a 100-job warm-up."""
    jobs, _ = apply_estimates(load_trace(resolve_trace("philly")).jobs, "qssf-noise", 0)
    return Window(100, 300).with_warmup(list(jobs[30_100:30_400]), 100)


def every_tick(jobs: list, warmup: int, settings: TickSettings) -> SimResult:  # type: ignore[type-arg]
    """The daemon without a model deciding at every tick, as its engine does with `refresh_s = 0`."""
    episode = TickEpisode(CLUSTER, jobs, warmup, settings)
    while episode.result is None:
        episode.apply(episode.decide(None))
    return episode.result


class Counted:
    """`decide` as the tick loop calls it, counted."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        decide = ticks.decide

        def counted(*args: Any, **kwargs: Any) -> Decision:
            self.calls += 1
            return decide(*args, **kwargs)

        monkeypatch.setattr(ticks, "decide", counted)

    def take(self) -> int:
        calls, self.calls = self.calls, 0
        return calls


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("base", ["fcfs", "sjf", "saf"])
def test_a_time_invariant_base_alone_skips_only_ticks_that_would_write_nothing(
    base: str, config: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Deciding at every tick, every tick `run_ticks` would pass plans no write; so its schedule is the
    same, with under half the decisions on this stretch."""
    jobs, warmup = window()
    settings = replace(CONFIGS[config], base=base)
    remembered = replace(settings, core=replace(settings.core, refresh_s=math.inf))  # quiet is asked
    episode, passable = TickEpisode(CLUSTER, jobs, warmup, remembered), 0
    while episode.result is None:
        passes = episode.quiet and episode.all_fixed
        decision = episode.decide(None)
        if passes:
            assert decision.plan.actions == (), episode.snapshot.now if episode.snapshot else None
            passable += 1
        episode.apply(decision)
    counted = Counted(monkeypatch)
    fast = run_ticks(CLUSTER, jobs, warmup, settings)
    assert fast.records == episode.result.records and fast.background == episode.result.background
    assert counted.take() < passable  # fewer decisions than the ticks it could pass


def test_an_order_given_to_the_loop_ranks_in_place_of_the_base() -> None:
    """Searched orders and teachers run through `run_order`: on a loop set up for FCFS, SJF's order
    gives the schedule the loop on SJF gives (deciding every tick, where `run_ticks` passes quiet ticks),
    and not FCFS's."""
    jobs, warmup = window()
    settings = CONFIGS["training"]
    ordered = run_order(CLUSTER, jobs, warmup, replace(settings, base="fcfs"), make_policy("sjf"))
    sjf = run_ticks(CLUSTER, jobs, warmup, replace(settings, base="sjf"))
    fcfs = run_ticks(CLUSTER, jobs, warmup, replace(settings, base="fcfs"))
    assert ordered.records == sjf.records and ordered.background == sjf.background
    assert ordered.records != fcfs.records


def test_a_base_that_ages_decides_every_tick(monkeypatch: pytest.MonkeyPatch) -> None:
    """WFP3's key grows with the wait: an unchanged queue can reorder, so no tick is skipped."""
    jobs, warmup = window()
    settings = replace(CONFIGS["training"], base="wfp3")
    counted = Counted(monkeypatch)
    run_ticks(CLUSTER, jobs, warmup, settings)
    decided = counted.take()
    every_tick(jobs, warmup, settings)
    assert decided == counted.take()


def test_a_pending_job_without_a_written_priority_keeps_the_base_alone_deciding() -> None:
    """Under the priority lever a job whose multifactor priority equalled its target was not written and
    ages in Slurm's order until a decision writes it: such a tick is not passed. A SiteFactor target is
    never 0 and is written wherever the ledger holds none, so that lever has no such job."""
    jobs, warmup = window()
    for lever, still_fixed in (
        (Lever(oversubscribe=False, steer_untyped=False), False),
        (CONFIGS["SiteFactor"].core.lever, True),
    ):
        settings = TickSettings(base="fcfs", core=replace(TRAINING, lever=lever, refresh_s=math.inf))
        episode = TickEpisode(CLUSTER, jobs, warmup, settings)
        while episode.snapshot is not None and len(episode.snapshot.pending) < 3:
            episode.apply(episode.decide(None))
        assert episode.snapshot is not None
        episode.apply(episode.decide(None))
        while episode.snapshot is not None and not episode.quiet:
            episode.apply(episode.decide(None))
        assert episode.snapshot is not None and episode.all_fixed
        episode.written.forget(episode.snapshot.pending[0].id)
        assert episode.all_fixed is still_fixed


@pytest.mark.parametrize("config", ["training", "SiteFactor", "narrow priority band"])
def test_a_plans_lever_writes_applied_as_pairs_give_what_its_actions_give(
    config: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A simulated tick applies and records a ranking lever's writes as (job, value) pairs, never as the
    actions the daemon writes: given the same plans as plain actions, the schedule is the same. A
    searched order (limit over the square root of the GPUs) reorders the queue at most ticks."""
    jobs, warmup = window()
    settings = replace(CONFIGS[config], base="fcfs")
    order = parse_loglinear("loglinear:b=-0.5,c=0,w0=60")
    pairs = run_order(CLUSTER, jobs, warmup, settings, order)
    decide = ticks.decide
    applied = []

    def as_actions(*args: Any, **kwargs: Any) -> Decision:
        decision = decide(*args, **kwargs)
        applied.append(len(decision.plan.actions))
        return replace(decision, plan=replace(decision.plan, actions=tuple(decision.plan.actions)))

    monkeypatch.setattr(ticks, "decide", as_actions)
    actions = run_order(CLUSTER, jobs, warmup, settings, order)
    assert sum(applied) >= 40  # writes on most of the stretch's jobs
    assert actions.records == pairs.records and actions.background == pairs.background
