"""The environment's two ways of paying the reward."""

from __future__ import annotations

import numpy as np
import pytest

from rltuned.rl.env import SchedulingEnv
from rltuned.sim.simulator import SimConfig
from tests.builders import cluster, job

SPEC = cluster(("P100", 4, 2), ("K80", 2, 2))
JOBS = [
    job(i, i * 5.0, 1 + (i * 7) % 5, 40 + (i * 53) % 300, estimate=30 + (i * 71) % 500) for i in range(400)
]


def play(env: SchedulingEnv, chooser: str) -> tuple[list[float], dict[str, float]]:
    rng = np.random.default_rng(0)
    obs, _ = env.reset(seed=1, options={"start": 100})
    rewards: list[float] = []
    done = False
    info: dict[str, float] = {}
    while not done:
        action = 0 if chooser == "base" else int(rng.integers(int(obs["mask"].sum())))
        obs, r, done, _, info = env.step(action)
        rewards.append(r)
    return rewards, info


def test_terminal_reward_is_the_papers_gap_paid_once() -> None:
    env = SchedulingEnv(JOBS, SPEC, "fcfs", "bsld", 200, SimConfig(), warmup=50)
    rewards, info = play(env, "random")
    assert all(r == 0.0 for r in rewards[:-1])
    gap = (info["base_score"] - info["agent_score"]) / max(info["base_score"], info["agent_score"])
    assert rewards[-1] == pytest.approx(gap) == info["gap"]


@pytest.mark.parametrize("metric", ["bsld", "wait"])
def test_dense_rewards_add_up_to_minus_the_agents_waiting_cost_over_the_bases_score(metric: str) -> None:
    """Paid as the waiting accrues; the episode's sum ranks runs as the metric does, and the paper's gap
    is still reported. Playing the base order pays (score - 1) / score for bsld, 1 for wait."""
    env = SchedulingEnv(JOBS, SPEC, "fcfs", metric, 200, SimConfig(), warmup=50, reward_mode="dense")
    base_rewards, base_info = play(env, "base")
    rand_rewards, rand_info = play(env, "random")
    assert sum(1 for r in base_rewards if r < 0) > 10, "paid along the way, not once"
    assert all(r <= 1e-12 for r in base_rewards + rand_rewards)  # up to rounding
    base = base_info["base_score"]
    assert base_info["gap"] == 0.0
    if metric == "wait":
        assert sum(base_rewards) == pytest.approx(-1.0)
        assert sum(rand_rewards) == pytest.approx(-rand_info["agent_score"] / base)
    else:
        assert -sum(base_rewards) == pytest.approx((base - 1) / base, abs=0.05)
    better = rand_info["agent_score"] < base
    assert (sum(rand_rewards) > sum(base_rewards)) == better


def test_dense_rewards_need_a_waiting_metric() -> None:
    with pytest.raises(ValueError, match="waiting metric"):
        SchedulingEnv(JOBS, SPEC, "fcfs", "util", 200, SimConfig(), reward_mode="dense")
