"""The ranking policy: its log-probability, its sampler and its mode."""

from __future__ import annotations

import math

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rltuned.rl import plackett_luce as pl


def sequential_log_prob(scores: list[float], ranking: list[int]) -> float:
    """The definition: each position a masked softmax over the jobs not ranked yet."""
    left = set(ranking)
    total = 0.0
    for slot in ranking:
        logits = torch.tensor(
            [scores[j] if j in left else -math.inf for j in range(len(scores))], dtype=torch.float64
        )
        total += float(torch.log_softmax(logits, 0)[slot])
        left.remove(slot)
    return total


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(-5, 5), min_size=1, max_size=12),
    st.integers(0, 6),
    st.randoms(use_true_random=False),
)
def test_log_prob_is_the_sum_of_sequential_masked_softmaxes(
    real: list[float], padding: int, rnd: object
) -> None:
    n = len(real)
    scores = torch.tensor(real + [-1e9] * padding, dtype=torch.float64)
    mask = torch.tensor([True] * n + [False] * padding)
    order = list(range(n))
    rnd.shuffle(order)  # type: ignore[attr-defined]
    ranking = torch.tensor(order + list(range(n, n + padding)))
    expected = sequential_log_prob(real, order)
    assert math.isclose(float(pl.log_prob(scores, mask, ranking)), expected, rel_tol=1e-9, abs_tol=1e-9)


def test_samples_rank_real_slots_first_and_follow_the_distribution() -> None:
    """Three jobs with scores log(1), log(2), log(4): P(first = slot 2) = 4/7; P(2, 1, 0) = 4/7 x 2/3."""
    scores = torch.log(torch.tensor([1.0, 2.0, 4.0, 1.0], dtype=torch.float64)).expand(40_000, 4)
    mask = torch.tensor([True, True, True, False]).expand(40_000, 4)
    rankings = pl.sample(scores, mask, torch.Generator().manual_seed(0))
    assert bool((rankings[:, 3] == 3).all())  # padding last
    first = (rankings[:, 0] == 2).double().mean()
    assert abs(float(first) - 4 / 7) < 0.01
    full = (rankings[:, :3] == torch.tensor([2, 1, 0])).all(-1).double().mean()
    assert abs(float(full) - (4 / 7) * (2 / 3)) < 0.01


def test_the_mode_is_the_stable_argsort_of_the_scores() -> None:
    scores = torch.tensor([0.5, 2.0, 0.5, -1e9])
    mask = torch.tensor([True, True, True, False])
    assert pl.mode(scores, mask).tolist() == [1, 0, 2, 3]


def test_gradients_are_finite_with_padding() -> None:
    scores = torch.tensor([[0.3, -0.2, -1e9, -1e9]], requires_grad=True)
    mask = torch.tensor([[True, True, False, False]])
    pl.log_prob(scores, mask, torch.tensor([[1, 0, 2, 3]])).sum().backward()
    assert scores.grad is not None and bool(torch.isfinite(scores.grad).all())
    assert scores.grad[0, 2:].abs().sum() == 0
