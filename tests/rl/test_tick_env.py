"""Training and evaluation in the daemon's loop: the base side is the same loop without a model."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from rltuned.clusters import load_cluster
from rltuned.errors import UsageError
from rltuned.estimates import apply_estimates
from rltuned.policies.loglinear import LogLinear
from rltuned.rl.agent import Actor
from rltuned.rl.evaluate import compare
from rltuned.rl.export import export_actor, load_model
from rltuned.rl.tick_env import TickEnv
from rltuned.sim.metrics import compute_metrics
from rltuned.sim.runner import Window
from rltuned.sim.ticks import TickEpisode, TickSettings, run_ticks
from rltuned.traces import load_trace
from rltuned.traces.bundled import resolve_trace

CLUSTER = load_cluster("philly-slice")


def philly(n: int, start: int = 20_000) -> list:  # type: ignore[type-arg]
    jobs, _ = apply_estimates(load_trace(resolve_trace("philly")).jobs, "qssf-noise", 0)
    return list(jobs[start : start + n])


def test_with_no_model_both_sides_of_evaluate_are_identical_window_by_window(tmp_path: Path) -> None:
    """Without a model both sides are the daemon on its base alone, as `run_ticks` runs it. An untrained
    actor (a zero output layer: every slot scores alike, so it ranks in base order) takes the model's
    branch, deciding every tick through the loaded model, and must give the very same windows."""
    jobs = philly(900)
    windows = [Window(300, 500), Window(500, 700), Window(700, 900)]
    settings = replace(TickSettings(), base="sjf")
    result = compare(None, jobs, CLUSTER, "sjf", settings, windows, warmup=200)
    assert len(result.base_metrics) == 3
    for window, base, rl in zip(windows, result.base_metrics, result.rl_metrics, strict=True):
        assert base == rl
        chunk, warm = window.with_warmup(jobs, 200)
        assert base == compute_metrics(run_ticks(CLUSTER, chunk, warm, settings))
    assert result.base_waits == result.rl_waits
    untrained = load_model(export_actor(Actor(), tmp_path / "untrained", {"base": "sjf", "seed": 0}))
    with_model = compare(untrained, jobs, CLUSTER, "sjf", settings, windows, warmup=200)
    assert with_model.base_metrics == result.base_metrics
    assert with_model.rl_metrics == result.base_metrics and with_model.rl_waits == result.base_waits


def test_an_agent_that_ranks_in_base_order_is_the_base_side() -> None:
    """Identity rankings at every tick reproduce the daemon without a model: gap 0, dense rewards summing
    to minus the base's own cost (less what had accrued before the first ranking)."""
    jobs = philly(600)
    env = TickEnv(
        jobs, CLUSTER, TickSettings(base="sjf"), "bsld", window=200, warmup=200, reward_mode="dense"
    )
    env.reset(seed=0)
    before = env.accrued
    done, paid, ticks = False, 0.0, 0
    while not done:
        _, reward, done, _, info = env.step(env.base_action())
        paid += reward
        ticks += 1
    assert ticks > 10
    assert info["gap"] == 0.0
    assert info["agent_score"] == info["base_score"]
    assert env.episode is not None and env.episode.result is not None
    records = env.episode.result.records
    cost = sum(r.wait / max(r.job.runtime or 0.0, 10.0) for r in records)
    assert np.isclose(-paid, (cost - before) / env.base_cost)


def test_relative_rewards_pay_only_what_the_rankings_changed() -> None:
    """`relative` pays the dense reward less the base side's own accrual over the same ticks: an agent
    that ranks in base order is paid nothing at any tick, and any agent's rewards sum to the gap in
    waiting cost between the two runs, over the same scale as the dense reward."""
    jobs = philly(600)
    env = TickEnv(
        jobs, CLUSTER, TickSettings(base="sjf"), "bsld", window=200, warmup=200, reward_mode="relative"
    )
    env.reset(seed=0)
    done, rewards = False, []
    while not done:
        _, reward, done, _, _ = env.step(env.base_action())
        rewards.append(reward)
    assert len(rewards) > 10 and max(map(abs, rewards)) < 1e-12
    obs, _ = env.reset(seed=0)
    assert env.episode is not None
    before = env.accrued - env.base_accrued  # what both had accrued before the first ranking
    done, paid = False, 0.0
    while not done:
        n = int(obs["mask"].sum())
        obs, reward, done, _, _ = env.step(np.r_[np.arange(n)[::-1], np.arange(n, len(obs["mask"]))])
        paid += reward
    assert env.episode.result is not None
    agent = sum(r.wait / max(r.job.runtime or 0.0, 10.0) for r in env.episode.result.records)
    base = run_ticks(CLUSTER, *Window(env.window_start, env.window_start + 200).with_warmup(jobs, 200),
                     TickSettings(base="sjf"))  # fmt: skip
    base_cost = sum(r.wait / max(r.job.runtime or 0.0, 10.0) for r in base.records)
    assert abs(paid) > 1e-3  # reversed rankings cost something
    assert np.isclose(-paid, (agent - base_cost - before) / env.base_cost)


def test_relative_rewards_need_the_daemons_loop() -> None:
    from rltuned.rl.args import Args

    with pytest.raises(UsageError, match="--reward relative needs --loop ticks"):
        Args(trace="philly", cluster="philly-slice", loop="paper", reward="relative").check()
    with pytest.raises(UsageError, match="--reward must be one of"):
        Args(trace="philly", cluster="philly-slice", reward="sparse").check()


def test_reversed_rankings_change_the_schedule() -> None:
    """The ranking the agent returns is what Slurm follows: reversing it changes who starts when."""
    jobs = philly(600)
    env = TickEnv(jobs, CLUSTER, TickSettings(base="sjf"), "wait", window=200, warmup=200)
    obs, info = env.reset(seed=0)
    done = False
    while not done:
        n = int(obs["mask"].sum())
        ranking = np.concatenate([np.arange(n)[::-1], np.arange(n, len(obs["mask"]))])
        obs, _, done, _, info = env.step(ranking)
    assert info["agent_score"] != info["base_score"]
    window, warm = Window(info["window_start"], info["window_start"] + 200).with_warmup(jobs, 200)
    base = compute_metrics(run_ticks(CLUSTER, window, warm, TickSettings(base="sjf")))
    assert base.avg_wait_s == info["base_score"]


@pytest.mark.parametrize("base", ["f1", "f4"])
def test_the_loop_refuses_a_base_the_daemon_cannot_serve(base: str) -> None:
    with pytest.raises(UsageError, match=base):
        run_ticks(CLUSTER, philly(50), 0, TickSettings(base=base))


def test_the_simulated_daemon_sends_only_what_its_pacing_allows_in_a_tick() -> None:
    """As `Engine.apply`: a burst, then `writes_per_s` until half the interval; the rest waits for the
    next tick's plan (which plans them again)."""
    small = load_cluster("paper-testbed")  # 13 GPUs: Philly's arrivals queue up
    paced = TickEpisode(small, philly(300), 0, TickSettings(base="sjf", writes_per_s=0.1, write_burst=3))
    sent = []
    while paced.snapshot is not None:
        decision = paced.decide(None)
        before = dict(paced.written.items())
        paced.apply(decision)
        changed = sum(1 for j, c in paced.written.items() if before.get(j) != c)
        sent.append((len(decision.plan.actions), changed))
    assert max(planned for planned, _ in sent) > 6  # ticks planned more than the pacing lets through
    assert max(changed for _, changed in sent) == 6  # a burst of 3, then 0.1/s for 30 s


@pytest.mark.parametrize("writes_per_s", [0.0, 0.1])
def test_a_finished_episode_is_freed_without_the_garbage_collector(writes_per_s: float) -> None:
    """Training runs thousands of episodes: one kept alive by a reference cycle waits for a full
    collection, which walks every job and record still alive (in the paper loop such a cycle cost NASA's
    windows 16% of their time)."""
    import gc
    import weakref

    from rltuned.sim.ticks import TickEpisode

    settings = TickSettings(base="sjf", writes_per_s=writes_per_s, write_burst=3)
    gc.disable()
    try:
        episode = TickEpisode(load_cluster("paper-testbed"), philly(60), 0, settings)
        while episode.snapshot is not None:
            episode.apply(episode.decide(None))
        alive = weakref.ref(episode)
        del episode
        assert alive() is None
    finally:
        gc.enable()


def test_quiet_ticks_change_no_time_invariant_base_and_are_no_actions() -> None:
    """With `refresh_s`, ticks where nothing changed decide nothing (core/quiet.py): SJF's order cannot
    have changed there, so its schedule is the same to the second; the agent acts only on the others."""
    jobs = philly(600, start=30_000)  # a queue forms: 60 ticks with two or more pending jobs
    every = TickSettings(base="sjf")
    quiet = TickSettings(base="sjf", core=replace(every.core, refresh_s=600.0))
    window, warm = Window(400, 600).with_warmup(jobs, 200)

    def records(settings: TickSettings) -> tuple:  # type: ignore[type-arg]
        episode = TickEpisode(CLUSTER, window, warm, settings)  # as the daemon, not `run_ticks`'s shortcut
        while episode.result is None:
            episode.step(None)
        return episode.result.records

    assert records(quiet) == records(every)

    def actions(settings: TickSettings) -> int:
        env = TickEnv(jobs, CLUSTER, settings, "bsld", window=200, warmup=200, reward_mode="dense")
        env.reset(seed=0, options={"start": 400})
        done, n, info = False, 0, {}
        while not done:
            _, _, done, _, info = env.step(env.base_action())
            n += 1
        assert info["gap"] == 0.0
        return n

    every_tick, on_change = actions(every), actions(quiet)
    assert on_change < every_tick


def test_a_teachers_ranking_orders_the_visible_rows_by_its_own_key() -> None:
    """The imitation target when a teacher is cloned: rows are in the base's order (SJF here), the
    ranking lists them in the teacher's (limit over wait), ties by submit time and id as `policies.rank`."""
    jobs = philly(600)
    env = TickEnv(jobs, CLUSTER, TickSettings(base="sjf"), "bsld", window=200, warmup=200)
    env.reset(seed=0)
    teacher = LogLinear(0.0, 1.0, 600.0)
    checked, done = 0, False
    while not done:
        assert env.episode is not None and env.episode.snapshot is not None and env.current is not None
        ranking = env.teacher_action(teacher)
        n = int(env.current.mask.sum())
        by_id = {j.id: j for j in env.episode.snapshot.pending}
        rows = [by_id[i] for i in env.current.job_ids[:n].tolist()]
        assert sorted(ranking[:n].tolist()) == list(range(n))
        assert ranking[n:].tolist() == list(range(n, 256))
        ctx = env.episode.snapshot.context
        keys = [(teacher.key(rows[i], ctx), rows[i].submit, rows[i].id) for i in ranking[:n]]
        assert keys == sorted(keys)
        checked += ranking[:n].tolist() != list(range(n))
        _, _, done, _, _ = env.step(ranking)
    assert checked >= 5  # ticks where the two orders differ, so the check above is not vacuous


def test_training_on_the_predicted_runtime_sees_the_state_the_daemon_builds_and_needs_the_history() -> None:
    from rltuned.features import RUNTIME_INPUTS, encode
    from rltuned.rl.args import RUNTIME_INPUTS as FLAG_VALUES
    from rltuned.rl.args import Args

    assert FLAG_VALUES == RUNTIME_INPUTS  # the command line's restated list

    jobs = philly(600)
    env = TickEnv(jobs, CLUSTER, TickSettings(base="psjf"), "bsld", 200, 200, "dense", "predicted")
    obs, _ = env.reset(seed=0)
    done, doubted = False, 0
    while not done:
        assert env.episode is not None and env.episode.snapshot is not None
        served = encode(env.episode.snapshot, env.episode.base, "predicted")
        assert np.array_equal(obs["actor"], served.actor) and np.array_equal(obs["critic"], served.critic)
        doubted += not np.array_equal(served.table, encode(env.episode.snapshot, env.episode.base).table)
        obs, _, done, _, _ = env.step(env.base_action())
    assert doubted > 0  # finished peers corrected some limits
    with pytest.raises(
        UsageError, match="--runtime-input predicted needs --loop ticks and a base that reads"
    ):
        Args(trace="philly", cluster="philly-slice", base="sjf", runtime_input="predicted").check()
    Args(trace="philly", cluster="philly-slice", base="psjf", loop="ticks", runtime_input="predicted").check()
