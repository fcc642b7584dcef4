"""GAE against advantages worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest

from rltuned.rl.gae import compute_gae


def test_terminal_reward_with_constant_values_matches_hand_computation() -> None:
    """Three steps, reward 1 at the end, V = 0.5 everywhere, gamma 0.9, lambda 0.8:
    deltas: t2 = 1 - 0.5 = 0.5; t1 = 0 + 0.9*0.5 - 0.5 = -0.05; t0 = -0.05.
    A2 = 0.5; A1 = -0.05 + 0.72*0.5 = 0.31; A0 = -0.05 + 0.72*0.31 = 0.1732."""
    rewards = np.array([0.0, 0.0, 1.0], dtype=np.float32)
    values = np.full(3, 0.5, dtype=np.float32)
    dones = np.array([False, False, True])
    adv, ret = compute_gae(rewards, values, dones, last_value=0.0, gamma=0.9, lam=0.8)
    assert adv == pytest.approx([0.1732, 0.31, 0.5], abs=1e-6)
    assert ret == pytest.approx(adv + 0.5)


def test_no_bootstrapping_across_episode_boundaries() -> None:
    rewards = np.array([1.0, 2.0], dtype=np.float32)
    values = np.array([10.0, 20.0], dtype=np.float32)
    dones = np.array([True, True])
    adv, _ = compute_gae(rewards, values, dones, last_value=99.0, gamma=1.0, lam=1.0)
    assert adv == pytest.approx([1.0 - 10.0, 2.0 - 20.0])


def test_matches_a_naive_discounted_sum_when_lambda_is_one() -> None:
    rng = np.random.default_rng(0)
    rewards = rng.normal(size=6).astype(np.float32)
    values = rng.normal(size=6).astype(np.float32)
    dones = np.array([False] * 5 + [True])
    adv, _ = compute_gae(rewards, values, dones, last_value=0.0, gamma=0.95, lam=1.0)
    naive = [sum(0.95**k * rewards[t + k] for k in range(6 - t)) - values[t] for t in range(6)]
    assert adv == pytest.approx(naive, abs=1e-5)
