"""Rollouts on every core: workers change how soon a batch arrives, never what is in it."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import numpy as np
import pytest
import torch

from rltuned.rl.agent import ActorCritic
from rltuned.rl.args import Args
from rltuned.rl.ppo import make_env, make_validator
from rltuned.rl.rollouts import LocalCollector, ProcessCollector, RayCollector, Rollout, run_episode
from tests.rl.test_training import burst


def small_args(tmp_path: Path, loop: str) -> Args:
    trace, spec = burst(tmp_path)
    return Args(trace=str(trace), cluster=str(spec), base="fcfs", estimates="exact", window=32, warmup=16,
                reward="dense", gamma=0.99, gae_lambda=0.95, loop=loop, out=str(tmp_path / "m"))  # fmt: skip


def trained_agent() -> ActorCritic:
    """Non-zero scores, so sampling is not uniform and a wrong generator would show."""
    torch.manual_seed(3)
    agent = ActorCritic()
    for p in agent.actor.net[-1].parameters():
        torch.nn.init.normal_(p, std=1.0)
    return agent


def assert_same(a: Rollout, b: Rollout) -> None:
    assert len(a.actions) == len(b.actions) > 0
    for name in ("actor", "mask", "critic", "actions"):
        pairs = zip(getattr(a, name), getattr(b, name), strict=True)
        assert all(np.array_equal(x, y) for x, y in pairs), name
    for name in ("logps", "values", "rewards", "dones", "episode_rewards", "base_scores", "agent_scores"):
        assert getattr(a, name) == getattr(b, name), name


@pytest.mark.slow
@pytest.mark.parametrize("loop", ["ticks", "paper"])
def test_two_workers_give_the_batch_one_gives(tmp_path: Path, loop: str) -> None:
    args = small_args(tmp_path, loop)
    agent = trained_agent()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the trainer and every worker run: reductions sum in one order
    seeds = range(10, 14)
    local = LocalCollector(make_env(args), make_validator(args))
    one = local.collect(agent, seeds)
    windows = len(local.validator.windows) if local.validator else 0
    two = ProcessCollector(partial(make_env, args), 0.0, 2, partial(make_validator, args), windows)
    try:
        assert_same(one, two.collect(agent, seeds))
        assert two.validate(agent) == local.validate(agent)
        assert two.validate(None) == local.validate(None) != local.validate(agent)
    finally:
        two.close()
        torch.set_num_threads(threads)


def test_an_episode_depends_on_its_seed_alone(tmp_path: Path) -> None:
    """The global torch RNG plays no part: what ran before an episode cannot change it."""
    env = make_env(small_args(tmp_path, "ticks"))
    agent = trained_agent()
    first = run_episode(env, agent, 5)
    torch.manual_seed(123)
    run_episode(env, agent, 6)
    assert_same(first, run_episode(env, agent, 5))
    other = run_episode(env, agent, 7)
    assert other.actions != first.actions or len(other.actions) != len(first.actions)


@pytest.mark.slow
def test_ray_actors_give_the_batch_one_process_gives(tmp_path: Path) -> None:
    """`rltunectl train --ray local`: the same worker code as Ray actors, on a Ray started here."""
    ray = pytest.importorskip("ray")
    args = small_args(tmp_path, "ticks")
    agent = trained_agent()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    seeds = range(10, 14)
    local = LocalCollector(make_env(args), make_validator(args))
    windows = len(local.validator.windows) if local.validator else 0
    try:
        actors = RayCollector(
            "local", partial(make_env, args), 0.0, 2, partial(make_validator, args), windows
        )
        assert actors.workers == 2
        assert_same(local.collect(agent, seeds), actors.collect(agent, seeds))
        assert actors.validate(agent) == local.validate(agent)
        actors.close()
    finally:
        ray.shutdown()
        torch.set_num_threads(threads)
