"""What is trained is what runs: on the same state, the daemon's engine (reading Slurm 22.05 JSON) and the
simulator's tick decide exactly alike: the same ranking, placements and `scontrol update`s.

The state comes from the simulator's own tick loop, after a random number of ticks under the daemon (so
priorities and the ledger carry earlier writes); it is rendered as `squeue --json` / `sinfo --json`, and
its history as `sshare` / `sacct` text, and read by the engine through the adapter. The model is a real
TorchScript file with random weights.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rltuned.core import CoreSettings, Lever
from rltuned.core.quiet import signature
from rltuned.daemon.config import Settings
from rltuned.daemon.engine import Engine
from rltuned.daemon.ledger import Ledger
from rltuned.domain import Job
from rltuned.features import ACTOR_FEATURES, MAX_JOBS
from rltuned.rl.agent import Actor
from rltuned.rl.export import LoadedModel, export_actor, load_model
from rltuned.sim.slurm import SlurmParams
from rltuned.sim.ticks import TickEpisode, TickSettings
from rltuned.slurm.history import history_from_slurm
from tests.builders import cluster
from tests.daemon.fakes import FakeAdapter
from tests.slurm.render import render, render_history

SPEC = cluster(("P100", 4, 2), ("K80", 2, 2), ("M40", 1, 1))


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> LoadedModel:
    torch.manual_seed(0)
    actor = Actor()
    for p in actor.net[-1].parameters():
        torch.nn.init.normal_(p, std=1.0)
    actor.fit_input(torch.rand(4, MAX_JOBS, ACTOR_FEATURES), torch.ones(4, MAX_JOBS, dtype=torch.bool))
    out: Path = tmp_path_factory.mktemp("model")
    return load_model(export_actor(actor, out / "m", {"trace": "t", "seed": 0, "training_commit": "x"}))


def workload(seed: int) -> list[Job]:
    """What Slurm keeps exactly: whole-second submits (epoch seconds: Slurm's JSON writes 0 for a time
    never set, so a job started at 0 would read as malformed), whole-minute limits, explicit CPUs."""
    rng = np.random.default_rng(seed)
    jobs, t = [], 1_700_000_000.0
    for i in range(40):
        t += float(rng.integers(0, 90))
        gpu_type = [None, "P100", "K80", None][int(rng.integers(0, 4))]
        gpus = int(rng.choice([1, 2, 4])) if gpu_type != "K80" else int(rng.integers(1, 3))
        limit = 60.0 * float(rng.integers(2, 60))
        runtime = float(rng.integers(30, int(limit) + 60))
        jobs.append(
            Job(
                i + 1,
                t,
                gpus,
                runtime=runtime,
                time_limit=limit,
                user=f"u{i % 3}",
                account=f"a{i % 2}",
                gpu_type=gpu_type,
                cpus=2 * gpus,
            )
        )
    return jobs


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    seed=st.integers(0, 10_000),
    base=st.sampled_from(["fcfs", "sjf", "wfp3", "unicep", "saf", "multifactor", "qssf"]),
    lever=st.sampled_from(["priority", "site_factor"]),
    placing=st.booleans(),
    ticks=st.integers(0, 12),
)
def test_the_engine_and_the_simulators_tick_decide_alike(
    model: LoadedModel, seed: int, base: str, lever: str, placing: bool, ticks: int
) -> None:
    config = Settings(
        policy={"base": base},
        apply={"lever": lever},
        placement={"oversubscribe": placing, "steer_untyped": placing},
    )
    sim = TickEpisode(SPEC, workload(seed), 0, TickSettings(base, 60.0, config.core(), SlurmParams()))
    for _ in range(ticks):
        if sim.snapshot is None:
            break
        sim.apply(sim.decide(model))
    if sim.snapshot is not None:
        assert_alike(sim, config, model)


@pytest.mark.parametrize("base", ["multifactor", "qssf", "psjf", "psaf"])
def test_the_bases_that_read_the_accounting_decide_alike_once_it_has_history(
    model: LoadedModel, base: str
) -> None:
    config = Settings(policy={"base": base})
    sim = TickEpisode(SPEC, workload(7), 0, TickSettings(base, 60.0, config.core(), SlurmParams()))
    while sim.snapshot is not None and not (
        sim.snapshot.history.usage
        and sim.snapshot.history.mean_runtime_by_user
        and len(sim.snapshot.history.recent_runtimes) > 3
        and len(sim.snapshot.pending) > 3
    ):
        sim.apply(sim.decide(model))
    assert sim.snapshot is not None, "the workload should leave a queue once jobs have finished"
    assert_alike(sim, config, model, accounting=True)


def test_sacct_rows_of_the_finished_jobs_give_the_simulators_peers_and_means() -> None:
    """What the engine reads from sacct is what the simulator keeps: the peers and the means."""
    config = Settings(policy={"base": "psjf"})
    sim = TickEpisode(SPEC, workload(7), 0, TickSettings("psjf", 60.0, config.core(), SlurmParams()))
    while sim.snapshot is not None and len(sim.snapshot.history.recent_runtimes) <= 3:
        sim.apply(sim.decide(None))
    assert sim.snapshot is not None
    done = [(e.job, e.start, e.end) for e in sim.run.done]
    rendered = render_history(sim.snapshot.history, done)
    with_peers = history_from_slurm(rendered.sshare, rendered.sacct)
    assert dict(with_peers.recent_runtimes) == dict(sim.snapshot.history.recent_runtimes)
    assert dict(with_peers.mean_runtime_by_user) == dict(sim.snapshot.history.mean_runtime_by_user)


def assert_alike(sim: TickEpisode, config: Settings, model: LoadedModel, accounting: bool = False) -> None:
    assert sim.snapshot is not None
    expected = sim.decide(model)
    squeue, sinfo = (json.loads(doc) if isinstance(doc, str) else doc for doc in render(sim.snapshot))
    ledger = Ledger(None)
    for job_id, change in sim.written.items():
        ledger.record(job_id, **asdict(change))
    done = [(e.job, e.start, e.end) for e in sim.run.done] if accounting else None
    adapter = FakeAdapter(squeue, sinfo, sim.snapshot.now, history=render_history(sim.snapshot.history, done))
    engine = Engine(config, adapter, model, ledger)
    view = engine.read()
    got = engine.decide(view)
    # Quiet ticks (core/quiet.py): both sides see the same change, or none.
    assert signature(view.snapshot) == signature(sim.snapshot)

    assert [j.id for j in got.ranking.order] == [j.id for j in expected.ranking.order]
    assert got.ranking.source == expected.ranking.source == "model"
    assert got.placements.by_job == expected.placements.by_job
    assert got.plan.actions == expected.plan.actions
    assert [(r.job_id, r.target) for r in got.plan.jobs] == [(r.job_id, r.target) for r in expected.plan.jobs]


def test_the_core_settings_of_a_config_are_what_the_simulator_is_given() -> None:
    config = Settings(apply={"lever": "site_factor", "max_actions": 7}, placement={"milp_k": 3})
    core = config.core()
    assert core.lever == Lever(kind="site_factor", max_actions=7)
    assert core.milp.k == 3
    assert isinstance(core, CoreSettings)
