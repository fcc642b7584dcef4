"""The tick's ranking: the visible jobs (the state's 256 rows, in base order) in the model's order, then
the overflow beyond 256 in base order.

The deterministic rule is the argsort of the actor's scores (stable, so equal scores keep base order);
a ranking sampled during training (Plackett-Luce, `rl/ranking.py`) enters through `ranking_from_slots`
and is turned into the same `Ranking` the daemon would write.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property, partial

import numpy as np
import numpy.typing as npt

from rltuned.core.scoring import score_queue
from rltuned.domain import ClusterSnapshot, Job
from rltuned.features import Observation, encode
from rltuned.policies.base import Policy, rank
from rltuned.rl.export import LoadedModel


@dataclass(frozen=True)
class Ranking:
    order: tuple[Job, ...]
    """Every managed pending job, first to start first."""
    base_order: tuple[Job, ...]
    """The managed jobs in base-policy order (the state's rows, then the overflow)."""
    scores: Mapping[int, float]
    """Actor score per visible job id (empty when the base policy ranked)."""
    source: str
    """"model", "base", or "sampled" (training's stochastic ranking)."""
    observe: Callable[[], Observation] = field(repr=False, compare=False)
    """The state the ranking was made on (see `observation`)."""
    fallback: str | None = None
    """Why the model was not used this tick (None when it was, or when none is loaded)."""
    features_s: float = 0.0
    """Time spent building the state (0 when no model asked for it)."""
    policy_s: float = 0.0
    guarded: Mapping[int, str] = field(default_factory=dict)
    """Jobs the starvation guard acted on (put first, or back at their base rank), and why ("max_wait"
    or "displaced"; `core/guard.py`)."""

    @cached_property
    def observation(self) -> Observation:
        """The state matrix. A base ranking needs none, so it is built only when read (`explain`): the
        simulator's base side and every tick without a model skip its cost. It is a pure function of the
        snapshot, so building it later gives what the tick would have built."""
        return self.observe()


def rank_jobs(
    snapshot: ClusterSnapshot, base: Policy, model: LoadedModel | None, max_inference_ms: float
) -> Ranking:
    if model is None or not snapshot.pending:
        in_base = tuple(rank(base, snapshot))  # the state's rows and overflow are this order
        return Ranking(in_base, in_base, {}, "base", partial(encode, snapshot, base))
    started = time.perf_counter()
    obs = encode(snapshot, base, model.runtime_input)
    features_s = time.perf_counter() - started
    in_base = obs.jobs
    scored = score_queue(model, obs, max_inference_ms)
    if scored.scores is None:
        return Ranking(in_base, in_base, {}, "base", lambda: obs, scored.problem, features_s, scored.seconds)
    n = int(obs.mask.sum())
    slots = np.argsort(-scored.scores[:n], kind="stable")  # stable: equal scores keep base order
    return _ranking(obs, in_base, slots.tolist(), scored.scores, "model", features_s, scored.seconds)


def ranking_from_slots(
    obs: Observation,
    in_base: Sequence[Job],
    slots: npt.NDArray[np.integer] | Sequence[int],
    scores: npt.NDArray[np.floating] | None,
    source: str,
) -> Ranking:
    """The ranking that puts the visible rows in `slots` order (each real slot once), then the overflow."""
    n = int(obs.mask.sum())
    chosen: list[int] = np.asarray(slots[:n], dtype=np.int64).tolist()
    if sorted(chosen) != list(range(n)):
        raise ValueError(f"slots must order the {n} visible rows exactly once, got {chosen[:8]}...")
    return _ranking(obs, in_base, chosen, scores, source)


def _ranking(
    obs: Observation,
    in_base: Sequence[Job],
    chosen: list[int],
    scores: npt.NDArray[np.floating] | None,
    source: str,
    features_s: float = 0.0,
    policy_s: float = 0.0,
) -> Ranking:
    """`ranking_from_slots` for slots known to order the visible rows exactly once (an argsort's)."""
    n = len(chosen)
    base = tuple(in_base)
    order = (*map(base.__getitem__, chosen), *base[n:])
    by_job = {} if scores is None else dict(zip(obs.job_ids[:n].tolist(), scores[:n].tolist(), strict=True))
    return Ranking(order, base, by_job, source, lambda: obs, features_s=features_s, policy_s=policy_s)
