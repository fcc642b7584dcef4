"""The policy's action per tick: a ranking of the visible jobs, drawn from a Plackett-Luce distribution.

The actor's scores s define P(ranking) = prod_k exp(s[r_k]) / sum_{j >= k} exp(s[r_j]): the first job is
drawn by softmax over all, the next over the rest, and so on. Adding Gumbel noise to the scores and
sorting draws exactly from it, in one sort. Its mode, the argsort of the scores, is the daemon's ranking
(`core.ranking.rank_jobs`), so the deterministic policy trained here is the one that serves.
Padding slots (mask False) are never ranked: they come last in every ranking and add nothing.
"""

from __future__ import annotations

import torch

PADDING = -1e30


def sample(
    scores: torch.Tensor, mask: torch.Tensor, generator: torch.Generator | None = None
) -> torch.Tensor:
    """scores, mask [..., 256] -> a ranking [..., 256] of slot indices, real slots first."""
    uniform = torch.rand(scores.shape, generator=generator, dtype=scores.dtype).clamp_(1e-12, 1.0 - 1e-12)
    gumbel = -torch.log(-torch.log(uniform))
    keys = torch.where(mask, scores + gumbel, torch.full_like(scores, float("-inf")))
    return torch.argsort(keys, dim=-1, descending=True, stable=True)


def mode(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The most likely ranking: the argsort of the scores (stable, so ties keep slot order)."""
    keys = torch.where(mask, scores, torch.full_like(scores, float("-inf")))
    return torch.argsort(keys, dim=-1, descending=True, stable=True)


def log_prob(scores: torch.Tensor, mask: torch.Tensor, ranking: torch.Tensor) -> torch.Tensor:
    """log P(ranking) for [..., 256] inputs; only the real slots (the first mask.sum() of the ranking)
    count. Each position's normalizer is a log-sum-exp over the jobs not yet ranked, computed for all
    positions at once as a reversed cumulative log-sum-exp."""
    ranked = torch.gather(scores, -1, ranking)
    real = torch.gather(mask, -1, ranking)
    # Padding gets a huge finite score rather than -inf: exp() of it is 0 next to any real score, and
    # no -inf - -inf appears anywhere, so gradients stay finite.
    ranked = torch.where(real, ranked, torch.full_like(ranked, PADDING))
    rest = torch.logcumsumexp(ranked.flip(-1), dim=-1).flip(-1)
    terms = torch.where(real, ranked - rest, torch.zeros_like(ranked))
    return terms.sum(-1)


def first_choice_entropy(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The entropy of the first draw (a softmax over the real slots): the ranking's own entropy has no
    closed form, and the first draw is where the policy's spread shows most."""
    logits = torch.where(mask, scores, torch.full_like(scores, -1e9))
    return torch.distributions.Categorical(logits=logits).entropy()
