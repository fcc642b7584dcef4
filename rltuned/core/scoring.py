"""The one wrapper around a loaded model's forward pass, with the checks that decide whether to trust it.

A model that raises, returns the wrong shape or non-finite scores, or is slower than its budget is not
trusted: the caller falls back to the base order and reports `problem`. The daemon's tick, the check
before a model is swapped in, and the simulator's tick all go through `score_queue`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from rltuned.features import Observation
from rltuned.rl.export import LoadedModel


@dataclass(frozen=True)
class Scored:
    scores: npt.NDArray[np.float64] | None
    """[256] actor scores (padding slots included), or None when the model is not trusted."""
    problem: str | None
    """"model failed: ..." or "model too slow: ..." when `scores` is None."""
    seconds: float


def score_queue(model: LoadedModel, obs: Observation, max_ms: float) -> Scored:
    started = time.perf_counter()
    try:
        scores = _forward(model, obs)
    except (RuntimeError, ValueError) as exc:
        reason = f"model failed: {str(exc).splitlines()[0][:200]}"
        return Scored(None, reason, time.perf_counter() - started)
    seconds = time.perf_counter() - started
    if seconds * 1000.0 > max_ms:
        return Scored(None, f"model too slow: {seconds * 1000.0:.0f} ms > {max_ms:g} ms", seconds)
    return Scored(scores, None, seconds)


def _forward(model: LoadedModel, obs: Observation) -> npt.NDArray[np.float64]:
    scores = model.score_rows(obs.actor, obs.mask)
    if scores.shape != obs.mask.shape:
        raise ValueError(f"scores of shape {scores.shape}, expected {obs.mask.shape}")
    if not np.isfinite(scores[: int(obs.mask.sum())]).all():
        raise ValueError("non-finite scores")
    return scores
